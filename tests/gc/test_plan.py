"""gc on real Flink fixtures, and one test per way orphan GC has deleted live data elsewhere.

Ground truth for what is referenced is Flink's own reader (fixtures/expected), never ckptctl.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.gc_plans import apply, plan_to_file
from tests.support.gc_support import DAY, STAND_INS, T0, Scenario, ckptctl, plan_json

OLD = ["--older-than", "1d", "--margin", "10m"]


@pytest.mark.parametrize(
    ("version", "scenario"), [("1.20.3", "claim"), ("2.2.0", "claim"), ("2.2.0", "unaligned")]
)
def test_plan_is_exactly_the_orphans_the_guards_allow(tmp_path: Path, version: str, scenario: str) -> None:
    sc = Scenario(version, scenario, tmp_path)
    job = sc.jobs()[0]
    planted = {
        sc.uri(sc.plant(f"checkpoints/{job.name}/shared/planted-old-sst")),
        sc.uri(sc.plant(f"checkpoints/{job.name}/taskowned/planted-old-taskowned")),
        sc.uri(sc.plant(f"checkpoints/{job.name}/chk-999/planted-in-aborted-checkpoint")),
    }
    young = sc.uri(sc.plant(f"checkpoints/{job.name}/shared/planted-in-flight", mtime=time.time()))
    plan = plan_json(str(sc.checkpoints), *sc.rebase, *OLD, "--force")
    candidates = {c["path"] for c in plan["candidates"]}
    # the fixture's genuine orphans (by Flink's dumps) are at T0, older than every _metadata
    expected = planted | sc.unreferenced_by_flink()
    assert candidates == expected
    assert young in {p["path"] for p in plan["protected"]}
    assert not candidates & sc.referenced_by_flink()
    assert plan["live_files"] >= len(sc.referenced_by_flink())
    for c in plan["candidates"]:
        assert set(c) >= {"path", "size", "mtime", "reason"} and c["path"].startswith("file:/")

    # apply deletes exactly the candidates and never a file Flink references
    plan_file = tmp_path / "plan.json"
    ckptctl("gc", "plan", str(sc.checkpoints), *sc.rebase, *OLD, "--force", "-o", str(plan_file))
    result = json.loads(ckptctl("gc", "apply", str(plan_file), "--yes", "--json").stdout)
    assert {d["path"] for d in result["deleted"]} == expected
    for uri in sc.referenced_by_flink():
        assert Path(uri[5:]).exists(), f"live file deleted: {uri}"
    for uri in expected:
        assert not Path(uri[5:]).exists()
    assert not (job / "chk-999").exists(), "emptied incomplete checkpoint directory is removed"
    manifest = [
        json.loads(line) for line in Path(str(plan_file) + ".manifest.jsonl").read_text().splitlines()
    ]
    assert {m["path"] for m in manifest if "path" in m} == expected
    # a second run finds nothing more to delete
    again = plan_json(str(sc.checkpoints), *sc.rebase, *OLD)
    assert again["candidate_files"] == 0


def test_cancellation_orphans_newer_than_last_checkpoint_are_kept(tmp_path: Path) -> None:
    """Files uploaded after the newest retained checkpoint may belong to an in-flight one."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    orphans = sc.unreferenced_by_flink()
    assert orphans
    for uri in orphans:
        os.utime(uri[5:], (T0 + 2 * 3600, T0 + 2 * 3600))  # after the last _metadata (T0 + 1h)
    plan = plan_json(str(sc.checkpoints), *sc.rebase, *OLD)
    assert plan["candidate_files"] == 0
    kept = {p["path"]: p["reason"] for p in plan["protected"]}
    assert all(kept[u] == "in-flight" for u in orphans)


