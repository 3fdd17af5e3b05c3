"""Heap (HashMap) backend snapshots: the key groups of a ``KeyGroupsStateHandle`` written by Flink's
``HeapSnapshotStrategy``, read with the serializers the header's snapshots name.

After the header (:mod:`ckptctl.metadata.keyedproxy`), at each key group's offset::

    int     key-group id
    per state (HashMap order, each with its own id; when the header's compression flag is set,
    each is its own Snappy framed stream, ``SnappyStreamCompressionDecorator``, read here by
    decompressing the key group's bytes up to the next key group's offset):
        short   state id (its index in the header)
        int     count
        KEY_VALUE (CopyOnWriteStateMapSnapshot): count x (namespace, key, state), each by its serializer
        PRIORITY_QUEUE (KeyGroupPartitioner): count x element (timers: TimerSerializer = long
                timestamp with the sign bit flipped, key, namespace)

The same in 1.20 and 2.x. Entries carry no lengths: only the serializer knows where one ends. So
a serializer this module does not know stops the state's key group, and with it the rest of that
key group (the next state's bytes start where the unknown ones end): such a state is *named*, never
guessed at (a key group whose count of it is 0 goes on). Entries are counted as RocksDB counts
rows (a map entry each; a list one entry, its elements for TTL ages), so that ``states --deep``
agrees across backends.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from ckptctl.errors import MetadataFormatError
from ckptctl.metadata.keyedproxy import COMPOSITE_ARITY, BackendHeader, StateMeta, short_class

FIXED = {
    "LongSerializer": 8, "IntSerializer": 4, "DoubleSerializer": 8, "FloatSerializer": 4,
    "ShortSerializer": 2, "ByteSerializer": 1, "BooleanSerializer": 1, "CharSerializer": 2,
    "VoidNamespaceSerializer": 1, "VoidSerializer": 1,
    "TimeWindowSerializer": 16, "GlobalWindowSerializer": 1,
}  # fmt: skip
STRINGS = {"StringSerializer"}
ARITY = COMPOSITE_ARITY  # nested serializers
KINDS = {"ListSerializer": "list", "MapSerializer": "map", "TtlSerializer": "ttl", "TimerSerializer": "timer"}


class Node(NamedTuple):
    """A serializer's shape: ``kind`` fixed | string | list | map | ttl | timer | unknown."""

    kind: str
    size: int = 0
    children: tuple = ()
    name: str = ""


def shape(classes: list[str]) -> Node:
    """The serializer tree from a snapshot's class and its nested snapshot classes (pre-order)."""
    pos = 0

    def take() -> Node:
        nonlocal pos
        if pos >= len(classes):
            return Node("unknown", name="(a nested serializer the snapshot does not name)")
        cls = classes[pos]
        pos += 1
        name = short_class(cls)
        if name in FIXED:
            return Node("fixed", FIXED[name], name=name)
        if name in STRINGS:
            return Node("string", name=name)
        if name in ARITY:
            kids = tuple(take() for _ in range(ARITY[name]))
            return Node(KINDS[name], children=kids, name=name)
        return Node("unknown", name=cls)

    return take()


def unknown_in(node: Node) -> str | None:
    """The first serializer snapshot class of a tree that cannot be read, if any."""
    if node.kind == "unknown":
        return node.name
    for c in node.children:
        u = unknown_in(c)
        if u is not None:
            return u
    return None


