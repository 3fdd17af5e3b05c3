"""Flink's rescaled restore, simulated: who gets which state, which handle becomes the base DB.

The rules, by the Flink sources (KeyGroupRangeAssignment, StateAssignmentOperation,
RocksDBIncrementalCheckpointUtils / RocksDBIncrementalRestoreOperation, RoundRobinOperatorStateRepartitioner):

* New subtask i owns key groups ``[(i*maxP + p - 1) / p, ((i+1)*maxP - 1) / p]``.
* It receives every old keyed handle whose range intersects its own, walking old subtasks in index
  order; incremental handles arrive whole, full-snapshot (key-group) handles narrowed.
* Parallelism unchanged, or one handle whose range is exactly the target: plain restore, the
  incremental history (uploaded SSTs) survives.
* Otherwise RocksDB opens one base handle, clips it to the target range and copies the in-range
  keys of every other handle through temporary instances. The base is chosen
  - Flink <= 1.15: score overlap*fraction^2 if fraction >= 0.75 else none; best > 0; ties: first;
    possibly no base at all (empty DB, everything copied);
  - Flink 1.16 - 2.x: score (overlap, fraction) compared lexicographically, a handle below the
    overlap-fraction threshold (default 0.0) scores lowest; the first handle is taken unless a
    later one is strictly better, so a base always exists;
  - Flink 2.x with ingest-DB restore: every handle is exported and imported into a fresh base,
    which is clipped from the union of their ranges; nothing is copied key by key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ckptctl.errors import CkptError
from ckptctl.metadata.checkpoint import CheckpointMetadata
from ckptctl.metadata.handles import IncrementalHandle, KeyGroupRange, KeyGroupsHandle
from ckptctl.metadata.operators import OperatorState
from ckptctl.metadata.walk import keyed_parts

LEGACY_FRACTION_THRESHOLD = 0.75  # Flink <= 1.15: OVERLAP_FRACTION_THRESHOLD


def key_group_range(max_parallelism: int, parallelism: int, index: int) -> tuple[int, int]:
    """Inclusive [start, end] of subtask ``index`` (KeyGroupRangeAssignment)."""
    start = (index * max_parallelism + parallelism - 1) // parallelism
    end = ((index + 1) * max_parallelism - 1) // parallelism
    return start, end


def default_max_parallelism(parallelism: int) -> int:
    """computeDefaultMaxParallelism: round p + p/2 up to a power of two, within [128, 32768]."""
    n = parallelism + parallelism // 2
    power = 1 << (n - 1).bit_length() if n > 1 else 1
    return min(max(power, 128), 32768)


def family_of(version: str) -> str:
    """The base-handle rule family of a Flink version like ``1.17`` or ``2.1.0``."""
    try:
        major, minor = (int(x) for x in version.split(".")[:2])
    except ValueError:
        raise CkptError(f"--flink-version expects MAJOR.MINOR such as 1.20 or 2.1, got '{version}'") from None
    if major == 2:
        return "2.x"
    if major == 1 and minor <= 15:
        return "1.15"
    if major == 1 and minor <= 18:
        return "1.16-1.18"
    if major == 1 and minor <= 20:
        return "1.19-1.20"
    raise CkptError(
        f"unknown Flink version {version}; known families: ≤1.15, 1.16-1.18, 1.19-1.20, 2.x "
        "(give MAJOR.MINOR such as 1.17 or 2.1)"
    )


def infer_family(md: CheckpointMetadata) -> tuple[str, str]:
    """(family, how it was inferred) from the metadata format version and handle codes."""
    if md.version >= 5:
        return "2.x", f"metadata V{md.version} is written by Flink 2.x"
    if md.version == 4:
        return "1.19-1.20", (
            "metadata V4 is written by Flink 1.16-1.20; 1.16-1.18 choose the same base handles, "
            "pass --flink-version to be exact"
        )
    return "1.15", "metadata V3 is written by Flink 1.11-1.15"


def key_group_bytes(h: KeyGroupsHandle, target: tuple[int, int]) -> int:
    """Bytes of a full-snapshot handle that fall in ``target`` (from its per-key-group offsets).

    Flink's ``KeyGroupRangeOffsets`` hold 0 for key groups the snapshot wrote nothing for (a
    RocksDB full snapshot sets an offset only when a key group has data; the file starts with the
    serialization header, so 0 is never a real offset). A key group's bytes therefore run from its
    offset to the next non-zero offset, or to the end of the file for the last one; an empty key
    group costs nothing, and the bytes of all key groups together never exceed the file.
    """
    total = h.state_size
    start = h.key_groups.first
    offsets = list(h.offsets)
    n = 0
    end = total
    for i in range(len(offsets) - 1, -1, -1):  # backwards: each span ends where the next one starts
        off = offsets[i]
        if off <= 0:
            continue
        if target[0] <= start + i <= target[1]:
            n += max(min(end, total) - off, 0)
        end = min(end, off)
    return min(n, total)


@dataclass
class Candidate:
    old_subtask: int
    handle: Any
    key_groups: tuple[int, int]
    overlap: int
    fraction: float
    bytes: int
    score: Any = None
    above_threshold: bool = True

    def view(self) -> dict[str, Any]:
        return {
            "old_subtask": self.old_subtask, "key_group_range": list(self.key_groups), "overlap": self.overlap,
            "fraction": round(self.fraction, 6), "score": self.score, "above_threshold": self.above_threshold,
            "state_handle_id": getattr(self.handle, "handle_id", None), "type": type(self.handle).__name__,
            "bytes": self.bytes,
        }  # fmt: skip


@dataclass
class SubtaskPlan:
    index: int
    key_groups: tuple[int, int]
    handles: list[Candidate]
    mode: str  # "direct" | "base" | "empty" | "ingest" | "full" | "none"
    base: Candidate | None
    clip: list[tuple[int, int]] = field(default_factory=list)
    copied: list[Candidate] = field(default_factory=list)
    download_bytes: int = 0
    history_kept: bool = False

    def view(self) -> dict[str, Any]:
        return {
            "index": self.index, "key_group_range": list(self.key_groups), "mode": self.mode,
            "handles": [c.view() for c in self.handles],
            "base": None if self.base is None else {**self.base.view(), "key_group_range": list(self.base.key_groups)},
            "clip": [list(r) for r in self.clip],
            "copied": [{"key_group_range": list(c.key_groups), "old_subtask": c.old_subtask,
                        "copy_range": list(_intersect(c.key_groups, self.key_groups))} for c in self.copied],
            "download_bytes": self.download_bytes, "incremental_history_kept": self.history_kept,
        }  # fmt: skip


def _intersect(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return max(a[0], b[0]), min(a[1], b[1])


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> int:
    lo, hi = _intersect(a, b)
    return max(0, hi - lo + 1)


def _kgr(r: KeyGroupRange) -> tuple[int, int]:
    return (r.first, r.end)


def _materialized_base(h: Any) -> Any:
    """The handle a restore opens as its base: ``h``, or a changelog handle's one materialized part."""
    parts = list(keyed_parts(h))
    return parts[0] if len(parts) == 1 else None


