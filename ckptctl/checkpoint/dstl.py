"""The changelog state backend's DSTL files, read for their structure (``verify``).

A DSTL file (``FsStateChangelogStorage``) is what a changelog checkpoint replays on top of its
materialized RocksDB state. Flink writes it as (``OutputStreamWithPos``, ``StateChangeFormat``):

- one header byte: 0 plain, 1 the rest Snappy-compressed (``dstl.dfs.compression.enabled``);
- change sets one after another (a batch of uploads shares a file): ``int`` groups, then per
  group ``int`` changes, ``int`` key group (-1: the state metadata, written first), and per
  change ``int`` length + its bytes.

The handle records the file's size without the header byte (the stream's position: of the
uncompressed bytes), and each piece of a checkpoint's changelog as an offset into those bytes,
where one change set begins; the handle's state size is the bytes of the changes its pieces
hold (their payloads: so on every fixture, 1.15 to 2.2). A compressed file is the header byte
and a Snappy framed stream (``SnappyFramedOutputStream``: chunks of at most 64 KiB uncompressed,
each compressed or stored as is) whose uncompressed bytes are what a plain file holds after its
header: on disk it is smaller (or a little larger) than the size recorded, so its size is checked
by decompressing it. Nothing in the file is checksummed but the framed chunks (CRC32C, which
Flink's reader does not verify either): a flipped byte inside a change's bytes is found by
nobody before the restore deserializes it. What can be checked without the serializers is
checked: the header, that the change sets tile the (uncompressed) bytes exactly to the size
recorded, that every referenced piece begins one, that a handle of one piece holds as many bytes
of changes as its state size, and that key groups are key groups.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from ckptctl.metadata.handles import (
    ChangelogBackendHandle,
    ChangelogFileHandle,
    FileHandle,
    RelativeFileHandle,
)

_INT = struct.Struct(">i").unpack_from
PLAIN, SNAPPY = 0, 1  # the header byte (StateChangeFsUploader: compression ? 1 : 0)
MAX_CHUNK = 1 << 16  # the Snappy framing format's largest uncompressed chunk
MAX_UNCOMPRESSED = 256 << 20  # a compressed file is not decompressed past this (nor past its recorded size)
COMMON_KEY_GROUP = -1  # StateChangeLoggerImpl: changes of no key group (state metadata)
MAX_KEY_GROUPS = 1 << 15  # KeyGroupRangeAssignment.UPPER_BOUND_MAX_PARALLELISM


class DstlError(ValueError):
    """A DSTL file that is not what Flink writes; ``offset``: the byte of the file."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(f"byte {offset:,}: {message}")
        self.offset = offset


def problem(
    data: bytes, recorded: Iterable[int], starts: Iterable[tuple[int, tuple[int, ...]]]
) -> str | None:
    """Why ``data`` (a whole DSTL file) is not the file its handles record (sizes ``recorded``;
    ``starts``: where referenced change sets begin, each with the bytes of changes a handle of
    that one piece records), or ``None``. A compressed file is decompressed first; what is wrong
    in its uncompressed bytes is said at their offsets ("uncompressed byte N")."""
    if not data:
        return "empty: no header byte"
    if data[0] not in (PLAIN, SNAPPY):
        return f"byte 0: header {data[0]}, neither 0 (plain) nor 1 (Snappy-compressed)"
    sizes = sorted(set(recorded))
    if data[0] == SNAPPY:
        try:
            body = unframe(
                memoryview(data)[1:], 1, min(MAX_UNCOMPRESSED, max(sizes, default=MAX_UNCOMPRESSED))
            )
        except DstlError as e:
            return str(e)
        at, byte = 0, "uncompressed byte"
    else:
        body, at, byte = memoryview(data)[1:], 1, "byte"
    try:
        begins = change_sets(body, at)
    except DstlError as e:
        return f"uncompressed {e}" if data[0] == SNAPPY else str(e)
    if sizes and sizes != [len(body)]:
        if data[0] == SNAPPY:
            return (f"uncompressed byte {sizes[0]:,}: the checkpoint's changes end there, the file's "
                    f"uncompressed bytes at {len(body):,}")  # fmt: skip
        return f"byte {sizes[0] + 1:,}: the checkpoint's changes end there, the file's at byte {len(data):,}"
    for start, expected in sorted(starts):
        if start not in begins:
            return f"{byte} {start + at:,}: a checkpoint's changes begin there, but no change set does"
        for size in expected:
            if begins[start] != size:
                return (f"{byte} {start + at:,}: the change set there holds {begins[start]:,} bytes of changes, "
                        f"the checkpoint records {size:,}")  # fmt: skip
    return None


def is_compressed(header: bytes) -> bool:
    """Whether a DSTL file whose first byte is ``header`` is Snappy-compressed (its size on disk
    is then not the size recorded)."""
    return header[:1] == bytes((SNAPPY,))