class _Cursor:
    __slots__ = ("data", "pos", "end", "path", "base")

    def __init__(self, data: bytes, pos: int, path: str, base: int) -> None:
        self.data, self.pos, self.end, self.path, self.base = data, pos, len(data), path, base

    def fail(self, what: str, at: int | None = None) -> MetadataFormatError:
        return MetadataFormatError(what, path=self.path, offset=self.base + (self.pos if at is None else at))

    def need(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > self.end:
            raise self.fail(f"truncated {what}: {n} bytes needed, {max(0, self.end - self.pos)} left")

    def i32(self, what: str) -> int:
        self.need(4, what)
        v = struct.unpack_from(">i", self.data, self.pos)[0]
        self.pos += 4
        return v

    def count(self, what: str, min_size: int) -> int:
        at = self.pos
        n = self.i32(what)
        if n < 0 or n * max(min_size, 1) > self.end - self.pos:
            raise self.fail(f"{what} {n}: more than the {self.end - self.pos} bytes left can hold", at)
        return n

    def varint(self, what: str) -> int:
        """StringValue's length / char encoding: 7 bits a byte, low first, high bit = more."""
        v = shift = 0
        while True:
            self.need(1, what)
            b = self.data[self.pos]
            self.pos += 1
            v |= (b & 0x7F) << shift
            if b < 0x80:
                return v
            shift += 7
            if shift > 35:
                raise self.fail(f"{what}: a variable-length number longer than 5 bytes", self.pos - 1)


def _min_size(node: Node) -> int:
    if node.kind == "fixed":
        return node.size
    if node.kind in ("string",):
        return 1
    if node.kind in ("list", "map"):
        return 4
    if node.kind == "ttl":
        return 8 + _min_size(node.children[1])
    if node.kind == "timer":
        return 8 + _min_size(node.children[0]) + _min_size(node.children[1])
    return 0


def skip(node: Node, c: _Cursor, stamps: list | None) -> None:
    """Step over one serialized value; TTL values add (timestamp, bytes) to ``stamps``."""
    kind = node.kind
    if kind == "fixed":
        c.need(node.size, node.name)
        c.pos += node.size
    elif kind == "string":
        at = c.pos
        n = c.varint("string length")
        if n - 1 > c.end - c.pos:
            raise c.fail(f"a string of {n - 1} characters, {c.end - c.pos} bytes left", at)
        for _ in range(n - 1 if n else 0):  # length + 1; 0 is null
            c.varint("string character")
    elif kind == "list":
        elem = node.children[0]
        for _ in range(c.count("list size", _min_size(elem))):
            skip(elem, c, stamps)
    elif kind == "map":
        k, v = node.children
        for _ in range(c.count("map size", _min_size(k) + 1)):
            skip(k, c, stamps)
            c.need(1, "map value null flag")
            null = c.data[c.pos]
            c.pos += 1
            if null > 1:
                raise c.fail(f"map value null flag {null}", c.pos - 1)
            if not null:
                skip(v, c, stamps)
    elif kind == "ttl":
        start = c.pos
        c.need(8, "TTL timestamp")
        ts = struct.unpack_from(">q", c.data, c.pos)[0]
        c.pos += 8
        skip(node.children[1], c, None)
        if stamps is not None:
            stamps.append((ts, c.pos - start))
    elif kind == "timer":
        c.need(8, "timer timestamp")
        c.pos += 8
        skip(node.children[0], c, None)
        skip(node.children[1], c, None)
    else:
        raise AssertionError(node)


class StateReader(NamedTuple):
    name: str
    queue: bool  # a priority queue (timers): elements, no namespace/key
    namespace: Node | None
    value: Node
    unknown: str | None  # the serializer (snapshot class) that cannot be read, if any


def state_reader(meta: StateMeta, key: Node) -> StateReader:
    value_info = meta.serializer("VALUE_SERIALIZER")
    value = shape(value_info.classes) if value_info else Node("unknown", name="(no value serializer)")
    if meta.backend_type == "PRIORITY_QUEUE":
        return StateReader(meta.name, True, None, value, unknown_in(value))
    ns_info = meta.serializer("NAMESPACE_SERIALIZER")
    ns = shape(ns_info.classes) if ns_info else Node("unknown", name="(no namespace serializer)")
    return StateReader(meta.name, False, ns, value, unknown_in(ns) or unknown_in(key) or unknown_in(value))


class HeapRow(NamedTuple):
    """What one key group holds of one state, counted the way RocksDB rows are."""

    state: str
    key_group: int
    entries: int
    bytes: int
    stamps: list  # (last-access millis, bytes) per TTL element


class Stopped(NamedTuple):
    """A state whose serializer cannot be read: the rest of that key group is not read."""

    state: str
    key_group: int
    serializer: str
    later_states: tuple[str, ...]


def read_heap_key_groups(data: bytes, offsets, header: BackendHeader, path: str, base: int = 0):
    """Yield :class:`HeapRow` / :class:`Stopped` per (key group, state) of a heap snapshot stream."""
    if header.key_serializer is None:
        raise MetadataFormatError("the header names no key serializer", path=path, offset=base)
    key = shape(header.key_serializer.classes)
    readers = [state_reader(m, key) for m in header.states]
    ordered = sorted(((kg, off) for kg, off in offsets if off > 0), key=lambda x: x[1])
    for i, (kg, off) in enumerate(ordered):
        c = _Cursor(data, off, path, base)
        got = c.i32("key-group id")
        if got != kg:
            raise c.fail(f"key group {kg}: its data starts with key-group id {got}", off)
        end = ordered[i + 1][1] if i + 1 < len(ordered) else len(data)
        if header.compressed:
            c = _decompressed(data, c.pos, end, kg, path, base)
            end = c.end
        seen: list[str] = []
        for n in range(len(readers)):
            at = c.pos
            c.need(2, f"key group {kg}: state id")
            sid = struct.unpack_from(">h", c.data, c.pos)[0]
            c.pos += 2
            if not 0 <= sid < len(readers):
                raise c.fail(f"key group {kg}: state id {sid}, the header has {len(readers)} states", at)
            r = readers[sid]
            seen.append(r.name)
            if r.unknown is not None:
                # the count comes first: a key group without entries of this state goes on
                count_at = c.pos
                if c.i32(f"key group {kg}: '{r.name}' count") == 0:
                    yield HeapRow(r.name, kg, 0, 4, [])
                else:
                    c.pos = count_at
                    rest = tuple(x.name for x in readers if x.name not in seen)
                    yield Stopped(r.name, kg, r.unknown, rest)
                    break
            else:
                yield _read_state(r, key, c, kg)
            if n == len(readers) - 1 and c.pos != end:
                # every state read: the key group must end where the next one begins
                after = (
                    "the end of the data"
                    if i + 1 == len(ordered) and not header.compressed
                    else "the next key group"
                )
                raise c.fail(
                    f"key group {kg}: its {len(readers)} states end here, {after} at byte {c.base + end}"
                )


def _decompressed(data: bytes, start: int, end: int, kg: int, path: str, base: int) -> _Cursor:
    """A cursor over one compressed key group's states: its Snappy framed streams (one per state)
    decompressed, never past the file's own size a hundred times over; errors inside name the
    uncompressed byte and where the key group's compressed bytes begin."""
    from ckptctl.checkpoint.dstl import DstlError, unframe

    if end < start:
        raise MetadataFormatError(f"key group {kg}: its offset lies after the next key group's", path=path,
                                  offset=base + start)  # fmt: skip
    try:
        plain = unframe(memoryview(data)[start:end], base + start, max(1 << 20, 100 * len(data)))
    except DstlError as e:
        raise MetadataFormatError(
            f"key group {kg}: {str(e).split(': ', 1)[1]}", path=path, offset=e.offset
        ) from None
    return _Cursor(
        plain, 0, f"{path} (key group {kg}, Snappy-compressed from byte {base + start}, uncompressed)", 0
    )


def _read_state(r: StateReader, key: Node, c: _Cursor, kg: int) -> HeapRow:
    stamps: list = []
    start = c.pos
    if r.queue:
        n = c.count(f"key group {kg}: '{r.name}' element count", _min_size(r.value))
        for _ in range(n):
            skip(r.value, c, stamps)
        return HeapRow(r.name, kg, n, c.pos - start, stamps)
    n = c.count(
        f"key group {kg}: '{r.name}' entry count",
        _min_size(r.namespace) + _min_size(key) + _min_size(r.value),
    )
    entries = 0
    value = r.value
    for _ in range(n):
        skip(r.namespace, c, None)
        skip(key, c, None)
        if value.kind == "map":
            at = c.pos
            size = struct.unpack_from(">i", c.data, at)[0] if at + 4 <= c.end else 0
            skip(value, c, stamps)
            entries += size  # one RocksDB row per map entry
        else:
            skip(value, c, stamps)
            entries += 1
    return HeapRow(r.name, kg, entries, c.pos - start, stamps)


def looks_heap(data: bytes, offsets) -> bool:
    """Heap key groups start with their own id as an int; the unified format with a short state id
    and an int key length, which reads so only for key group 0."""
    hits = 0
    for kg, off in offsets:
        if off <= 0:
            continue
        if off + 4 > len(data) or struct.unpack_from(">i", data, off)[0] != kg:
            return False
        hits += kg != 0
    return hits > 0