def choose_base(cands: list[Candidate], family: str, threshold: float) -> Candidate | None:
    """The initial handle by the rules of ``family`` (mutates the candidates' scores)."""
    if family == "1.15":
        best, best_score = None, 0.0
        for c in cands:
            c.above_threshold = c.fraction >= LEGACY_FRACTION_THRESHOLD
            c.score = c.overlap * c.fraction**2 if c.above_threshold else -1.0
            if c.score > best_score:
                best, best_score = c, c.score
        return best
    if len(cands) == 1 and family in ("1.19-1.20", "2.x"):
        cands[0].score = [cands[0].overlap, cands[0].fraction]
        return cands[0]
    best, best_score = None, None
    for c in cands:
        c.above_threshold = c.fraction >= threshold
        score = (c.overlap, c.fraction) if c.above_threshold else (-1, -1.0)
        c.score = list(score)
        if best is None or score > best_score:  # first taken, later only if strictly better
            best, best_score = c, score
    return best


def plan_operator(
    op: OperatorState, new_parallelism: int, family: str, threshold: float, ingest_db: bool
) -> dict[str, Any]:
    old_parallelism, max_par = op.parallelism, op.max_parallelism
    subtasks = sorted(op.subtasks or (), key=lambda s: s.index)
    old = [(s.index, s.managed_keyed) for s in subtasks if s.managed_keyed is not None]
    out_subtasks = []
    for i in range(new_parallelism):
        target = key_group_range(max_par, new_parallelism, i)
        cands = []
        for old_index, h in old:
            kg = _kgr(h.key_groups)
            ov = _overlap(kg, target)
            if new_parallelism == old_parallelism:
                if old_index != i:
                    continue
            elif ov == 0:
                continue
            size = kg[1] - kg[0] + 1
            # bytes a restore downloads: the key groups in range of a full snapshot, else the
            # handle's whole state (all its files, or its inline bytes)
            nbytes = key_group_bytes(h, target) if type(h) is KeyGroupsHandle else h.state_size
            cands.append(Candidate(old_index, h, kg, ov, ov / size if size > 0 else 0.0, nbytes))
        plan = SubtaskPlan(i, target, cands, "none", None)
        plan.download_bytes = sum(c.bytes for c in cands)
        incremental = [c for c in cands if type(_materialized_base(c.handle)) is IncrementalHandle]
        if not cands:
            plan.mode = "none"
        elif len(incremental) < len(cands):
            plan.mode = "full"  # full snapshots (heap, canonical savepoints): key groups are read, no base DB
        elif len(cands) == 1 and cands[0].key_groups == target:
            plan.mode, plan.base = "direct", cands[0]
            plan.history_kept = type(cands[0].handle) is IncrementalHandle
        elif ingest_db and family == "2.x" and len(cands) > 1:
            plan.mode = "ingest"
            union = (min(c.key_groups[0] for c in cands), max(c.key_groups[1] for c in cands))
            plan.clip = _clips(union, target)
        else:
            base = choose_base(cands, family, threshold)
            plan.base = base
            if base is None:
                plan.mode = "empty"
                plan.copied = list(cands)
            else:
                plan.mode = "base"
                plan.clip = _clips(base.key_groups, target)
                plan.copied = [c for c in cands if c is not base]
        out_subtasks.append(plan)
    totals = [p.download_bytes for p in out_subtasks]
    mean = sum(totals) / len(totals) if totals else 0
    return {
        "operator_id": op.operator_id, "name": op.display_name, "uid": op.display_uid,
        "old_parallelism": old_parallelism, "new_parallelism": new_parallelism, "max_parallelism": max_par,
        "keyed": bool(old),
        "subtasks": [p.view() for p in out_subtasks] if old else [],
        "operator_state": operator_state_plan(op, new_parallelism),
        "download_bytes": sum(totals), "max_subtask_bytes": max(totals, default=0),
        "skew": (max(totals) / mean) if mean else None,
        "merging_subtasks": sum(1 for p in out_subtasks if p.copied or p.mode == "ingest"),
        "clipping_subtasks": sum(1 for p in out_subtasks if p.clip),
    }  # fmt: skip


