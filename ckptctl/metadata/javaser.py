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
from ckptctl.metadata.checkpoint import CheckpointProperties

TC_NULL, TC_REFERENCE, TC_CLASSDESC, TC_OBJECT, TC_STRING = 0x70, 0x71, 0x72, 0x73, 0x74
TC_ARRAY, TC_CLASS, TC_BLOCKDATA, TC_ENDBLOCKDATA, TC_RESET = 0x75, 0x76, 0x77, 0x78, 0x79
TC_BLOCKDATALONG, TC_LONGSTRING, TC_ENUM = 0x7A, 0x7C, 0x7E
BASE_HANDLE = 0x7E0000
SC_WRITE_METHOD, SC_SERIALIZABLE, SC_EXTERNALIZABLE, SC_BLOCK_DATA = 0x01, 0x02, 0x04, 0x08
_PRIMITIVES = {"B": ">b", "C": ">H", "D": ">d", "F": ">f", "I": ">i", "J": ">q", "S": ">h", "Z": ">?"}
MAX_DEPTH = 64
MAX_ARRAY = 1 << 16
SC_ENUM = 0x10


class LocalClass:
    """What the JVM reading the trailer knows of a class: Java serialization checks the stream
    against it (serialVersionUID, serializable/enum flags, field types by name, enum constants)."""

    __slots__ = ("uid", "enum", "fields", "constants", "is_a")

    def __init__(self, uid: int, enum: bool = False, fields: dict[str, tuple[str, str | None]] | None = None,
                 constants: tuple[str, ...] = (), is_a: tuple[str, ...] = ()) -> None:  # fmt: skip
        self.uid, self.enum, self.fields, self.constants = uid, enum, fields or {}, constants
        self.is_a = is_a  # local supertypes a field's declared type may name


_CKPT = "org.apache.flink.runtime.checkpoint."
_STRING = "java.lang.String"
_SHARING = _CKPT + "SnapshotType$SharingFilesStrategy"
_FORMAT = "org.apache.flink.core.execution.SavepointFormatType"
_ACTION = _CKPT + "SavepointType$PostCheckpointAction"
# The classes of the trailer as the JVM of Flink's releases that write V4+ metadata sees them
# (fixtures/dumper/TrailerClasses.java printed the same for every release from 1.15.4 to 2.3.0):
# field name -> (type code, declared type).
LOCAL_CLASSES: dict[str, LocalClass] = {
    _CKPT + "CheckpointProperties": LocalClass(
        2,
        fields={
            **{
                f: ("Z", None)
                for f in (
                    "discardCancelled",
                    "discardFailed",
                    "discardFinished",
                    "discardSubsumed",
                    "discardSuspended",
                    "forced",
                    "unclaimed",
                )
            },
            "checkpointType": ("L", _CKPT + "SnapshotType"),
        },
    ),  # fmt: skip
    _CKPT + "CheckpointType": LocalClass(
        -0x2921B0FCFA51E2C6,
        fields={"name": ("L", _STRING), "sharingFilesStrategy": ("L", _SHARING)},
        is_a=(_CKPT + "SnapshotType",),
    ),
    _CKPT + "SavepointType": LocalClass(
        -0x5F782CF75BA7EB48,
        fields={"formatType": ("L", _FORMAT), "name": ("L", _STRING), "postCheckpointAction": ("L", _ACTION)},
        is_a=(_CKPT + "SnapshotType",),
    ),
    _SHARING: LocalClass(0, enum=True, constants=("FORWARD_BACKWARD", "FORWARD", "NO_SHARING")),
    _FORMAT: LocalClass(0, enum=True, constants=("CANONICAL", "NATIVE")),
    _ACTION: LocalClass(0, enum=True, constants=("NONE", "SUSPEND", "TERMINATE")),
    "java.lang.Enum": LocalClass(0, enum=True),
}


class JavaSerializationError(ValueError):
    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


class ClassDesc:
    __slots__ = ("name", "flags", "fields", "superclass", "local", "missing_at")

    def __init__(self, name: str, flags: int, fields: list[tuple[str, str]], superclass: ClassDesc | None):
        self.name, self.flags, self.fields, self.superclass = name, flags, fields, superclass
        self.local: LocalClass | None = None
        self.missing_at: int | None = None


class JavaObject:
    __slots__ = ("class_name", "fields")

    def __init__(self, class_name: str) -> None:
        self.class_name = class_name
        self.fields: dict[str, Any] = {}


class JavaEnum:
    __slots__ = ("class_name", "constant")

    def __init__(self, class_name: str, constant: str) -> None:
        self.class_name, self.constant = class_name, constant