def test_moved_directory_needs_rebase(tmp_path: Path) -> None:
    sc = Scenario("1.20.3", "claim", tmp_path)
    result = ckptctl("gc", "plan", str(sc.checkpoints), *OLD, expect=1)
    assert "were written at another location" in result.stderr and "--rebase" in result.stderr
    # one refusal per mapping, not one per checkpoint (a moved root has dozens)
    plan = plan_json(str(sc.checkpoints), *OLD, expect=1)
    moved = [r for r in plan["refusals"] if r["code"] == "moved-directory"]
    assert len(moved) == 1 and f"{len(plan['retained'])} checkpoints" in moved[0]["message"]


def test_gc_console_names_the_largest_orphans_and_a_blocked_plan_is_not_to_apply(tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0].name
    big = sc.plant(f"checkpoints/{job}/shared/big-orphan", size=50_000)
    for i in range(12):
        sc.plant(f"checkpoints/{job}/shared/small-{i:02d}", size=10 + i)
    out = ckptctl(
        "gc", "plan", str(sc.checkpoints), *sc.rebase, *OLD, "--force", env={"COLUMNS": "200"}
    ).stdout
    assert "largest orphans" in out and big.name in out and "small-11" in out and "small-00" not in out
    blocked = tmp_path / "blocked.json"
    text = ckptctl("gc", "plan", str(sc.checkpoints), *OLD, "-o", str(blocked), expect=1).stdout
    assert "apply with" not in text and "can never be applied" in text
    missing_dir = tmp_path / "no" / "such" / "plan.json"
    err = ckptctl(
        "gc", "plan", str(sc.checkpoints), *sc.rebase, *OLD, "-o", str(missing_dir), expect=2
    ).stderr
    assert "no such directory" in err and "Traceback" not in err


def test_sibling_prefix_is_not_inside_the_root(tmp_path: Path) -> None:
    """job-a must never match job-ab: listing and containment compare whole path segments."""
    sc = Scenario("1.20.3", "claim", tmp_path)
    jobs = sc.jobs()
    sibling = jobs[0].with_name(jobs[0].name + "b")
    (sibling / "shared").mkdir(parents=True)
    victim = sibling / "shared" / "old-file"
    victim.write_bytes(b"x")
    os.utime(victim, (T0 - DAY, T0 - DAY))
    # scan only the first job: the sibling's file must not appear anywhere in the plan
    rebase = ["--rebase", f"{sc.original}/checkpoints/{jobs[0].name}={jobs[0]}"]
    plan = plan_json(str(jobs[0]), *rebase, *OLD, "--allow-external", "--force", expect=0)
    everything = json.dumps(plan)
    assert str(sibling) + "/" not in everything
    ckptctl(
        "gc",
        "plan",
        str(jobs[0]),
        *rebase,
        *OLD,
        "-o",
        str(tmp_path / "p.json"),
        "--allow-external",
        "--force",
    )
    ckptctl("gc", "apply", str(tmp_path / "p.json"), "--yes")
    assert victim.exists()


def test_claim_cross_job_references_stay_live(tmp_path: Path) -> None:
    """Job 2 (restored in CLAIM mode) references job 1's shared files; expiring job 1's checkpoints
    with --keep-last must keep every file job 2's retained checkpoints still borrow."""
    sc = Scenario("1.20.3", "claim", tmp_path)
    refs = json.loads(ckptctl("refs", "--format", "json", str(sc.checkpoints), *sc.rebase).stdout)
    keep = 2
    ids: dict[str, set[int]] = {}
    for r in refs:
        ids.setdefault(r["job_id"], set()).add(r["checkpoint_id"])
    retained = {(job, cid) for job, cids in ids.items() for cid in sorted(cids)[-keep:]}
    borrowed = {
        r["path"] for r in refs
        if (r["job_id"], r["checkpoint_id"]) in retained and f"/{r['job_id']}/" not in r["path"] and "/shared/" in r["path"]
    }  # fmt: skip
    assert borrowed, "the fixture's retained CLAIM checkpoints borrow files of the original job"
    plan = plan_json(str(sc.checkpoints), *sc.rebase, *OLD, "--keep-last", str(keep), "--force")
    candidates = {c["path"] for c in plan["candidates"]}
    still_needed = {r["path"] for r in refs if (r["job_id"], r["checkpoint_id"]) in retained}
    assert not candidates & still_needed
    assert any(c["reason"] == "expired-checkpoint" for c in plan["candidates"])
    # the expired checkpoints' own files that nobody else needs do go
    expired_only = {
        r["path"] for r in refs if (r["job_id"], r["checkpoint_id"]) not in retained
    } - still_needed
    assert expired_only and expired_only <= candidates