def _clips(current: tuple[int, int], target: tuple[int, int]) -> list[tuple[int, int]]:
    out = []
    if current[0] < target[0]:
        out.append((current[0], target[0] - 1))
    if current[1] > target[1]:
        out.append((target[1] + 1, current[1]))
    return out


def operator_state_plan(op: OperatorState, new_parallelism: int) -> list[dict[str, Any]]:
    """Bytes each new subtask reads of the operator (non-keyed) state, by distribution mode.

    SPLIT_DISTRIBUTE elements are dealt out round-robin in contiguous chunks (the start rotates
    between state names), UNION elements go to every subtask, BROADCAST subtask i reads old
    subtask i mod old-parallelism's copy.
    """
    elements: dict[tuple[str, int], list[int]] = {}  # (name, mode) -> element sizes in old-subtask order
    broadcast: dict[str, list[int]] = {}
    for s in sorted(op.subtasks or (), key=lambda s: s.index):
        h = s.managed_operator
        if h is None:
            continue
        total = h.state_size
        all_offsets = sorted({o for st in h.states for o in st.offsets})
        ends = {
            o: (all_offsets[k + 1] if k + 1 < len(all_offsets) else total) for k, o in enumerate(all_offsets)
        }
        for st in h.states:
            sizes = [max(ends[o] - o, 0) for o in st.offsets]
            if st.mode_name == "BROADCAST":
                broadcast.setdefault(st.name, []).append(sum(sizes))
            else:
                elements.setdefault((st.name, st.mode), []).extend(sizes)
    reads = [0] * new_parallelism
    states = []
    start = 0
    for (name, mode), sizes in elements.items():
        if mode == 1:  # UNION
            for i in range(new_parallelism):
                reads[i] += sum(sizes)
            states.append({"name": name, "mode": "UNION", "elements": len(sizes), "bytes": sum(sizes)})
            continue
        base, remainder = divmod(len(sizes), new_parallelism)
        pos, new_start = 0, start
        for k in range(new_parallelism):
            idx = (k + start) % new_parallelism
            n = base
            if remainder > 0:
                n += 1
                remainder -= 1
            elif remainder == 0:
                new_start = idx
                remainder -= 1
            reads[idx] += sum(sizes[pos : pos + n])
            pos += n
        start = new_start
        states.append({"name": name, "mode": "SPLIT_DISTRIBUTE", "elements": len(sizes), "bytes": sum(sizes)})
    for name, copies in broadcast.items():
        for i in range(new_parallelism):
            reads[i] += copies[i % len(copies)]
        states.append({"name": name, "mode": "BROADCAST", "elements": len(copies), "bytes": sum(copies)})
    if not states:
        return []
    return [{"states": states, "bytes_per_subtask": reads}]


