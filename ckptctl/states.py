"""What state each operator holds: the catalog (metadata only) and the deep scan (RocksDB, TTL ages).

**Catalog.** Every keyed handle carries the backend's own description of its state, the
``KeyedBackendSerializationProxy`` Flink writes at the start of a full snapshot / canonical
savepoint stream and as the whole meta file of an incremental RocksDB handle::

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

Operator (non-keyed) state comes from the ``OperatorStateHandle``: its state name → offsets map
(mode SPLIT_DISTRIBUTE / UNION / BROADCAST, one offset per element).

**Deep scan.** Keyed incremental RocksDB handles are rebuilt and opened like ``verify --deep`` (see
:mod:`ckptctl.verify`); per column family (state) entries and bytes per key group, and for TTL
states the last-access timestamp of every entry: Flink's ``TtlSerializer`` writes it first, 8 bytes
big-endian millis (value/reducing/aggregating: at byte 0 of the value; map: after the null flag;
list: each element, when the element's length is fixed, separated by one delimiter byte). Column
families with unmerged list-state merge operands are read by :mod:`ckptctl.rocksdb.sst`. Canonical
savepoint streams (the unified key/value format of ``FullSnapshotAsyncWriter``) are read directly.
"""

from __future__ import annotations

import re
import struct
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ckptctl.errors import CkptError, MetadataFormatError, StorageError
from ckptctl.metadata import mutf8
from ckptctl.metadata.bytereader import ByteReader
from ckptctl.metadata.model import (
    DISTRIBUTION_MODES,
    ChangelogBackendHandle,
    FileMergingOperatorHandle,
    IncrementalHandle,
    KeyGroupsHandle,
    OperatorStreamHandle,
    keyed_parts,
)
from ckptctl.refs import LoadedCheckpoint, file_resolver
from ckptctl.rocksdb.sst import MergeOperandsError, iterate_cf
from ckptctl.storage import Storage, StorageOptions

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

_ANCHORS = tuple(
    struct.pack(">H", len(k)) + k.encode() + struct.pack(">i", SNAPSHOT_PROXY_VERSION)
    for k in SERIALIZER_KEYS
)
_CLASS_NAME = re.compile(rb"(?:[A-Za-z_$][\w$]*\.)+[A-Za-z_$][\w$]*")


# ---------------------------------------------------------------------------------------------
# the serialization proxy


@dataclass
class SerializerInfo:
    key: str  # KEY_SERIALIZER, VALUE_SERIALIZER, ...
    snapshot_class: str
    version: int
    nested: list[str]  # class names found inside the snapshot's bytes, in order

    @property
    def classes(self) -> list[str]:
        return [self.snapshot_class, *self.nested]

    @property
    def summary(self) -> str:
        inner = [short_class(c) for c in self.nested]
        return short_class(self.snapshot_class) + (f"<{', '.join(inner)}>" if inner else "")

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
        if not name:
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


def _read_snapshot_then(r: _Reader, data: bytes, key: str | None, *, with_count: bool, last: bool = True):
    """Read one serializer snapshot whose length is unknown; return it and the next state's header, if any."""
    start = r.pos
    proxy = r.int("serializer snapshot proxy version")
    if proxy != SNAPSHOT_PROXY_VERSION:
        raise r.fail(
            f"serializer snapshot: proxy version {proxy}, expected {SNAPSHOT_PROXY_VERSION}", at=start
        )
    cls = r.utf("serializer snapshot class")
    version = r.int("serializer snapshot version")
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
    return SerializerInfo(
        key or "KEY_SERIALIZER", cls, version, _nested_classes(data[body_start:body_end])
    ), nxt


# ---------------------------------------------------------------------------------------------
# reading the streams


def read_stream(storage, resolve, h, offset: int = 0, length: int | None = None) -> tuple[bytes, str]:
    """Bytes of a stream handle (or a part); returns (bytes, a name for error messages)."""
    src = h.source(resolve) if h is not None else None
    if src is None:
        raise CkptError(f"unsupported stream handle {type(h).__name__}")
    if src[0] == "inline":
        data = src[1]
        end = len(data) if length is None else offset + length
        return data[offset:end], f"{h.name} (inline)"
    if src[0] == "range":
        _kind, uri, start, size = src
        n = size - offset if length is None else min(length, size - offset)
        return storage.read_range(uri, start + offset, n), uri
    uri = src[1]
    if offset == 0 and length is None:
        return storage.read_bytes(uri), uri
    if length is None:
        length = h.state_size - offset
    return storage.read_range(uri, offset, length), uri


