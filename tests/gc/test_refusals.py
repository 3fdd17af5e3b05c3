"""Invariant 6: the plan is blocked (exit 1, a refusal code, nothing can be applied) when gc cannot
be sure: live files missing, scopes overlapping, future mtimes, an unreadable ``_metadata``, an
unknown storage clock, checkpoints changing while they are listed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.faulty_proxy import (
    FaultyProxy,
    Rule,
    is_clock_request,
    lists_inside,
    response_has_key_inside,
)
from tests.support.gc_plans import OLD, apply, candidates, codes, plan_to_file, snapshot
from tests.support.gc_support import DAY, T0, Scenario, add_job, ckptctl, plan_json
from tests.support.s3_rewritten import ATTEMPTS_PER_CALL, Upload, all_keys, client, plan, run_plan


def test_renamed_job_dir_with_wrong_rebase_blocks_on_missing_live_files(tmp_path: Path) -> None:
    """Tracker: row03."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    (renamed_from,) = sc.jobs()
    healthy, healthy_rebase = add_job(sc, "1.20.3", "basic")
    healthy2, healthy2_rebase = add_job(sc, "1.20.3", "unaligned")
    renamed = renamed_from.with_name(renamed_from.name[::-1])  # still a 32-hex job id
    renamed_from.rename(renamed)
    # the operator maps the written root onto this root: every path keeps the OLD job basename
    args = [str(sc.checkpoints), *sc.rebase, *healthy_rebase, *healthy2_rebase, *OLD]
    retained = {sc.uri(m.parent) for m in renamed.glob("chk-*/_metadata")}

    # preconditions of the story: the job's shared files are most of the job, but the
    # healthy jobs keep the global share under the default 50 % cap
    job_files = [p for p in renamed.rglob("*") if p.is_file()]
    shared = [p for p in job_files if "shared" in p.relative_to(renamed).parts]
    total = [p for p in sc.checkpoints.rglob("*") if p.is_file()]
    assert len(shared) / len(job_files) > 0.5 and len(shared) / len(total) < 0.5

    plan = plan_json(*args, expect=1)
    assert plan["blocked"] and "missing-live-files" in codes(plan)
    assert {c for m in plan["missing"] for c in m["checkpoints"]} == retained
    before = snapshot(sc.root)
    apply(plan_to_file(tmp_path, *args, expect=1), expect=1)
    assert snapshot(sc.root) == before, "a blocked plan deletes nothing"

    # accepting the loss of every such checkpoint lifts that refusal, but the per-job cap still
    # fires: this job still has retained checkpoints and would lose most of its files
    accept = [a for uri in sorted(retained) for a in ("--accept-lost", uri[5:])]
    plan = plan_json(*args, *accept, expect=1)
    assert "missing-live-files" not in codes(plan) and "delete-fraction" in codes(plan)
    assert snapshot(sc.root) == before


# ---------------------------------------------------------------------------------------------
# row 4: overlapping scopes


@pytest.mark.parametrize(
    "layout", ["changelog-dir-is-root", "changelog-dir-contains-savepoints", "savepoints-contain-root"]
)
def test_overlapping_scopes_block(tmp_path: Path, layout: str) -> None:
    """Tracker: row04."""
    sc = Scenario("2.2.0", "savepoints", tmp_path)
    savepoints = sc.root / "savepoints"
    assert any(savepoints.rglob("_metadata"))
    root = str(sc.checkpoints)
    extra = {
        "changelog-dir-is-root": ["--changelog-dir", root],
        "changelog-dir-contains-savepoints": [
            "--savepoints",
            str(savepoints),
            "--changelog-dir",
            str(sc.root),
        ],
        "savepoints-contain-root": ["--savepoints", str(sc.root)],
    }[layout]
    args = [root, *extra, *sc.rebase, *OLD, "--force"]
    before = snapshot(sc.root)
    plan = plan_json(*args, expect=1)
    assert plan["blocked"] and "overlapping-scopes" in codes(plan)
    result = apply(plan_to_file(tmp_path, *args, expect=1), expect=None)
    assert result.exit_code != 0
    assert snapshot(sc.root) == before, "_metadata, SSTs and savepoints all stay"


