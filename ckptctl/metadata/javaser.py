"""A small, bounded decoder of the Java Object Serialization Stream Protocol.

Flink appends ``CheckpointProperties`` to V4+ metadata with an ``ObjectOutputStream``. Its field
set differs across Flink releases (``CheckpointType`` vs ``SavepointType``, new booleans), so this
decodes the stream generically from its class descriptors instead of hard-coding offsets, then
picks out what ckptctl reports: checkpoint vs. savepoint, savepoint format, sharing strategy.
Only the grammar Flink's trailer can use is accepted; anything else is an error with an offset.
"""

from __future__ import annotations

import struct
from typing import Any

from ckptctl.metadata import mutf8
from ckptctl.metadata.model import CheckpointProperties

TC_NULL, TC_REFERENCE, TC_CLASSDESC, TC_OBJECT, TC_STRING = 0x70, 0x71, 0x72, 0x73, 0x74
TC_ARRAY, TC_CLASS, TC_BLOCKDATA, TC_ENDBLOCKDATA, TC_RESET = 0x75, 0x76, 0x77, 0x78, 0x79
TC_BLOCKDATALONG, TC_LONGSTRING, TC_ENUM = 0x7A, 0x7C, 0x7E
BASE_HANDLE = 0x7E0000
SC_WRITE_METHOD, SC_SERIALIZABLE, SC_EXTERNALIZABLE, SC_BLOCK_DATA = 0x01, 0x02, 0x04, 0x08
_PRIMITIVES = {"B": ">b", "C": ">H", "D": ">d", "F": ">f", "I": ">i", "J": ">q", "S": ">h", "Z": ">?"}
MAX_DEPTH = 64
MAX_ARRAY = 1 << 16


class JavaSerializationError(ValueError):
    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


class ClassDesc:
    __slots__ = ("name", "flags", "fields", "superclass")

    def __init__(self, name: str, flags: int, fields: list[tuple[str, str]], superclass: ClassDesc | None):
        self.name, self.flags, self.fields, self.superclass = name, flags, fields, superclass


class JavaObject:
    __slots__ = ("class_name", "fields")

    def __init__(self, class_name: str) -> None:
        self.class_name = class_name
        self.fields: dict[str, Any] = {}


class JavaEnum:
    __slots__ = ("class_name", "constant")

    def __init__(self, class_name: str, constant: str) -> None:
        self.class_name, self.constant = class_name, constant


