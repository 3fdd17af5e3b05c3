"""Flink's ``KeyedBackendSerializationProxy``: the description of its keyed state a backend writes.

It is the start of a full snapshot / canonical savepoint stream and the whole meta file of an
incremental RocksDB handle::

    int     proxy version (6)
    bool    key-group compression
    snapshot  key serializer snapshot
    short   number of states
    per state (StateMetaInfoSnapshotReadersWriters, current writer):
        UTF   name
        int   backend state type (KEY_VALUE, OPERATOR, BROADCAST, PRIORITY_QUEUE, KEY_VALUE_V2)
        int   options; (UTF key, UTF value) each, e.g. KEYED_STATE_TYPE=VALUE|LIST|MAP|...
        int   serializers; (UTF key, snapshot) each, keys KEY_/NAMESPACE_/VALUE_/USER_KEY_SERIALIZER

and a *snapshot* is ``int 2`` (TypeSerializerSnapshotSerializationProxy version), ``UTF`` snapshot
class name, ``int`` snapshot version, and the snapshot's own bytes, which carry **no length**: only
the class can read them. Instead of knowing every serializer, the reader re-synchronises on what
must follow a snapshot: the next serializer entry (its UTF key followed by ``int 2`` is a
distinctive byte string), the next state's header (tried at each offset before that entry; it must
end exactly there), or the end of the header. The class names inside a snapshot's bytes (nested
serializers of composite snapshots: map, list, TTL, timer, row) are picked up as Java class names.
A state uses TTL when its value serializer is (or nests) Flink's ``TtlSerializer``.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from typing import Any

from ckptctl.errors import MetadataFormatError
from ckptctl.metadata import mutf8
from ckptctl.metadata.bytereader import ByteReader

BACKEND_STATE_TYPES = ("KEY_VALUE", "OPERATOR", "BROADCAST", "PRIORITY_QUEUE", "KEY_VALUE_V2")
SERIALIZER_KEYS = ("KEY_SERIALIZER", "NAMESPACE_SERIALIZER", "VALUE_SERIALIZER", "USER_KEY_SERIALIZER")
OPTION_KEYS = ("KEYED_STATE_TYPE", "OPERATOR_STATE_DISTRIBUTION_MODE")
SNAPSHOT_PROXY_VERSION = 2
TTL_MARKER = "TtlSerializerSnapshot"
# fixed-length serializers (TypeSerializer.getLength() >= 0) by snapshot class, for list elements
FIXED_LENGTHS = {
    "LongSerializer": 8, "IntSerializer": 4, "DoubleSerializer": 8, "FloatSerializer": 4,
    "ShortSerializer": 2, "ByteSerializer": 1, "BooleanSerializer": 1, "CharSerializer": 2,
}  # fmt: skip

# composite serializers and how many serializers each nests, in order: a snapshot's nested classes
# (pre-order) are its children's (the heap reader walks them, SerializerInfo.summary draws them)
COMPOSITE_ARITY = {"ListSerializer": 1, "MapSerializer": 2, "TtlSerializer": 2, "TimerSerializer": 2}

_ANCHORS = tuple(
    struct.pack(">H", len(k)) + k.encode() + struct.pack(">i", SNAPSHOT_PROXY_VERSION)
    for k in SERIALIZER_KEYS
)
_CLASS_NAME = re.compile(rb"(?:[A-Za-z_$][\w$]*\.)+[A-Za-z_$][\w$]*")
_JAVA_CLASS = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*")  # a binary name, the default package too


@dataclass
class SerializerInfo:
    key: str  # KEY_SERIALIZER, VALUE_SERIALIZER, ...
    snapshot_class: str
    version: int
    nested: list[str]  # class names found inside the snapshot's bytes, in order
    # the snapshot's own bytes (after class and version): what ``preflight`` compares, snapshot
    # against snapshot, by the rules of the snapshot class (not in ``to_json``)
    body: bytes = field(default=b"", repr=False, compare=False)

    @property
    def classes(self) -> list[str]:
        return [self.snapshot_class, *self.nested]

    @property
    def summary(self) -> str:
        """The serializer as a type, nested as Flink nests it: ``MapSerializer<IntSerializer,
        TtlSerializer<LongSerializer>>`` (review c4: it read ``Map<Int, Ttl, Long, Long>``). A TTL
        serializer's first nested one, the last-access timestamp's, is left out: every TTL value has
        it. Classes that a composite this reader does not know nests are listed flat after it."""
        names = [short_class(c) for c in self.classes]
        at = 0

        def take() -> str:
            nonlocal at
            name = names[at]
            at += 1
            inner = [take() for _ in range(COMPOSITE_ARITY.get(name, 0)) if at < len(names)]
            if name == "TtlSerializer" and len(inner) == 2 and inner[0] == "LongSerializer":
                inner = inner[1:]
            return name + (f"<{', '.join(inner)}>" if inner else "")

        typed = take()
        if at == len(names):
            return typed
        return names[0] + f"<{', '.join(names[1:])}>"  # not a tree this reader can tell: flat, as read

    def to_json(self) -> dict[str, Any]:
        return {"class": self.snapshot_class, "version": self.version, "nested": self.nested}


@dataclass
class StateMeta:
    name: str
    backend_type: str
    options: dict[str, str]
    serializers: list[SerializerInfo]

    @property
    def kind(self) -> str:
        if self.backend_type == "PRIORITY_QUEUE":
            return "TIMERS" if self.name.startswith("_timer_state/") else "PRIORITY_QUEUE"
        return (
            self.options.get("KEYED_STATE_TYPE")
            or self.options.get("OPERATOR_STATE_DISTRIBUTION_MODE")
            or "?"
        )

    def serializer(self, key: str) -> SerializerInfo | None:
        return next((s for s in self.serializers if s.key == key), None)

    @property
    def ttl(self) -> bool:
        value = self.serializer("VALUE_SERIALIZER")
        return value is not None and any(TTL_MARKER in c for c in value.classes)

    @property
    def ttl_element_length(self) -> int | None:
        """For TTL list state: the length of one serialized element (timestamp + user value), if fixed."""
        value = self.serializer("VALUE_SERIALIZER")
        if value is None:
            return None
        classes = value.classes
        idx = next((i for i, c in enumerate(classes) if TTL_MARKER in c), None)
        if idx is None:
            return None
        user = classes[idx + 2 :]  # after the TTL serializer and its timestamp (Long) serializer
        if len(user) != 1:
            return None
        n = FIXED_LENGTHS.get(short_class(user[0]))
        return None if n is None else 8 + n


@dataclass
class BackendHeader:
    version: int
    compressed: bool
    key_serializer: SerializerInfo | None
    states: list[StateMeta]
    end: int  # offset after the header (as far as it could be determined)


def short_class(name: str) -> str:
    """``org.apache...LongSerializer$LongSerializerSnapshot`` → ``LongSerializer``; ``...TtlStateFactory$TtlSerializerSnapshot`` → ``TtlSerializer``."""
    simple = name.rsplit(".", 1)[-1]
    if "$" in simple:
        inner = simple.rsplit("$", 1)[-1]
        simple = inner if inner and not inner.isdigit() else simple.split("$", 1)[0]
    if simple.endswith("Snapshot") and len(simple) > len("Snapshot"):
        simple = simple[: -len("Snapshot")]
    if simple.endswith("Config") and simple.endswith("SerializerConfig"):
        simple = simple[: -len("Config")]
    return simple


class _Reader(ByteReader):
    SUBJECT = "state meta data"

    def int(self, what: str) -> int:
        return self.i32(what)

    def short(self, what: str) -> int:
        return self._unpack(">h", 2, what)

    def utf(self, what: str) -> str:
        self.need(2, what)
        n = struct.unpack_from(">H", self.data, self.pos)[0]
        self.need(2 + n, what)
        raw = self.data[self.pos + 2 : self.pos + 2 + n]
        try:
            text = mutf8.decode(raw)
        except (mutf8.MalformedUtf, UnicodeDecodeError) as e:
            raise self.fail(f"{what}: not a modified UTF-8 string ({e})") from None
        self.pos += 2 + n
        return text


def _next_anchor(data: bytes, start: int) -> int:
    hits = [i for i in (data.find(a, start) for a in _ANCHORS) if i >= 0]
    return min(hits) if hits else -1


def _nested_classes(body: bytes) -> list[str]:
    """Serializer snapshot class names (``writeUTF``) inside a snapshot's bytes; the length's low byte
    may itself read as a letter (0x50 'P' …), so the name may start up to two bytes into a match."""
    out = []
    for m in _CLASS_NAME.finditer(body):
        for s in range(m.start(), min(m.start() + 3, m.end())):
            if s >= 2 and struct.unpack_from(">H", body, s - 2)[0] == m.end() - s:
                name = body[s : m.end()].decode("ascii")
                if name.endswith("Snapshot"):
                    out.append(name)
                break
    return out


def _try_state_header(data: bytes, s: int, end: int, *, with_count: bool) -> tuple | None:
    """Parse [short count] + a state header at ``s``; the result if it ends exactly at ``end``."""
    r = _Reader(data, "")
    r.pos = s
    try:
        count = None
        if with_count:
            count = r.short("count")
            if not 1 <= count <= 4096:
                return None
        name = r.utf("name")
        # a raw 0 byte is no modified UTF-8 (U+0000 is written C0 80): a header tried two bytes
        # early reads the end of the previous snapshot's version (00 03) as the name's length
        if not name or "\x00" in name:
            return None
        btype = r.int("type")
        if not 0 <= btype < len(BACKEND_STATE_TYPES):
            return None
        n_opts = r.int("options")
        if not 0 <= n_opts <= len(OPTION_KEYS):
            return None
        opts = {}
        for _ in range(n_opts):
            k = r.utf("key")
            if k not in OPTION_KEYS:
                return None
            opts[k] = r.utf("value")
        n_ser = r.int("serializers")
        if not 1 <= n_ser <= len(SERIALIZER_KEYS):
            return None
    except MetadataFormatError:
        return None
    if r.pos != end:
        return None
    return count, name, BACKEND_STATE_TYPES[btype], opts, n_ser


def _find_header(data: bytes, start: int, anchor: int, *, with_count: bool) -> tuple[int, tuple] | None:
    for s in range(start, anchor):
        parsed = _try_state_header(data, s, anchor, with_count=with_count)
        if parsed is not None:
            return s, parsed
    return None


def parse_backend_header(data: bytes, path: str, *, base: int = 0) -> BackendHeader:
    """Read a keyed backend serialization proxy from ``data``: exactly the header's bytes (an
    incremental meta file, or a full-snapshot stream up to its first key group)."""
    r = _Reader(data, path, base)
    version = r.int("proxy version")
    if not 1 <= version <= 64:
        raise r.fail(f"not a keyed state backend header: proxy version {version}", at=0)
    compressed = r.bool("compression flag")
    states: list[StateMeta] = []
    # key serializer snapshot: proxy version, class, version, bytes up to "short count + first header"
    key_ser, pending = _read_snapshot_then(r, data, None, with_count=True)
    declared = pending[1][0] if pending is not None else None
    while pending is not None:
        _count, name, btype, opts, n_ser = pending[1]
        r.pos = pending[0] + _header_len(data, pending[0], pending[1])
        sers: list[SerializerInfo] = []
        pending = None
        for i in range(n_ser):
            key = r.utf("serializer key")
            if key not in SERIALIZER_KEYS:
                raise r.fail(f"state '{name}': unknown serializer key '{key}'")
            last = i == n_ser - 1
            info, nxt = _read_snapshot_then(r, data, key, with_count=False, last=last)
            sers.append(info)
            if last:
                pending = nxt
        states.append(StateMeta(name, btype, opts, sers))
    if declared is not None and len(states) != declared:
        raise r.fail(
            f"the header declares {declared} states but {len(states)} were found "
            "(truncated, or a serializer snapshot that cannot be skipped)"
        )
    return BackendHeader(version, compressed, key_ser, states, r.pos)


def _header_len(data: bytes, s: int, parsed: tuple) -> int:
    r = _Reader(data, "")
    r.pos = s
    if parsed[0] is not None:
        r.short("count")
    r.utf("name")
    r.int("type")
    for _ in range(r.int("options")):
        r.utf("k")
        r.utf("v")
    r.int("serializers")
    return r.pos - s


def _snapshot_head(r: _Reader) -> tuple[int, str, int]:
    """A serializer snapshot's head: (where it starts, its class, its version); the body follows."""
    start = r.pos
    proxy = r.int("serializer snapshot proxy version")
    if proxy != SNAPSHOT_PROXY_VERSION:
        raise r.fail(
            f"serializer snapshot: proxy version {proxy}, expected {SNAPSHOT_PROXY_VERSION}", at=start
        )
    at = r.pos
    cls = r.utf("serializer snapshot class")
    if not _JAVA_CLASS.fullmatch(cls):
        # Flink writes snapshot.getClass().getName() and loads it by that name on restore
        raise r.fail(f"serializer snapshot class {cls[:80]!r} is no Java class name", at=at)
    return start, cls, r.int("serializer snapshot version")


