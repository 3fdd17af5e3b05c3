"""RocksDB's log format (``db/log_format.h``, ``db/log_reader.cc``) as a MANIFEST file holds it: the
record checksums a shallow ``verify`` checks, so a flipped byte in a ``MANIFEST-NNNNNN`` that keeps
its size is found without opening the database (RocksDB's own recovery refuses such a file:
``Corruption: checksum mismatch``).

The file is a run of 32 KiB blocks. Each block holds records, each a header -- a masked CRC32C
(4 bytes, little-endian), the payload length (2 bytes), the record type (1 byte), and for the
recyclable types the log number (4 bytes) -- then the payload. The checksum covers the type byte,
the log number if any, and the payload. A block's last bytes, too few for a header, are zeros; so
is a zero-type record of length 0 (preallocated space). Only what the format fixes is judged: a
checksum that does not match, or a length that runs past its block. A file that ends inside a
record is left to the size check (the recorded size is the checkpoint's).
"""

from __future__ import annotations

import struct

BLOCK_SIZE = 32768
HEADER_SIZE = 7
RECYCLABLE_HEADER_SIZE = 11
RECYCLABLE_TYPES = frozenset({5, 6, 7, 8, 11})  # kRecyclable{Full,First,Middle,Last,UserDefinedTimestampSize}
MASK_DELTA = 0xA282EAD8
CHECKED_LIMIT = 16 << 20  # a MANIFEST of a checkpoint is KBs; a larger one is size-checked only

_HEADER = struct.Struct("<IHB")


def _table() -> list[int]:
    poly, table = 0x82F63B78, []  # CRC-32C (Castagnoli), reflected
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE: list[int] = []


def crc32c(data: bytes | memoryview) -> int:
    """CRC-32C of ``data`` (pure Python: a MANIFEST's records are small)."""
    if not _CRC_TABLE:
        _CRC_TABLE.extend(_table())
    table, crc = _CRC_TABLE, 0xFFFFFFFF
    for b in bytes(data):
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def unmask(masked: int) -> int:
    """RocksDB stores ``crc32c::Mask(crc)``: rotated right by 15 bits plus a constant."""
    rot = (masked - MASK_DELTA) & 0xFFFFFFFF
    return ((rot >> 17) | (rot << 15)) & 0xFFFFFFFF


def log_problem(data: bytes, base: int = 0) -> str | None:
    """What is wrong with the log records in ``data`` (a whole MANIFEST file; ``base``: its offset
    in the file read), at its byte, or None."""
    view = memoryview(data)
    for block_start in range(0, len(data), BLOCK_SIZE):
        block_end = min(block_start + BLOCK_SIZE, len(data))
        at = block_start
        while block_end - at >= HEADER_SIZE:
            masked, length, kind = _HEADER.unpack_from(data, at)
            if kind == 0 and length == 0:
                break  # zeros to the end of the block (preallocated or trailer)
            header = RECYCLABLE_HEADER_SIZE if kind in RECYCLABLE_TYPES else HEADER_SIZE
            end = at + header + length
            if end > len(data):
                return None  # the file ends inside this record: the size check's to judge
            if end > block_end:
                return f"byte {base + at:,}: log record of {length} bytes runs past its 32 KiB block"
            if crc32c(view[at + 6 : end]) != unmask(masked):
                return f"byte {base + at:,}: log record checksum mismatch (type {kind}, {length} bytes)"
            at = end
    return None