class _Stream:
    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0
        self.handles: list[Any] = []
        self.depth = 0

    def fail(self, message: str, at: int | None = None) -> JavaSerializationError:
        return JavaSerializationError(message, self.pos if at is None else at)

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise self.fail(f"truncated: needs {n} bytes, {len(self.buf) - self.pos} left")
        p = self.pos
        self.pos += n
        return self.buf[p : p + n]

    def unpack(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, self.take(size))[0]

    def utf(self) -> str:
        n = self.unpack(">H")
        at = self.pos
        try:
            return mutf8.decode(self.take(n))
        except mutf8.MalformedUtf as e:
            raise self.fail("invalid modified UTF-8", at + e.index) from None

    def new_handle(self, value: Any) -> int:
        self.handles.append(value)
        return len(self.handles) - 1

    def reference(self) -> Any:
        at = self.pos
        h = self.unpack(">i") - BASE_HANDLE
        if not 0 <= h < len(self.handles):
            raise self.fail(f"dangling back-reference {h + BASE_HANDLE:#x}", at)
        return self.handles[h]

    # -- grammar --------------------------------------------------------------------------
    def content(self) -> Any:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.fail("objects nested too deeply")
        at = self.pos
        tc = self.take(1)[0]
        try:
            if tc == TC_NULL:
                return None
            if tc == TC_REFERENCE:
                return self.reference()
            if tc == TC_STRING:
                s = self.utf()
                self.new_handle(s)
                return s
            if tc == TC_LONGSTRING:
                n = self.unpack(">q")
                body_at = self.pos
                try:
                    s = mutf8.decode(self.take(n))
                except mutf8.MalformedUtf as e:
                    raise self.fail("invalid modified UTF-8", body_at + e.index) from None
                self.new_handle(s)
                return s
            if tc == TC_ENUM:
                desc = self.class_desc()
                slot = self.new_handle(None)
                name = self.content()
                if not isinstance(name, str):
                    raise self.fail("enum constant name is not a string", at)
                value = JavaEnum(desc.name if desc else "?", name)
                self.handles[slot] = value
                return value
            if tc == TC_OBJECT:
                return self.object()
            if tc == TC_ARRAY:
                desc = self.class_desc()
                values: list[Any] = []
                self.new_handle(values)
                n = self.unpack(">i")
                if not 0 <= n <= MAX_ARRAY:
                    raise self.fail(f"array length {n} out of bounds", self.pos - 4)
                component = desc.name[1:] if desc else "L"
                for _ in range(n):
                    values.append(self.value(component[:1]))
                return values
            if tc == TC_CLASSDESC:
                self.pos = at
                return self.class_desc()
            if tc == TC_RESET:
                self.handles.clear()
                return self.content()
            raise self.fail(f"unsupported serialization type code 0x{tc:02x}", at)
        finally:
            self.depth -= 1

    def class_desc(self) -> ClassDesc | None:
        at = self.pos
        tc = self.take(1)[0]
        if tc == TC_NULL:
            return None
        if tc == TC_REFERENCE:
            desc = self.reference()
            if not isinstance(desc, ClassDesc):
                raise self.fail("reference is not a class descriptor", at)
            return desc
        if tc != TC_CLASSDESC:
            raise self.fail(f"expected a class descriptor, found 0x{tc:02x}", at)
        name = self.utf()
        self.take(8)  # serialVersionUID
        flags = self.take(1)[0]
        desc = ClassDesc(name, flags, [], None)
        self.new_handle(desc)
        for _ in range(self.unpack(">H")):
            type_code = chr(self.take(1)[0])
            field_name = self.utf()
            if type_code in "L[":
                self.content()  # the field's class name as a string object
            elif type_code not in _PRIMITIVES:
                raise self.fail(f"unknown field type code {type_code!r}", self.pos - 1)
            desc.fields.append((type_code, field_name))
        self.annotations()
        desc.superclass = self.class_desc()
        return desc

    def annotations(self) -> None:
        while True:
            if self.pos < len(self.buf) and self.buf[self.pos] == TC_ENDBLOCKDATA:
                self.pos += 1
                return
            if self.pos < len(self.buf) and self.buf[self.pos] == TC_BLOCKDATA:
                self.pos += 1
                self.take(self.take(1)[0])
            elif self.pos < len(self.buf) and self.buf[self.pos] == TC_BLOCKDATALONG:
                self.pos += 1
                self.take(self.unpack(">i"))
            else:
                self.content()

    def value(self, type_code: str) -> Any:
        if type_code in _PRIMITIVES:
            return self.unpack(_PRIMITIVES[type_code])
        return self.content()

    def object(self) -> JavaObject:
        desc = self.class_desc()
        if desc is None:
            raise self.fail("object without a class descriptor")
        obj = JavaObject(desc.name)
        self.new_handle(obj)
        chain = []
        d: ClassDesc | None = desc
        while d is not None:
            chain.append(d)
            d = d.superclass
        for cls in reversed(chain):
            if cls.flags & SC_EXTERNALIZABLE:
                raise self.fail(f"externalizable class {cls.name} is not supported")
            for type_code, field_name in cls.fields:
                obj.fields[field_name] = self.value(type_code)
            if cls.flags & SC_WRITE_METHOD:
                self.annotations()
        return obj


def decode(buf: bytes) -> Any:
    """Decode the first object of a Java serialization stream."""
    s = _Stream(buf)
    if s.take(4) != b"\xac\xed\x00\x05":
        raise JavaSerializationError("missing Java serialization header AC ED 00 05", 0)
    return s.content()


def _plain(value: Any) -> Any:
    if isinstance(value, JavaEnum):
        return value.constant
    if isinstance(value, JavaObject):
        return {k: _plain(v) for k, v in value.fields.items()}
    return value


def decode_checkpoint_properties(buf: bytes) -> CheckpointProperties | None:
    """The trailer's properties; ``None`` for a serialized Java null (``AC ED 00 05 70``), which
    Flink writes when metadata is built without properties (e.g. by the state processor API)."""
    obj = decode(buf)
    if obj is None:
        return None
    if not isinstance(obj, JavaObject) or not obj.class_name.endswith("CheckpointProperties"):
        name = obj.class_name if isinstance(obj, JavaObject) else type(obj).__name__
        raise JavaSerializationError(f"trailer holds {name}, not CheckpointProperties", 0)
    fields: list[tuple[str, object]] = []
    ctype_name = savepoint_format = sharing = None
    is_savepoint = False
    for key, value in obj.fields.items():
        if isinstance(value, JavaObject):
            is_savepoint = is_savepoint or value.class_name.endswith("SavepointType")
            inner = _plain(value)
            ctype_name = inner.get("name", ctype_name)
            savepoint_format = inner.get("formatType", savepoint_format)
            sharing = inner.get("sharingFilesStrategy", sharing)
            fields.extend((f"{key}.{k}", v) for k, v in inner.items() if not isinstance(v, (dict, list)))
        else:
            fields.append((key, _plain(value)))
    return CheckpointProperties(ctype_name, is_savepoint, savepoint_format, sharing, tuple(fields))