def _read_snapshot_then(r: _Reader, data: bytes, key: str | None, *, with_count: bool, last: bool = True):
    """Read one serializer snapshot whose length is unknown; return it and the next state's header, if any."""
    start, cls, version = _snapshot_head(r)
    body_start = r.pos
    anchor = _next_anchor(data, body_start)
    nxt = None
    if anchor < 0:
        body_end = len(data)
    elif not last:
        body_end = anchor
    else:
        found = _find_header(data, body_start, anchor, with_count=with_count)
        if found is None:
            raise r.fail(f"cannot find where serializer snapshot {cls} ends", at=body_start)
        body_end, nxt = found[0], found
    r.pos = body_end
    body = data[body_start:body_end]
    return SerializerInfo(key or "KEY_SERIALIZER", cls, version, _nested_classes(body), body), nxt


def parse_operator_header(data: bytes, path: str, *, base: int = 0) -> list[StateMeta]:
    """Read an ``OperatorBackendSerializationProxy`` (the head of an operator state stream):
    ``int`` version, then ``short`` count + operator (list/union) states and ``short`` count +
    broadcast states, each a state header as in the keyed proxy. ``data`` is exactly the header:
    the stream up to its first state element (the smallest offset the metadata records)."""
    r = _Reader(data, path, base)
    version = r.int("proxy version")
    if not 1 <= version <= 64:
        raise r.fail(f"not an operator state backend header: proxy version {version}", at=0)
    if version >= 6:  # version 6 (Flink 1.18+) adds the snapshot compression flag
        r.bool("compression flag")
    states: list[StateMeta] = []
    for section in (0, 1):
        count = r.short("state count")
        if not 0 <= count <= 4096:
            raise r.fail(f"operator state count {count}")
        for i in range(count):
            at = r.pos
            parsed = _state_header_at(data, at)
            if parsed is None:
                raise r.fail("not an operator state header", at=at)
            name, btype, opts, n_ser, length = parsed
            r.pos = at + length
            sers: list[SerializerInfo] = []
            for j in range(n_ser):
                key = r.utf("serializer key")
                if key not in SERIALIZER_KEYS:
                    raise r.fail(f"state '{name}': unknown serializer key '{key}'")
                last_in_state = j == n_ser - 1
                info = _operator_snapshot(r, data, key, last_in_state, i == count - 1, section)
                sers.append(info)
            states.append(StateMeta(name, btype, opts, sers))
    return states