def read_keyed_header(storage, resolve, h) -> tuple[BackendHeader, str]:
    """The serialization proxy of one keyed handle (incremental meta file or full-snapshot stream head)."""
    if type(h) is IncrementalHandle:
        if h.meta is None:
            raise CkptError("incremental handle without a meta data handle")
        data, name = read_stream(storage, resolve, h.meta)
        return parse_backend_header(data, name), name
    if type(h) is KeyGroupsHandle:
        if h.delegate is None:
            raise CkptError("key-groups handle without a stream")
        positive = [o for o in h.offsets if o > 0]
        size = h.delegate.state_size
        head = min(positive) if positive else size
        data, name = read_stream(storage, resolve, h.delegate, 0, head)
        return parse_backend_header(data, name), name
    raise CkptError(f"no state meta data in a {type(h).__name__}")


# ---------------------------------------------------------------------------------------------
# the catalog


@dataclass
class StateEntry:
    name: str
    kind: str
    scope: str  # keyed | operator
    ttl: bool | None
    backend_type: str | None = None
    serializers: dict[str, SerializerInfo] = field(default_factory=dict)
    ttl_element_length: int | None = None
    elements: int | None = None  # operator state: list elements
    bytes: int | None = None  # operator state: bytes in the stream
    subtasks: int = 0

    @property
    def timers(self) -> bool:
        return self.backend_type == "PRIORITY_QUEUE"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "kind": self.kind, "scope": self.scope, "ttl": self.ttl, "timers": self.timers,
            "backend_state_type": self.backend_type,
            "serializers": {k: v.to_json() for k, v in self.serializers.items()},
            "serializer_summary": {k: v.summary for k, v in self.serializers.items()},
            "ttl_element_length": self.ttl_element_length,
            "elements": self.elements, "bytes": self.bytes, "subtasks": self.subtasks,
        }  # fmt: skip


@dataclass
class OperatorCatalog:
    operator_id: str
    name: str | None
    uid: str | None
    parallelism: int
    max_parallelism: int
    keyed_backend: str | None = None  # rocksdb-incremental | full-snapshot | changelog
    keyed_handles: int = 0
    keyed_bytes: int = 0
    operator_handles: int = 0
    operator_bytes: int = 0
    key_serializer: SerializerInfo | None = None
    states: dict[str, StateEntry] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def has_state(self) -> bool:
        return bool(self.states) or self.keyed_handles > 0 or self.operator_handles > 0

    def to_json(self) -> dict[str, Any]:
        return {
            "operator_id": self.operator_id, "name": self.name, "uid": self.uid,
            "parallelism": self.parallelism, "max_parallelism": self.max_parallelism,
            "keyed_backend": self.keyed_backend, "keyed_handles": self.keyed_handles,
            "keyed_bytes": self.keyed_bytes, "operator_handles": self.operator_handles,
            "operator_bytes": self.operator_bytes,
            "key_serializer": self.key_serializer.to_json() if self.key_serializer else None,
            "states": [s.to_json() for s in self.states.values()],
            "notes": self.notes,
        }  # fmt: skip


