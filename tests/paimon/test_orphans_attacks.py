"""Attacks on ``ckptctl paimon orphans`` + ``ckptctl gc apply``: ways to make the plan delete a file a
retained Flink checkpoint (or the table) still needs, each on a copy of the real fixtures.

The product rule: GC fails closed. A plan that cannot see every retained checkpoint of the job that
commits to the table is blocked, never a list of deletions.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ckptctl.checkpoint.rebase import Rebase
from ckptctl.cli import app, gc_alias
from ckptctl.paimon.orphans import plan_orphans
from ckptctl.paimon.restore import run_report
from ckptctl.storage import Storage
from tests.support.paimon_scenarios import (
    commit_again,
    commit_user,
    copy_scenario,
    set_mtime,
    sync_commit_times,
)


def run(*args: str):
    return CliRunner().invoke(app, gc_alias(list(args)))


def chk(job: Path, n: int) -> Path:
    return job / f"chk-{n}"


def newest(job: Path) -> Path:
    return max(job.glob("chk-*"), key=lambda p: int(p.name[4:]))


def missing_on_restore(ck: Path, table: Path) -> set[str]:
    report = run_report(Storage(), str(ck), str(table), Rebase())
    return {x.name for f in report.forecasts for c in f.committables if c.recommitted
            for x in c.files if x.checked and x.state == "missing"}  # fmt: skip


def test_one_checkpoint_as_the_root_does_not_protect_its_siblings(tmp_path: Path) -> None:
    """--checkpoints job/chk-4 (one retained checkpoint, not the job's directory): chk-5 and chk-6,
    retained next to it, hold the uncommitted files of committables 5 and 6. A plan that protects
    only chk-4's files deletes them, and the restore of chk-6 (what Flink takes) then fails."""
    job, table = copy_scenario(tmp_path, "pending")
    assert not missing_on_restore(newest(job), table)
    plan_file = tmp_path / "plan.json"
    res = run(
        "paimon", "orphans", "--table", str(table), "--checkpoints", str(chk(job, 4)), "-o", str(plan_file)
    )
    assert res.exit_code == 1, res.output
    plan = json.loads(plan_file.read_text())
    assert plan["blocked"] and "single-checkpoint" in {r["code"] for r in plan["refusals"]}
    assert run("gc", "apply", str(plan_file), "--yes").exit_code == 1
    assert not missing_on_restore(newest(job), table)
    # the job's directory (or the root above it) is the way: everything held
    ok = plan_orphans(Storage(), str(table), [str(job)], Rebase())
    assert not ok.refusals and not ok.candidates and ok.held


def test_a_tampered_plan_cannot_narrow_the_checkpoints_to_one(tmp_path: Path) -> None:
    """The plan names the job's directory; edited to name chk-4 only, `gc apply` re-plans with it."""
    job, table = copy_scenario(tmp_path, "pending")
    plan_file = tmp_path / "plan.json"
    assert (
        run(
            "paimon", "orphans", "--table", str(table), "--checkpoints", str(job), "-o", str(plan_file)
        ).exit_code
        == 0
    )
    plan = json.loads(plan_file.read_text())
    doomed = []
    for h in plan["held"]:  # the files chk-5 and chk-6 hold, edited into candidates
        f = table / h["path"]
        doomed.append({"path": "file:" + str(f), "size": f.stat().st_size, "mtime": f.stat().st_mtime,
                       "reason": "unreferenced"})  # fmt: skip
    assert doomed
    plan["candidates"] = doomed
    plan["checkpoints"] = ["file:" + str(chk(job, 4))]
    plan_file.write_text(json.dumps(plan))
    res = run("gc", "apply", str(plan_file), "--yes")
    assert res.exit_code == 1 and "blocked" in res.output, res.output
    assert not missing_on_restore(newest(job), table)


def test_checkpoints_older_than_what_the_user_committed_are_not_the_jobs_current_ones(tmp_path: Path) -> None:
    """The job moved on: its newer checkpoints (or the savepoint it was stopped with and restarted
    from) are in another directory, and it committed identifier 5 from there. --checkpoints names
    the old directory with chk-4 only: chk-6 elsewhere holds committable 6, not committed yet, whose
    files a plan must not delete. The commit user's latest identifier (5) is above every
    checkpoint of that user under the roots (4): the roots cannot be the job's current ones."""
    job, table = copy_scenario(tmp_path, "pending")
    elsewhere = tmp_path / "savepoints" / job.name
    elsewhere.mkdir(parents=True)
    for n in (5, 6):
        shutil.move(chk(job, n), elsewhere / f"chk-{n}")
    commit_again(table, 5, time.time() - 2 * 86400)
    held_elsewhere = missing_on_restore(elsewhere / "chk-6", table)
    assert not held_elsewhere
    plan_file = tmp_path / "plan.json"
    res = run("paimon", "orphans", "--table", str(table), "--checkpoints", str(job), "-o", str(plan_file))
    assert res.exit_code == 1, res.output
    plan = json.loads(plan_file.read_text())
    assert "stale-checkpoints" in {r["code"] for r in plan["refusals"]}
    assert run("gc", "apply", str(plan_file), "--yes").exit_code == 1
    assert not missing_on_restore(elsewhere / "chk-6", table)
    # both directories named: nothing the job holds is a candidate
    both = plan_orphans(Storage(), str(table), [str(job), str(elsewhere)], Rebase())
    assert not both.refusals and not both.candidates


def _in_progress(tmp_path: Path) -> tuple[Path, Path, set[str]]:
    """pending with chk-6 still being taken (no _metadata yet): the files of committable 6 were
    written five minutes ago and no completed checkpoint names them. They are the running job's
    uncommitted data: the commit after chk-6 completes names them."""
    job, table = copy_scenario(tmp_path, "pending")
    report = run_report(Storage(), str(chk(job, 6)), str(table), Rebase())
    only6 = {x.name for c in report.forecasts[0].committables if c.identifier == 6 for x in c.files}
    (chk(job, 6) / "_metadata").unlink()
    fresh = time.time() - 300
    for p in table.rglob("*"):
        if p.name in only6:
            os.utime(p, (fresh, fresh))
    assert only6
    return job, table, only6


def test_a_cut_off_within_the_running_checkpoint_is_refused(tmp_path: Path) -> None:
    """Paimon's only guard for files being written is older_than; a cut-off of minutes lets the
    plan delete the files of the checkpoint being taken. ckptctl keeps a floor under it."""
    job, table, only6 = _in_progress(tmp_path)
    res = run("paimon", "orphans", "--table", str(table), "--checkpoints", str(job), "--older-than", "2m",
              "-o", str(tmp_path / "plan.json"))  # fmt: skip
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert "--older-than" in res.output
    instant = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 120))
    res = run("paimon", "orphans", "--table", str(table), "--checkpoints", str(job), "--older-than", instant)
    assert res.exit_code == 2, res.output
    assert all(any(p.name == n for p in table.rglob("*")) for n in only6)