def _state_header_at(data: bytes, s: int) -> tuple | None:
    r = _Reader(data, "")
    r.pos = s
    try:
        name = r.utf("name")
        if not name or "\x00" in name:
            return None
        btype = r.int("type")
        if not 0 <= btype < len(BACKEND_STATE_TYPES):
            return None
        opts = {}
        for _ in range(r.int("options")):
            k = r.utf("key")
            if k not in OPTION_KEYS:
                return None
            opts[k] = r.utf("value")
        n_ser = r.int("serializers")
        if not 1 <= n_ser <= len(SERIALIZER_KEYS):
            return None
    except MetadataFormatError:
        return None
    return name, BACKEND_STATE_TYPES[btype], opts, n_ser, r.pos - s


def _operator_snapshot(
    r: _Reader, data: bytes, key: str, last_in_state: bool, last_in_section: bool, section: int
):
    """One snapshot of an operator state header; its end is the next serializer entry, the next
    state's header (after a count when the broadcast section starts) or the header's end."""
    start, cls, version = _snapshot_head(r)
    body_start = r.pos
    anchor = _next_anchor(data, body_start)
    if not last_in_state:
        if anchor < 0:
            raise r.fail(f"cannot find where serializer snapshot {cls} ends", at=body_start)
        body_end = anchor
    elif anchor < 0:
        if not last_in_section:
            raise r.fail(f"cannot find where serializer snapshot {cls} ends", at=body_start)
        # the last state of all: the header ends here (after the empty broadcast count, if any)
        body_end = len(data) - (2 if section == 0 else 0)
        if section == 0 and data[body_end:] != b"\x00\x00":
            raise r.fail(f"cannot find where serializer snapshot {cls} ends", at=body_start)
    else:
        # the next state of this section, or (after the last one of section 0) the broadcast
        # section's count and first state
        found = _find_header(data, body_start, anchor, with_count=section == 0 and last_in_section)
        if found is None:
            raise r.fail(f"cannot find where serializer snapshot {cls} ends", at=body_start)
        body_end = found[0]
    body = data[body_start:body_end]
    r.pos = body_end
    return SerializerInfo(key, cls, version, _nested_classes(body), body)