def catalog(storage, ck: LoadedCheckpoint) -> list[OperatorCatalog]:
    """Per operator: its states from the keyed backend headers and the operator state handles."""
    resolve = file_resolver(ck)
    headers = _read_headers(storage, resolve, ck)
    out = []
    for op in ck.metadata.operators:
        oc = OperatorCatalog(
            op.operator_id, op.display_name, op.display_uid, op.parallelism, op.max_parallelism
        )
        seen_meta: set = set()
        for s in op.subtasks or ():
            for keyed in (s.managed_keyed, s.raw_keyed):
                if keyed is None:
                    continue
                if type(keyed) is ChangelogBackendHandle:
                    oc.keyed_backend = "changelog"
                    if "changelog" not in " ".join(oc.notes):
                        oc.notes.append("changelog backend: states read from the materialized part only")
                for part in keyed_parts(keyed):
                    if type(part) not in (IncrementalHandle, KeyGroupsHandle):
                        continue
                    if oc.keyed_backend is None:
                        oc.keyed_backend = (
                            "rocksdb-incremental" if type(part) is IncrementalHandle else "full-snapshot"
                        )
                    oc.keyed_handles += 1
                    oc.keyed_bytes += part.state_size
                    if keyed is s.raw_keyed:
                        note = "raw keyed state: written by the operator itself, not catalogued"
                        if note not in oc.notes:
                            oc.notes.append(note)
                        continue
                    ident = id(part.meta if type(part) is IncrementalHandle else part.delegate)
                    if ident in seen_meta:
                        continue
                    seen_meta.add(ident)
                    header = headers[id(part)]
                    if isinstance(header, Exception):
                        if isinstance(header, StorageError):
                            raise CkptError(
                                f"operator {op.operator_id} subtask {s.index}: {header}"
                            ) from None
                        raise header
                    if oc.key_serializer is None:
                        oc.key_serializer = header.key_serializer
                    for meta in header.states:
                        entry = oc.states.get(meta.name)
                        if entry is None:
                            entry = oc.states[meta.name] = StateEntry(
                                meta.name, meta.kind, "keyed", meta.ttl, meta.backend_type,
                                {x.key: x for x in meta.serializers}, meta.ttl_element_length,
                            )  # fmt: skip
                        entry.subtasks += 1
            for oph in (s.managed_operator, s.raw_operator):
                if oph is None or type(oph) not in (OperatorStreamHandle, FileMergingOperatorHandle):
                    continue
                if not oph.states and getattr(oph, "is_empty", False):
                    continue
                oc.operator_handles += 1
                size = oph.state_size
                oc.operator_bytes += size
                starts = sorted((min(st.offsets) if st.offsets else size, st.name) for st in oph.states)
                bounds = {name: (start, starts[i + 1][0] if i + 1 < len(starts) else size)
                          for i, (start, name) in enumerate(starts)}  # fmt: skip
                for st in oph.states:
                    mode = (
                        DISTRIBUTION_MODES[st.mode]
                        if 0 <= st.mode < len(DISTRIBUTION_MODES)
                        else str(st.mode)
                    )
                    entry = oc.states.get(st.name)
                    if entry is None:
                        entry = oc.states[st.name] = StateEntry(
                            st.name, mode, "operator", False, "BROADCAST" if mode == "BROADCAST" else "OPERATOR",
                            elements=0, bytes=0,
                        )  # fmt: skip
                    entry.subtasks += 1
                    entry.elements = (entry.elements or 0) + len(st.offsets)
                    lo, hi = bounds[st.name]
                    entry.bytes = (entry.bytes or 0) + (max(0, hi - lo) if st.offsets else 0)
        out.append(oc)
    return out


def _read_headers(storage, resolve, ck: LoadedCheckpoint, workers: int = 16) -> dict[int, Any]:
    """Every managed keyed handle's backend header, read in parallel (one small read per handle:
    on S3 a sequential loop over hundreds of subtasks would take seconds). ``id(handle)`` → header
    or the exception reading it raised."""
    from concurrent.futures import ThreadPoolExecutor

    parts = [
        part
        for op in ck.metadata.operators
        for s in op.subtasks or ()
        for part in keyed_parts(s.managed_keyed)
        if type(part) in (IncrementalHandle, KeyGroupsHandle)
    ]

    def one(part):
        try:
            return read_keyed_header(storage, resolve, part)[0]
        except CkptError as e:
            return e

    if len(parts) <= 1:
        return {id(p): one(p) for p in parts}
    with ThreadPoolExecutor(min(workers, len(parts))) as pool:
        return {id(p): h for p, h in zip(parts, pool.map(one, parts), strict=True)}


# ---------------------------------------------------------------------------------------------
# the deep scan (runs on executors and in-process)

DAY_MS = 86_400_000
# age buckets: [edge[i-1], edge[i]) in milliseconds; bucket 0 holds timestamps after "now"
AGE_EDGES_MS = (0, 1_000, 10_000, 60_000, 600_000, 3_600_000, 21_600_000, DAY_MS, 7 * DAY_MS, 30 * DAY_MS,
                90 * DAY_MS, 365 * DAY_MS)  # fmt: skip
AGE_LABELS = ("future", "<1s", "1-10s", "10s-1m", "1-10m", "10m-1h", "1-6h", "6h-1d", "1-7d", "7-30d",
              "30-90d", "90-365d", ">365d")  # fmt: skip
TTL_LAYOUTS = {"VALUE": "value", "REDUCING": "value", "AGGREGATING": "value", "FOLDING": "value",
               "MAP": "map", "LIST": "list"}  # fmt: skip


def age_bucket(age_ms: int) -> int:
    import bisect

    return 0 if age_ms < 0 else bisect.bisect_right(AGE_EDGES_MS, age_ms)


def state_spec(entry: StateEntry, ttl_ms: int | None) -> tuple:
    """What the executor needs to know about one column family: (name, layout, element length, ttl)."""
    layout = TTL_LAYOUTS.get(entry.kind, "value") if entry.ttl else "none"
    return (entry.name, layout, entry.ttl_element_length if layout == "list" else None, ttl_ms)


