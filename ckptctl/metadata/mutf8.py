"""Java's *modified* UTF-8, as written by ``DataOutputStream.writeUTF`` and read by ``readUTF``.

It differs from UTF-8 in two ways that matter for byte-exact round trips: U+0000 is written as
``C0 80`` and characters outside the BMP as two 3-byte surrogates. The decoder follows
``DataInputStream.readUTF`` exactly (it accepts what Java accepts and rejects what Java rejects),
with a fast path for the ASCII strings that make up almost every path in a checkpoint.
"""

from __future__ import annotations


class MalformedUtf(ValueError):
    """Raised with the index of the offending byte inside the string's bytes."""

    def __init__(self, index: int) -> None:
        super().__init__(f"malformed modified UTF-8 at string byte {index}")
        self.index = index


def decode(raw: bytes) -> str:
    if raw.isascii():
        return raw.decode("ascii")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return _decode_java(raw)
    # Standard UTF-8 and Java agree on 1-3 byte sequences without surrogates; Java rejects 4-byte ones.
    if any(ord(ch) > 0xFFFF for ch in text):
        return _decode_java(raw)
    return text


def _decode_java(raw: bytes) -> str:
    """The byte-by-byte algorithm of ``DataInputStream.readUTF``; yields UTF-16 code units."""
    units: list[int] = []
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        top = c >> 4
        if top <= 7:
            units.append(c)
            i += 1
        elif top in (12, 13):
            if i + 1 >= n or (raw[i + 1] & 0xC0) != 0x80:
                raise MalformedUtf(i)
            units.append(((c & 0x1F) << 6) | (raw[i + 1] & 0x3F))
            i += 2
        elif top == 14:
            if i + 2 >= n or (raw[i + 1] & 0xC0) != 0x80 or (raw[i + 2] & 0xC0) != 0x80:
                raise MalformedUtf(i)
            units.append(((c & 0x0F) << 12) | ((raw[i + 1] & 0x3F) << 6) | (raw[i + 2] & 0x3F))
            i += 3
        else:
            raise MalformedUtf(i)
    # Join surrogate pairs into code points, keep lone surrogates (Java strings may hold them).
    return b"".join(u.to_bytes(2, "big") for u in units).decode("utf-16-be", "surrogatepass")


def encode(text: str) -> bytes:
    if text.isascii() and "\x00" not in text:
        return text.encode("ascii")
    out = bytearray()
    data = text.encode("utf-16-be", "surrogatepass")
    for k in range(0, len(data), 2):
        u = (data[k] << 8) | data[k + 1]
        if 0 < u < 0x80:
            out.append(u)
        elif u < 0x800:
            out += bytes((0xC0 | (u >> 6), 0x80 | (u & 0x3F)))
        else:
            out += bytes((0xE0 | (u >> 12), 0x80 | ((u >> 6) & 0x3F), 0x80 | (u & 0x3F)))
    return bytes(out)