class Missing:
    """An object or enum constant of a class the reading JVM does not have. Java records the
    ClassNotFoundException on it and throws it at the end only if the value is reachable through
    fields the local classes declare (or is the top-level object); otherwise it is discarded."""

    __slots__ = ("class_name", "at")

    def __init__(self, class_name: str, at: int) -> None:
        self.class_name, self.at = class_name, at


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
                if desc is None or not desc.flags & SC_ENUM:
                    raise self.fail("non-enum class for an enum constant", at)
                if desc.missing_at is not None:
                    self.handles[slot] = Missing(desc.name, desc.missing_at)
                    return self.handles[slot]
                if desc.local is not None and name not in desc.local.constants:
                    raise self.fail(f"enum constant {name} does not exist in {desc.name}", at)
                value = JavaEnum(desc.name, name)
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
        name_at = self.pos
        name = self.utf()
        uid_at = self.pos
        uid = self.unpack(">q")
        flags = self.take(1)[0]
        desc = ClassDesc(name, flags, [], None)
        self.new_handle(desc)
        # ObjectStreamClass.readNonProxy
        externalizable, serializable, is_enum = (
            flags & SC_EXTERNALIZABLE,
            flags & SC_SERIALIZABLE,
            flags & SC_ENUM,
        )
        if externalizable and serializable:
            raise self.fail(f"{name}: serializable and externalizable flags conflict", uid_at + 8)
        if is_enum and uid != 0:
            raise self.fail(f"{name}: enum descriptor has non-zero serialVersionUID {uid}", uid_at)
        n_fields = self.unpack(">H")
        if is_enum and n_fields != 0:
            raise self.fail(f"{name}: enum descriptor has non-zero field count", self.pos - 2)
        for _ in range(n_fields):
            field_at = self.pos
            type_code = chr(self.take(1)[0])
            field_name = self.utf()
            if type_code in "L[":
                # ObjectInputStream.readTypeString: a string, a back-reference or null, nothing else
                peek = self.buf[self.pos] if self.pos < len(self.buf) else None
                if peek is not None and peek not in (TC_NULL, TC_REFERENCE, TC_STRING, TC_LONGSTRING):
                    raise self.fail(f"invalid type code: {peek:02X}", self.pos)
                sig = self.content()  # the field's type signature as a string object
                if not isinstance(sig, str):
                    raise self.fail(f"{name}: invalid type string for field {field_name}", field_at)
                type_code = sig[:1]  # ObjectStreamField takes its type from the signature
            if type_code not in _PRIMITIVES and type_code not in ("L", "["):
                raise self.fail(f"{name}: invalid descriptor for field {field_name}", field_at)
            desc.fields.append((type_code, field_name))
        self.annotations()
        desc.superclass = self.class_desc()
        # resolveClass + ObjectStreamClass.initNonProxy against the local class
        local = LOCAL_CLASSES.get(name)
        if local is None:
            # Java records the ClassNotFoundException and throws it only when an object or enum
            # constant of the class is read (an enum's java.lang.Enum superclass never is)
            desc.missing_at = name_at
            return desc
        if local.enum != bool(is_enum):
            raise self.fail(f"{name}: enum/non-enum descriptor does not match the class", uid_at + 8)
        if not local.enum:
            if not serializable or externalizable:
                raise self.fail(f"{name}: class invalid for deserialization", uid_at + 8)
            if uid != local.uid:
                raise self.fail(f"{name}: local class incompatible: stream serialVersionUID {uid}", uid_at)
            for type_code, field_name in desc.fields:
                mine = local.fields.get(field_name)
                if (
                    mine is not None
                    and (type_code in _PRIMITIVES or mine[0] in _PRIMITIVES)
                    and type_code != mine[0]
                ):
                    raise self.fail(f"{name}: incompatible types for field {field_name}", field_at)
        desc.local = local
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
        at = self.pos - 1  # the TC_OBJECT byte
        desc = self.class_desc()
        if desc is None:
            raise self.fail("object without a class descriptor")
        if desc.flags & SC_ENUM and desc.missing_at is None:
            # ObjectInputStream.readOrdinaryObject -> checkDeserialize: an enum is never an object
            raise self.fail(f"{desc.name}: enum type read as an ordinary object", at)
        obj = JavaObject(desc.name)
        slot = self.new_handle(obj)
        failure: Missing | None = None
        chain = []
        d: ClassDesc | None = desc
        while d is not None:
            chain.append(d)
            d = d.superclass
        for cls in reversed(chain):
            if cls.flags & SC_EXTERNALIZABLE:
                raise self.fail(f"externalizable class {cls.name} is not supported")
            # defaultReadFields: the primitive values first, then the objects, each in stream order
            for type_code, field_name in cls.fields:
                if type_code in _PRIMITIVES:
                    obj.fields[field_name] = self.value(type_code)
            for type_code, field_name in cls.fields:
                if type_code not in _PRIMITIVES:
                    at = self.pos
                    value = self.value(type_code)
                    declared = cls.local.fields.get(field_name) if cls.local is not None else None
                    if isinstance(value, Missing):
                        if declared is not None:  # the exception passes to this object
                            failure = failure or value
                        continue  # a field the local class lacks: read and dropped
                    if declared is not None and value is not None and not _is_instance(value, declared[1]):
                        raise self.fail(
                            f"cannot assign {_class_of(value)} to field {cls.name}.{field_name}", at
                        )
                    obj.fields[field_name] = value
            if cls.flags & SC_WRITE_METHOD:
                self.annotations()
        if desc.missing_at is not None:
            failure = Missing(desc.name, desc.missing_at)
        if failure is not None:
            if slot < len(self.handles) and self.handles[slot] is obj:
                self.handles[slot] = failure
            return failure
        return obj


def _class_of(value: Any) -> str:
    if isinstance(value, (JavaObject, JavaEnum)):
        return value.class_name
    return "java.lang.String" if isinstance(value, str) else type(value).__name__


def _is_instance(value: Any, declared: str | None) -> bool:
    if declared is None:
        return True
    name = _class_of(value)
    if name == declared:
        return True
    local = LOCAL_CLASSES.get(name)
    return local is not None and declared in local.is_a


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
    if isinstance(obj, Missing):
        raise JavaSerializationError(f"class {obj.class_name!r} not found", obj.at)
    if not isinstance(obj, JavaObject) or obj.class_name != _CKPT + "CheckpointProperties":
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