def parse_state_meta(data: bytes, path: str, *, base: int = 0, body_length=None) -> StateMeta:
    """One ``StateMetaInfoSnapshot`` as the current writer writes it (the per-state part of the
    proxy above) at the start of ``data``, and what follows it unread: the changelog backend's
    metadata record (:mod:`ckptctl.preflight.changelogstates`) writes it then its own fields
    (default value, TTL config, state id). The last serializer snapshot's end is not marked, so
    its ``body`` runs to the end of ``data`` unless ``body_length(class, bytes)`` (a reader of the
    snapshot's grammar) tells where it ends (``None``: it cannot)."""
    parsed = _state_header_at(data, 0)
    if parsed is None:
        raise _Reader(data, path, base).fail("not a state meta info snapshot", at=0)
    name, btype, opts, n_ser, length = parsed
    r = _Reader(data, path, base)
    r.pos = length
    sers: list[SerializerInfo] = []
    for i in range(n_ser):
        key = r.utf("serializer key")
        if key not in SERIALIZER_KEYS:
            raise r.fail(f"state '{name}': unknown serializer key '{key}'")
        if i < n_ser - 1:
            info, _ = _read_snapshot_then(r, data, key, with_count=False, last=False)
        else:
            _start, cls, version = _snapshot_head(r)
            body = data[r.pos :]
            end = body_length(cls, body) if body_length is not None else None
            body = body if end is None else body[:end]
            info = SerializerInfo(key, cls, version, _nested_classes(body), body)
        sers.append(info)
    return StateMeta(name, btype, opts, sers)
