"""Invariant 5 and ``--keep-last``: a checkpoint goes as a unit, and expiry refuses when the order of
checkpoints or a starting job makes it unsure."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from tests.support.fixture_cases import REPO
from tests.support.gc_plans import OLD, apply, candidates, plan_to_file
from tests.support.gc_support import J1, T0, Scenario, ckptctl, plan_json

# ---------------------------------------------------------------------------------------------
# row 11: --keep-last deletes a checkpoint as a unit


def test_expired_checkpoint_with_protected_metadata_keeps_all_its_files(tmp_path: Path) -> None:
    """Tracker: row11."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0]
    chks = sorted(job.glob("chk-*/_metadata"), key=lambda m: int(m.parent.name[4:]))
    assert len(chks) >= 3
    young_meta = chks[-2]  # expired by --keep-last 1, but its _metadata is too young to delete
    young = time.time() - 60
    os.utime(young_meta, (young, young))
    gone_meta = chks[0]  # expired, and its _metadata predates the newest one by more than --margin
    os.utime(gone_meta, (T0 + 600, T0 + 600))
    exp = json.loads(
        (REPO / sc.entry["expected_dir"] / young_meta.parent.relative_to(sc.root))
        .with_suffix(".json")
        .read_text()
    )
    its_files = {
        "file:" + str(sc.root) + r["path"].removeprefix("file:")[len(sc.original) :]
        for r in exp["references"]
    }
    assert its_files
    args = [str(sc.checkpoints), *sc.rebase, *OLD, "--keep-last", "1", "--force"]
    plan = plan_json(*args)
    assert not its_files & candidates(plan), "an expired checkpoint whose _metadata stays keeps its files"
    assert sc.uri(young_meta) not in candidates(plan)
    # the other expired checkpoint goes as a unit, _metadata included
    assert sc.uri(gone_meta) in candidates(plan)
    apply(plan_to_file(tmp_path, *args))
    for uri in its_files:
        assert Path(uri[5:]).exists(), uri
    assert not gone_meta.exists()
    ckptctl("check", str(sc.checkpoints), *sc.rebase)  # every remaining _metadata resolves


# --- F3: --keep-last ranks by N, not by completion --------------------------------------------


def test_keep_last_refuses_when_checkpoint_numbers_and_times_disagree(tmp_path: Path) -> None:
    """A fixed job id (application mode, operator-managed jobs) restored from an older savepoint
    continues at a lower N next to a stale higher chk-N of the previous run. --keep-last 1 keeps
    the stale chk-9 and would delete chk-8, the checkpoint that completed last (the one Flink's HA
    store points to): the plan must be blocked.

    Tracker: f3."""
    sc = Scenario("1.20.3", "basic", tmp_path)
    (job,) = sc.jobs()
    os.utime(job / "chk-9" / "_metadata", (T0 + 600, T0 + 600))  # chk-7, chk-8 completed after it
    args = (str(sc.checkpoints), *sc.rebase, *OLD, "--force", "--keep-last", "1")
    plan = plan_json(*args, expect=1)
    assert "keep-last-order" in {r["code"] for r in plan["refusals"]}
    apply(plan_to_file(tmp_path, *args, expect=1), expect=1)
    assert (job / "chk-8" / "_metadata").exists(), "the most recently completed checkpoint was deleted"