def _ttl_timestamps(layout: str, value: bytes, elem_len: int | None) -> list[tuple[int, int]] | None:
    """(last-access millis, bytes) per element of a TTL value; ``None`` when it cannot be decoded."""
    if layout == "value":
        return [(struct.unpack_from(">q", value, 0)[0], len(value))] if len(value) >= 8 else None
    if layout == "map":
        # RocksDBMapState: a null flag, then the TtlValue (timestamp first) unless null
        if len(value) >= 9 and value[0] == 0:
            return [(struct.unpack_from(">q", value, 1)[0], len(value))]
        return None
    if layout == "list":
        # RocksDB list state: elements separated by one delimiter byte (StringAppendTESTOperator ',')
        if not elem_len or (len(value) + 1) % (elem_len + 1):
            return None
        n = (len(value) + 1) // (elem_len + 1)
        return [(struct.unpack_from(">q", value, i * (elem_len + 1))[0], elem_len) for i in range(n)]
    return None


def scan_states(storage, task: tuple) -> Iterator[tuple]:
    """One deep-scan task: rebuild the handle's RocksDB directory and count every column family."""
    import shutil
    import tempfile

    from ckptctl.rocksdb.handledir import open_read_only, rebuild_handle_dir

    _s, index, files, kg_start, kg_end, prefix_bytes, specs, now_ms = task
    workdir = tempfile.mkdtemp(prefix="ckptctl-states-")
    try:
        try:
            rebuild_handle_dir(storage, files, workdir)
        except (StorageError, OSError) as e:
            yield ("c", index, False, f"cannot rebuild the RocksDB directory: {e}")
            return
        try:
            db, cfs = open_read_only(workdir)
        except Exception as e:  # noqa: BLE001
            yield ("c", index, False, f"RocksDB cannot open the rebuilt directory: {e}")
            return
        by_name = {spec[0]: spec for spec in specs}
        try:
            for cf in cfs:
                if cf == "default":
                    continue
                spec = by_name.get(cf, (cf, "none", None, None))
                try:
                    yield from _scan_cf(db, cf, spec, index, prefix_bytes, now_ms, workdir)
                except Exception as e:  # noqa: BLE001 - SstFormatError, rocksdict errors: reported per handle
                    yield ("c", index, False, f"column family '{cf}': {e}")
        finally:
            db.close()
        yield ("c", index, True, None)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _scan_cf(db, cf, spec, index, prefix_bytes, now_ms, workdir) -> Iterator[tuple]:
    try:
        yield from _count_cf(iterate_cf(db, cf), cf, spec, index, prefix_bytes, now_ms, "rocksdb")
    except MergeOperandsError:
        from ckptctl.rocksdb.sst import read_column_family

        yield from _count_cf(read_column_family(workdir, cf), cf, spec, index, prefix_bytes, now_ms, "sst")


def _count_cf(rows, cf, spec, index, prefix_bytes, now_ms, source) -> list[tuple]:
    """Entries and bytes per key group, TTL ages per (key group, bucket); all or nothing (a list, so
    that an iterator failing half-way yields no partial counts)."""
    _name, layout, elem_len, ttl_ms = spec
    counts: dict[int, list[int]] = {}
    ages: dict[tuple[int, int], list[int]] = {}
    expired = [0, 0]
    undecodable = 0
    decoded = 0
    lo_ts = hi_ts = None
    for k, v in rows:
        if prefix_bytes == 1:  # noqa: SIM108
            kg = k[0] if k else -1
        else:
            kg = (k[0] << 8) | k[1] if len(k) >= 2 else -1
        c = counts.get(kg)
        if c is None:
            c = counts[kg] = [0, 0]
        c[0] += 1
        c[1] += len(k) + len(v)
        if layout == "none":
            continue
        stamps = _ttl_timestamps(layout, v, elem_len)
        if stamps is None:
            undecodable += 1
            continue
        for ts, nbytes in stamps:
            decoded += 1
            if layout != "list":
                nbytes += len(k)
            lo_ts = ts if lo_ts is None or ts < lo_ts else lo_ts
            hi_ts = ts if hi_ts is None or ts > hi_ts else hi_ts
            age = now_ms - ts
            b = ages.get((kg, age_bucket(age)))
            if b is None:
                b = ages[(kg, age_bucket(age))] = [0, 0]
            b[0] += 1
            b[1] += nbytes
            if ttl_ms is not None and age >= ttl_ms:
                expired[0] += 1
                expired[1] += nbytes
    out: list[tuple] = [("e", index, cf, kg, n, nbytes) for kg, (n, nbytes) in sorted(counts.items())]
    out.extend(("a", index, cf, kg, bucket, n, nbytes) for (kg, bucket), (n, nbytes) in sorted(ages.items()))
    out.append(("x", index, cf, layout, decoded, undecodable, expired[0], expired[1], lo_ts, hi_ts, source))
    return out