def test_a_tampered_cut_off_cannot_reach_the_running_checkpoint(tmp_path: Path) -> None:
    job, table, only6 = _in_progress(tmp_path)
    plan_file = tmp_path / "plan.json"
    res = run("paimon", "orphans", "--table", str(table), "--checkpoints", str(job), "-o", str(plan_file))
    assert res.exit_code == 0, res.output
    plan = json.loads(plan_file.read_text())
    assert not {c["path"].rpartition("/")[2] for c in plan["candidates"]} & only6
    plan["cutoff"] = time.time() - 60
    for n in only6:  # the files of the running checkpoint, edited in as candidates
        f = next(p for p in table.rglob(n))
        plan["candidates"].append({"path": "file:" + str(f), "size": f.stat().st_size, "mtime": f.stat().st_mtime,
                                   "reason": "unreferenced"})  # fmt: skip
    plan_file.write_text(json.dumps(plan))
    res = run("gc", "apply", str(plan_file), "--yes")
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert all(any(p.name == n for p in table.rglob("*")) for n in only6)


def _user_b_elsewhere(table: Path, user_a: str, where: str) -> None:
    """Job B's commits (snapshots 1-4 of the ``pending`` table, by its commit user) kept where the
    main branch's snapshots do not show them, and main's latest snapshot by job A: on a branch
    (``branch/branch-b``: a job writing to a branch), in ``changelog/`` (snapshots expired, a longer
    changelog retention) or in a tag (snapshots expired, snapshot 4 tagged)."""
    snaps = table / "snapshot"
    if where == "branch":
        branch = table / "branch" / "branch-b"
        branch.mkdir(parents=True)
        shutil.copytree(table / "schema", branch / "schema")
        shutil.copytree(snaps, branch / "snapshot")
        for f in snaps.glob("snapshot-*"):  # main: the same snapshots, committed by job A
            f.write_text(json.dumps({**json.loads(f.read_text()), "commitUser": user_a}))
        return
    fifth = {
        **json.loads((snaps / "snapshot-4").read_text()),
        "id": 5,
        "commitUser": user_a,
        "commitIdentifier": 5,
    }
    if where == "changelog":
        (table / "changelog").mkdir()
        for i in range(1, 5):
            shutil.move(snaps / f"snapshot-{i}", table / "changelog" / f"changelog-{i}")
        (table / "changelog" / "EARLIEST").write_text("1")
        (table / "changelog" / "LATEST").write_text("4")
    else:
        (table / "tag").mkdir()
        shutil.copy(snaps / "snapshot-4", table / "tag" / "tag-daily")
        for i in range(1, 5):
            (snaps / f"snapshot-{i}").unlink()
    (snaps / "snapshot-5").write_text(json.dumps(fifth))
    (snaps / "LATEST").write_text("5")
    (snaps / "EARLIEST").write_text("5")