def test_partially_live_merged_files_are_reported_not_deleted(tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "filemerging", tmp_path)
    plan = plan_json(str(sc.checkpoints), *sc.rebase, *OLD, "--keep-last", "1", "--force")
    assert plan["partially_live"], "file merging leaves dead segments in physical files"
    candidates = {c["path"] for c in plan["candidates"]}
    for p in plan["partially_live"]:
        assert p["path"] not in candidates
        assert 0 < p["dead_bytes"] < p["size"] and p["live_bytes"] + p["dead_bytes"] == p["size"]
    assert plan["dead_bytes_in_partially_live_files"] == sum(p["dead_bytes"] for p in plan["partially_live"])


def test_a_stand_in_mtime_is_no_age(tmp_path: Path) -> None:
    """A file just written (referenced by no checkpoint yet: in flight) whose store reports a
    stand-in for its time looks decades old: past --older-than and the in-flight margin, it was a
    candidate. Such a time is no age: kept as "no-mtime", and ``gc apply`` leaves it. An orphan of
    2016's first second is old and collected (the guard is not "anything old")."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    shared = f"checkpoints/{sc.jobs()[0].name}/shared"
    stand_ins = {sc.uri(sc.plant(f"{shared}/{name}", mtime=t)): name for name, t in STAND_INS.items()}
    first_age = sc.uri(sc.plant(f"{shared}/written-2016-01-01", mtime=1_451_606_400))
    plan_file = plan_to_file(tmp_path, str(sc.checkpoints), *sc.rebase, *OLD, "--force")
    plan = json.loads(plan_file.read_text())
    kept = {p["path"]: p["reason"] for p in plan["protected"]}
    assert {kept.get(path) for path in stand_ins} == {"no-mtime"}, kept
    assert first_age in {c["path"] for c in plan["candidates"]}
    apply(plan_file)
    assert all(Path(path.removeprefix("file:")).exists() for path in stand_ins)
    assert not Path(first_age.removeprefix("file:")).exists()


def test_missing_mtime_is_kept(tmp_path: Path) -> None:
    """Object stores can list a file without a modification time: never a candidate then."""
    from ckptctl.gc import build_plan
    from ckptctl.storage import Storage

    sc = Scenario("2.2.0", "basic", tmp_path)
    orphan = sc.uri(sc.plant(f"checkpoints/{sc.jobs()[0].name}/shared/no-mtime"))

    class NoMtimeStorage(Storage):
        def list_files(self, uri, notes=None):
            for f in super().list_files(uri, notes):
                yield f._replace(mtime=None) if f.uri == orphan else f

    plan = build_plan(
        NoMtimeStorage(),
        sc.gc_options(),
    )
    assert orphan not in {c.path for c in plan.candidates}
    assert {p.path: p.reason for p in plan.protected}[orphan] == "no-mtime"


def test_future_cutoff_is_refused(tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    result = ckptctl(
        "gc", "plan", str(sc.checkpoints), *sc.rebase, "--older-than", "2099-01-01T00:00:00Z", expect=2
    )
    assert "in the future" in result.stderr
    result = ckptctl("gc", "plan", str(sc.checkpoints), *sc.rebase, "--older-than", "-5h", expect=2)


def test_an_iso_older_than_is_the_cutoff_itself(tmp_path: Path) -> None:
    """--older-than 2026-…Z is an instant compared with file times as it is; it used to be turned
    into an age with this machine's clock, then back with the storage's (issue 19, also seen)."""
    import datetime

    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0].name
    older = sc.plant(f"checkpoints/{job}/shared/before-cutoff", mtime=T0 - 7200)
    newer = sc.plant(f"checkpoints/{job}/shared/after-cutoff", mtime=T0 - 1800)
    instant = float(round(T0 - 3600))
    iso = datetime.datetime.fromtimestamp(instant, datetime.UTC).isoformat().replace("+00:00", "Z")
    plan = plan_json(str(sc.checkpoints), *sc.rebase, "--older-than", iso, "--margin", "10m", "--force")
    assert plan["cutoff"] == instant
    assert sc.uri(older) in {c["path"] for c in plan["candidates"]}
    assert {p["path"]: p["reason"] for p in plan["protected"]}[sc.uri(newer)] == "young"
    assert plan["options"]["older_than_at"] == instant
    err = ckptctl("gc", "plan", str(sc.checkpoints), *sc.rebase, "--margin", iso, expect=2).stderr
    assert "--margin expects a duration" in err


def test_file_from_the_future_blocks_the_plan(tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    sc.plant(f"checkpoints/{sc.jobs()[0].name}/shared/from-the-future", mtime=time.time() + 30 * DAY)
    result = ckptctl("gc", "plan", str(sc.checkpoints), *sc.rebase, *OLD, "--force", expect=1)
    assert "modification time in the future" in result.stderr


def test_empty_live_set_is_refused(tmp_path: Path) -> None:
    job = tmp_path / "root" / ("ab" * 16)
    (job / "shared").mkdir(parents=True)
    for i in range(3):
        f = job / "shared" / f"f{i}"
        f.write_bytes(b"x" * 10)
        os.utime(f, (T0, T0))
    (job / "chk-1").mkdir()  # Flink evidence: the directory of a checkpoint that never completed
    os.utime(job / "chk-1", (T0 + 3600, T0 + 3600))  # begun long ago, after those files (else: in flight)
    # a dead job is kept unless collected explicitly; collected, an empty live set still refuses
    kept = json.loads(ckptctl("gc", "plan", "--json", str(tmp_path / "root"), *OLD, "--force").stdout)
    assert not kept["candidates"] and {p["reason"] for p in kept["protected"]} == {"dead-job"}
    assert [d["collected"] for d in kept["dead_jobs"]] == [False]
    result = ckptctl("gc", "plan", str(tmp_path / "root"), *OLD, "--force", "--collect-dead-jobs", expect=1)
    assert "live set is empty" in result.stderr


@pytest.mark.parametrize("damage", ["truncate", "version"])
def test_unreadable_metadata_blocks_everything(tmp_path: Path, damage: str) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    sc.plant(f"checkpoints/{sc.jobs()[0].name}/shared/planted-old-sst")
    meta = sorted(sc.checkpoints.rglob("_metadata"))[0]
    data = meta.read_bytes()
    meta.write_bytes(data[:300] if damage == "truncate" else data[:4] + b"\x00\x00\x00\x09" + data[8:])
    result = ckptctl("gc", "plan", str(sc.checkpoints), *sc.rebase, *OLD, "--force", expect=1)
    assert "unreadable _metadata" in result.stderr and str(meta.parent.name) in result.stderr
    assert "byte " in result.stderr


def test_in_flight_checkpoint_is_protected(tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0].name
    now = time.time()
    inflight = [sc.uri(sc.plant(f"checkpoints/{job}/chk-1000/{n}", mtime=now)) for n in ("a", "b")]
    uploading = sc.uri(sc.plant(f"checkpoints/{job}/shared/uploading-sst", mtime=now))
    plan = plan_json(str(sc.checkpoints), *sc.rebase, "--older-than", "0s", "--margin", "10m", "--force")
    kept = {p["path"] for p in plan["protected"]}
    assert set(inflight) | {uploading} <= kept


def test_external_references_block_unless_allowed(tmp_path: Path) -> None:
    """Scanning only one job of a CLAIM pair: the other job's files are outside the roots."""
    sc = Scenario("1.20.3", "claim", tmp_path)
    refs = json.loads(ckptctl("refs", "--format", "json", str(sc.checkpoints), *sc.rebase).stdout)
    borrower = next(
        r["job_id"] for r in refs if f"/{r['job_id']}/" not in r["path"] and "/shared/" in r["path"]
    )
    job_dir = sc.checkpoints / borrower
    rebase = ["--rebase", f"{sc.original}={sc.root}"]
    result = ckptctl("gc", "plan", str(job_dir), *rebase, *OLD, "--force", expect=1)
    assert "outside the scanned roots" in result.stderr
    plan = plan_json(str(job_dir), *rebase, *OLD, "--force", "--allow-external")
    assert plan["external"] and all(
        not e["path"].startswith("file:" + str(job_dir) + "/") for e in plan["external"]
    )


