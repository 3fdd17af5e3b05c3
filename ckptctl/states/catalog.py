"""The catalog: what state each operator holds, from the metadata and the keyed backend headers.

Every keyed handle carries the backend's own description of its state (the serialization proxy,
:mod:`ckptctl.metadata.keyedproxy`); operator (non-keyed) state comes from the
``OperatorStateHandle``: its state name → offsets map (mode SPLIT_DISTRIBUTE / UNION / BROADCAST,
one offset per element). Reads one small header per handle, in parallel; no RocksDB.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ckptctl.checkpoint.loading import LoadedCheckpoint
from ckptctl.checkpoint.refs import file_resolver
from ckptctl.checkpoint.streams import read_stream
from ckptctl.errors import CkptError, StorageError, StoreUnanswered
from ckptctl.metadata.codes import DISTRIBUTION_MODES
from ckptctl.metadata.handles import ChangelogBackendHandle, IncrementalHandle, KeyGroupsHandle
from ckptctl.metadata.keyedproxy import (
    BackendHeader,
    SerializerInfo,
    parse_backend_header,
    parse_operator_header,
)
from ckptctl.metadata.operators import FileMergingOperatorHandle, OperatorStreamHandle
from ckptctl.metadata.walk import keyed_parts

# ---------------------------------------------------------------------------------------------
# reading the streams


def read_keyed_header(storage, resolve, h) -> tuple[BackendHeader, str]:
    """The serialization proxy of one keyed handle (incremental meta file or full-snapshot stream head)."""
    if type(h) is IncrementalHandle:
        if h.meta is None:
            raise CkptError("incremental handle without a meta data handle")
        data, name = read_stream(storage, resolve, h.meta)
        return _parsed(data, name), name
    if type(h) is KeyGroupsHandle:
        if h.delegate is None:
            raise CkptError("key-groups handle without a stream")
        positive = [o for o in h.offsets if o > 0]
        size = h.delegate.state_size
        head = min(positive) if positive else size
        data, name = read_stream(storage, resolve, h.delegate, 0, head)
        return _parsed(data, name), name
    raise CkptError(f"no state meta data in a {type(h).__name__}")


_PARSED: dict[bytes, BackendHeader] = {}


def _parsed(data: bytes, name: str) -> BackendHeader:
    """The header of ``data``, parsed once per content: the subtasks of an operator write the
    same header bytes (key serializer, states), and parsing one (re-synchronising on each
    snapshot's end) costs ~5 ms of CPU -- 10 s for the 2,048 handles of a 52 MB ``_metadata``.
    Headers are not modified by their readers."""
    got = _PARSED.get(data)
    if got is None:
        got = parse_backend_header(data, name)
        if len(_PARSED) >= 1024:
            _PARSED.clear()
        _PARSED[data] = got
    return got


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


def catalog(storage, ck: LoadedCheckpoint, *, operator_serializers: bool = False) -> list[OperatorCatalog]:
    """Per operator: its states from the keyed backend headers and the operator state handles;
    ``operator_serializers``: also the operator (list/union/broadcast) states' serializer
    snapshots, from the head of one operator state stream per operator (``preflight``)."""
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
                    add_keyed_states(oc, header.states)
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
                    if operator_serializers and not entry.serializers:
                        _add_operator_serializers(storage, resolve, op.operator_id, oph, oc)
                    entry.elements = (entry.elements or 0) + len(st.offsets)
                    lo, hi = bounds[st.name]
                    entry.bytes = (entry.bytes or 0) + (max(0, hi - lo) if st.offsets else 0)
        out.append(oc)
    return out


def add_keyed_states(oc: OperatorCatalog, metas) -> None:
    """Keyed states (``StateMeta``s, as a subtask's backend records them) into ``oc``: the
    first subtask's record of a state is kept, the others counted."""
    for meta in metas:
        entry = oc.states.get(meta.name)
        if entry is None:
            entry = oc.states[meta.name] = StateEntry(
                meta.name, meta.kind, "keyed", meta.ttl, meta.backend_type,
                {x.key: x for x in meta.serializers}, meta.ttl_element_length,
            )  # fmt: skip
        entry.subtasks += 1


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
        except StoreUnanswered:
            raise  # each next handle would wait out the same deadline
        except CkptError as e:
            return e

    if len(parts) <= 1:
        return {id(p): one(p) for p in parts}
    with ThreadPoolExecutor(min(workers, len(parts))) as pool:
        return {id(p): h for p, h in zip(parts, pool.map(one, parts), strict=True)}


def _add_operator_serializers(storage, resolve, operator_id: str, oph, oc: OperatorCatalog) -> None:
    """The serializer snapshots of an operator state stream's states (its head, up to the first
    element: the smallest offset the metadata records), into the catalog's entries."""
    offsets = [o for st in oph.states for o in st.offsets]
    end = min(offsets) if offsets else oph.state_size
    try:
        data, name = read_stream(storage, resolve, oph.delegate, 0, end)
        metas = parse_operator_header(data, name)
    except StoreUnanswered:
        raise
    except CkptError as e:
        note = f"operator state serializers not readable: {e}"
        if note not in oc.notes:
            oc.notes.append(note)
        return
    for meta in metas:
        entry = oc.states.get(meta.name)
        if entry is not None and not entry.serializers:
            entry.serializers = {x.key: x for x in meta.serializers}