def plan_rescale(
    md: CheckpointMetadata,
    parallelism: int,
    *,
    operator: str | None = None,
    flink_version: str | None = None,
    overlap_threshold: float | None = None,
    ingest_db: bool = False,
    max_parallelism: int | None = None,
) -> dict[str, Any]:
    """The whole simulated restore at ``parallelism`` (see the module docstring for the rules)."""
    family, why = (
        (family_of(flink_version), f"--flink-version {flink_version}") if flink_version else infer_family(md)
    )
    threshold = overlap_threshold if overlap_threshold is not None else 0.0
    if overlap_threshold is not None and not 0.0 <= overlap_threshold <= 1.0:
        raise CkptError("--overlap-threshold must be between 0 and 1")
    if ingest_db and family != "2.x":
        raise CkptError(
            "--ingest-db is the Flink 2.x ingest-DB restore; this checkpoint is from Flink " + family
        )
    ops = [op for op in md.operators if not op.fully_finished]
    if operator is not None:
        sel = [op for op in ops if operator in (op.operator_id, op.display_name, op.display_uid)]
        if not sel:
            known = ", ".join(
                f"{op.operator_id}" + (f" ({op.display_name})" if op.display_name else "") for op in ops
            )
            raise CkptError(f"no operator '{operator}' in this checkpoint; operators: {known}")
        ops = sel
    if parallelism < 1:
        raise CkptError("--parallelism must be at least 1")
    for op in ops:
        if max_parallelism is not None and max_parallelism != op.max_parallelism:
            raise CkptError(
                f"operator {op.operator_id} was checkpointed with max parallelism {op.max_parallelism}; "
                f"Flink cannot restore keyed state at max parallelism {max_parallelism} (key groups are fixed)"
            )
        if parallelism > op.max_parallelism:
            raise CkptError(
                f"parallelism {parallelism} exceeds the max parallelism {op.max_parallelism} of operator "
                f"{op.operator_id}; Flink refuses to restore"
            )
    planned = [plan_operator(op, parallelism, family, threshold, ingest_db) for op in ops]
    keyed = [p for p in planned if p["keyed"]]
    per_subtask = [0] * parallelism
    for p in keyed:
        for s in p["subtasks"]:
            per_subtask[s["index"]] += s["download_bytes"]
    mean = sum(per_subtask) / parallelism if parallelism else 0
    return {
        "checkpoint_id": md.checkpoint_id, "flink_family": family, "family_from": why,
        "overlap_threshold": threshold, "ingest_db": ingest_db, "new_parallelism": parallelism,
        "operators": planned,
        "download_bytes": sum(per_subtask), "max_subtask_bytes": max(per_subtask, default=0),
        "critical_subtask": per_subtask.index(max(per_subtask)) if per_subtask and max(per_subtask) else None,
        "skew": (max(per_subtask) / mean) if mean else None,
        "merging_subtasks": sum(p["merging_subtasks"] for p in keyed),
    }  # fmt: skip