def test_max_delete_fraction(tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0].name
    for i in range(200):
        sc.plant(f"checkpoints/{job}/shared/orphan-{i}")
    result = ckptctl("gc", "plan", str(sc.checkpoints), *sc.rebase, *OLD, expect=1)
    assert "--max-delete-fraction" in result.stderr
    plan_json(str(sc.checkpoints), *sc.rebase, *OLD, "--max-delete-fraction", "0.99")


def test_apply_revalidates(tmp_path: Path) -> None:
    """A candidate that changed (rewritten) or vanished after the plan is skipped, not deleted."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0].name
    a = sc.plant(f"checkpoints/{job}/shared/a")
    b = sc.plant(f"checkpoints/{job}/shared/b")
    c = sc.plant(f"checkpoints/{job}/shared/c")
    plan_file = tmp_path / "plan.json"
    ckptctl("gc", "plan", str(sc.checkpoints), *sc.rebase, *OLD, "--force", "-o", str(plan_file))
    b.write_bytes(b"rewritten by a new upload")
    c.unlink()
    result = json.loads(ckptctl("gc", "apply", str(plan_file), "--yes", "--json").stdout)
    deleted = {d["path"] for d in result["deleted"]}
    assert sc.uri(a) in deleted and sc.uri(b) not in deleted and b.exists()
    assert {s["path"] for s in result["skipped"]} >= {sc.uri(b), sc.uri(c)}


def test_apply_without_terminal_needs_yes(tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    orphan = sc.plant(f"checkpoints/{sc.jobs()[0].name}/shared/a")
    plan_file = tmp_path / "plan.json"
    ckptctl("gc", "plan", str(sc.checkpoints), *sc.rebase, *OLD, "--force", "-o", str(plan_file))
    result = ckptctl("gc", "apply", str(plan_file), expect=2)
    assert "--yes" in result.stderr and orphan.exists()


def test_trash_moves_instead_of_deleting(tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0].name
    orphan = sc.plant(f"checkpoints/{job}/shared/to-trash", size=1234)
    plan_file = tmp_path / "plan.json"
    ckptctl("gc", "plan", str(sc.checkpoints), *sc.rebase, *OLD, "--force", "-o", str(plan_file))
    trash = tmp_path / "trash"
    ckptctl("gc", "apply", str(plan_file), "--yes", "--trash", str(trash))
    assert not orphan.exists()
    moved = list(trash.rglob("to-trash"))
    assert len(moved) == 1 and moved[0].stat().st_size == 1234 and f"{job}/shared" in str(moved[0])
    result = ckptctl("gc", "apply", str(plan_file), "--yes", "--trash", str(sc.checkpoints / "t"), expect=1)
    assert "overlapping scopes" in result.stderr


def test_kill_during_apply_converges(tmp_path: Path) -> None:
    """kill -9 in the middle of apply, then apply again: every orphan goes, every live file stays."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0].name
    orphans = {sc.uri(sc.plant(f"checkpoints/{job}/shared/orphan-{i:04d}", size=10)) for i in range(1500)}
    orphans |= sc.unreferenced_by_flink()
    plan_file = tmp_path / "plan.json"
    ckptctl("gc", "plan", str(sc.checkpoints), *sc.rebase, *OLD, "--force", "-o", str(plan_file))
    ckptctl_bin = str(Path(sys.executable).parent / "ckptctl")
    manifest = Path(str(plan_file) + ".manifest.jsonl")
    proc = subprocess.Popen(
        [ckptctl_bin, "gc", "apply", str(plan_file), "--yes", "--batch-size", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.time() + 60
    while time.time() < deadline:
        if manifest.exists() and manifest.read_text().count('"done"') >= 20:
            break
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    remaining = {o for o in orphans if Path(o[5:]).exists()}
    assert 0 < len(remaining) < len(orphans), "the kill must land mid-way"
    # whatever the manifest announced and is gone was an orphan
    announced = {json.loads(line)["path"] for line in manifest.read_text().splitlines() if '"path"' in line}
    assert announced <= orphans
    ckptctl("gc", "apply", str(plan_file), "--yes")
    assert not any(Path(o[5:]).exists() for o in orphans)
    for uri in sc.referenced_by_flink():
        assert Path(uri[5:]).exists()


def test_gc_alias_is_plan(tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    a = json.loads(ckptctl("gc", str(sc.checkpoints), *sc.rebase, *OLD, "--json").stdout)
    b = plan_json(str(sc.checkpoints), *sc.rebase, *OLD)
    assert a["candidates"] == b["candidates"] and a["live_files"] == b["live_files"]


def test_worker_process_gives_the_same_plan(tmp_path: Path, monkeypatch) -> None:
    """Large metadata is decoded in a worker process while the roots are listed, and the listed
    files are looked up in the live set that process holds: the same plan, also when a file a
    checkpoint references is missing from the listing. Names packed by threes, sent a few chunks at
    a time: a directory's flags come back in pieces."""
    from ckptctl.gc import plan as gc_plan
    from ckptctl.storage import listing

    monkeypatch.setattr(listing, "NAMES_CHUNK", 3)
    monkeypatch.setattr(gc_plan, "WORKER_PIECES_BYTES", 1000)
    sc = Scenario("1.20.3", "claim", tmp_path)
    sc.plant(f"checkpoints/{sc.jobs()[0].name}/shared/planted")

    def inline_and_parallel(*args: str, expect: int) -> dict:
        monkeypatch.setattr(gc_plan, "PARALLEL_METADATA_BYTES", 1 << 62)
        inline = plan_json(*args, expect=expect)
        monkeypatch.setattr(gc_plan, "PARALLEL_METADATA_BYTES", 0)
        parallel = plan_json(*args, expect=expect)
        for key in ("candidates", "protected", "live_files", "retained", "expired", "partially_live", "missing",
                    "refusals"):  # fmt: skip
            assert parallel[key] == inline[key], key
        return parallel

    assert inline_and_parallel(
        str(sc.checkpoints), *sc.rebase, *OLD, "--keep-last", "2", "--force", expect=0
    )["expired"]
    gone = min(u for u in sc.referenced_by_flink() if "/shared/" in u)
    os.remove(gone.removeprefix("file:"))
    plan = inline_and_parallel(str(sc.checkpoints), *sc.rebase, *OLD, "--force", expect=1)
    assert [m["path"] for m in plan["missing"]] == [gone]


def test_streamed_plan_json_equals_the_plan(tmp_path: Path) -> None:
    """-o/--json stream the plan entry by entry; it must parse to exactly the plan's content."""
    import io

    from ckptctl.gc import build_plan
    from ckptctl.storage import Storage

    sc = Scenario("2.2.0", "basic", tmp_path)
    sc.plant(f'checkpoints/{sc.jobs()[0].name}/shared/we"ird\\\\name')
    sc.plant(f"checkpoints/{sc.jobs()[0].name}/shared/fresh", mtime=time.time())
    plan = build_plan(
        Storage(),
        sc.gc_options(),
    )
    buf = io.BytesIO()
    plan.write_json(buf)
    streamed, direct = json.loads(buf.getvalue()), json.loads(json.dumps(plan.to_json()))
    streamed.pop("created_at")
    direct.pop("created_at")
    assert streamed == direct and len(streamed["candidates"]) >= 1 and len(streamed["protected"]) >= 1


@pytest.mark.parametrize("version", ["1.20.3", "2.2.0"])
def test_changelog_dir_inside_the_root_is_classified_as_changelog(tmp_path: Path, version: str) -> None:
    """The same plan whether the changelog dir is scanned on its own or lies inside a scanned root:
    DSTL files only expired checkpoints reference are 'expired-only', never 'not a Flink file'."""
    sc = Scenario(version, "changelog", tmp_path)
    dstl = sc.root / "dstl"
    args = (*sc.rebase, *OLD, "--keep-last", "1", "--force", "--changelog-dir", str(dstl))
    inside = plan_json(str(sc.root), *args)
    apart = plan_json(str(sc.checkpoints), *args)
    assert {c["path"] for c in inside["candidates"]} == {c["path"] for c in apart["candidates"]}
    dstl_reasons = {c["reason"] for c in inside["candidates"] if c["path"].startswith(sc.uri(dstl) + "/")}
    assert dstl_reasons and dstl_reasons <= {"expired-only", "unreferenced-changelog"}
    assert "expired-only" in dstl_reasons, (
        "the fixture's older checkpoints hold DSTL files the newest does not"
    )
    assert not any(p["path"].startswith(sc.uri(dstl) + "/") and p["reason"] == "not-flink-file"
                   for p in inside["protected"])  # fmt: skip


def test_summary_counts_each_reason_once(tmp_path: Path) -> None:
    """Reasons are codes: files kept for being young are one row, whatever their ages."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0].name
    for i, age in enumerate((5, 50, 500)):
        sc.plant(f"checkpoints/{job}/shared/young-{i}", mtime=time.time() - age)
    plan = plan_json(str(sc.checkpoints), *sc.rebase, *OLD, "--force")
    assert plan["protected_by_reason"]["young"] == 3
    human = ckptctl("gc", "plan", str(sc.checkpoints), *sc.rebase, *OLD, "--force").stdout
    assert human.count("younger than --older-than") == 1


def test_blocked_plan_names_the_command_that_fixes_it(tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0].name
    for i in range(200):
        sc.plant(f"checkpoints/{job}/shared/orphan-{i}")
    plan_file = tmp_path / "plan.json"
    result = ckptctl("gc", "plan", str(sc.checkpoints), *sc.rebase, *OLD, "-o", str(plan_file), expect=1)
    assert "`ckptctl gc plan` again with --force" in result.stderr
    applied = ckptctl("gc", "apply", str(plan_file), "--yes", expect=1)
    assert "blocked" in applied.stderr and "gc plan" in applied.stderr
    assert all((sc.checkpoints / job / "shared" / f"orphan-{i}").exists() for i in range(200))
    # the condition clearing later does not make a blocked plan applicable
    for i in range(200):
        (sc.checkpoints / job / "shared" / f"orphan-{i}").unlink()
    ckptctl("gc", "apply", str(plan_file), "--yes", expect=1)


def test_apply_prompt_answered_no_says_nothing_was_deleted(tmp_path: Path) -> None:
    """At a terminal, answering n aborts with a message and deletes nothing (real pty)."""
    import pty

    sc = Scenario("2.2.0", "basic", tmp_path)
    orphan = sc.plant(f"checkpoints/{sc.jobs()[0].name}/shared/a")
    plan_file = tmp_path / "plan.json"
    ckptctl("gc", "plan", str(sc.checkpoints), *sc.rebase, *OLD, "--force", "-o", str(plan_file))
    ckptctl_bin = str(Path(sys.executable).parent / "ckptctl")
    pid, fd = pty.fork()
    if pid == 0:  # the child: ckptctl at a terminal
        os.execv(ckptctl_bin, [ckptctl_bin, "gc", "apply", str(plan_file)])
    out = b""
    deadline = time.time() + 60
    while b"[y/N]" not in out and time.time() < deadline:
        try:
            out += os.read(fd, 4096)
        except OSError:
            break
    os.write(fd, b"n\n")
    while time.time() < deadline:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 1
    assert b"aborted; nothing deleted" in out
    assert orphan.exists()


def test_one_tree_under_two_names_is_refused(tmp_path: Path) -> None:
    """A root and its alias through a symbolic link: the alias's files look unreferenced (the
    _metadata spells the other name), so deleting them would delete live files."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    alias = tmp_path / "alias"
    alias.symlink_to(sc.checkpoints)
    result = ckptctl(
        "gc", "plan", str(sc.checkpoints), str(alias), *sc.rebase, *OLD, "--force", "--json", expect=1
    )
    codes = {r["code"] for r in json.loads(result.stdout)["refusals"]}
    assert "overlapping-scopes" in codes


@pytest.mark.parametrize("where", ["job", "chk"])
def test_changelog_dir_holding_checkpoint_files_is_refused(tmp_path: Path, where: str) -> None:
    """--changelog-dir pointed (strictly inside the root) at a job directory or a checkpoint:
    its _metadata and SSTs must not become 'unreferenced changelog files'."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0]
    target = job if where == "job" else sorted(job.glob("chk-*"))[-1]
    plan_file = tmp_path / "plan.json"
    result = ckptctl(
        "gc", "plan", str(sc.checkpoints), "--changelog-dir", str(target), *sc.rebase, *OLD, "--force",
        "--json", "-o", str(plan_file), expect=1,
    )  # fmt: skip
    plan = json.loads(result.stdout)
    assert "overlapping-scopes" in {r["code"] for r in plan["refusals"]}
    referenced = sc.referenced_by_flink()
    assert not referenced & {c["path"] for c in plan["candidates"]}
    ckptctl("gc", "apply", str(plan_file), "--yes", expect=1)
    assert all(Path(u[5:]).exists() for u in referenced)


def test_plan_warnings_name_the_same_file_whatever_the_hash_seed() -> None:
    """The FLINK-39964 warning names its first file: the same one on every run (it was taken from a
    set, so it followed Python's hash seed)."""
    root = Path(__file__).resolve().parents[2] / "fixtures" / "data" / "2.2.0" / "claim_native"
    outs = []
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        p = subprocess.run([sys.executable, "-m", "ckptctl", "gc", str(root), "--clock", "local"],
                           capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
        outs.append([line for line in p.stderr.splitlines() if "FLINK-39964" in line])
    assert outs[0] and outs[0] == outs[1] == outs[2]


def test_a_segments_file_missing_from_the_listing_is_reported_missing(tmp_path: Path) -> None:
    """File merging: a physical file retained checkpoints use a part of (a segment) deleted behind
    Flink's back is a missing live file, like a whole file would be (the segments' files are
    looked up apart from the live set)."""
    from ckptctl.checkpoint.layout import locate_checkpoint
    from ckptctl.checkpoint.loading import load_checkpoint
    from ckptctl.checkpoint.refs import referenced_files
    from ckptctl.gc import build_plan
    from ckptctl.storage import Storage

    sc = Scenario("2.2.0", "filemerging", tmp_path)
    options = sc.gc_options(max_delete_fraction=1.0)
    storage = Storage()
    newest = sorted(sc.jobs()[0].glob("chk-*/_metadata"), key=lambda m: int(m.parent.name[4:]))[-1]
    ck = load_checkpoint(storage, locate_checkpoint(storage, str(newest.parent)), options.rebase)
    refs = list(referenced_files(ck))
    whole = {r[0] for r in refs if r[1] != "segment"}
    segment = sorted({r[0] for r in refs if r[1] == "segment"} - whole)[0]
    assert not build_plan(storage, options).missing
    os.unlink(segment.removeprefix("file:"))
    missing = build_plan(storage, options).missing
    assert segment in {m["path"] for m in missing}
