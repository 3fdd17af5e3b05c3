"""Property: over random reference graphs, no file a retained checkpoint references is ever a candidate.

Each example writes a real checkpoint root: several jobs, checkpoints that reference shared files
of their own or of other jobs (CLAIM), relative exclusive files, file-merging segments, orphans and
incomplete checkpoint directories; then runs the planner and checks the plan against the graph.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from ckptctl.gc import GcOptions, build_plan
from ckptctl.metadata import write_metadata
from ckptctl.metadata.checkpoint import CheckpointMetadata
from ckptctl.metadata.handles import (
    FileHandle,
    IncrementalHandle,
    KeyGroupRange,
    LocalFile,
    RelativeFileHandle,
    SegmentFileHandle,
)
from ckptctl.metadata.operators import NamedOperatorState, OperatorState, OperatorStreamHandle, SubtaskState
from ckptctl.storage import Storage

T0 = time.time() - 5 * 86400
NULL_PROPERTIES = b"\xac\xed\x00\x05\x70"  # ObjectOutputStream.writeObject(null)


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


def write_graph(root: Path, graph, written: Path | None = None) -> dict[tuple[int, int], set[str]]:
    """Write files and _metadata; return the file URIs each (job, checkpoint) references.

    ``written``: the root the absolute paths in ``_metadata`` name (as if the root had been moved
    from there to ``root``); the returned URIs are where the files are now.
    """
    n_jobs, pools, checkpoints, orphans, _keep = graph
    at = written or root
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
            LocalFile(f"{i:06d}.sst", FileHandle(f"file:{at / job_id(oj) / 'shared' / name}", 64))
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
            merged = job_id(j) + f"/taskowned/merged-{k}"
            op_state = OperatorStreamHandle(
                (NamedOperatorState("s", 0, (0,)),),
                SegmentFileHandle(off, size, 0, f"file:{at / merged}", "lf"),
            )
            used.add(f"file:{root / merged}")
        sub = SubtaskState(0, False, managed_operator=op_state, managed_keyed=keyed)
        # V4: the first format with file-merging segment handles; its trailer is writeObject(null).
        ops = (OperatorState("ab" * 16, 1, 128, None, (sub,)),)
        md = CheckpointMetadata(4, cid, (), ops, NULL_PROPERTIES, None)
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


def retained_refs(refs: dict[tuple[int, int], set[str]], keep_last: int | None) -> set[str]:
    """Every file the checkpoints that --keep-last retains reference (their _metadata included)."""
    retained: set[str] = set()
    by_job: dict[int, list[int]] = {}
    for j, cid in refs:
        by_job.setdefault(j, []).append(cid)
    for j, cids in by_job.items():
        for cid in sorted(cids)[-keep_last:] if keep_last else cids:
            retained |= refs[(j, cid)]
    return retained


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
        retained = retained_refs(refs, keep_last)
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


# ---------------------------------------------------------------------------------------------
# operator mistakes: whatever the operator gets wrong, plan + apply never delete a file a retained
# checkpoint references, nor anything outside the roots; a blocked plan deletes nothing at all

MISTAKES = (
    "no-rebase",  # the root was moved and no --rebase is given
    "wrong-rebase",  # --rebase maps the written root somewhere else (outside the roots)
    "wrong-rebase-inside",  # --rebase maps it onto a directory inside the root (paths miss)
    "partial-rebase",  # --rebase maps only the first job's directory
    "changelog-dir-is-root",
    "savepoints-contain-root",
    "future-mtime-anchor",  # the newest _metadata of a job (its in-flight guard's anchor), 2 days ahead
    "future-mtime-any",  # one random file, _metadata and live files included, 2 days ahead
    "symlinked-dir-out",  # <job>/shared/evil -> a directory outside holding files
    "symlinked-file-out",  # <job>/shared/evil-file -> a file outside
    "symlinked-job-out",  # <root>/<32 hex> -> a job-shaped directory outside
)


def plant_outside(outside: Path) -> None:
    for rel in (
        "victim",
        "shared-like/000001.sst",
        "shared-like/orphan-0",
        "job/shared/sst-0-0",
        "job/chk-1/x",
    ):
        p = outside / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"outside the roots")
        os.utime(p, (T0 - 3600, T0 - 3600))


def files_below(*dirs: Path) -> dict[str, bytes]:
    return {
        str(p): p.read_bytes()
        for d in dirs
        for p in d.rglob("*")
        if p.is_file() and not p.is_symlink() and not any(q.is_symlink() for q in p.relative_to(d).parents)
    }


def stage_mistakes(base: Path, graph, mistakes: set[str], rnd) -> tuple[Path, Path, list[str], set[str]]:
    """A random graph written at ``base/written-at`` and moved to ``base/scan/root``, files planted
    outside, the operator's ``mistakes`` made, two files of a checkpoint in flight: (the root, the
    directory outside, the ``gc plan`` arguments, the files that must stay)."""
    written, scan = base / "written-at", base / "scan"
    root, outside = scan / "root", base / "outside"
    refs = write_graph(root, graph, written=written)
    plant_outside(outside)
    keep_last = graph[4]
    args = [str(root), "--older-than", "1d", "--margin", "1m", "--force"]
    if keep_last is not None:
        args += ["--keep-last", str(keep_last)]
    rebase = {
        "no-rebase": [],
        "wrong-rebase": ["--rebase", f"{written}={base / 'elsewhere'}"],
        "wrong-rebase-inside": ["--rebase", f"{written}={root / job_id(0)}"],
        "partial-rebase": ["--rebase", f"{written / job_id(0)}={root / job_id(0)}"],
    }
    chosen = [m for m in MISTAKES[:4] if m in mistakes]
    args += rebase[chosen[0]] if chosen else ["--rebase", f"{written}={root}"]
    if "changelog-dir-is-root" in mistakes:
        args += ["--changelog-dir", str(root)]
    if "savepoints-contain-root" in mistakes:
        args += ["--savepoints", str(scan)]
    future = time.time() + 2 * 86400
    if "future-mtime-anchor" in mistakes:
        metas = sorted((root / job_id(0)).glob("chk-*/_metadata"), key=lambda m: int(m.parent.name[4:]))
        os.utime(metas[-1], (future, future))
    if "future-mtime-any" in mistakes:
        os.utime(rnd.choice(sorted(p for p in root.rglob("*") if p.is_file())), (future, future))
    if "symlinked-dir-out" in mistakes:
        (root / job_id(0) / "shared" / "evil").symlink_to(outside / "shared-like", target_is_directory=True)
    if "symlinked-file-out" in mistakes:
        (root / job_id(0) / "shared" / "evil-file").symlink_to(outside / "victim")
    if "symlinked-job-out" in mistakes:
        (root / ("e" * 32)).symlink_to(outside / "job", target_is_directory=True)

    # files of a checkpoint in flight: newer than every _metadata of the job (T0 + 1h)
    in_flight = set()
    for rel in (f"{job_id(0)}/chk-1000/state", f"{job_id(0)}/shared/uploading.sst"):
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"in flight")
        os.utime(p, (T0 + 2 * 3600, T0 + 2 * 3600))
        in_flight.add(f"file:{p}")
    return root, outside, args, retained_refs(refs, keep_last) | in_flight


@pytest.mark.parametrize("mistake", MISTAKES)
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=graphs(), also=hs.sets(hs.sampled_from(MISTAKES), max_size=1), rnd=hs.randoms())
def test_operator_mistakes_never_delete_live_or_outside_files(mistake, graph, also, rnd) -> None:
    """Each mistake in every run (plus at times a second one), over random reference graphs."""
    from tests.support.gc_support import ckptctl

    mistakes = {mistake} | also
    base = Path(tempfile.mkdtemp(prefix="ckptctl-gcmistake-"))
    try:
        root, outside, args, must_stay = stage_mistakes(base, graph, mistakes, rnd)
        before_outside = files_below(outside)
        before_root = files_below(root)
        plan_file = base / "plan.json"
        planned = ckptctl("gc", "plan", *args, "-o", str(plan_file), expect=None)
        assert planned.exit_code in (0, 1), planned.stderr
        applied = ckptctl("gc", "apply", str(plan_file), "--yes", expect=None)

        assert files_below(outside) == before_outside, f"{mistakes}: a file outside the roots was deleted"
        gone = {"file:" + p for p in before_root} - {"file:" + p for p in files_below(root)}
        assert not gone & must_stay, (
            f"{mistakes}: live or in-flight files deleted: {sorted(gone & must_stay)[:3]}"
        )
        if planned.exit_code != 0:
            assert not gone, f"{mistakes}: a blocked plan deleted {sorted(gone)[:3]}"
            assert applied.exit_code != 0
        if not mistakes:
            assert planned.exit_code == 0 and applied.exit_code == 0, planned.stderr + applied.stderr
    finally:
        shutil.rmtree(base, ignore_errors=True)


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=graphs(), mistakes=hs.sets(hs.sampled_from(MISTAKES), max_size=2), rnd=hs.randoms())
def test_spark_plan_equals_local_plan_over_random_graphs_and_mistakes(graph, mistakes, rnd) -> None:
    """The Spark planner over the same random graphs and operator mistakes: exactly the local
    planner's plan (refusals, candidates, protected files, counts), so everything proven of the
    local plan above holds of it; its candidates are never live, in flight or outside."""
    from unittest import mock

    from ckptctl.gc.discovery import Discovery
    from tests.support.gc_support import ckptctl

    base = Path(tempfile.mkdtemp(prefix="ckptctl-gcsparkprop-"))
    now = time.time()  # one clock for both plans: evidence names the cut-off
    try:
        root, outside, args, must_stay = stage_mistakes(base, graph, mistakes, rnd)
        plans = {}
        for engine in ("local", "spark"):
            out = base / f"plan-{engine}.json"
            with mock.patch.object(Discovery, "clock", lambda self: (now, "test clock")):
                planned = ckptctl("gc", "plan", *args, "--engine", engine, "-o", str(out), expect=None)
            assert planned.exit_code in (0, 1), planned.stderr
            plans[engine] = json.loads(out.read_text())
            assert plans[engine].get("engine", {"kind": "local"})["kind"] == engine
        local, spark = ({k: v for k, v in p.items() if k not in ("created_at", "engine", "files")}
                        for p in (plans["local"], plans["spark"]))  # fmt: skip
        assert spark.keys() == local.keys()
        for key in local:
            assert spark[key] == local[key], (mistakes, key)
        if spark["refusals"]:  # blocked: apply deletes nothing (the test above)
            return
        candidates = {c["path"] for c in spark["candidates"]}
        assert not candidates & must_stay, (
            f"{mistakes}: live or in-flight candidates {sorted(candidates & must_stay)[:3]}"
        )
        assert all(c.startswith(f"file:{root}/") for c in candidates), (
            f"{mistakes}: a candidate outside the root"
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)
