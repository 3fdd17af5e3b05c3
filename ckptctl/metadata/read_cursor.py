"""A cursor over a ``_metadata`` file's bytes: Java ``DataInputStream`` primitives, bounds-checked.

The bottom of the reader's layers (:class:`Cursor`, then :mod:`ckptctl.metadata.read_streams`,
:mod:`ckptctl.metadata.read_keyed`, :mod:`ckptctl.metadata.read_operators` and
:class:`ckptctl.metadata.reader.Decoder` on top). Every read checks the bytes left first and every
count is checked against them before anything is allocated, so a corrupt file fails with
:class:`MetadataFormatError` naming the byte offset. A plain cursor also reads the blocks Flink
nests with their own length (merged channel offsets, master states).
"""

from __future__ import annotations

import struct

from ckptctl.errors import MetadataFormatError
from ckptctl.metadata import flinkpath, mutf8
from ckptctl.metadata.handles import (
    KeyGroupRange,
    wrap32,
)

_I32 = struct.Struct(">i").unpack_from
_I64 = struct.Struct(">q").unpack_from
_U16 = struct.Struct(">H").unpack_from
_I32I32 = struct.Struct(">ii").unpack_from

_PLAIN_PATH = flinkpath.is_plain


class Cursor:
    """A position in the file's bytes (``buf[pos:end]``) with Java ``DataInputStream`` primitives."""

    __slots__ = ("buf", "pos", "end", "path")

    def __init__(self, buf: bytes, path: str | None, start: int = 0, end: int | None = None) -> None:
        self.buf = buf
        self.pos = start
        self.end = len(buf) if end is None else end
        self.path = path

    # -- errors ---------------------------------------------------------------------------
    def fail(self, message: str, offset: int | None = None) -> MetadataFormatError:
        return MetadataFormatError(message, path=self.path, offset=self.pos if offset is None else offset)

    def need(self, n: int, what: str) -> None:
        if self.pos + n > self.end:
            raise self.fail(f"truncated: {what} needs {n} bytes, {self.end - self.pos} left")

    # -- primitives -----------------------------------------------------------------------
    def u8(self) -> int:
        p = self.pos
        if p >= self.end:
            raise self.fail("truncated: expected 1 more byte")
        self.pos = p + 1
        return self.buf[p]

    def i32(self) -> int:
        p = self.pos
        if p + 4 > self.end:
            raise self.fail(f"truncated: expected a 4-byte int, {self.end - p} bytes left")
        self.pos = p + 4
        return _I32(self.buf, p)[0]

    def i64(self) -> int:
        p = self.pos
        if p + 8 > self.end:
            raise self.fail(f"truncated: expected an 8-byte long, {self.end - p} bytes left")
        self.pos = p + 8
        return _I64(self.buf, p)[0]

    def utf(self) -> str:
        p = self.pos
        if p + 2 > self.end:
            raise self.fail("truncated: expected a string length")
        n = _U16(self.buf, p)[0]
        q = p + 2 + n
        if q > self.end:
            raise self.fail(f"truncated: string of {n} bytes, {self.end - p - 2} left")
        raw = self.buf[p + 2 : q]
        try:
            text = mutf8.decode(raw)
        except mutf8.MalformedUtf as e:
            raise self.fail("invalid modified UTF-8 in string", p + 2 + e.index) from None
        self.pos = q
        return text

    def path_utf(self, what: str) -> str:
        """A ``utf`` that Flink turns into a ``Path`` right away: rejected where ``new Path(s)`` throws."""
        at = self.pos
        text = self.utf()
        if not _PLAIN_PATH(text):
            self.check_path(text, what, at)
        return text

    def check_path(self, text: str, what: str, at: int, relative: bool = False) -> None:
        try:
            if relative:
                flinkpath.check_relative(text)
            else:
                flinkpath.check_path(text)
        except flinkpath.InvalidPath as e:
            raise self.fail(f"invalid {what} {text!r}: {e}", at) from None

    def raw(self, n: int, what: str) -> bytes:
        if n < 0:
            raise self.fail(f"negative length {n} for {what}", self.pos - 4)
        self.need(n, what)
        p = self.pos
        self.pos = p + n
        return self.buf[p : p + n]

    def count(self, what: str, item_min_bytes: int) -> int:
        """An ``i32`` element count, rejected if negative or larger than the bytes left could hold."""
        at = self.pos
        n = self.i32()
        if n < 0:
            raise self.fail(f"negative count {n} for {what}", at)
        if n * item_min_bytes > self.end - self.pos:
            raise self.fail(f"count {n} for {what} exceeds the {self.end - self.pos} bytes left", at)
        return n

    def collection_count(self, what: str) -> int:
        """The count of a channel-state collection: Flink loops ``size`` times, so negative is empty."""
        at = self.pos
        n = self.i32()
        if n > self.end - self.pos:
            raise self.fail(f"count {n} for {what} exceeds the {self.end - self.pos} bytes left", at)
        return max(n, 0)

    def longs(self, what: str) -> tuple[int, ...]:
        n = self.count(what, 8)
        p = self.pos
        self.pos = p + 8 * n
        return struct.unpack_from(f">{n}q", self.buf, p)

    def key_group_range(self) -> KeyGroupRange:
        """``KeyGroupRange.of(start, start + count - 1)`` with its constructor's preconditions."""
        p = self.pos
        if p + 8 > self.end:
            raise self.fail("truncated: expected a key-group range")
        self.pos = p + 8
        start, count = _I32I32(self.buf, p)
        return self.checked_range(start, count, p)

    def checked_range(self, start: int, count: int, at: int) -> KeyGroupRange:
        end = wrap32(start + count - 1)
        if start <= end:  # otherwise Flink substitutes the empty range
            if start < 0:
                raise self.fail(f"negative start key group {start}", at)
            if wrap32(1 + end - start) < 0:
                raise self.fail(f"key-group range [{start}, {end}] overflows", at)
        return KeyGroupRange(start, count)