@pytest.mark.parametrize("where", ["branch", "changelog", "tag"])
def test_a_commit_user_main_snapshots_do_not_show_is_still_checked(tmp_path: Path, where: str) -> None:
    """A red-team helper's attack: the commit users checked against --checkpoints were those of the
    main branch's snapshots only. Job B (the ``pending`` scenario: chk-6 holds committables 5 and 6,
    not committed) writing to a branch, or whose snapshots expired while changelogs or a tag kept
    them, and only job A's checkpoints named: the plan was not blocked and gc apply deleted the 8
    files chk-6 re-commits on restore. Every snapshot, tag and changelog of every branch counts."""
    job_b, table = copy_scenario(tmp_path / "b", "pending")
    job_a, table_a = copy_scenario(tmp_path / "a", "committed")
    user_a = json.loads((table_a / "snapshot" / "snapshot-1").read_text())["commitUser"]
    _user_b_elsewhere(table, user_a, where)
    old = time.time() - 2 * 86400
    for p in table.rglob("*"):
        os.utime(p, (old, old))
    sync_commit_times(table)
    report = run_report(Storage(), str(newest(job_b)), str(table), Rebase())
    needed = {x.name for f in report.forecasts for c in f.committables if c.recommitted for x in c.files}
    assert needed
    for p in table.rglob("*"):  # B flushed them hours before the table's latest commit
        if p.name in needed:
            os.utime(p, (old - 3 * 3600, old - 3 * 3600))
    plan = plan_orphans(Storage(), str(table), [str(job_a)], Rebase(), older_than=86400)
    assert needed & {c.path.rpartition("/")[2] for c in plan.candidates}  # what a plan not blocked deleted
    assert "unprotected-commit-user" in {r["code"] for r in plan.refusals}, (
        plan.refusals
    )  # blocked: nothing goes


