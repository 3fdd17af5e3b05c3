"""Property: over random reference graphs, no file a retained checkpoint references is ever a candidate.

Each example writes a real checkpoint root: several jobs, checkpoints that reference shared files
of their own or of other jobs (CLAIM), relative exclusive files, file-merging segments, orphans and
incomplete checkpoint directories; then runs the planner and checks the plan against the graph.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from ckptctl.gc import GcOptions, build_plan
from ckptctl.metadata import write_metadata
from ckptctl.metadata.model import (
    CheckpointMetadata,
    FileHandle,
    IncrementalHandle,
    KeyGroupRange,
    LocalFile,
    NamedOperatorState,
    OperatorState,
    OperatorStreamHandle,
    RelativeFileHandle,
    SegmentFileHandle,
    SubtaskState,
)
from ckptctl.storage import Storage

T0 = time.time() - 5 * 86400


@hs.composite
def graphs(draw):
    n_jobs = draw(hs.integers(1, 3))
    pools = {j: [f"sst-{j}-{i}" for i in range(draw(hs.integers(1, 8)))] for j in range(n_jobs)}
    checkpoints = []
    for j in range(n_jobs):
        for cid in sorted(draw(hs.sets(hs.integers(1, 30), min_size=1, max_size=4))):
            refs = draw(hs.lists(hs.tuples(hs.sampled_from(range(n_jobs)), hs.integers(0, 7)), max_size=6))
            shared = sorted({(oj, pools[oj][i % len(pools[oj])]) for oj, i in refs})
            segment = draw(hs.none() | hs.tuples(hs.integers(0, 2), hs.integers(0, 50), hs.integers(1, 50)))
            checkpoints.append((j, cid, shared, segment))
    orphans = draw(hs.lists(hs.sampled_from(["shared", "taskowned", "chk-999"]), max_size=4))
    keep_last = draw(hs.none() | hs.integers(1, 3))
    return n_jobs, pools, checkpoints, orphans, keep_last


def job_id(j: int) -> str:
    return f"{j:032x}"


def write_graph(root: Path, graph) -> dict[tuple[int, int], set[str]]:
    """Write files and _metadata; return the file URIs each (job, checkpoint) references."""
    n_jobs, pools, checkpoints, orphans, _keep = graph
    refs: dict[tuple[int, int], set[str]] = {}
    for j, pool in pools.items():
        for name in pool:
            p = root / job_id(j) / "shared" / name
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(b"s" * 64)
        for k in range(3):
            p = root / job_id(j) / "taskowned" / f"merged-{k}"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(b"m" * 200)
    for j, cid, shared, segment in checkpoints:
        chk = root / job_id(j) / f"chk-{cid}"
        chk.mkdir(parents=True, exist_ok=True)
        (chk / "meta-file").write_bytes(b"x" * 10)
        files = tuple(
            LocalFile(f"{i:06d}.sst", FileHandle(f"file:{root / job_id(oj) / 'shared' / name}", 64))
            for i, (oj, name) in enumerate(shared)
        )
        used = {f"file:{root / job_id(oj) / 'shared' / name}" for oj, name in shared} | {
            f"file:{chk / 'meta-file'}"
        }
        keyed = IncrementalHandle(
            11, cid, "b", KeyGroupRange(0, 128), 0, RelativeFileHandle("meta-file", 10), files, (), "id"
        )
        op_state = None
        if segment is not None:
            k, off, size = segment
            merged = root / job_id(j) / "taskowned" / f"merged-{k}"
            op_state = OperatorStreamHandle(
                (NamedOperatorState("s", 0, (0,)),), SegmentFileHandle(off, size, 0, f"file:{merged}", "lf")
            )
            used.add(f"file:{merged}")
        sub = SubtaskState(0, False, managed_operator=op_state, managed_keyed=keyed)
        md = CheckpointMetadata(3, cid, (), (OperatorState("ab" * 16, 1, 128, None, (sub,)),), b"", None)
        (chk / "_metadata").write_bytes(write_metadata(md))
        refs[(j, cid)] = used | {f"file:{chk / '_metadata'}"}
    for i, where in enumerate(orphans):
        p = root / job_id(0) / where / f"orphan-{i}"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"o")
    for p in root.rglob("*"):
        if p.is_file():
            t = T0 + 3600 if p.name == "_metadata" else T0
            os.utime(p, (t, t))
    return refs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=graphs())
def test_no_referenced_file_is_ever_a_candidate(graph) -> None:
    root = Path(tempfile.mkdtemp(prefix="ckptctl-gcprop-"))
    try:
        refs = write_graph(root, graph)
        keep_last = graph[4]
        plan = build_plan(
            Storage(), GcOptions((str(root),), keep_last=keep_last, older_than=86400, margin=60, force=True)
        )
        assert not plan.refusals, plan.refusals
        retained: set[str] = set()
        by_job: dict[int, list[int]] = {}
        for j, cid in refs:
            by_job.setdefault(j, []).append(cid)
        for j, cids in by_job.items():
            for cid in sorted(cids)[-keep_last:] if keep_last else cids:
                retained |= refs[(j, cid)]
        candidates = {c.path for c in plan.candidates}
        assert not candidates & retained
        listed = {"file:" + str(p) for p in root.rglob("*") if p.is_file()}
        if keep_last is None:
            # without expiry, everything unreferenced in shared/, taskowned/ or an incomplete chk dir goes
            garbage = {
                u for u in listed - retained if "/shared/" in u or "/taskowned/" in u or "/chk-999/" in u
            }
            assert candidates == garbage
    finally:
        shutil.rmtree(root, ignore_errors=True)