END_OF_KEY_GROUP_MARK = 0xFFFF
META_DATA_FOLLOWS = 0x80


def full_snapshot_rows(
    data: bytes, offsets: tuple[tuple[int, int], ...], names: list[str], path: str, prefix_bytes: int = 1
):
    """(state name, key, value) of a RocksDB full snapshot / canonical savepoint stream (the unified
    format both backends write for savepoints): per key group at its offset a ``short`` state id,
    then ``int`` length + key, ``int`` length + value pairs; the key's first bit says that a
    ``short`` follows: the next state id, or ``0xFFFF`` at the end of the key group."""
    for kg, off in sorted(offsets, key=lambda x: x[1]):
        if off <= 0:
            continue
        pos = off
        try:
            sid = struct.unpack_from(">H", data, pos)[0]
            pos += 2
            while True:
                if sid >= len(names):
                    raise MetadataFormatError(
                        f"key group {kg}: state id {sid}, the header has {len(names)} states",
                        path=path,
                        offset=pos - 2,
                    )
                klen = struct.unpack_from(">i", data, pos)[0]
                key = data[pos + 4 : pos + 4 + klen]
                pos += 4 + klen
                vlen = struct.unpack_from(">i", data, pos)[0]
                if klen < 1 or vlen < 0 or pos + 4 + vlen > len(data):
                    raise MetadataFormatError(
                        f"key group {kg}: bad key/value lengths {klen}/{vlen}", path=path, offset=pos
                    )
                value = data[pos + 4 : pos + 4 + vlen]
                pos += 4 + vlen
                follows = key[0] & META_DATA_FOLLOWS
                if follows:
                    key = bytes([key[0] & ~META_DATA_FOLLOWS & 0xFF]) + key[1:]
                key_kg = key[0] if prefix_bytes == 1 else int.from_bytes(key[:2], "big")
                if key_kg != kg:
                    raise MetadataFormatError(
                        f"a key of key group {key_kg} in the data of key group {kg}", path=path, offset=pos
                    )
                yield names[sid], key, value
                if follows:
                    nxt = struct.unpack_from(">H", data, pos)[0]
                    pos += 2
                    if nxt == END_OF_KEY_GROUP_MARK:
                        break
                    sid = nxt
        except struct.error:
            raise MetadataFormatError(f"key group {kg}: truncated", path=path, offset=pos) from None


def scan_full_snapshot(storage, task: tuple) -> Iterator[tuple]:
    """One deep-scan task over a full-snapshot stream (canonical savepoint)."""
    _k, index, source, offsets, prefix_bytes, specs, now_ms = task
    try:
        if source[0] == "inline":
            data, path = source[1], "(inline)"
        elif source[0] == "file":
            data, path = storage.read_bytes(source[1]), source[1]
        else:
            data, path = storage.read_range(source[1], source[2], source[3]), source[1]
    except (StorageError, OSError) as e:
        yield ("c", index, False, f"cannot read the snapshot stream: {e}")
        return
    positive = [o for _kg, o in offsets if o > 0]
    try:
        header = parse_backend_header(data[: min(positive) if positive else len(data)], path)
        if header.compressed:
            yield ("c", index, False, "key groups are compressed (snapshot compression): not counted")
            return
        names = [m.name for m in header.states]
        rows: dict[str, list[tuple[bytes, bytes]]] = {n: [] for n in names}
        for name, k, v in full_snapshot_rows(data, offsets, names, path, prefix_bytes):
            rows[name].append((k, v))
    except MetadataFormatError as e:
        yield ("c", index, False, str(e))
        return
    by_name = {spec[0]: spec for spec in specs}
    for name in names:
        spec = by_name.get(name, (name, "none", None, None))
        yield from _count_cf(rows[name], name, spec, index, prefix_bytes, now_ms, "snapshot")
    yield ("c", index, True, None)


def run_state_tasks(options: StorageOptions, tasks: Iterable[tuple]) -> Iterator[tuple]:
    """The task function of both engines (module level: Spark pickles it, with ``options`` bound,
    by reference)."""
    storage = Storage.shared(options)
    for task in tasks:
        if task[0] == "k":
            yield from scan_full_snapshot(storage, task)
        else:
            yield from scan_states(storage, task)


