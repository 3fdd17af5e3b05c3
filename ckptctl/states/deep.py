"""The deep scan's driver: tasks from the catalog, the engine's records added up per state."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ckptctl.checkpoint.loading import LoadedCheckpoint
from ckptctl.checkpoint.refs import file_resolver
from ckptctl.errors import CkptError
from ckptctl.metadata.handles import KeyGroupsHandle
from ckptctl.states.catalog import OperatorCatalog, StateEntry
from ckptctl.states.scan import (
    AGE_LABELS,
    AgeCount,
    HandleOutcome,
    KeyGroupEntries,
    NotDecoded,
    RocksDBTask,
    SnapshotTask,
    StateSpec,
    TtlSummary,
    run_state_tasks,
)

TTL_LAYOUTS = {"VALUE": "value", "REDUCING": "value", "AGGREGATING": "value", "FOLDING": "value",
               "MAP": "map", "LIST": "list"}  # fmt: skip


def state_spec(entry: StateEntry, ttl_ms: int | None) -> StateSpec:
    """What the executor needs to know about one column family."""
    layout = TTL_LAYOUTS.get(entry.kind, "value") if entry.ttl else "none"
    return StateSpec(entry.name, layout, entry.ttl_element_length if layout == "list" else None, ttl_ms)


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


def checkpoint_time_ms(storage, ck: LoadedCheckpoint) -> int:
    info = storage.stat(ck.location.metadata_uri)
    if info is None or info.mtime is None:
        raise CkptError(f"{ck.location.metadata_uri}: no modification time; pass --now")
    return int(info.mtime * 1000)


@dataclass
class SnapshotRef:
    """One full-snapshot stream to scan (same fields as verify's HandleRef where they matter)."""

    index: int
    files: tuple  # the stream's source: ("inline", bytes) | ("file", uri, recorded size) | ("range", uri, offset, length)
    key_group_start: int
    key_group_end: int
    key_group_offsets: tuple[tuple[int, int], ...]
    prefix_bytes: int
    owners: list[tuple[str, str, int | None]] = field(default_factory=list)
    canonical: bool = True  # a savepoint's stream: the unified format for certain


def _full_snapshot_refs(ck: LoadedCheckpoint, start: int) -> list[SnapshotRef]:
    """Key-group stream handles: canonical savepoints are in the unified format (key/value byte
    arrays) whatever the backend; other full snapshots are the heap backend's (written with the
    states' own serializers, :mod:`ckptctl.states.heap`) or RocksDB's in the unified format."""
    from ckptctl.metadata.codes import SAVEPOINT_KEY_GROUPS_HANDLE
    from ckptctl.verify import key_group_prefix_bytes

    resolve = file_resolver(ck)
    out: list[SnapshotRef] = []
    for op in ck.metadata.operators:
        for s in op.subtasks or ():
            h = s.managed_keyed
            if type(h) is not KeyGroupsHandle or h.delegate is None or not h.key_groups.count:
                continue
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
    """Entries, bytes and TTL ages of every state of every keyed RocksDB handle, canonical savepoint
    stream and heap (HashMap) backend snapshot."""
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
            RocksDBTask(h.index, h.files, h.key_group_start, h.key_group_end, h.prefix_bytes, specs, now_ms)
        )
    not_scanned = []
    handles.extend(_full_snapshot_refs(ck, len(handles)))
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
        tasks.append(
            SnapshotTask(h.index, h.files, h.key_group_offsets, h.prefix_bytes, specs, now_ms, h.canonical)
        )
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

    for rec in records:
        kind, index = rec.__class__, rec.index
        ref = handles[index]
        for _ck, op_id, sub in ref.owners:
            if kind is HandleOutcome:
                if not rec.ok:
                    problems.append(
                        f"operator {op_id} subtask {sub} key groups [{ref.key_group_start}, {ref.key_group_end}]: "
                        f"{rec.detail}"
                    )
            elif kind is NotDecoded:
                name = by_op[op_id].name if op_id in by_op and by_op[op_id].name else op_id
                what = f"state '{rec.state}'" if rec.state is not None else "heap snapshot"
                line = f"operator {name}: {what} of the heap (HashMap) backend: {rec.detail}"
                if line not in not_scanned:
                    not_scanned.append(line)
            elif kind is KeyGroupEntries:
                _i, cf, kg, n, nbytes = rec
                u = get(op_id, cf)
                u.entries += n
                u.bytes += nbytes
                slot = u.key_groups.setdefault(kg, [0, 0])
                slot[0] += n
                slot[1] += nbytes
                histogram.append((op_id, sub, cf, kg, None, n, nbytes))
            elif kind is AgeCount:
                _i, cf, kg, bucket, n, nbytes = rec
                u = get(op_id, cf)
                slot = u.ages.setdefault(bucket, [0, 0])
                slot[0] += n
                slot[1] += nbytes
                histogram.append((op_id, sub, cf, kg, AGE_LABELS[bucket], n, nbytes))
            elif kind is TtlSummary:
                _i, cf, layout, decoded, undecodable, exp_n, exp_b, lo_ts, hi_ts, source = rec
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
