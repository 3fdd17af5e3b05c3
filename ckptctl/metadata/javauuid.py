"""The backend identifier of an incremental handle as Flink holds it: a ``java.util.UUID``.

The file stores the identifier as a string. Flink's deserializer turns it into a UUID with
``UUID.fromString`` and, when that throws, with ``UUID.nameUUIDFromBytes(id.getBytes(UTF_8))``;
the UUID is what restores compare to decide whether a local RocksDB instance can be reused. This
module reproduces both on Java 17 (the JVM the differential harness runs Flink on), including the
lenient path of ``fromString`` (``Long.parseLong`` per component: signs, any Unicode decimal
digit, fullwidth letters), so that ckptctl reports the identifier Flink ends up with.
"""

from __future__ import annotations

import hashlib
import struct
import unicodedata
import uuid

_MAX = (1 << 63) - 1
_MIN = -(1 << 63)


def flink_backend_uuid(backend_id: str) -> str:
    """``UUID.toString()`` of the UUID Flink makes of ``backend_id``."""
    units = _utf16(backend_id)
    try:
        value = _from_string(units)
    except ValueError:
        value = _name_uuid(backend_id)
    return str(value)


def _utf16(s: str) -> tuple[int, ...]:
    raw = s.encode("utf-16-be", "surrogatepass")
    return struct.unpack(f">{len(raw) // 2}H", raw)


def _digit16(unit: int) -> int:
    """``Character.digit(char, 16)``."""
    if 0xD800 <= unit <= 0xDFFF:
        return -1
    ch = chr(unit)
    try:
        d = unicodedata.decimal(ch)
    except ValueError:
        d = -1
    if d < 0:
        if 0x41 <= unit <= 0x5A:
            d = unit - 0x41 + 10
        elif 0x61 <= unit <= 0x7A:
            d = unit - 0x61 + 10
        elif 0xFF21 <= unit <= 0xFF3A:
            d = unit - 0xFF21 + 10
        elif 0xFF41 <= unit <= 0xFF5A:
            d = unit - 0xFF41 + 10
    return d if 0 <= d < 16 else -1


def _ascii_hex(unit: int) -> int:
    """``UUID.parse4Nibbles``' table: ASCII hex digits only."""
    if 0x30 <= unit <= 0x39:
        return unit - 0x30
    if 0x41 <= unit <= 0x46:
        return unit - 0x41 + 10
    if 0x61 <= unit <= 0x66:
        return unit - 0x61 + 10
    return -1


def _parse_long(units: tuple[int, ...], begin: int, end: int) -> int:
    """``Long.parseLong(CharSequence, begin, end, 16)``: ``ValueError`` where Java throws."""
    if begin >= end:
        raise ValueError("empty")
    negative = False
    limit = -_MAX
    i = begin
    first = units[i]
    if first < 0x30:
        if first == 0x2D:
            negative, limit = True, _MIN
        elif first != 0x2B:
            raise ValueError("sign")
        i += 1
        if i == end:
            raise ValueError("lone sign")
    multmin = -((-limit) // 16)  # Java's limit / radix truncates toward zero
    result = 0
    while i < end:
        digit = _digit16(units[i])
        if digit < 0 or result < multmin:
            raise ValueError("digit")
        result *= 16
        if result < limit + digit:
            raise ValueError("overflow")
        result -= digit
        i += 1
    return result if negative else -result


def _index_of(units: tuple[int, ...], start: int) -> int:
    for i in range(max(start, 0), len(units)):
        if units[i] == 0x2D:
            return i
    return -1


def _from_string(units: tuple[int, ...]) -> uuid.UUID:
    """``UUID.fromString`` of Java 17: the strict 36-character form, else ``fromString1``."""
    n = len(units)
    if n == 36 and all(units[p] == 0x2D for p in (8, 13, 18, 23)):
        digits = [_ascii_hex(u) for i, u in enumerate(units) if i not in (8, 13, 18, 23)]
        if min(digits) >= 0:
            return uuid.UUID(int=int("".join(f"{d:x}" for d in digits), 16))
    if n > 36:
        raise ValueError("UUID string too large")
    d1 = _index_of(units, 0)
    d2 = _index_of(units, d1 + 1)
    d3 = _index_of(units, d2 + 1)
    d4 = _index_of(units, d3 + 1)
    d5 = _index_of(units, d4 + 1)
    if d4 < 0 or d5 >= 0:
        raise ValueError("Invalid UUID string")
    msb = _parse_long(units, 0, d1) & 0xFFFFFFFF
    msb = (msb << 16) | (_parse_long(units, d1 + 1, d2) & 0xFFFF)
    msb = (msb << 16) | (_parse_long(units, d2 + 1, d3) & 0xFFFF)
    lsb = (_parse_long(units, d3 + 1, d4) & 0xFFFF) << 48
    lsb |= _parse_long(units, d4 + 1, n) & 0xFFFFFFFFFFFF
    return uuid.UUID(int=(msb << 64) | lsb)


def _name_uuid(s: str) -> uuid.UUID:
    """``UUID.nameUUIDFromBytes(s.getBytes(UTF_8))``: Java encodes a lone surrogate as '?'."""
    combined = s.encode("utf-16-be", "surrogatepass").decode("utf-16-be", "surrogatepass")
    data = combined.encode("utf-8", "replace")
    return uuid.UUID(bytes=hashlib.md5(data).digest(), version=3)  # noqa: S324 - Java's choice
