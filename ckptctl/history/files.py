"""``history --states``: what only the state files can tell, read when asked (a ``GET`` per file
read; the default ``history`` reads ``_metadata`` files alone).

Per job, from the checkpoints of it on disk:

* **per state** of each operator, in the newest checkpoint: entries and bytes (RocksDB rebuilt
  and heap snapshots decoded as ``states --deep`` does, :mod:`ckptctl.states`; operator state
  from its handles), with whether the state has TTL: the unbounded growth of keyed state without
  TTL is then named by state, not guessed;
* **file merging** (Flink 1.20+, ``execution.checkpointing.file-merging.enabled``): state files
  are written as segments of shared physical files, and a physical file is kept as long as one
  of its segments is referenced. Space amplification = the bytes of the physical files the
  checkpoints on disk reference / the bytes of the segments they reference (each counted once),
  Flink's own measure (``execution.checkpointing.file-merging.max-space-amplification``, default
  2). The sizes of the physical files come from one stat each (a listing where the store has one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MAX_SPACE_AMPLIFICATION = 2.0  # Flink's default execution.checkpointing.file-merging.max-space-amplification


@dataclass
class JobFiles:
    """What the files of one job's checkpoints on disk tell (:func:`read_job`)."""

    checkpoint_id: int  # the newest on disk: the one whose states are counted
    states: dict[str, list[dict[str, Any]]]  # operator id -> its states
    file_merging: dict[str, Any] | None  # None: no segment referenced (file merging off)
    problems: list[str] = field(default_factory=list)


def read_job(storage: Any, checkpoints: list[Any]) -> JobFiles:
    """``checkpoints``: one job's loaded checkpoints on disk (:class:`ckptctl.checkpoint.loading.LoadedCheckpoint`),
    any order; per-state figures are read from the newest."""
    from ckptctl.states import catalog, deep_scan

    newest = max(checkpoints, key=lambda c: c.metadata.checkpoint_id)
    cat = catalog(storage, newest)
    deep = deep_scan(storage, newest, cat, engine="local")
    states: dict[str, list[dict[str, Any]]] = {}
    for oc in cat:
        rows = []
        for e in oc.states.values():
            usage = deep.usage.get((oc.operator_id, e.name)) if e.scope == "keyed" else None
            entries = usage.entries if usage is not None else e.elements
            rows.append(
                {
                    "name": e.name, "kind": e.kind, "scope": e.scope, "ttl": e.ttl,
                    "entries": entries, "bytes": usage.bytes if usage is not None else e.bytes,
                }
            )  # fmt: skip
        rows.sort(key=lambda r: -(r["bytes"] or 0))
        states[oc.operator_id] = rows
    problems = [*deep.problems, *deep.not_scanned]
    merging, missing = space_amplification(storage, checkpoints)
    problems += [f"{uri}: a physical file of file merging is missing" for uri in missing]
    return JobFiles(newest.metadata.checkpoint_id, states, merging, problems)


def space_amplification(storage: Any, checkpoints: list[Any]) -> tuple[dict[str, Any] | None, list[str]]:
    """File merging's figures over ``checkpoints`` (see the module docstring), and the physical
    files referenced but not found (left out of the figures)."""
    from ckptctl.checkpoint.refs import file_resolver
    from ckptctl.metadata.handles import SegmentFileHandle
    from ckptctl.metadata.walk import file_handles

    segments: dict[str, dict[int, int]] = {}  # physical file -> offset -> size
    for ck in checkpoints:
        resolve = file_resolver(ck)
        for _scope, h in file_handles(ck.metadata):
            if type(h) is SegmentFileHandle:
                segments.setdefault(resolve(h), {})[h.offset] = h.size
    if not segments:
        return None, []
    stats = storage.stat_many(list(segments))
    missing = sorted(u for u, info in stats.items() if info is None)
    present = {u: info.size for u, info in stats.items() if info is not None}
    referenced = sum(sum(segments[u].values()) for u in present)
    physical = sum(present.values())
    ratio = physical / referenced if referenced else None
    return {
        "checkpoint_ids": sorted(c.metadata.checkpoint_id for c in checkpoints),
        "physical_files": len(present), "physical_bytes": physical, "referenced_bytes": referenced,
        "segments": sum(len(segments[u]) for u in present), "space_amplification": ratio,
        "max_space_amplification": MAX_SPACE_AMPLIFICATION,
        "suspect": amplification_named(ratio, physical, referenced),
    }, missing  # fmt: skip


def amplification_named(ratio: float | None, physical: int, referenced: int) -> str | None:
    """The finding of a space amplification beyond Flink's default limit (``None`` within it)."""
    from ckptctl.sizes import human_bytes

    if ratio is None or ratio < MAX_SPACE_AMPLIFICATION:
        return None
    return (
        f"file-merging space amplification {ratio:.2f}x: physical files hold {human_bytes(physical)} for "
        f"{human_bytes(referenced)} of segments referenced (Flink's default limit: "
        f"{MAX_SPACE_AMPLIFICATION:g}); segments no checkpoint needs keep their files"
    )