def sweep(
    md: CheckpointMetadata,
    parallelisms: list[int],
    *,
    histogram: list[tuple] | None = None,
    checkpoint: str | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Restore cost per parallelism, and which ones need no merging of RocksDB instances.

    Merging (copying keys out of temporary instances) is the slow part of a rescaled RocksDB
    restore; clipping a single instance is cheap (range deletes). The recommendation is the
    parallelism with the smallest critical path (largest subtask download), then fewest merges.
    With a ``histogram`` (``verify --deep --histogram``) every row also carries the measured bytes
    clipped and copied, and fewer copied bytes break ties before fewer merging subtasks.
    """
    rows = []
    for p in parallelisms:
        plan = plan_rescale(md, p, **kwargs)
        row = {
            "parallelism": p, "download_bytes": plan["download_bytes"], "max_subtask_bytes": plan["max_subtask_bytes"],
            "skew": plan["skew"], "merging_subtasks": plan["merging_subtasks"],
        }  # fmt: skip
        if histogram is not None:
            apply_histogram(plan, histogram, checkpoint)
            totals = [op["data"] for op in plan["operators"] if "data" in op]
            row["data"] = {k: sum(t[k] for t in totals) for k in ("keep_bytes", "clip_bytes", "copy_bytes")}
        rows.append(row)
    no_merge = [r["parallelism"] for r in rows if r["merging_subtasks"] == 0]
    fastest = min(
        rows,
        key=lambda r: (r["max_subtask_bytes"], r.get("data", {}).get("copy_bytes", 0), r["merging_subtasks"]),
    )
    keyed = {op.parallelism for op in md.operators if op.subtasks}
    current = keyed.pop() if len(keyed) == 1 else None  # the parallelism the checkpoint was taken at
    for r in rows:
        r["current"] = r["parallelism"] == current
    out = {"rows": rows, "no_merge": no_merge, "recommended": fastest["parallelism"], "current": current}
    if histogram is not None:
        out["data_aware"] = True
    return out


@dataclass
class RescalePlan:
    """``plan-rescale -p N``: one simulated restore (:func:`plan_rescale`, measured bytes added by
    :func:`apply_histogram`), naming the checkpoint it was planned for."""

    plan: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return self.plan


@dataclass
class RescaleSweep:
    """``plan-rescale -p LOW..HIGH``: the cost of each parallelism and the recommendation (:func:`sweep`)."""

    sweep: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return self.sweep


def plan_or_sweep(
    md: CheckpointMetadata,
    parallelisms: list[int],
    checkpoint: str,
    histogram: list[tuple] | None = None,
    **kwargs: Any,
) -> RescalePlan | RescaleSweep:
    """``plan-rescale``: the plan of one parallelism, or the sweep over several."""
    if len(parallelisms) == 1:
        plan = plan_rescale(md, parallelisms[0], **kwargs)
        plan["checkpoint"] = checkpoint
        if histogram is not None:
            apply_histogram(plan, histogram, checkpoint)
        return RescalePlan(plan)
    result = sweep(md, parallelisms, histogram=histogram, checkpoint=checkpoint, **kwargs)
    result["checkpoint"] = checkpoint
    return RescaleSweep(result)


def apply_histogram(plan: dict[str, Any], rows: list[tuple], checkpoint: str | None = None) -> dict[str, Any]:
    """Replace the uniform-key-group assumption with measured bytes (``verify --deep --histogram``).

    ``rows`` are (checkpoint, operator_id, subtask, column_family, key_group, entries, bytes); rows
    of other checkpoints are ignored when ``checkpoint`` is given. Per new subtask it adds the bytes
    it ends up holding (``keep_bytes``), the bytes its base instance must drop by clipping
    (``clip_bytes``) and the bytes copied key by key out of temporary instances (``copy_bytes``).
    """
    per_kg: dict[str, dict[int, list[int]]] = {}
    for ck, op_id, _subtask, _cf, kg, entries, nbytes in rows:
        if checkpoint is not None and ck != checkpoint:
            continue
        slot = per_kg.setdefault(op_id, {}).setdefault(kg, [0, 0])
        slot[0] += entries
        slot[1] += nbytes
    if not per_kg:
        raise CkptError("the histogram has no rows for this checkpoint (run verify --deep --histogram on it)")

    def measure(kgs: dict[int, list[int]], lo: int, hi: int, index: int) -> int:
        return sum(v[index] for kg, v in kgs.items() if lo <= kg <= hi)

    for op in plan["operators"]:
        kgs = per_kg.get(op["operator_id"])
        if kgs is None or not op["keyed"]:
            continue
        totals = {"keep_bytes": 0, "clip_bytes": 0, "copy_bytes": 0}
        for s in op["subtasks"]:
            lo, hi = s["key_group_range"]
            clip = sum(measure(kgs, a, b, 1) for a, b in s["clip"])
            copy = sum(measure(kgs, *c["copy_range"], 1) for c in s["copied"])
            data = {
                "keep_bytes": measure(kgs, lo, hi, 1), "keep_entries": measure(kgs, lo, hi, 0),
                "clip_bytes": clip, "copy_bytes": copy,
            }  # fmt: skip
            s["data"] = data
            for k in totals:
                totals[k] += data[k]
        op["data"] = totals
    plan["data_aware"] = True
    return plan