def unframe(framed, at: int, limit: int) -> bytes:
    """The uncompressed bytes of a Snappy framed stream (``framed``; ``at``: its first byte's
    offset in the file, for errors), decompressed chunk by chunk and never past ``limit`` bytes
    (a corrupt length cannot make a giant allocation). The chunks' CRCs are not verified (nor
    does Flink's reader: ``SnappyFramedInputStream(in, false)``); a chunk that does not
    decompress, a reserved chunk type or a truncated chunk is an error at its byte."""
    import pyarrow as pa

    n = len(framed)
    pos = 0
    out: list[bytes] = []
    total = 0
    while pos < n:
        if pos + 4 > n:
            raise DstlError(f"truncated Snappy chunk header ({n - pos} bytes left)", pos + at)
        kind = framed[pos]
        length = int.from_bytes(framed[pos + 1 : pos + 4], "little")
        if pos + 4 + length > n:
            raise DstlError(f"a Snappy chunk of {length:,} bytes, {n - pos - 4:,} left in the file", pos + at)
        chunk = framed[pos + 4 : pos + 4 + length]
        if pos == 0 and (kind != 0xFF or bytes(chunk) != b"sNaPpY"):
            raise DstlError("no Snappy stream identifier after the header byte 1 (compressed)", pos + at)
        if kind in (0x00, 0x01):
            if length < 4:
                raise DstlError(f"a Snappy data chunk of {length} bytes: no room for its checksum", pos + at)
            payload = chunk[4:]
            if kind == 0x01:
                data = bytes(payload)
            else:
                size = _varint(payload)
                if size is None or size > MAX_CHUNK:
                    raise DstlError(f"a Snappy chunk that decompresses to {size or '?'} bytes (at most {MAX_CHUNK:,})",
                                    pos + at)  # fmt: skip
                try:
                    data = pa.decompress(payload, decompressed_size=size, codec="snappy").to_pybytes()
                except (pa.ArrowException, ValueError, OSError) as e:
                    raise DstlError(f"a Snappy chunk that does not decompress ({e})", pos + at) from None
            if len(data) > MAX_CHUNK:
                raise DstlError(
                    f"a Snappy chunk of {len(data):,} uncompressed bytes (at most {MAX_CHUNK:,})", pos + at
                )
            total += len(data)
            if total > limit:
                raise DstlError(
                    f"decompresses to more than the {limit:,} bytes the checkpoint records", pos + at
                )
            out.append(data)
        elif 0x02 <= kind <= 0x7F:
            raise DstlError(f"a reserved unskippable Snappy chunk type 0x{kind:02x}", pos + at)
        pos += 4 + length  # the stream identifier again, padding (0xfe), reserved skippable chunks
    return b"".join(out)


def _varint(data) -> int | None:
    """The little-endian base-128 varint a raw Snappy block begins with (its uncompressed length)."""
    value = 0
    for i in range(min(5, len(data))):
        value |= (data[i] & 0x7F) << (7 * i)
        if not data[i] & 0x80:
            return value
    return None


def change_sets(body, at: int = 0) -> dict[int, int]:
    """Where each change set of ``body`` (the bytes after the header; ``at``: their first byte's
    offset in the file, for errors) begins, and the bytes of changes it holds. They must end
    exactly at the end of ``body``."""
    pos = 0
    begins: dict[int, int] = {}
    while pos < len(body):
        end, payload, _common = change_set(body, pos, at)
        begins[pos] = payload
        pos = end
    return begins


def change_set(body, start: int, at: int = 0) -> tuple[int, int, list[tuple[int, int]]]:
    """The change set of ``body`` that begins at ``start`` (``StateChangeFormat.write``): where it
    ends, the bytes of changes it holds, and where its changes of key group -1 (the state
    metadata records: ``(offset, length)`` in ``body``) are."""
    n = len(body)
    pos = start
    payload = 0
    common: list[tuple[int, int]] = []

    def read_int(what: str) -> int:
        nonlocal pos
        if pos + 4 > n:
            raise DstlError(f"truncated: {what} expected, {n - pos} bytes left", pos + at)
        value = _INT(body, pos)[0]
        pos += 4
        return value

    groups = read_int("a change set's group count")
    if groups < 0:
        raise DstlError(f"negative group count {groups}", start + at)
    for _ in range(groups):
        where = pos
        changes = read_int("a group's change count")
        if changes < 0:
            raise DstlError(f"negative change count {changes}", where + at)
        where = pos
        key_group = read_int("a group's key group")
        if not COMMON_KEY_GROUP <= key_group < MAX_KEY_GROUPS:
            raise DstlError(f"key group {key_group} is no key group", where + at)
        for _ in range(changes):
            where = pos
            length = read_int("a change's length")
            if length < 0 or length > n - pos:
                raise DstlError(f"a change of {length:,} bytes, {n - pos:,} left in the file", where + at)
            if key_group == COMMON_KEY_GROUP:
                common.append((pos, length))
            pos += length
            payload += length
    return pos, payload, common


def body_of(data: bytes, limit: int):
    """The bytes after the header of a whole DSTL file (decompressed if it is compressed, never
    past ``limit`` bytes) and their first byte's offset in the file (0 for uncompressed bytes)."""
    if not data:
        raise DstlError("empty: no header byte", 0)
    if data[0] == PLAIN:
        return memoryview(data)[1:], 1
    if data[0] == SNAPPY:
        return unframe(memoryview(data)[1:], 1, limit), 0
    raise DstlError(f"header {data[0]}, neither 0 (plain) nor 1 (Snappy-compressed)", 0)


def changelog_starts(metadata, resolve) -> dict[str, dict[int, set[int]]]:
    """The pieces a checkpoint's changelog handles reference, by DSTL file: URI -> offset (into
    the bytes after the header) where a piece's change set begins -> the state sizes of the
    handles of that one piece (the bytes of changes it must hold; none for a piece of many)."""
    out: dict[str, dict[int, set[int]]] = {}
    for op in metadata.operators:
        for s in op.subtasks or ():
            for keyed in (s.managed_keyed, s.raw_keyed):
                if type(keyed) is not ChangelogBackendHandle:
                    continue
                for part in keyed.non_materialized:
                    if type(part) is not ChangelogFileHandle:
                        continue
                    for offset, stream in part.pieces:
                        if type(stream) is FileHandle or type(stream) is RelativeFileHandle:
                            sizes = out.setdefault(resolve(stream), {}).setdefault(offset, set())
                            if len(part.pieces) == 1:
                                sizes.add(part.state_size)
    return out