# ---------------------------------------------------------------------------------------------
# row 8: future mtimes on _metadata and live files


@pytest.mark.parametrize("which", ["newest-metadata", "live-file"])
def test_future_mtime_on_metadata_or_live_file_blocks(tmp_path: Path, which: str) -> None:
    """Tracker: row08."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0]
    # an in-flight checkpoint: written after the newest _metadata (T0 + 1h), older than --older-than
    inflight = [sc.plant(f"checkpoints/{job.name}/chk-1000/{n}", mtime=T0 + 2 * 3600) for n in "ab"]
    if which == "newest-metadata":
        target = max(job.glob("chk-*/_metadata"), key=lambda m: int(m.parent.name[4:]))
    else:
        target = Path(sorted(sc.referenced_by_flink())[0][5:])
        assert target.name != "_metadata"
    future = time.time() + 2 * DAY
    os.utime(target, (future, future))
    args = [str(sc.checkpoints), *sc.rebase, *OLD, "--force"]
    plan = plan_json(*args, expect=1)
    assert plan["blocked"] and "future-mtime" in codes(plan)
    assert not {sc.uri(p) for p in inflight} & candidates(plan)
    before = snapshot(sc.root)
    apply(plan_to_file(tmp_path, *args, expect=1), expect=1)
    assert snapshot(sc.root) == before


def test_a_metadata_being_written_blocks_and_a_crashed_writes_leftover_does_not(tmp_path: Path) -> None:
    """Flink (FLINK-17808) writes a ``_metadata`` into ``chk-N/._metadata.inprogress.<uuid>`` and renames
    it (local and HDFS file systems). A plan made meanwhile saw chk-N without ``_metadata``: its
    state file, written before the newest ``_metadata`` minus --margin (a checkpoint that started
    while an older one ran), was a candidate (``incomplete-checkpoint``), and so were the job's
    unreferenced shared files, which the completing checkpoint may name. A young one now blocks
    the plan; one older than --older-than is a crashed write's leftover and does not."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0]
    state = sc.plant(f"checkpoints/{job.name}/chk-1000/9c0ffee0-state", mtime=T0)
    writing = sc.plant(f"checkpoints/{job.name}/chk-1000/._metadata.inprogress.5e1f", mtime=time.time() - 5)
    args = [str(sc.checkpoints), *sc.rebase, *OLD, "--force"]
    plan = plan_json(*args, expect=1)
    assert plan["blocked"] and codes(plan) == {"metadata-being-written"}, plan["refusals"]
    assert sc.uri(writing) in plan["refusals"][0]["message"]
    before = snapshot(sc.root)
    apply(plan_to_file(tmp_path, *args, expect=1), expect=1)
    assert snapshot(sc.root) == before
    os.utime(writing, (T0, T0))  # what a write that crashed three days ago left
    plan = plan_json(*args, expect=0)
    assert not codes(plan) and {sc.uri(state), sc.uri(writing)} <= candidates(plan)


# ---------------------------------------------------------------------------------------------
# row 9: the request that reads the storage clock fails


def test_clock_request_failing_once_is_retried(s3_server) -> None:
    """Tracker: row09."""
    up = Upload(s3_server, "attack-row9-once")
    rule = Rule(is_clock_request, fail=ATTEMPTS_PER_CALL)
    with FaultyProxy(s3_server.endpoint, fault_rate=0.0, rules=[rule]) as proxy:
        p = plan(proxy.endpoint, up.root)
    assert rule.failed == ATTEMPTS_PER_CALL, "the clock request must have failed"
    assert "S3" in p["now_source"] and "local" not in p["now_source"].lower()
    assert "clock-unknown" not in codes(p)


