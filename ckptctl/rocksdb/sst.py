"""A small reader of RocksDB block-based SST files, for what rocksdict cannot read: merge operands.

Flink's RocksDB list state appends with ``merge`` (operator ``StringAppendTESTOperator``, delimiter
``,``); until a compaction merges them, the operands stay in the SST files. rocksdict cannot set
that merge operator, and its iterator stops at the first such key. This module reads the SST files
of a rebuilt checkpoint directory itself and applies the string-append merge, so every key of a
column family is seen, newest sequence number first, with deletions honoured.

Format (``table/format.h``, ``table/block_based/block.cc``): a 53-byte footer (checksum type, the
metaindex and index block handles as varints, format version, magic); blocks followed by a
5-byte trailer (compression type, checksum); block entries with shared/unshared key prefixes and
restart points; index values that are full handles at restart points and size deltas otherwise
(format version >= 4); internal keys = user key + 8 bytes (sequence << 8 | type). Snappy is the
only compression Flink's RocksDB uses by default; it is decoded here (other codecs are reported).
Range deletions, blob files and wide columns are not written by Flink's RocksDB state backend.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator

MAGIC = 0x88E241B785F4CFF7
FOOTER_SIZE = 53
BLOCK_TRAILER = 5
TYPE_DELETION, TYPE_VALUE, TYPE_MERGE, TYPE_SINGLE_DELETION = 0x0, 0x1, 0x2, 0x7
MERGE_DELIMITER = b","


class SstFormatError(Exception):
    def __init__(self, path: str, offset: int, message: str) -> None:
        super().__init__(f"{path}: byte {offset}: {message}")


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


MAX_BLOCK = 256 << 20  # a RocksDB block is KiBs to MiBs; a corrupt length must not allocate more


def snappy_decompress(data: bytes) -> bytes:
    """Raw snappy (no framing), as RocksDB stores compressed blocks: PyArrow's C++ codec (~50x the
    pure-Python decoder below, which stays as the reference the tests compare it with). The
    announced length is checked first: a corrupt one is an error, never a giant allocation."""
    n, _pos = _varint(data, 0)
    if n > MAX_BLOCK or n > 64 * max(len(data), 1):
        raise ValueError(f"snappy: {n} bytes announced for {len(data)} compressed bytes")
    try:
        import pyarrow as pa

        out = pa.decompress(data, decompressed_size=n, codec="snappy", asbytes=True)
    except ImportError:
        return snappy_decompress_python(data)
    except (OSError, ValueError) as e:  # pyarrow's ArrowIOError/ArrowInvalid on bad input
        raise ValueError(f"snappy: {e}") from None
    if len(out) != n:
        raise ValueError(f"snappy: {len(out)} bytes decoded, {n} announced")
    return out


def snappy_decompress_python(data: bytes) -> bytes:
    """Raw snappy in pure Python (the reference decoder; slow: ~30 MB/s)."""
    n, pos = _varint(data, 0)
    out = bytearray()
    end = len(data)
    while pos < end:
        tag = data[pos]
        pos += 1
        kind = tag & 3
        if kind == 0:
            length = tag >> 2
            if length >= 60:
                extra = length - 59
                length = int.from_bytes(data[pos : pos + extra], "little")
                pos += extra
            length += 1
            out += data[pos : pos + length]
            pos += length
            continue
        if kind == 1:
            length = ((tag >> 2) & 7) + 4
            offset = ((tag >> 5) << 8) | data[pos]
            pos += 1
        elif kind == 2:
            length = (tag >> 2) + 1
            offset = data[pos] | (data[pos + 1] << 8)
            pos += 2
        else:
            length = (tag >> 2) + 1
            offset = int.from_bytes(data[pos : pos + 4], "little")
            pos += 4
        if offset <= 0 or offset > len(out):
            raise ValueError(f"snappy copy offset {offset} outside {len(out)} bytes")
        start = len(out) - offset
        if offset >= length:
            out += out[start : start + length]
        else:
            for i in range(length):
                out.append(out[start + i])
    if len(out) != n:
        raise ValueError(f"snappy: {len(out)} bytes decoded, {n} announced")
    return bytes(out)


class SstFile:
    def __init__(self, path: str) -> None:
        self.path = path
        with open(path, "rb") as f:
            self.data = f.read()
        d = self.data
        if len(d) < FOOTER_SIZE:
            raise SstFormatError(path, 0, "too short for an SST footer")
        magic = struct.unpack_from("<Q", d, len(d) - 8)[0]
        if magic != MAGIC:
            raise SstFormatError(path, len(d) - 8, f"not a block-based table (magic 0x{magic:016x})")
        self.format_version = struct.unpack_from("<I", d, len(d) - 12)[0]
        if self.format_version > 5:
            raise SstFormatError(
                path, len(d) - 12, f"SST format version {self.format_version} is not supported"
            )
        pos = len(d) - FOOTER_SIZE + 1  # after the checksum type
        try:
            self.metaindex = self._handle(pos)
            self.index = self._handle(self._after_handle(pos))
        except (IndexError, ValueError) as e:
            raise SstFormatError(path, pos, f"a corrupt footer ({e})") from None
        self.properties = self._properties()

    def _handle(self, pos: int) -> tuple[int, int]:
        off, pos = _varint(self.data, pos)
        size, _ = _varint(self.data, pos)
        return off, size

    def _after_handle(self, pos: int) -> int:
        _, pos = _varint(self.data, pos)
        _, pos = _varint(self.data, pos)
        return pos

    def block(self, handle: tuple[int, int]) -> bytes:
        off, size = handle
        if off + size + BLOCK_TRAILER > len(self.data):
            raise SstFormatError(self.path, off, f"block of {size} bytes runs past the end of the file")
        raw = self.data[off : off + size]
        ctype = self.data[off + size]
        if ctype == 0:
            return raw
        if ctype == 1:
            try:
                return snappy_decompress(raw)
            except (ValueError, IndexError) as e:
                raise SstFormatError(self.path, off, f"bad snappy block: {e}") from None
        raise SstFormatError(
            self.path, off + size, f"compression type {ctype} is not supported (only snappy)"
        )

    def _entries(self, block: bytes, handle_values: bool = False, delta: bool = False) -> Iterator[tuple]:
        n_restarts = struct.unpack_from("<I", block, len(block) - 4)[0] & 0x7FFFFFFF
        limit = len(block) - 4 * (n_restarts + 1)
        restarts = set(struct.unpack_from(f"<{n_restarts}I", block, limit)) if delta else ()
        pos = 0
        key = b""
        prev = None
        while pos < limit:
            start = pos
            shared, pos = _varint(block, pos)
            unshared, pos = _varint(block, pos)
            if delta:
                key = key[:shared] + block[pos : pos + unshared]
                pos += unshared
                if start in restarts or prev is None:
                    off, pos = _varint(block, pos)
                    size, pos = _varint(block, pos)
                else:
                    zz, pos = _varint(block, pos)
                    diff = (zz >> 1) ^ -(zz & 1)
                    off, size = prev[0] + prev[1] + BLOCK_TRAILER, prev[1] + diff
                prev = (off, size)
                yield key, (off, size)
                continue
            vlen, pos = _varint(block, pos)
            key = key[:shared] + block[pos : pos + unshared]
            pos += unshared
            value = block[pos : pos + vlen]
            pos += vlen
            if handle_values:
                off, p = _varint(value, 0)
                size, _ = _varint(value, p)
                yield key, (off, size)
            else:
                yield key, value

    def _entries_of(self, handle: tuple[int, int], **how) -> Iterator[tuple]:
        """:meth:`_entries` of the block at ``handle``; a block whose lengths lead past its end
        (nothing here checks blocks' checksums: a flipped byte is read as it is) is an error at
        the block's offset, not an IndexError or struct.error without a file."""
        block = self.block(handle)
        try:
            yield from self._entries(block, **how)
        except (IndexError, ValueError, struct.error) as e:
            raise SstFormatError(
                self.path, handle[0], f"a corrupt block of {handle[1]} bytes ({e})"
            ) from None

    def _properties(self) -> dict[bytes, bytes]:
        for name, handle in self._entries_of(self.metaindex, handle_values=True):
            if name == b"rocksdb.properties":
                return dict(self._entries_of(handle))
        return {}

    @property
    def column_family(self) -> str | None:
        name = self.properties.get(b"rocksdb.column.family.name")
        return name.decode("utf-8", "replace") if name is not None else None

    def internal_entries(self) -> Iterator[tuple[bytes, int, int, bytes]]:
        """(user key, sequence, type, value) of every entry, in file order."""
        delta = self.properties.get(b"rocksdb.index.value.is.delta.encoded", b"\x00") not in (b"\x00", b"")
        for _k, handle in self._entries_of(self.index, handle_values=not delta, delta=delta):
            for ikey, value in self._entries_of(handle):
                if len(ikey) < 8:
                    raise SstFormatError(self.path, handle[0], "internal key shorter than 8 bytes")
                trailer = struct.unpack_from("<Q", ikey, len(ikey) - 8)[0]
                yield ikey[:-8], trailer >> 8, trailer & 0xFF, value


def read_column_family(directory: str, cf: str) -> list[tuple[bytes, bytes]]:
    """Every live (key, value) of column family ``cf`` in the SST files of ``directory``, with merge
    operands resolved by string append (``,``), sorted by key."""
    versions: dict[bytes, list[tuple[int, int, bytes]]] = {}
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".sst"):
            continue
        sst = SstFile(os.path.join(directory, name))
        if sst.column_family != cf:
            continue
        for key, seq, typ, value in sst.internal_entries():
            if typ not in (TYPE_DELETION, TYPE_VALUE, TYPE_MERGE, TYPE_SINGLE_DELETION):
                raise SstFormatError(sst.path, 0, f"entry type 0x{typ:02x} is not supported")
            versions.setdefault(key, []).append((seq, typ, value))
    out = []
    for key in sorted(versions):
        operands: list[bytes] = []
        result = None
        for _seq, typ, value in sorted(versions[key], key=lambda v: -v[0]):
            if typ == TYPE_MERGE:
                operands.append(value)
                continue
            if typ == TYPE_VALUE:
                result = value
            break  # a value or a deletion ends the history
        if operands:
            parts = ([result] if result is not None else []) + operands[::-1]
            result = MERGE_DELIMITER.join(parts)
        if result is not None:
            out.append((key, result))
    return out


class MergeOperandsError(Exception):
    """RocksDB stopped iterating: merge operands that need Flink's merge operator to be read."""


def iterate_cf(db, cf: str) -> Iterator[tuple[bytes, bytes]]:
    """Every (key, value) of a column family; raises :class:`MergeOperandsError` when the iterator
    stops early on unmerged list-state operands (rocksdict has no way to set Flink's merge operator,
    and a plain ``items()`` would silently stop there)."""
    handle = db.get_column_family(cf)
    it = handle.iter()
    it.seek_to_first()
    while it.valid():
        yield it.key(), it.value()
        it.next()
    try:
        it.status()
    except Exception as e:  # noqa: BLE001 - rocksdict raises plain exceptions
        if "merge_operator" in str(e):
            raise MergeOperandsError(str(e)) from None
        raise
    finally:
        del it, handle
