"""Paimon's ``BinaryRow`` and ``BinaryArray``, read without a JVM (only what the sink state needs).

A ``BinaryRow`` of ``arity`` fields (``paimon-common`` ``BinaryRow`` / ``BinarySegmentUtils``)::

    null bits   ((arity + 63 + 8) // 64) * 8 bytes; byte 0 is the RowKind, field i is null when bit
                (i + 8) is set (bit i & 7 of byte (i + 8) >> 3, least significant first)
    fixed part  arity x 8-byte slots, little-endian
    variable    strings, bytes, arrays, nested rows the slots point to

A fixed-width field (BIGINT, INT, TINYINT, TIMESTAMP(<=3) as epoch millis, ...) sits at the start of
its slot. A variable-length one (STRING, BYTES, ARRAY, ROW) is either *inline* (at most 7 bytes:
the slot's most significant byte is ``0x80 | length``, the bytes at the start of the slot) or a
pointer ``offset << 32 | length`` with the offset from the start of the row (or array).

A ``BinaryArray``: int32 element count (little-endian), null bits in ``((n + 31) // 32) * 4``
bytes, then n elements of their fixed width (8 for strings, pointers relative to the array start).

Every offset and length is checked against the bytes at hand; a violation raises
:class:`BinaryRowError` with the offset (relative to the row's first byte) where it was found, which
the caller turns into a one-line error naming the file and the absolute offset.
"""

from __future__ import annotations

import contextlib
import struct
from typing import Any, NamedTuple

HIGHEST_FIRST_BIT = 0x80


