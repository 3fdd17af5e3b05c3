"""Serializer snapshot against serializer snapshot, by the rules of Flink's built-in snapshots.

At restore Flink asks the NEW serializer's snapshot whether it can read what the OLD one wrote
(``TypeSerializerSnapshot.resolveSchemaCompatibility``): as-is, after migration, after
reconfiguration, or incompatible. The NEW job's staging savepoint carries its snapshots, so the
question is answered offline by reading both snapshots' bytes:

* ``SimpleTypeSerializerSnapshot`` (int, long, String, ...): the same class is as-is, any other
  class incompatible (``IntSerializer`` → ``LongSerializer`` is incompatible);
* ``CompositeTypeSerializerSnapshot`` (List, Map, TTL, Tuple, Row, Timer, Nullable, ...;
  self-describing: its bytes start with the magic ``911108``): the outer snapshot must be equal,
  the nested ones are compared pairwise, their number must not change, the worst result wins;
* ``PojoSerializerSnapshot``: the same POJO class; a field removed or added is migration, a field
  whose serializer is incompatible makes the POJO incompatible;
* ``RowDataSerializerSnapshot`` (SQL): the logical types must be equal, else incompatible;
* ``EnumSerializerSnapshot``: constants may be added, not removed;
* Kryo, Avro: identical snapshots are as-is; anything else is ``unknown`` (their rules need the
  user's classes or schema resolution);
* any other class (a user's own serializer): ``unknown``, naming the class.

Identical bytes of a built-in snapshot are as-is. Nested snapshots are parsed only as far as
their formats are known: where a nested snapshot of an unknown class makes the rest unreadable,
the answer is ``unknown`` naming that class -- never a guess.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

AS_IS, MIGRATION, INCOMPATIBLE, UNKNOWN = "as-is", "migration", "incompatible", "unknown"
_RANK = {AS_IS: 0, MIGRATION: 1, UNKNOWN: 2, INCOMPATIBLE: 3}

COMPOSITE_MAGIC = 911108
NESTED_MAGIC = 1333245
OPTIONAL_MAP_HEADER = 0x4F2C69A3D70
_NESTED_HEAD = struct.pack(">ii", NESTED_MAGIC, 1)

_BASE = "org.apache.flink.api.common.typeutils.base."
POJO = "org.apache.flink.api.java.typeutils.runtime.PojoSerializerSnapshot"
ROWDATA = "org.apache.flink.table.runtime.typeutils.RowDataSerializer$RowDataSerializerSnapshot"
ENUM = "org.apache.flink.api.common.typeutils.base.EnumSerializer$EnumSerializerSnapshot"
TTL = "org.apache.flink.runtime.state.ttl.TtlStateFactory$TtlSerializerSnapshot"

# snapshots with an empty body whose only rule is "the same class": SimpleTypeSerializerSnapshot
# subclasses and the namespace serializers
_SIMPLE_PACKAGES = (_BASE, "org.apache.flink.api.common.typeutils.base.array.")
_SIMPLE_EXTRA = {
    "org.apache.flink.runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot",
    "org.apache.flink.streaming.api.windowing.windows.TimeWindow$Serializer$TimeWindowSerializerSnapshot",
    "org.apache.flink.streaming.api.windowing.windows.GlobalWindow$Serializer$GlobalWindowSerializerSnapshot",
    "org.apache.flink.api.common.typeutils.base.array.BytePrimitiveArraySerializer$BytePrimitiveArraySerializerSnapshot",
    "org.apache.flink.table.runtime.typeutils.StringDataSerializer$StringDataSerializerSnapshot",
    "org.apache.flink.table.runtime.typeutils.BinaryRowDataSerializer$BinaryRowDataSerializerSnapshot",
}
# built-in snapshots whose rules need what a snapshot cannot give (classes, schema resolution)
_OPAQUE_BUILTIN = ("Kryo", "Avro", "Generic", "Java")


@dataclass(frozen=True)
class Snap:
    """One serializer snapshot: its class, version and own bytes."""

    cls: str
    version: int
    body: bytes


@dataclass(frozen=True)
class Compat:
    outcome: str  # as-is | migration | incompatible | unknown
    detail: str  # why, in words (the field, the classes)
    blocking: str | None = None  # unknown: the snapshot class that blocks the decision


def short(cls: str) -> str:
    from ckptctl.metadata.keyedproxy import short_class

    return short_class(cls)


def worst(results: list[Compat]) -> Compat | None:
    return max(results, key=lambda c: _RANK[c.outcome]) if results else None


def is_flink_class(cls: str) -> bool:
    return cls.startswith("org.apache.flink.")


def is_simple(cls: str) -> bool:
    if cls in _SIMPLE_EXTRA:
        return True
    if not cls.startswith(_SIMPLE_PACKAGES) or "Enum" in cls:
        return False
    rest = cls.rsplit(".", 1)[-1]
    # base.IntSerializer$IntSerializerSnapshot, base.array.LongPrimitiveArraySerializer$...Snapshot
    return (
        "$" in rest
        and rest.endswith("SerializerSnapshot")
        and "Composite" not in rest
        and "List" not in rest
        and "Map" not in rest
    )


class _Unreadable(Exception):
    def __init__(self, cls: str) -> None:
        super().__init__(cls)
        self.cls = cls


class _In:
    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data, self.pos = data, pos

    def need(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("truncated")

    def i32(self) -> int:
        self.need(4)
        v = struct.unpack_from(">i", self.data, self.pos)[0]
        self.pos += 4
        return v

    def i64(self) -> int:
        self.need(8)
        v = struct.unpack_from(">q", self.data, self.pos)[0]
        self.pos += 8
        return v

    def bool(self) -> bool:
        self.need(1)
        self.pos += 1
        return self.data[self.pos - 1] != 0

    def utf(self) -> str:
        self.need(2)
        n = struct.unpack_from(">H", self.data, self.pos)[0]
        self.need(2 + n)
        raw = self.data[self.pos + 2 : self.pos + 2 + n]
        self.pos += 2 + n
        from ckptctl.metadata import mutf8

        return mutf8.decode(raw)

    def take(self, n: int) -> bytes:
        self.need(n)
        self.pos += n
        return self.data[self.pos - n : self.pos]


def read_versioned(r: _In) -> Snap:
    """``TypeSerializerSnapshot.writeVersionedSnapshot``: class, version, body (its length is
    known only by parsing it, see :func:`_skip_body`)."""
    cls = r.utf()
    version = r.i32()
    start = r.pos
    _skip_body(r, cls)
    return Snap(cls, version, r.data[start : r.pos])


def _skip_body(r: _In, cls: str) -> None:
    """Move past the body of a snapshot of class ``cls``; :class:`_Unreadable` when its format is
    not known (a user's snapshot inside a composite)."""
    if is_simple(cls):
        return
    if cls == POJO:
        _pojo_fields(r)
        return
    if cls == ROWDATA:
        _rowdata(r)
        return
    if cls == ENUM:
        _enum_constants(r)
        return
    if r.pos + 4 <= len(r.data) and struct.unpack_from(">i", r.data, r.pos)[0] == COMPOSITE_MAGIC:
        _composite(r)
        return
    raise _Unreadable(cls)


def body_length(cls: str, body: bytes) -> int | None:
    """Where the body of a snapshot of class ``cls`` that ``body`` begins with ends (bytes of
    something else may follow it: the changelog's metadata records), by the snapshot's grammar;
    ``None`` where the format of the class (or of a snapshot it nests) is not known."""
    r = _In(body)
    try:
        _skip_body(r, cls)
    except (_Unreadable, ValueError, UnicodeDecodeError):
        return None
    return r.pos


def _composite(r: _In) -> tuple[bytes, list[Snap]]:
    """``CompositeTypeSerializerSnapshot``: magic, outer version, outer snapshot (class specific:
    found by the nested snapshots' header that follows it), nested snapshots."""
    if r.i32() != COMPOSITE_MAGIC:
        raise ValueError("not a composite snapshot")
    outer_start = r.pos
    at = r.data.find(_NESTED_HEAD, r.pos)
    if at < 0:
        raise ValueError("composite snapshot without nested snapshots")
    outer = r.data[outer_start:at]
    r.pos = at + 8
    return outer, _nested(r)


def _nested(r: _In) -> list[Snap]:
    n = r.i32()
    if not 0 <= n <= 4096:
        raise ValueError(f"{n} nested snapshots")
    return [read_versioned(r) for _ in range(n)]


def _optional_map(r: _In, value_is_snapshot: bool) -> list[tuple[str, bytes | None, Snap | None]]:
    """``LinkedOptionalMapSerializer.writeOptionalMap``: header, count, then per entry its name
    and the framed (length-prefixed) key and value, each optional."""
    if r.i64() != OPTIONAL_MAP_HEADER:
        raise ValueError("not an optional map")
    n = r.i32()
    if not 0 <= n <= 65536:
        raise ValueError(f"{n} map entries")
    out = []
    for _ in range(n):
        name = r.utf()
        key = r.take(r.i32()) if r.bool() else None
        value = None
        if r.bool():
            frame = r.take(r.i32())
            if value_is_snapshot:
                value = read_versioned(_In(frame))
        out.append((name, key, value))
    return out


def _pojo_fields(r: _In) -> tuple[str, dict[str, Snap | None], list, list]:
    """``PojoSerializerSnapshotData``: class name, fields (name → field serializer snapshot),
    registered and non-registered subclasses."""
    cls = r.utf()
    fields = {name: snap for name, _key, snap in _optional_map(r, True)}
    registered = _optional_map(r, True)
    non_registered = _optional_map(r, True)
    return cls, fields, registered, non_registered


def _rowdata(r: _In) -> tuple[bytes, list[Snap]]:
    """``RowDataSerializerSnapshot``: the number of fields, the Java-serialized logical types,
    then the field serializers' snapshots."""
    n = r.i32()
    if not 0 <= n <= 65536:
        raise ValueError(f"{n} row fields")
    at = r.data.find(_NESTED_HEAD, r.pos)
    if at < 0:
        raise ValueError("row snapshot without nested snapshots")
    types = r.data[r.pos - 4 : at]
    r.pos = at + 8
    return types, _nested(r)


def _enum_constants(r: _In) -> tuple[str, list[str]]:
    cls = r.utf()
    n = r.i32()
    if not 0 <= n <= 1 << 20:
        raise ValueError(f"{n} enum constants")
    return cls, [r.utf() for _ in range(n)]


def _parse(snap: Snap, fn):
    r = _In(snap.body)
    result = fn(r)
    if r.pos != len(snap.body):
        raise ValueError("trailing bytes")
    return result


def resolve(old: Snap, new: Snap, path: str = "") -> Compat:
    """What Flink's NEW snapshot answers about OLD: as-is, migration, incompatible or unknown."""
    where = path or short(new.cls)
    if old.cls != new.cls:
        if not is_flink_class(new.cls):
            return Compat(UNKNOWN, f"{where}: {short(old.cls)} → custom {short(new.cls)}", new.cls)
        if not is_flink_class(old.cls) and any(k in new.cls for k in _OPAQUE_BUILTIN):
            return Compat(UNKNOWN, f"{where}: {short(old.cls)} → {short(new.cls)}", old.cls)
        # every built-in snapshot checks the old snapshot's class first (instanceof): another
        # class is incompatible (int → long, POJO → Kryo, Row → RowData)
        return Compat(INCOMPATIBLE, f"{where}: {short(old.cls)} → {short(new.cls)}")
    cls = new.cls
    if not is_flink_class(cls):
        return Compat(UNKNOWN, f"{where}: custom serializer snapshot {short(cls)}", cls)
    if old.body == new.body and old.version == new.version:
        return Compat(AS_IS, f"{where}: unchanged")
    if is_simple(cls):
        return Compat(AS_IS, f"{where}: same type")
    try:
        if cls == POJO:
            return _resolve_pojo(old, new, where)
        if cls == ROWDATA:
            return _resolve_rowdata(old, new, where)
        if cls == ENUM:
            return _resolve_enum(old, new, where)
        if any(k in cls for k in _OPAQUE_BUILTIN):
            return Compat(
                UNKNOWN, f"{where}: {short(cls)} snapshots differ (decided by the user's classes)", cls
            )
        if new.body[:4] == struct.pack(">i", COMPOSITE_MAGIC):
            return _resolve_composite(old, new, where)
    except _Unreadable as e:
        return Compat(UNKNOWN, f"{where}: nested {short(e.cls)} cannot be read without its class", e.cls)
    except (ValueError, UnicodeDecodeError) as e:
        return Compat(UNKNOWN, f"{where}: {short(cls)} snapshot not decodable ({e})", cls)
    return Compat(UNKNOWN, f"{where}: {short(cls)} snapshots differ; no rule known for this class", cls)


def _resolve_composite(old: Snap, new: Snap, where: str) -> Compat:
    old_outer, old_nested = _parse(old, _composite)
    new_outer, new_nested = _parse(new, _composite)
    if old_outer != new_outer:
        return Compat(INCOMPATIBLE, f"{where}: outer configuration changed ({short(new.cls)})")
    if len(old_nested) != len(new_nested):
        return Compat(INCOMPATIBLE, f"{where}: {len(old_nested)} → {len(new_nested)} nested serializers")
    parts = [
        resolve(o, n, f"{where}[{i}]") for i, (o, n) in enumerate(zip(old_nested, new_nested, strict=True))
    ]
    w = worst(parts)
    if w is None or w.outcome == AS_IS:
        return Compat(AS_IS, f"{where}: nested serializers unchanged")
    return w


def _resolve_pojo(old: Snap, new: Snap, where: str) -> Compat:
    o_cls, o_fields, o_reg, _o_non = _parse(old, _pojo_fields)
    n_cls, n_fields, n_reg, _n_non = _parse(new, _pojo_fields)
    if o_cls != n_cls:
        return Compat(INCOMPATIBLE, f"{where}: POJO class {o_cls} → {n_cls}")
    parts: list[Compat] = []
    for name, o_snap in o_fields.items():
        n_snap = n_fields.get(name)
        if name not in n_fields:
            parts.append(Compat(MIGRATION, f"{where}.{name}: field removed"))
        elif o_snap is None or n_snap is None:
            parts.append(Compat(UNKNOWN, f"{where}.{name}: field serializer not recorded", POJO))
        else:
            parts.append(resolve(o_snap, n_snap, f"{where}.{name}"))
    for name in n_fields:
        if name not in o_fields:
            parts.append(Compat(MIGRATION, f"{where}.{name}: field added"))
    # registered subclasses: a new registration order or a removed subclass is not decided here
    if [n for n, _k, _v in o_reg] != [n for n, _k, _v in n_reg][: len(o_reg)]:
        parts.append(Compat(UNKNOWN, f"{where}: registered subclasses changed", POJO))
    w = worst(parts)
    return w if w is not None and w.outcome != AS_IS else Compat(AS_IS, f"{where}: fields unchanged")


def _resolve_rowdata(old: Snap, new: Snap, where: str) -> Compat:
    o_types, o_nested = _parse(old, _rowdata)
    n_types, n_nested = _parse(new, _rowdata)
    if o_types != n_types or len(o_nested) != len(n_nested):
        return Compat(INCOMPATIBLE, f"{where}: row field types changed")
    parts = [resolve(o, n, f"{where}[{i}]") for i, (o, n) in enumerate(zip(o_nested, n_nested, strict=True))]
    w = worst(parts)
    return w if w is not None and w.outcome != AS_IS else Compat(AS_IS, f"{where}: row unchanged")


def _resolve_enum(old: Snap, new: Snap, where: str) -> Compat:
    o_cls, o_consts = _parse(old, _enum_constants)
    n_cls, n_consts = _parse(new, _enum_constants)
    if o_cls != n_cls:
        return Compat(INCOMPATIBLE, f"{where}: enum {o_cls} → {n_cls}")
    removed = [c for c in o_consts if c not in n_consts]
    if removed:
        return Compat(INCOMPATIBLE, f"{where}: enum constants removed: {', '.join(removed)}")
    # reordered or appended constants: compatible after reconfiguration (ordinals remapped)
    return Compat(AS_IS, f"{where}: enum constants kept")


def ttl_unwrapped(snap: Snap) -> Snap | None:
    """The user's value serializer inside a TTL serializer snapshot (``TtlSerializerSnapshot`` is
    a composite of the timestamp's ``LongSerializer`` and the user's serializer)."""
    if snap.cls != TTL:
        return None
    try:
        _outer, nested = _parse(snap, _composite)
    except (_Unreadable, ValueError, UnicodeDecodeError):
        return None
    return nested[1] if len(nested) == 2 else None


def nested_of(snap: Snap) -> list[Snap] | None:
    """The nested snapshots of a composite (a MapSerializer's key and value), if readable."""
    try:
        return _parse(snap, _composite)[1]
    except (_Unreadable, ValueError, UnicodeDecodeError):
        return None