# ---------------------------------------------------------------------------------------------
# the deep scan (driver)


@dataclass
class StateUsage:
    entries: int = 0
    bytes: int = 0
    key_groups: dict[int, list[int]] = field(default_factory=dict)  # kg -> [entries, bytes]
    ages: dict[int, list[int]] = field(default_factory=dict)  # bucket -> [elements, bytes]
    layout: str = "none"
    ttl_decoded: int = 0
    ttl_undecodable: int = 0
    expired_elements: int | None = None
    expired_bytes: int | None = None
    ttl_ms: int | None = None
    oldest_ms: int | None = None  # age of the oldest element
    newest_ms: int | None = None
    read_with: set[str] = field(default_factory=set)

    def to_json(self) -> dict[str, Any]:
        return {
            "entries": self.entries, "bytes": self.bytes,
            "key_groups": {str(k): {"entries": v[0], "bytes": v[1]} for k, v in sorted(self.key_groups.items())},
            "ttl_layout": self.layout if self.layout != "none" else None,
            "ttl_elements_decoded": self.ttl_decoded, "ttl_entries_not_decodable": self.ttl_undecodable,
            "age_histogram": [
                {"bucket": AGE_LABELS[b], "elements": v[0], "bytes": v[1]} for b, v in sorted(self.ages.items())
            ],
            "oldest_age_ms": self.oldest_ms, "newest_age_ms": self.newest_ms,
            "ttl_ms": self.ttl_ms, "expired_elements": self.expired_elements, "expired_bytes": self.expired_bytes,
            "read_with": sorted(self.read_with),
        }  # fmt: skip


@dataclass
class DeepResult:
    now_ms: int
    now_source: str
    usage: dict[tuple[str, str], StateUsage]  # (operator_id, state) -> usage
    histogram: list[tuple]  # (operator_id, subtask, state, key_group, age_bucket, entries/elements, bytes)
    problems: list[str]
    not_scanned: list[str]
    handles: int
    engine: str
    elapsed: float


def parse_duration(text: str) -> int:
    """``7d``, ``12h``, ``1h30m``, ``45s``, ``500ms`` (a bare number is seconds) → milliseconds: the
    one grammar of every duration option (:mod:`ckptctl.durations`)."""
    from ckptctl.durations import parse_millis

    return parse_millis(text, "--ttl")


def parse_ttls(values: Iterable[str]) -> tuple[int | None, dict[str, int]]:
    """``--ttl 7d`` (every TTL state) and ``--ttl NAME=7d`` (one state) → (default, per name)."""
    default = None
    named: dict[str, int] = {}
    for v in values:
        name, eq, dur = v.rpartition("=")
        if eq:
            if not name:
                raise CkptError(f"--ttl expects 7d or NAME=7d, got '{v}'")
            named[name] = parse_duration(dur)
        else:
            default = parse_duration(dur)
    return default, named


def parse_now(text: str) -> int:
    """``--now``: epoch milliseconds, or an ISO-8601 time (UTC unless it says otherwise)."""
    from datetime import UTC, datetime

    t = text.strip()
    if t.isdigit():
        return int(t)
    try:
        dt = datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise CkptError(f"--now expects epoch milliseconds or an ISO-8601 time, got '{text}'") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def checkpoint_time_ms(storage, ck: LoadedCheckpoint) -> int:
    info = storage.stat(ck.location.metadata_uri)
    if info is None or info.mtime is None:
        raise CkptError(f"{ck.location.metadata_uri}: no modification time; pass --now")
    return int(info.mtime * 1000)


@dataclass
class SnapshotRef:
    """One full-snapshot stream to scan (same fields as verify's HandleRef where they matter)."""

    index: int
    files: tuple  # the stream's source: ("inline", bytes) | ("file", uri) | ("range", uri, offset, length)
    key_group_start: int
    key_group_end: int
    key_group_offsets: tuple[tuple[int, int], ...]
    prefix_bytes: int
    owners: list[tuple[str, str, int | None]] = field(default_factory=list)
    canonical: bool = True  # a savepoint's stream: the unified format for certain