class BinaryRowError(ValueError):
    """A malformed row or array; ``offset`` is relative to the first byte of the row."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


def null_bits_size(arity: int) -> int:
    return ((arity + 63 + 8) // 64) * 8


class Row:
    """A view on the bytes of one ``BinaryRow`` (without the int32 arity some framings put first)."""

    __slots__ = ("data", "arity", "fixed_end")

    def __init__(self, data: bytes, arity: int) -> None:
        if arity < 0:
            raise BinaryRowError(f"negative row arity {arity}", 0)
        fixed_end = null_bits_size(arity) + 8 * arity
        if fixed_end > len(data):
            raise BinaryRowError(
                f"row of {len(data)} bytes is shorter than the fixed part of {arity} fields ({fixed_end} bytes)",
                0,
            )
        self.data, self.arity, self.fixed_end = data, arity, fixed_end

    def _slot_at(self, pos: int) -> int:
        if not 0 <= pos < self.arity:
            raise BinaryRowError(f"field {pos} outside a row of {self.arity} fields", 0)
        return null_bits_size(self.arity) + 8 * pos

    def is_null(self, pos: int) -> bool:
        self._slot_at(pos)
        bit = pos + 8
        return bool(self.data[bit >> 3] & (1 << (bit & 7)))

    def slot(self, pos: int) -> bytes:
        at = self._slot_at(pos)
        return self.data[at : at + 8]

    def long(self, pos: int) -> int:
        return struct.unpack_from("<q", self.data, self._slot_at(pos))[0]

    def int(self, pos: int) -> int:
        return struct.unpack_from("<i", self.data, self._slot_at(pos))[0]

    def byte(self, pos: int) -> int:
        return struct.unpack_from("<b", self.data, self._slot_at(pos))[0]

    def binary(self, pos: int) -> bytes:
        return _var_bytes(self.data, 0, self._slot_at(pos), self.fixed_end, f"field {pos}")

    def string(self, pos: int) -> str:
        raw = self.binary(pos)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise BinaryRowError(f"field {pos}: not UTF-8 ({e.reason})", self._slot_at(pos)) from None

    def nullable(self, pos: int, getter: str) -> Any:
        """``getter`` ('long', 'int', 'byte', 'string', ...) of field ``pos``, None when null or absent."""
        if pos >= self.arity or self.is_null(pos):
            return None
        return getattr(self, getter)(pos)

    def string_array(self, pos: int) -> list[str]:
        slot = self._slot_at(pos)
        start, size = _pointer(self.data, 0, slot, self.fixed_end, f"field {pos}")
        return _string_array(self.data[start : start + size], start, f"field {pos}")


def _pointer(data: bytes, base: int, slot: int, min_offset: int, what: str) -> tuple[int, int]:
    """(absolute start, length) of an out-of-line variable part; ``base`` is the row/array start."""
    v = struct.unpack_from("<Q", data, slot)[0]
    if v >> 63:
        raise BinaryRowError(f"{what}: inline value where a row/array pointer is expected", slot)
    offset, length = v >> 32, v & 0xFFFFFFFF
    start = base + offset
    if offset < min_offset - base or start + length > len(data):
        raise BinaryRowError(
            f"{what}: variable part [{offset}, {offset + length}) outside the {len(data) - base} bytes", slot
        )
    return start, length


def _var_bytes(data: bytes, base: int, slot: int, min_offset: int, what: str) -> bytes:
    v = struct.unpack_from("<Q", data, slot)[0]
    if v >> 63:  # inline: up to 7 bytes at the start of the slot (little-endian)
        n = (v >> 56) & 0x7F
        if n > 7:
            raise BinaryRowError(f"{what}: inline length {n} > 7", slot)
        return data[slot : slot + n]
    start, length = _pointer(data, base, slot, min_offset, what)
    return data[start : start + length]


def _string_array(arr: bytes, at: int, what: str) -> list[str]:
    """Strings of a BinaryArray (``at``: its offset inside the row, for errors)."""
    if len(arr) < 4:
        raise BinaryRowError(f"{what}: array of {len(arr)} bytes has no element count", at)
    n = struct.unpack_from("<i", arr, 0)[0]
    header = 4 + ((n + 31) // 32) * 4 if n >= 0 else 0
    if n < 0 or header + 8 * n > len(arr):
        raise BinaryRowError(f"{what}: array count {n} does not fit its {len(arr)} bytes", at)
    out = []
    for i in range(n):
        if arr[4 + (i >> 3)] & (1 << (i & 7)):
            raise BinaryRowError(f"{what}: null element {i} in a non-null string array", at)
        try:
            raw = _var_bytes(arr, 0, header + 8 * i, header + 8 * n, f"{what}[{i}]")
            out.append(raw.decode("utf-8"))
        except BinaryRowError as e:
            raise BinaryRowError(str(e), at + e.offset) from None
        except UnicodeDecodeError as e:
            raise BinaryRowError(f"{what}[{i}]: not UTF-8 ({e.reason})", at + header + 8 * i) from None
    return out


# ---------------------------------------------------------------------------------------------
# rows whose field types are unknown (partitions)


class RawField(NamedTuple):
    """One field of a row whose types are not known (a partition, without the table's schema).

    ``slot`` is the 8-byte slot in hex, as stored. ``value`` is the reading the slot allows: a
    ``string`` when the slot is a valid inline or out-of-line string whose bytes are UTF-8; else an
    ``int`` (INT, SMALLINT, TINYINT, DATE, ... write 4 bytes or fewer, so the upper 4 bytes are 0)
    or a ``long`` (BIGINT, TIMESTAMP millis, DOUBLE bits, ...) from the little-endian slot. The
    reading is a guess only between these kinds: a BOOLEAN reads as int 0/1, a DOUBLE as its bits.
    """

    index: int
    null: bool
    slot: str
    kind: str | None  # string | int | long | None (null)
    value: Any

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "null": self.null,
            "slot": self.slot,
            "kind": self.kind,
            "value": self.value,
        }


class RawRow(NamedTuple):
    arity: int
    fields: tuple[RawField, ...]
    size: int  # bytes of the row (without the arity int)
    data: bytes = b""  # the row's bytes: a table's layout turns them into its partition directory

    @property
    def serialized(self) -> bytes:
        """``SerializationUtils.serializeBinaryRow`` without its length: the arity (big-endian) and
        the row, as a manifest holds a partition."""
        return self.arity.to_bytes(4, "big") + self.data

    @property
    def values(self) -> list[Any]:
        return [f.value for f in self.fields]

    def to_json(self) -> dict[str, Any]:
        return {"arity": self.arity, "values": self.values, "fields": [f.to_json() for f in self.fields],
                "size": self.size}  # fmt: skip

    def __str__(self) -> str:
        return "/".join("null" if f.null else str(f.value) for f in self.fields)


def raw_row(data: bytes, arity: int) -> RawRow:
    row = Row(data, arity)
    fields = []
    for i in range(arity):
        slot = row.slot(i)
        if row.is_null(i):
            fields.append(RawField(i, True, slot.hex(), None, None))
            continue
        text = None
        with contextlib.suppress(BinaryRowError):
            text = row.string(i)
        if text is not None:
            fields.append(RawField(i, False, slot.hex(), "string", text))
            continue
        v = struct.unpack("<q", slot)[0]
        if slot[4:] == b"\0\0\0\0":
            fields.append(RawField(i, False, slot.hex(), "int", struct.unpack("<i", slot[:4])[0]))
        else:
            fields.append(RawField(i, False, slot.hex(), "long", v))
    return RawRow(arity, tuple(fields), len(data), bytes(data))