def test_a_stand_in_mtime_is_no_age_for_paimon_orphans(tmp_path: Path) -> None:
    """Paimon's cleaner takes an orphan whose mtime is before the cut-off; a store reporting a
    stand-in for a time it lacks (0, 1, FAT's 1980) makes a data file written a second ago -- by a
    checkpoint in progress that names it nowhere yet -- look decades old, past --min-age too. The
    plan keeps it as ``undated``; `gc apply` leaves it. An orphan really three days old goes."""
    from tests.support.gc_support import STAND_INS

    job, table = copy_scenario(tmp_path, "pending")
    bucket = next(table.glob("part=*/bucket-*"))
    old = time.time() - 3 * 86400  # a day before the table's latest commit
    planted = {}
    for name, t in {**STAND_INS, "three-days-old": old}.items():
        f = bucket / f"data-{name}-0.orc"
        f.write_bytes(os.urandom(64))
        os.utime(f, (t, t))
        planted[name] = f
    plan_file = tmp_path / "plan.json"
    res = run("paimon", "orphans", "--table", str(table), "--checkpoints", str(job), "-o", str(plan_file))
    assert res.exit_code == 0, res.output
    plan = json.loads(plan_file.read_text())
    undated = {Path(u["path"]).name for u in plan["undated"]}
    assert undated == {planted[n].name for n in STAND_INS}
    assert "file:" + str(planted["three-days-old"]) in {c["path"] for c in plan["candidates"]}
    assert run("gc", "apply", str(plan_file), "--yes").exit_code == 0
    assert all(planted[n].exists() for n in STAND_INS) and not planted["three-days-old"].exists()
    assert not missing_on_restore(newest(job), table)


HOUR = 3600.0


def _files_of(ck: Path, table: Path, identifiers: set[int]) -> set[str]:
    """The names of the files the committables ``identifiers`` of checkpoint ``ck`` name."""
    report = run_report(Storage(), str(ck), str(table), Rebase())
    return {
        x.name
        for f in report.forecasts
        for c in f.committables
        if c.identifier in identifiers
        for x in c.files
    }


def _on_disk(table: Path, names: set[str]) -> list[Path]:
    return [p for p in table.rglob("*") if p.name in names]


def _old_orphan(table: Path, age: float) -> Path:
    """A real data file of the table copied under a name no snapshot or checkpoint uses, ``age``
    seconds old: the leftover of a commit that failed long ago, which the plan must still delete."""
    src = next(table.glob("part=*/bucket-*/data-*.avro"))
    dst = src.with_name(f"data-{uuid.uuid4()}-0.avro")
    shutil.copy(src, dst)
    set_mtime([dst], time.time() - age)
    return dst


def _checkpoint_being_taken(
    tmp_path: Path, newest_age: float, flushed_age: float
) -> tuple[Path, Path, Path, set[str]]:
    """``pending``'s job still running: chk-6 is being taken (moved aside to ``aside``: it appears
    when it completes), its newest completed checkpoint chk-5 is ``newest_age`` seconds old, and the
    files its writer flushed for checkpoint 6 (the committable 6 chk-6 will name) ``flushed_age``.
    Returns (job, table, aside, those files' names)."""
    job, table = copy_scenario(tmp_path, "pending")
    flushed = _files_of(chk(job, 6), table, {6})
    assert len(flushed) == 4
    aside = tmp_path / "in-progress" / "chk-6"
    aside.parent.mkdir()
    shutil.move(chk(job, 6), aside)
    set_mtime([*chk(job, 4).rglob("*"), chk(job, 4)], time.time() - newest_age - 600)
    set_mtime([*chk(job, 5).rglob("*"), chk(job, 5)], time.time() - newest_age)
    set_mtime(_on_disk(table, flushed), time.time() - flushed_age)
    return job, table, aside, flushed