def _full_snapshot_refs(ck: LoadedCheckpoint, start: int, not_scanned: list[str]) -> list[SnapshotRef]:
    """Key-group stream handles: canonical savepoints are in the unified format (key/value byte
    arrays) whatever the backend; other full snapshots may be the heap backend's, written with the
    user's serializers, and are only counted when they parse as the unified format."""
    from ckptctl.metadata.model import SAVEPOINT_KEY_GROUPS_HANDLE
    from ckptctl.verify import key_group_prefix_bytes

    resolve = file_resolver(ck)
    out: list[SnapshotRef] = []
    for op in ck.metadata.operators:
        for s in op.subtasks or ():
            h = s.managed_keyed
            if type(h) is not KeyGroupsHandle or h.delegate is None or not h.key_groups.count:
                continue
            if h.code != SAVEPOINT_KEY_GROUPS_HANDLE and not any("heap" in n for n in not_scanned):
                not_scanned.append(
                    f"operator {op.display_name or op.operator_id}: a full (non-savepoint) snapshot; counted "
                    "only if it is in the RocksDB/canonical format (heap snapshots need the user's serializers)"
                )
            src = h.delegate.source(resolve)
            if src is None:
                continue
            kgs = h.key_groups
            offsets = tuple((kgs.start + i, o) for i, o in enumerate(h.offsets))
            ref = SnapshotRef(
                start + len(out), src, kgs.start, kgs.end, offsets, key_group_prefix_bytes(op.max_parallelism),
                canonical=h.code == SAVEPOINT_KEY_GROUPS_HANDLE,
            )  # fmt: skip
            ref.owners.append((ck.location.uri, op.operator_id, s.index))
            out.append(ref)
    return out


def deep_scan(
    storage, ck: LoadedCheckpoint, cat: list[OperatorCatalog], *, now_ms: int | None = None,
    ttl_default: int | None = None, ttl_named: dict[str, int] | None = None, engine: Any = "auto",
    master: str | None = None, progress=None,
) -> DeepResult:  # fmt: skip
    """Entries, bytes and TTL ages of every state of every keyed RocksDB handle and canonical savepoint stream."""
    from ckptctl.engine import Engine
    from ckptctl.verify import handle_refs

    chosen = Engine.parse(engine, master)
    started = time.monotonic()
    now_source = "--now"
    if now_ms is None:
        now_ms, now_source = checkpoint_time_ms(storage, ck), "_metadata modification time"
    ttl_named = dict(ttl_named or {})
    by_op = {oc.operator_id: oc for oc in cat}
    known = {name for oc in cat for name in oc.states}
    unknown = sorted(set(ttl_named) - known)
    if unknown:
        raise CkptError(f"--ttl names no state of this checkpoint: {', '.join(unknown)}")
    ttl_states = {name for oc in cat for name, e in oc.states.items() if e.ttl}
    no_ttl = sorted(set(ttl_named) - ttl_states)
    if no_ttl:
        raise CkptError(f"--ttl names states without TTL (no last-access time stored): {', '.join(no_ttl)}")
    handles = handle_refs([ck])
    tasks = []
    for h in handles:
        op_id = h.owners[0][1]
        oc = by_op.get(op_id)
        specs = tuple(
            state_spec(e, ttl_named.get(e.name, ttl_default) if e.ttl else None)
            for e in (oc.states.values() if oc else ())
            if e.scope == "keyed"
        )
        tasks.append(
            ("s", h.index, h.files, h.key_group_start, h.key_group_end, h.prefix_bytes, specs, now_ms)
        )
    not_scanned = []
    handles.extend(_full_snapshot_refs(ck, len(handles), not_scanned))
    for oc in cat:
        if oc.keyed_backend == "changelog":
            not_scanned.append(
                f"operator {oc.name or oc.operator_id}: changelog backend; only the materialized RocksDB "
                "part is counted, not the changes logged since (DSTL)"
            )
    for h in handles[len(tasks) :]:
        oc = by_op.get(h.owners[0][1])
        specs = tuple(
            state_spec(e, ttl_named.get(e.name, ttl_default) if e.ttl else None)
            for e in (oc.states.values() if oc else ())
            if e.scope == "keyed"
        )
        tasks.append(("k", h.index, h.files, h.key_group_offsets, h.prefix_bytes, specs, now_ms))
    ran, records = chosen.run(tasks, partial(run_state_tasks, storage.options), progress)
    engine = ran.kind
    usage: dict[tuple[str, str], StateUsage] = {}
    histogram: list[tuple] = []
    problems: list[str] = []

    def get(op_id: str, cf: str) -> StateUsage:
        u = usage.get((op_id, cf))
        if u is None:
            u = usage[(op_id, cf)] = StateUsage()
        return u

    # A full checkpoint snapshot that does not parse as the unified format is a heap (HashMap)
    # backend's, written with the user's serializers: not decodable here, and not corruption
    # (verify checks its files). Its partial counts are dropped and it is named as not scanned.
    heap = {
        rec[1] for rec in records
        if rec[0] == "c" and not rec[2] and isinstance(handles[rec[1]], SnapshotRef) and not handles[rec[1]].canonical
    }  # fmt: skip
    for index in sorted(heap):
        ref = handles[index]
        for _ck, op_id, sub in ref.owners:
            name = by_op[op_id].name if op_id in by_op and by_op[op_id].name else op_id
            not_scanned.append(
                f"operator {name} subtask {sub}: a heap (HashMap) backend snapshot, written with the job's own "
                "serializers: not decodable without them (this is not damage; `verify` checks its files)"
            )
    for rec in records:
        kind, index = rec[0], rec[1]
        if index in heap:
            continue
        ref = handles[index]
        for _ck, op_id, sub in ref.owners:
            if kind == "c":
                if not rec[2]:
                    problems.append(
                        f"operator {op_id} subtask {sub} key groups [{ref.key_group_start}, {ref.key_group_end}]: "
                        f"{rec[3]}"
                    )
            elif kind == "e":
                _e, _i, cf, kg, n, nbytes = rec
                u = get(op_id, cf)
                u.entries += n
                u.bytes += nbytes
                slot = u.key_groups.setdefault(kg, [0, 0])
                slot[0] += n
                slot[1] += nbytes
                histogram.append((op_id, sub, cf, kg, None, n, nbytes))
            elif kind == "a":
                _a, _i, cf, kg, bucket, n, nbytes = rec
                u = get(op_id, cf)
                slot = u.ages.setdefault(bucket, [0, 0])
                slot[0] += n
                slot[1] += nbytes
                histogram.append((op_id, sub, cf, kg, AGE_LABELS[bucket], n, nbytes))
            elif kind == "x":
                _x, _i, cf, layout, decoded, undecodable, exp_n, exp_b, lo_ts, hi_ts, source = rec
                u = get(op_id, cf)
                u.layout = layout
                u.read_with.add(source)
                u.ttl_decoded += decoded
                u.ttl_undecodable += undecodable
                oc = by_op.get(op_id)
                entry = oc.states.get(cf) if oc else None
                if entry is not None and entry.ttl:
                    u.ttl_ms = ttl_named.get(cf, ttl_default)
                    if u.ttl_ms is not None:
                        u.expired_elements = (u.expired_elements or 0) + exp_n
                        u.expired_bytes = (u.expired_bytes or 0) + exp_b
                if lo_ts is not None:
                    oldest, newest = now_ms - lo_ts, now_ms - hi_ts
                    u.oldest_ms = oldest if u.oldest_ms is None else max(u.oldest_ms, oldest)
                    u.newest_ms = newest if u.newest_ms is None else min(u.newest_ms, newest)
    return DeepResult(now_ms, now_source, usage, histogram, problems, not_scanned, len(handles), engine,
                      time.monotonic() - started)  # fmt: skip