def test_keep_last_refuses_while_a_run_restored_under_the_same_job_id_takes_its_first_checkpoint(
    tmp_path: Path,
) -> None:
    """Application mode with HA gives every deployment of a cluster id the same job id: rolled
    back to chk-7 (chk-8 was aborted, so discarded), the new run writes into the same job
    directory and numbers its checkpoints on from chk-7. While its first one, chk-8, is in progress
    -- below the newest completed chk-9, no _metadata yet -- --keep-last 1 would expire chk-7, the
    checkpoint it restored from and fails over to: blocked. An old chk-8 (a leftover of an aborted
    checkpoint) or a young one above the newest (the running job's next) blocks nothing.

    Tracker: f3b."""
    import shutil

    sc = Scenario("1.20.3", "basic", tmp_path)
    (job,) = sc.jobs()
    shutil.rmtree(job / "chk-8")
    state = sc.plant(f"checkpoints/{job.name}/chk-8/in-flight-state", mtime=time.time() - 60)
    args = (str(sc.checkpoints), *sc.rebase, *OLD, "--force", "--keep-last", "1")
    plan = plan_json(*args, expect=1)
    refusals = {r["code"]: r["message"] for r in plan["refusals"]}
    assert "job-starting" in refusals and f"{job.name}/chk-8" in refusals["job-starting"], refusals
    apply(plan_to_file(tmp_path, *args, expect=1), expect=1)
    assert (job / "chk-7" / "_metadata").exists(), "the checkpoint a restored run fails over to was deleted"

    for path in (state, state.parent):  # the same chk-8, written two days ago: a leftover
        os.utime(path, (time.time() - 2 * 86400,) * 2)
    assert "job-starting" not in {r["code"] for r in plan_json(*args, expect=None)["refusals"]}
    shutil.rmtree(state.parent)
    sc.plant(
        f"checkpoints/{job.name}/chk-10/in-flight-state", mtime=time.time() - 60
    )  # the running job's next
    plan = plan_json(*args, expect=0)
    assert not plan["refusals"] and any(e["path"].endswith("/chk-7") for e in plan["expired"]), plan[
        "expired"
    ]


# --- F4: a job starting from an expired checkpoint ---------------------------------------------


def test_keep_last_refuses_while_a_job_is_starting(tmp_path: Path) -> None:
    """A job started a minute ago from J1/chk-7 (CLAIM, rolling back past chk-8) has no completed
    checkpoint yet: only its young files show it runs. --keep-last 1 deletes chk-7 (and the
    files only it references), which that job restores from on failover and whose shared files
    its first incremental checkpoint will reference: the plan must be blocked.

    Tracker: f4."""
    sc = Scenario("1.20.3", "claim", tmp_path)
    starting = "0123456789abcdef0123456789abcdef"
    recent = time.time() - 60
    sc.plant(f"checkpoints/{starting}/chk-1/in-flight-state", mtime=recent)
    sc.plant(f"checkpoints/{starting}/shared/new-sst", mtime=recent)
    args = (str(sc.checkpoints), *sc.rebase, *OLD, "--force", "--keep-last", "1")
    plan = plan_json(*args, expect=1)
    assert "job-starting" in {r["code"] for r in plan["refusals"]}
    apply(plan_to_file(tmp_path, *args, expect=1), expect=1)
    assert (sc.checkpoints / J1 / "chk-7" / "_metadata").exists(), (
        "the checkpoint a starting job restores from was deleted"
    )


def test_a_checkpoint_copied_under_a_name_flink_never_writes_keeps_its_files_under_keep_last(
    tmp_path: Path,
) -> None:
    """Attack: before the job subsumes chk-N, an operator keeps it as ``chk-0N`` (a zero-padded
    backup beside it; ``flink run -s …/chk-0N`` restores from it). Flink never writes that name,
    so it never subsumes it. ``--keep-last 1`` expires chk-N, but the copy's ``_metadata`` still
    references chk-N's shared files: they, the copy's ``_metadata`` and the copy's own files stay."""
    import shutil

    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0]
    chks = sorted(job.glob("chk-*/_metadata"), key=lambda m: int(m.parent.name[4:]))
    assert len(chks) >= 2
    oldest = chks[0].parent
    copy = job / f"chk-0{oldest.name[4:]}"
    shutil.copytree(oldest, copy)
    for f in copy.rglob("*"):
        os.utime(f, (T0, T0))
    exp = json.loads(
        (REPO / sc.entry["expected_dir"] / oldest.relative_to(sc.root)).with_suffix(".json").read_text()
    )
    shared = {
        "file:" + str(sc.root) + r["path"].removeprefix("file:")[len(sc.original) :]
        for r in exp["references"]
        if "/shared/" in r["path"]
    }
    assert shared, "the copied checkpoint references shared files"
    args = [str(sc.checkpoints), *sc.rebase, *OLD, "--keep-last", "1", "--force"]
    plan = plan_json(*args, expect=None)
    gone = candidates(plan)
    assert not shared & gone, sorted(shared & gone)[:3]
    assert not {sc.uri(f) for f in copy.rglob("*") if f.is_file()} & gone
    if plan["refusals"]:
        return  # refused: nothing at all is deleted
    apply(plan_to_file(tmp_path, *args))
    for uri in shared:
        assert Path(uri[5:]).exists(), uri
    ckptctl("check", str(copy), *sc.rebase)  # the copy still resolves every file it needs