def test_a_writer_whose_checkpoints_fail_is_refused(tmp_path: Path) -> None:
    """Issue 45, row 3: the writing job runs but its checkpoints fail: its newest retained
    checkpoint is 2 h old, its writer flushed the files of the next checkpoint 100 min ago.
    `paimon orphans --older-than 1h` took them (only the one-hour floor protected files in flight,
    though the command read the job's checkpoints), `gc apply` deleted them, and the restore of the
    checkpoint that then completed fails. A streaming commit user whose newest checkpoint is older
    than the cut-off is refused, in one line naming it and that checkpoint."""
    job, table, aside, flushed = _checkpoint_being_taken(tmp_path, newest_age=2 * HOUR, flushed_age=100 * 60)
    user = commit_user(table)
    # an older savepoint of the job copied next to them today: a copy's time is not the job's last checkpoint
    savepoints = tmp_path / "savepoints"
    copy = shutil.copytree(chk(job, 4), savepoints / "savepoint-0a1b2c-0123456789ab")
    set_mtime([copy, *copy.iterdir()], time.time() - 60)
    plan_file = tmp_path / "plan.json"
    res = run("paimon", "orphans", "--table", str(table), "--checkpoints", str(job), "--checkpoints", str(savepoints),
              "--older-than", "1h", "-o", str(plan_file))  # fmt: skip
    assert run("gc", "apply", str(plan_file), "--yes").exit_code == 1
    shutil.move(aside, chk(job, 6))  # the checkpoint completes
    assert not missing_on_restore(chk(job, 6), table)
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    plan = json.loads(plan_file.read_text())
    (refusal,) = [r for r in plan["refusals"] if r["code"] == "failing-checkpoints"]
    assert (
        user in refusal["message"]
        and str(chk(job, 5)) in refusal["message"]
        and "\n" not in refusal["message"]
    )
    assert not {Path(c["path"]).name for c in plan["candidates"]} & flushed
    # stopped for good: a cut-off before its newest checkpoint less --margin plans again
    res = run("paimon", "orphans", "--table", str(table), "--checkpoints", str(job), "--older-than", "3h1m",
              "-o", str(plan_file))  # fmt: skip
    assert res.exit_code == 0, res.output


def test_files_flushed_while_a_slow_checkpoint_completes_are_in_flight(tmp_path: Path) -> None:
    """Issue 45, row 3, slow checkpoints: chk-5 took long to complete (its _metadata landed 2 h
    ago) and the writer flushed files for checkpoint 6 in the meantime, 2 h 45 min ago. With
    `--older-than 150m` the job's newest checkpoint is after the cut-off, so nothing is refused, but
    those files are older than the cut-off and named by no completed checkpoint. gc's in-flight
    rule: files not older than the writer's newest checkpoint less --margin are kept. Another job
    (``committed``'s, healthy: checkpoints minutes old) commits to the same table, so the table's
    latest commit is a minute old and does not protect them."""
    job, table, aside, flushed = _checkpoint_being_taken(tmp_path, newest_age=2 * HOUR, flushed_age=165 * 60)
    other_job, other_table = copy_scenario(tmp_path / "other", "committed", checkpointed=300)
    commit_again(table, 5, time.time() - 60, user=commit_user(other_table))
    orphan = _old_orphan(table, 3 * 86400)
    plan_file = tmp_path / "plan.json"
    res = run("paimon", "orphans", "--table", str(table), "--checkpoints", str(job), "--checkpoints", str(other_job),
              "--older-than", "150m", "-o", str(plan_file))  # fmt: skip
    assert res.exit_code == 0, res.output
    plan = json.loads(plan_file.read_text())
    assert {Path(f["path"]).name for f in plan["in_flight"]} == flushed
    assert [Path(c["path"]).name for c in plan["candidates"]] == [orphan.name]
    # --margin is gc's: a smaller one reaches them
    res = run("paimon", "orphans", "--table", str(table), "--checkpoints", str(job), "--checkpoints", str(other_job),
              "--older-than", "150m", "--margin", "30m", "-o", str(tmp_path / "smaller.json"))  # fmt: skip
    assert res.exit_code == 0, res.output
    smaller = json.loads((tmp_path / "smaller.json").read_text())
    assert {Path(c["path"]).name for c in smaller["candidates"]} == flushed | {orphan.name}
    res = run(
        "paimon",
        "orphans",
        "--table",
        str(table),
        "--checkpoints",
        str(job),
        "--margin",
        "2026-01-01T00:00:00Z",
    )
    assert res.exit_code == 2 and "--margin" in res.output and "Traceback" not in res.output
    assert run("gc", "apply", str(plan_file), "--yes").exit_code == 0
    shutil.move(aside, chk(job, 6))  # the checkpoint completes
    assert not orphan.exists() and not missing_on_restore(chk(job, 6), table)