def write_histogram(result: DeepResult, checkpoint: str, path: str) -> None:
    """Parquet: one row per (operator, subtask, state, key group) with ``age_bucket`` null (all entries),
    plus one per age bucket for TTL states (elements and bytes whose last access falls in it)."""
    import pyarrow as pa

    from ckptctl.export import write_parquet

    rows = result.histogram
    cols = list(zip(*rows, strict=True)) if rows else [[]] * 7
    names_types = (
        ("operator_id", pa.string()), ("subtask", pa.int32()), ("state", pa.string()), ("key_group", pa.int32()),
        ("age_bucket", pa.string()), ("entries", pa.int64()), ("bytes", pa.int64()),
    )  # fmt: skip
    data = {"checkpoint": pa.array([checkpoint] * len(rows), pa.string())}
    data.update({n: pa.array(c, t) for (n, t), c in zip(names_types, cols, strict=True)})
    write_parquet(pa.table(data), path)


@dataclass
class StatesReport:
    """``states``: each operator's states and sizes (the catalog) and, after ``--deep``, the scan;
    :meth:`to_json` is the ``--json`` document."""

    path: str
    checkpoint_id: int
    kind: str
    savepoint_format: str | None
    operators: list[dict[str, Any]]  # each operator's catalog view (with ``usage``, ``paimon`` when known)
    stateless_operators: int
    deep: dict[str, Any] | None

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path, "checkpoint_id": self.checkpoint_id, "kind": self.kind,
            "savepoint_format": self.savepoint_format, "operators": self.operators,
            "stateless_operators": self.stateless_operators, "deep": self.deep,
        }  # fmt: skip
