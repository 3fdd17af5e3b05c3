"""A bounds-checked big-endian reader over bytes Flink's serializers wrote (Java ``DataOutput``).

Shared by the readers of state streams (:mod:`ckptctl.states`: serializer snapshots; and
:mod:`ckptctl.paimon.sinkstate`: Paimon's sink state): every read checks the bytes left first, and
every error is one :class:`~ckptctl.errors.MetadataFormatError` naming the file and the absolute
offset ``base + pos``. ``SUBJECT`` names what is being read in the truncation message.
"""

from __future__ import annotations

import struct
from typing import Any

from ckptctl.errors import MetadataFormatError


class ByteReader:
    SUBJECT = "data"

    def __init__(self, data: bytes, path: str, base: int = 0) -> None:
        self.data, self.path, self.base, self.pos = data, path, base, 0

    @property
    def left(self) -> int:
        return len(self.data) - self.pos

    def fail(self, message: str, at: int | None = None) -> MetadataFormatError:
        return MetadataFormatError(
            message, path=self.path, offset=self.base + (self.pos if at is None else at)
        )

    def need(self, n: int, what: str) -> None:
        if n > self.left:
            raise self.fail(f"truncated {self.SUBJECT}: {what} needs {n} bytes, {self.left} left")

    def _unpack(self, fmt: str, n: int, what: str) -> Any:
        self.need(n, what)
        v = struct.unpack_from(fmt, self.data, self.pos)[0]
        self.pos += n
        return v

    def i32(self, what: str) -> int:
        return self._unpack(">i", 4, what)

    def bool(self, what: str) -> bool:
        self.need(1, what)
        v = self.data[self.pos]
        if v > 1:
            raise self.fail(f"{what}: expected a boolean, found byte 0x{v:02x}")
        self.pos += 1
        return bool(v)