def test_unknown_clock_blocks_unless_local_clock_is_chosen(s3_server, tmp_path: Path, monkeypatch) -> None:
    # retried until the deadline, not for the default 20 s: the outcome is the same, sooner
    """Tracker: row09."""
    monkeypatch.setenv("CKPTCTL_S3_DEADLINE", "3")
    up = Upload(s3_server, "attack-row9-never")
    before = all_keys(up.s3, up.bucket)
    rule = Rule(is_clock_request, fail=10**9)
    with FaultyProxy(s3_server.endpoint, fault_rate=0.0, rules=[rule]) as proxy:
        plan_file = tmp_path / "plan.json"
        code, p = run_plan(proxy.endpoint, up.root, out=plan_file)
        assert rule.failed >= ATTEMPTS_PER_CALL
        assert code == 1 and p["blocked"] and "clock-unknown" in codes(p)
        result = ckptctl("gc", "apply", str(plan_file), "--yes", "--s3-endpoint", proxy.endpoint, expect=None)
        assert result.exit_code == 1
        assert all_keys(up.s3, up.bucket) == before, "a plan without a storage clock deletes nothing"
        chosen = plan(proxy.endpoint, up.root, "--clock", "local")
    assert "clock-unknown" not in codes(chosen) and not chosen["blocked"]
    assert "local" in chosen["now_source"].lower()


# ---------------------------------------------------------------------------------------------
# row 10: a checkpoint completes while shared/ is listed


def test_checkpoint_completing_during_listing_blocks(s3_server, tmp_path: Path) -> None:
    """Tracker: row10."""
    up = Upload(s3_server, "attack-row10")
    newest_key = f"checkpoints/{up.job}/{up.newest.parent.name}/_metadata"
    body = up.s3.get_object(Bucket=up.bucket, Key=newest_key)["Body"].read()
    completing = f"checkpoints/{up.job}/chk-999/_metadata"
    uploader = client(s3_server.endpoint)  # straight to moto, not through the proxy

    def complete_checkpoint() -> None:
        uploader.put_object(Bucket=up.bucket, Key=completing, Body=body)

    rule = Rule(
        lists_inside("shared"), before=complete_checkpoint, after_response=response_has_key_inside("shared")
    )
    with FaultyProxy(s3_server.endpoint, fault_rate=0.0, rules=[rule]) as proxy:
        plan_file = tmp_path / "plan.json"
        code, p = run_plan(proxy.endpoint, up.root, out=plan_file)
    assert rule.fired, "the checkpoint must have completed during the listing"
    assert code == 1 and p["blocked"] and "checkpoints-changed" in codes(p)
    before = all_keys(up.s3, up.bucket)
    result = ckptctl("gc", "apply", str(plan_file), "--yes", "--s3-endpoint", s3_server.endpoint, expect=None)
    assert result.exit_code == 1
    assert all_keys(up.s3, up.bucket) == before


@pytest.mark.parametrize("kind", ["fifo", "symlink-to-dev-zero"])
def test_non_regular_metadata_is_refused_not_read(tmp_path: Path, kind: str) -> None:
    """chk-N/_metadata as a FIFO: gc plan blocks forever in read. As a symlink to /dev/zero (or
    to any huge file): read until MemoryError (exit 3) or the OOM killer.

    Tracker: f8b."""
    sc = Scenario("1.20.3", "basic", tmp_path)
    (job,) = sc.jobs()
    meta = job / "chk-10" / "_metadata"
    meta.parent.mkdir()
    if kind == "fifo":
        os.mkfifo(meta)
    else:
        meta.symlink_to("/dev/zero")
    code = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)); "
        "from ckptctl.cli import main; sys.argv[0] = 'ckptctl'; main()"
    )
    argv = [sys.executable, "-c", code, "gc", "plan", str(sc.checkpoints), *sc.rebase, *OLD]
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("gc plan hung on a FIFO _metadata")
    assert result.returncode in (1, 2), result.stderr