def test_a_checkpoint_time_ahead_of_the_storage_clock_dates_nothing(tmp_path: Path) -> None:
    """The newest checkpoint's _metadata is dated a day ahead (copied with another clock's times):
    its time less --margin would lie after every file, so nothing would look in flight. It dates
    nothing: every Paimon orphan is kept, and a warning names the checkpoint."""
    job, table, aside, flushed = _checkpoint_being_taken(tmp_path, newest_age=-86400, flushed_age=100 * 60)
    orphan = _old_orphan(table, 3 * 86400)
    plan_file = tmp_path / "plan.json"
    res = run("paimon", "orphans", "--table", str(table), "--checkpoints", str(job), "--older-than", "1h",
              "-o", str(plan_file))  # fmt: skip
    assert res.exit_code == 0, res.output
    plan = json.loads(plan_file.read_text())
    assert not plan["candidates"] and flushed | {orphan.name} <= {
        Path(f["path"]).name for f in plan["in_flight"]
    }
    assert any(str(chk(job, 5)) in w for w in plan["warnings"])
    assert run("gc", "apply", str(plan_file), "--yes").exit_code == 0
    shutil.move(aside, chk(job, 6))
    assert orphan.exists() and not missing_on_restore(chk(job, 6), table)


def _second_writer(tmp_path: Path, when: str) -> tuple[Path, Path, Path, set[str], Path]:
    """Issue 45, row 4: job B (``pending``'s: chk-6 holds committables 5 and 6, eight data files)
    wrote to a table whose every commit is job A's (``committed``'s, running: checkpoints 20 min
    old): B's commits all failed (a conflict, lost notifications) and B was stopped, so no
    snapshot, tag or changelog names B. A's latest commit is 3 h old; B flushed its files
    ``when``: 2.5 h ago (after A's latest commit), in the same second, or A's latest commit has a
    stand-in time (1, before 2016: no time at all) or one a day ahead of the storage's clock, or the snapshot files were copied 10 min ago (their
    ``timeMillis``, the committer's, still say 3 h). Returns (A's job, B's job, table, B's files, an
    orphan three days old)."""
    job_b, table = copy_scenario(tmp_path / "b", "pending")
    job_a, table_a = copy_scenario(tmp_path / "a", "committed", checkpointed=20 * 60)
    user_a = commit_user(table_a)
    for f in (table / "snapshot").glob("snapshot-*"):
        f.write_text(json.dumps({**json.loads(f.read_text()), "commitUser": user_a}))
    b_files = _files_of(newest(job_b), table, {5, 6})
    assert len(b_files) == 8
    committed = time.time() - 3 * HOUR
    stamp = {
        "commit-undated": 1.0,
        "commit-ahead": time.time() + 86400,
        "commit-copied": time.time() - 600,
    }.get(when, committed)
    set_mtime((table / "snapshot").iterdir(), stamp)
    sync_commit_times(table, committed)  # the committer's clock: right
    set_mtime(_on_disk(table, b_files), time.time() - 2.5 * HOUR if when == "after" else committed)
    return job_a, job_b, table, b_files, _old_orphan(table, 3 * 86400)


@pytest.mark.parametrize("when", ["after", "same-second", "commit-undated", "commit-ahead", "commit-copied"])
def test_files_of_a_writer_the_table_never_saw_commit_are_kept(tmp_path: Path, when: str) -> None:
    """Issue 45, row 4: `paimon orphans --checkpoints <A>` took B's eight files (no commit names
    them, no scanned checkpoint does) and `gc apply` deleted them: B's restore then fails. Data,
    changelog and index files written after the table's latest commit less --margin are kept: no
    commit could name them yet, so only a writer whose checkpoints are not scanned (or a running
    one) holds them. A latest commit without a usable time dates nothing: every such file is kept."""
    job_a, job_b, table, b_files, orphan = _second_writer(tmp_path, when)
    assert not missing_on_restore(newest(job_b), table)
    plan_file = tmp_path / "plan.json"
    res = run("paimon", "orphans", "--table", str(table), "--checkpoints", str(job_a), "--older-than", "1h",
              "-o", str(plan_file))  # fmt: skip
    assert res.exit_code == 0, res.output
    assert run("gc", "apply", str(plan_file), "--yes").exit_code == 0
    assert not missing_on_restore(newest(job_b), table)
    plan = json.loads(plan_file.read_text())
    kept = {Path(f["path"]).name for f in plan["after_last_commit"]}
    assert b_files <= kept
    if when in ("commit-undated", "commit-ahead"):
        assert orphan.exists() and orphan.name in kept and "snapshot/snapshot-4" in " ".join(plan["warnings"])
    else:
        assert not orphan.exists() and kept == b_files
        assert plan["latest_commit"]["snapshot"] == "snapshot/snapshot-4"


def test_on_s3_files_of_a_writer_the_table_never_saw_commit_are_kept(s3_server, tmp_path: Path) -> None:
    """Row 4 on S3 (moto, loopback), where an object's time is when it was uploaded: the table's
    data files, then its commits (all job A's), then the eight files job B flushed, then A's
    checkpoints, each a second apart. Nothing B flushed after the latest commit goes; an orphan
    older than that commit does."""
    from ckptctl.storage import StorageOptions
    from tests.support.s3_clock import next_second

    job_a, job_b, table, b_files, orphan = _second_writer(tmp_path, "after")
    bucket = "ckptctl-paimon-row4"
    s3_server.create_bucket(bucket)
    fs = s3_server.filesystem()
    base = f"{bucket}/lake/events"

    def upload(files, under: Path, to: str) -> None:
        for p in sorted(files):
            if p.is_file():
                fs.pipe_file(f"{to}/{p.relative_to(under).as_posix()}", p.read_bytes())

    data = [p for p in table.glob("part=*/bucket-*/*") if p.name not in b_files]
    assert orphan in data
    upload(data, table, base)
    next_second()
    sync_commit_times(table, time.time())  # committed now, after those files
    upload(
        [p for p in table.rglob("*") if not p.relative_to(table).as_posix().startswith("part=")], table, base
    )
    next_second()
    upload([p for p in table.rglob("*") if p.name in b_files], table, base)
    next_second()
    checkpointed = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    upload(job_a.rglob("*"), job_a.parent, f"{bucket}/ck")
    next_second()
    endpoint = ["--s3-endpoint", s3_server.endpoint]
    orphans = ["paimon", "orphans", "--table", f"s3://{base}", "--checkpoints", f"s3://{bucket}/ck/{job_a.name}",
               "--older-than", checkpointed, "--min-age", "0s", *endpoint]  # fmt: skip
    plan_file = tmp_path / "plan.json"
    res = run(*orphans, "-o", str(plan_file))
    assert res.exit_code == 0, res.output
    assert not {Path(c["path"]).name for c in json.loads(plan_file.read_text())["candidates"]} & b_files
    res = run(*orphans, "--margin", "0s", "-o", str(plan_file))
    assert res.exit_code == 0, res.output
    plan = json.loads(plan_file.read_text())
    assert [Path(c["path"]).name for c in plan["candidates"]] == [orphan.name]
    assert {Path(f["path"]).name for f in plan["after_last_commit"]} == b_files
    assert run("gc", "apply", str(plan_file), "--yes", *endpoint).exit_code == 0
    left = {k.rpartition("/")[2] for k in fs.find(base)}
    assert b_files <= left and orphan.name not in left
    storage = Storage(StorageOptions.from_env(s3_endpoint=s3_server.endpoint))
    report = run_report(storage, str(newest(job_b)), f"s3://{base}", Rebase())
    recommitted = [x for f in report.forecasts for c in f.committables if c.recommitted for x in c.files]
    assert {x.name for x in recommitted} == b_files and all(x.state != "missing" for x in recommitted)
