"""Discovery sees every checkpoint Flink would use (issue 19 rows 1, 2, 3, 5, 6, 9, 11, 13).

gc is exact on what it sees; these are the places it used not to look: a root below a directory
named ``shared``, a ``chk-N`` that is a symlink to another volume, a job that was just restored
and has created only its empty directories, a second mount of the volume inside a root, a tree
deeper than PATH_MAX. Every scenario is a private copy of a real Flink fixture, rearranged the way
an operator's platform would; assertions are outcomes: which files are candidates, which still
exist after ``gc apply``, exit codes and refusal codes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from ckptctl.checkpoint.loading import LoadedCheckpoint
from ckptctl.checkpoint.refs import referenced_files
from ckptctl.metadata import read_metadata
from tests.support.fixture_cases import REPO
from tests.support.gc_support import DAY, T0, Scenario, ckptctl, plan_json

OLD = ["--older-than", "1d", "--margin", "10m"]
CLAIM_JOB_1 = "f0fed761440519b8cf2493650f4e5dd9"  # the claim fixture's first job (see its manifest entry)
CLAIM_JOB_2 = "8a4c8c97e1541abf6adb570589e5edd7"  # restored from job 1 in CLAIM mode


def codes(plan: dict) -> set[str]:
    return {r["code"] for r in plan["refusals"]}


def candidates(plan: dict) -> set[str]:
    return {c["path"] for c in plan["candidates"]}


def live_by_flink(sc: Scenario, moves: dict[str, Path]) -> set[str]:
    """Every file Flink's own reading says a completed checkpoint references, where it is now.

    ``moves``: directory as the fixture has it (relative to the scenario root) -> where it was moved.
    """
    out = set()
    for uri in sc.referenced_by_flink():
        path = uri.removeprefix("file:")
        for rel, new in sorted(moves.items(), key=lambda kv: -len(kv[0])):
            old = str(sc.root / rel)
            if path == old or path.startswith(old + "/"):
                path = str(new) + path[len(old) :]
                break
        out.add("file:" + path)
    return out


def rebase_args(sc: Scenario, moves: dict[str, Path]) -> list[str]:
    out = ["--rebase", f"{sc.original}={sc.root}"]
    for rel, new in moves.items():
        out += ["--rebase", f"{sc.original}/{rel}={new}"]
    return out


def apply_plan(plan_path: Path) -> None:
    ckptctl("gc", "apply", str(plan_path), "--yes")


def plan_to_file(tmp_path: Path, *args: str) -> tuple[dict, Path]:
    out = tmp_path / "plan.json"
    ckptctl("gc", "plan", *args, "-o", str(out))
    return json.loads(out.read_text()), out


def newest_chk(job: Path) -> Path:
    return max((p for p in job.iterdir() if p.name.startswith("chk-") and (p / "_metadata").exists()),
               key=lambda p: int(p.name[4:]))  # fmt: skip


# ---------------------------------------------------------------------------------------------
# row 1: a root below a directory named `shared`; a CLAIM job there borrows another team's files


def fleet_of_the_claim_fixture(sc: Scenario, tmp_path: Path) -> tuple[Path, dict[str, Path]]:
    """``<fleet>/teamA/<job 1>`` and ``<fleet>/shared/ckpts/<job 2>``: job 2 was restored from job 1
    in CLAIM mode and references files in job 1's shared/ (a platform whose
    ``state.checkpoints.dir`` is ``<fleet>/shared/ckpts``)."""
    fleet = tmp_path / "fleet"
    moves = {
        f"checkpoints/{CLAIM_JOB_1}": fleet / "teamA" / CLAIM_JOB_1,
        f"checkpoints/{CLAIM_JOB_2}": fleet / "shared" / "ckpts" / CLAIM_JOB_2,
    }
    for rel, new in moves.items():
        new.parent.mkdir(parents=True, exist_ok=True)
        os.rename(sc.root / rel, new)
    return fleet, moves


def test_a_root_below_a_directory_named_shared_is_searched(tmp_path: Path) -> None:
    """Tracker: row1."""
    sc = Scenario("2.2.0", "claim", tmp_path)
    fleet, moves = fleet_of_the_claim_fixture(sc, tmp_path)
    live = live_by_flink(sc, moves)
    borrowed = {u for u in live if f"/teamA/{CLAIM_JOB_1}/shared/" in u}
    assert borrowed  # job 2's checkpoints keep files of job 1 alive
    plan, path = plan_to_file(tmp_path, str(fleet), *OLD, "--force", *rebase_args(sc, moves))
    retained = {c["path"] for c in plan["retained"]}
    assert {p for p in retained if "/shared/ckpts/" in p}, "job 2's checkpoints must be discovered"
    assert not candidates(plan) & live
    apply_plan(path)
    assert all(Path(u.removeprefix("file:")).exists() for u in live)


def test_check_sees_a_broken_checkpoint_below_a_directory_named_shared(tmp_path: Path) -> None:
    """Tracker: row9."""
    sc = Scenario("2.2.0", "claim", tmp_path)
    fleet, moves = fleet_of_the_claim_fixture(sc, tmp_path)
    meta = newest_chk(moves[f"checkpoints/{CLAIM_JOB_2}"]) / "_metadata"
    meta.write_bytes(meta.read_bytes()[:100])
    report = json.loads(ckptctl("check", str(fleet), "--json", *rebase_args(sc, moves), expect=1).stdout)
    assert str(meta.parent) in json.dumps(report)


def test_a_directory_named_shared_that_is_not_a_jobs_is_not_flinks(tmp_path: Path) -> None:
    """The converse stays true: ``ROOT/team/shared/report.csv`` is nobody's shared state."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    report = sc.plant("checkpoints/team/shared/report.csv")
    plan = plan_json(str(sc.checkpoints), *OLD, "--force", *sc_rebase(sc))
    assert "file:" + str(report) not in candidates(plan)


def sc_rebase(sc: Scenario) -> list[str]:
    return ["--rebase", f"{sc.original}={sc.root}"]


# ---------------------------------------------------------------------------------------------
# rows 2 and 11: a retained chk-N is a symlink to another volume


def symlinked_newest(sc: Scenario, tmp_path: Path) -> tuple[Path, Path]:
    job = sc.jobs()[0]
    chk = newest_chk(job)
    elsewhere = tmp_path / "other-volume" / chk.name
    elsewhere.parent.mkdir()
    shutil.move(str(chk), elsewhere)
    chk.symlink_to(elsewhere, target_is_directory=True)
    return chk, elsewhere


def test_a_symlinked_chk_is_discovered_and_its_files_kept(tmp_path: Path) -> None:
    """Tracker: row2."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    chk, elsewhere = symlinked_newest(sc, tmp_path)
    md = read_metadata((elsewhere / "_metadata").read_bytes())
    plan, path = plan_to_file(tmp_path, str(sc.checkpoints), *OLD, "--force", *sc_rebase(sc))
    assert str(chk) in {c["path"].removeprefix("file:") for c in plan["retained"]}
    assert any("symlink" in w for w in plan["warnings"])
    assert plan["discovery"]["followed_symlinks"] == [{"path": f"file:{chk}", "target": f"file:{elsewhere}"}]
    live = sc.referenced_by_flink()
    assert not candidates(plan) & live
    apply_plan(path)
    assert all(Path(u.removeprefix("file:")).exists() for u in live)
    assert read_metadata((elsewhere / "_metadata").read_bytes()) == md
    assert sorted(p.name for p in elsewhere.iterdir())  # nothing deleted through the link


def test_relocate_all_copies_a_symlinked_checkpoint(tmp_path: Path) -> None:
    """Tracker: row11."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    chk, _elsewhere = symlinked_newest(sc, tmp_path)
    dst = tmp_path / "dst"
    ckptctl("relocate", str(sc.checkpoints), str(dst), "--all", "--apply", *sc_rebase(sc))
    assert (dst / chk.parent.name / chk.name / "_metadata").is_file()


# ---------------------------------------------------------------------------------------------
# row 3: a job just restored from the checkpoint --keep-last would expire, nothing uploaded yet


@pytest.mark.parametrize("area", ["shared", "taskowned"])
def test_empty_directories_of_a_starting_job_block_keep_last(tmp_path: Path, area: str) -> None:
    """Tracker: row3."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    starting = sc.checkpoints / ("e" * 32)
    (starting / area).mkdir(parents=True)  # created by the restore, mtime now; no file yet
    plan = plan_json(str(sc.checkpoints), *OLD, "--keep-last", "1", "--force", *sc_rebase(sc), expect=1)
    assert plan["expired"], "the control needs a checkpoint --keep-last would expire"
    assert "job-starting" in codes(plan)


def test_control_old_empty_directories_do_not_block(tmp_path: Path) -> None:
    """Tracker: row3."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    old = sc.checkpoints / ("e" * 32) / "shared"
    old.mkdir(parents=True)
    then = time.time() - 10 * 86400
    os.utime(old, (then, then))
    os.utime(old.parent, (then, then))
    plan = plan_json(str(sc.checkpoints), *OLD, "--keep-last", "1", "--force", *sc_rebase(sc))
    assert "job-starting" not in codes(plan)


# ---------------------------------------------------------------------------------------------
# row 5: the same directory under two names


def test_a_symlink_back_into_the_root_is_an_alias_and_refused(tmp_path: Path) -> None:
    """Tracker: row5."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0]
    (job / "shared" / "mirror").symlink_to(sc.checkpoints, target_is_directory=True)
    plan = plan_json(str(sc.checkpoints), *OLD, "--force", *sc_rebase(sc), expect=1)
    assert "aliased-path" in codes(plan)
    assert [d["path"] for d in plan["discovery"]["not_descended"]] == [f"file:{job}/shared/mirror"]


def test_a_second_mount_inside_shared_is_refused(tmp_path: Path) -> None:
    """Tracker: row5."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0]
    mirror = job / "shared" / "mirror"
    mirror.mkdir()
    if subprocess.run(["mount", "--bind", str(sc.checkpoints), str(mirror)], capture_output=True).returncode:
        pytest.skip("bind mounts need privileges this machine does not give")
    try:
        before = {str(p) for p in sc.checkpoints.rglob("*") if "mirror" not in p.parts and p.is_file()}
        plan = plan_json(str(sc.checkpoints), *OLD, "--force", *sc_rebase(sc), expect=1)
        assert "aliased-path" in codes(plan)
        err = ckptctl(
            "gc", str(sc.checkpoints), "--apply", "--yes", *OLD, "--force", *sc_rebase(sc), expect=None
        )
        assert err.exit_code != 0
        assert before <= {
            str(p) for p in sc.checkpoints.rglob("*") if "mirror" not in p.parts and p.is_file()
        }
    finally:
        subprocess.run(["umount", str(mirror)], check=False)


# ---------------------------------------------------------------------------------------------
# row 13: a tree deeper than PATH_MAX


def test_a_tree_deeper_than_path_max_is_one_line_exit_2(tmp_path: Path) -> None:
    """Tracker: row13."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    fd = os.open(sc.checkpoints, os.O_RDONLY)
    name = "d" * 200
    try:
        for _ in range(25):  # 25 x 201 > 4096 (PATH_MAX)
            os.mkdir(name, dir_fd=fd)
            nxt = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nxt
        with open(os.open("x", os.O_CREAT | os.O_WRONLY, dir_fd=fd), "w") as f:
            f.write("x")
    finally:
        os.close(fd)
    for args in (
        ["gc", "plan", str(sc.checkpoints), *OLD],
        ["check", str(sc.checkpoints)],
        ["ls", str(sc.checkpoints)],
    ):
        result = ckptctl(*args, expect=2)
        err = result.stderr.strip()
        assert "Traceback" not in err and len(err.splitlines()) == 1 and "file:" in err, err
    shutil.rmtree(sc.checkpoints / name, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# row 6: one job id in two roots sharing a changelog directory


def test_dstl_anchor_is_the_oldest_newest_checkpoint_of_a_job_id(tmp_path: Path) -> None:
    """Two roots run the same fixed job id and share one changelog dir: a DSTL file newer than the
    slower root's newest checkpoint (minus the margin) may be in flight for it, whichever root
    is listed last.

    Tracker: row6."""
    sc = Scenario("2.2.0", "changelog", tmp_path)
    a = sc.checkpoints
    b = tmp_path / "root-b"
    shutil.copytree(a, b, symlinks=True)
    changelog = _changelog_dir(sc)
    for job in (p for p in b.iterdir() if p.is_dir()):
        for meta in job.rglob("_metadata"):  # the faster root: its checkpoints are a day newer
            t = meta.stat().st_mtime + 86400
            os.utime(meta, (t, t))
    slow_newest = max(m.stat().st_mtime for m in a.rglob("_metadata"))
    dstl = next(p for p in changelog.rglob("*") if p.is_file())
    job_dir = next(p for p in dstl.parents if len(p.name) == 32)
    planted = job_dir / "dstl" / "in-flight-for-root-a"
    planted.parent.mkdir(parents=True, exist_ok=True)
    planted.write_bytes(b"x" * 10)
    t = slow_newest + 60  # after root a's newest checkpoint, long before root b's
    os.utime(planted, (t, t))
    for first, second in ((a, b), (b, a)):
        plan = plan_json(
            str(first), str(second), "--changelog-dir", str(changelog), *OLD, "--force", "--allow-external",
            "--rebase", f"{sc.original}={sc.root}", expect=None,
        )  # fmt: skip
        assert "file:" + str(planted) not in candidates(plan)


def _changelog_dir(sc: Scenario) -> Path:
    found = [p for p in sc.root.iterdir() if p.is_dir() and p.name != "checkpoints"]
    assert found, "the changelog fixture keeps its DSTL files beside checkpoints/"
    return found[0]


def referenced(ck: LoadedCheckpoint) -> set[str]:
    return {p for p, *_ in referenced_files(ck)}


# ---------------------------------------------------------------------------------------------
# row 7: a directory is a Flink job only on evidence; dead jobs are collected only when asked


def tenant_and_dead_job(sc: Scenario) -> tuple[list[Path], list[Path]]:
    tenant = sc.checkpoints / ("c" * 32)  # a team directory named by a 32-hex tenant id
    not_flink = [sc.plant(f"checkpoints/{tenant.name}/shared/report.csv"),
                 sc.plant(f"checkpoints/{tenant.name}/taskowned/notes.txt")]  # fmt: skip
    dead = sc.checkpoints / ("d" * 32)  # a Flink job whose last checkpoint never completed
    # orphans of its earlier attempts: what it wrote after its last chk-N began may be that
    # checkpoint's, in flight (issue 45 row 1), and a chk-N created now is a job at work
    began = T0 - 10 * DAY
    orphans = [sc.plant(f"checkpoints/{dead.name}/shared/{i:08x}-0000-4000-8000-000000000000", began - DAY)
               for i in range(3)]  # fmt: skip
    (dead / "chk-5").mkdir()
    os.utime(dead / "chk-5", (began, began))
    return not_flink, orphans


def test_a_hex_named_team_directory_is_not_a_flink_job(tmp_path: Path) -> None:
    """Tracker: row7."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    not_flink, orphans = tenant_and_dead_job(sc)
    for extra in ([], ["--collect-dead-jobs"]):
        plan = plan_json(str(sc.checkpoints), *OLD, "--force", *sc_rebase(sc), *extra)
        kept = {p["path"]: p["reason"] for p in plan["protected"]}
        assert all(kept.get(sc.uri(p)) == "not-flink-file" for p in not_flink)
        assert ("c" * 32) not in {d["job"].rpartition("/")[2] for d in plan["dead_jobs"]}


def test_dead_jobs_are_kept_unless_collected_explicitly(tmp_path: Path) -> None:
    """Tracker: row7."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    _not_flink, orphans = tenant_and_dead_job(sc)
    uris = {sc.uri(p) for p in orphans}
    plan = plan_json(str(sc.checkpoints), *OLD, "--force", *sc_rebase(sc))
    assert not uris & candidates(plan)
    assert {p["path"]: p["reason"] for p in plan["protected"] if p["path"] in uris} == dict.fromkeys(
        uris, "dead-job"
    )
    dead = {d["job"].rpartition("/")[2]: d for d in plan["dead_jobs"]}
    assert dead["d" * 32]["collected"] is False and dead["d" * 32]["evidence"] == "chk-dir"
    collected = plan_json(str(sc.checkpoints), *OLD, "--force", "--collect-dead-jobs", *sc_rebase(sc))
    assert uris <= candidates(collected)
    named = plan_json(str(sc.checkpoints), str(sc.checkpoints / ("d" * 32)), *OLD, "--force", *sc_rebase(sc),
                      expect=None)  # fmt: skip
    assert uris <= candidates(named) and not codes(named)


def test_fresh_files_of_a_job_without_evidence_still_block_keep_last(tmp_path: Path) -> None:
    """A starting job that has uploaded a file but created no chk-N yet is not a Flink job by
    evidence (its files are kept as not-flink-file); it still blocks --keep-last.

    Tracker: row3."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    fresh = sc.plant(f"checkpoints/{'e' * 32}/shared/first-upload", mtime=time.time() - 5)
    then = time.time() - 10 * 86400
    for d in (fresh.parent, fresh.parent.parent):
        os.utime(d, (then, then))  # only the file says so
    plan = plan_json(str(sc.checkpoints), *OLD, "--keep-last", "1", "--force", *sc_rebase(sc), expect=1)
    assert "job-starting" in codes(plan)


# ---------------------------------------------------------------------------------------------
# red team 4: a hex-named tenant's `shared/` holding a checkpoint root; a pin from another scope

TENANT_ID = "3fa85f6457174562b3fc2c963f66afa6"  # a tenant UUID without dashes: 32 lowercase hex digits


def fleet_with_tenant(sc: Scenario, tmp_path: Path, tenant: str) -> tuple[Path, dict[str, Path]]:
    """Row 1's fleet, where team B's ``state.checkpoints.dir`` is ``<fleet>/<tenant>/shared``: job 2
    (restored from job 1 in CLAIM mode, borrowing files of job 1's shared/) writes its checkpoints
    to ``<fleet>/<tenant>/shared/<job 2>/chk-N``."""
    fleet = tmp_path / "fleet"
    moves = {
        f"checkpoints/{CLAIM_JOB_1}": fleet / "teamA" / CLAIM_JOB_1,
        f"checkpoints/{CLAIM_JOB_2}": fleet / tenant / "shared" / CLAIM_JOB_2,
    }
    for rel, new in moves.items():
        new.parent.mkdir(parents=True, exist_ok=True)
        os.rename(sc.root / rel, new)
    return fleet, moves


def plan_apply_then_assert_kept(tmp_path: Path, live: set[str], *args: str) -> int:
    """Plan, apply when the plan is not blocked, and check no file in ``live`` was deleted."""
    out = tmp_path / "plan.json"
    exit_code = ckptctl("gc", "plan", *args, "-o", str(out), expect=None).exit_code
    assert exit_code in (0, 1), exit_code
    if exit_code == 0:
        apply_plan(out)
    gone = sorted(u for u in live if not Path(u.removeprefix("file:")).exists())
    assert not gone, f"gc deleted {len(gone)} files a completed checkpoint references (first: {gone[0]})"
    return exit_code


@pytest.mark.parametrize("worker", [False, True])
def test_a_root_in_a_hex_named_tenants_shared_dir_is_searched(tmp_path: Path, monkeypatch, worker: bool,
                                                                       ) -> None:  # fmt: skip
    """Attacked: discovery's pruning of ``<job-id>/shared`` (``walk_local``'s ``prune_here`` and
    ``is_checkpoint_metadata``) decides "job directory" by the name alone: 32 lowercase hex digits.
    A tenant directory named by a UUID without dashes is such a name, and row 1's fix (a root below
    a directory named ``shared`` is searched) does not hold when that ``shared`` sits right below
    it: job 2's checkpoints in ``<fleet>/<tenant>/shared/<job 2>/chk-N`` are never discovered, and
    the files of job 1 that only job 2's checkpoints still use become ``unreferenced-shared``.
    With the references decoded in a worker process too: it holds the live set and looks the
    listed files up, but not the paths of the checkpoints only the listing found.

    Tracker: redteam4."""
    if worker:
        from ckptctl.gc import plan as gc_plan

        monkeypatch.setattr(gc_plan, "PARALLEL_METADATA_BYTES", 0)
    sc = Scenario("2.2.0", "claim", tmp_path)
    fleet, moves = fleet_with_tenant(sc, tmp_path, TENANT_ID)
    live = live_by_flink(sc, moves)
    assert {u for u in live if f"/teamA/{CLAIM_JOB_1}/shared/" in u}  # job 2 borrows job 1's files
    plan_apply_then_assert_kept(tmp_path, live, str(fleet), *OLD, "--force", *rebase_args(sc, moves))


def test_control_a_root_in_a_plain_named_tenants_shared_dir(tmp_path: Path) -> None:
    """Control: the same fleet with the tenant directory named ``teamB``: job 2 is discovered.

    Tracker: redteam4."""
    sc = Scenario("2.2.0", "claim", tmp_path)
    fleet, moves = fleet_with_tenant(sc, tmp_path, "teamB")
    live = live_by_flink(sc, moves)
    exit_code = plan_apply_then_assert_kept(
        tmp_path, live, str(fleet), *OLD, "--force", *rebase_args(sc, moves)
    )
    assert exit_code == 0


@pytest.mark.parametrize("name", ["release-42", "savepoint-2cadc2-053498faf5d0"])
def test_a_renamed_savepoint_in_a_hex_named_tenants_shared_dir_keeps_its_files(
    tmp_path: Path, name: str
) -> None:
    """Attacked (a red-team helper): the tenant directory of redteam4 named as ROOT, the team's
    checkpoints in ``<tenant>/shared/<job>``, and a savepoint an operator moved next to them as
    ``<tenant>/shared/savepoints/release-42`` (savepoints are relocatable; Flink names them
    ``savepoint-…`` only when it writes them). The full listing found its ``_metadata`` but, the
    directory named like no checkpoint, it was dropped: its files, in what looks like the tenant's
    shared/, went as ``unreferenced-shared`` in a plan without refusal. A ``_metadata`` found there
    is read by its content (Flink's magic number), whatever its directory is called."""
    sc = Scenario("2.2.0", "savepoints", tmp_path)
    job = sc.jobs()[0]
    tenant = tmp_path / "fleet" / TENANT_ID
    moves = {
        f"checkpoints/{job.name}": tenant / "shared" / job.name,
        "savepoints/savepoint-2cadc2-053498faf5d0": tenant / "shared" / "savepoints" / name,
    }
    for rel, new in moves.items():
        new.parent.mkdir(parents=True, exist_ok=True)
        os.rename(sc.root / rel, new)
    savepoint = moves["savepoints/savepoint-2cadc2-053498faf5d0"]
    kept = {"file:" + str(p) for p in savepoint.iterdir()}
    live = live_by_flink(sc, moves)
    assert {u for u in live if u.startswith(f"file:{savepoint}/") and not u.endswith("/_metadata")}
    # the gate checks it too (it lists the whole root: found there, not only by gc's second listing)
    report = json.loads(ckptctl("check", str(tenant), "--json", *rebase_args(sc, moves)).stdout)
    assert {c["path"]: c["ok"] for c in report["checkpoints"]}.get(f"file:{savepoint}") is True
    args = [str(tenant), *OLD, "--force", *rebase_args(sc, moves)]
    plan = plan_json(*args)
    assert f"file:{savepoint}" in plan["discovery"]["found_by_listing_only"]
    assert not {c["path"] for c in plan["candidates"]} & kept
    assert plan_apply_then_assert_kept(tmp_path, live | kept, *args) == 0


def tenant_with_a_job_running_inside(
    sc: Scenario, tmp_path: Path
) -> tuple[Path, dict[str, Path], Path, Path]:
    """The scenario's job moved to ``<fleet>/<tenant>/shared/<job>`` (a root below a tenant
    directory named like a job), with a file uploaded a minute after its newest checkpoint (maybe
    for the next one) and an orphan two hours older: (tenant, moves, in flight, old orphan)."""
    job = sc.jobs()[0]
    tenant = tmp_path / "fleet" / TENANT_ID
    moves = {f"checkpoints/{job.name}": tenant / "shared" / job.name}
    (tenant / "shared").mkdir(parents=True)
    os.rename(job, moves[f"checkpoints/{job.name}"])
    moved = moves[f"checkpoints/{job.name}"]
    newest = max(m.stat().st_mtime for m in moved.rglob("_metadata"))
    flight, old = moved / "shared" / "uploaded-for-the-next-checkpoint", moved / "shared" / "old-orphan"
    for path, t in ((flight, newest + 60), (old, newest - 7200)):
        path.write_bytes(b"sst")
        os.utime(path, (t, t))
    return tenant, moves, flight, old


def test_a_root_inside_a_tenant_named_as_root_keeps_its_files_in_flight(tmp_path: Path) -> None:
    """A red-team helper's note: the tenant directory named as ROOT is a dead job to collect, and
    the checkpoints the listing finds inside it were retained but anchored nothing, so a file the
    job running there just uploaded for its next checkpoint had only --older-than between it and
    deletion. The newest of those checkpoints is now the in-flight anchor of the tenant's files."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    tenant, moves, flight, old = tenant_with_a_job_running_inside(sc, tmp_path)
    plan = plan_json(str(tenant), "--older-than", "0s", "--margin", "10m", "--force", *rebase_args(sc, moves))
    reasons = {d["path"]: d["reason"] for d in plan["candidates"] + plan["protected"]}
    assert reasons[f"file:{flight}"] == "in-flight"
    assert reasons[f"file:{old}"] == "unreferenced-shared"


def test_two_jobs_inside_a_tenant_anchor_its_files_on_the_slower(tmp_path: Path) -> None:
    """A review of the fix above: the anchor was the newest of every checkpoint found inside the
    tenant, so a file the slower of two jobs running there uploaded for its next checkpoint, older
    than the faster job's newest checkpoint, was a candidate. Each inner job's newest checkpoint
    counts, and of those the oldest (as for one job id in two roots)."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    tenant, moves, _flight, _old = tenant_with_a_job_running_inside(sc, tmp_path)
    fast = next(iter(moves.values()))
    slow = tenant / "shared" / ("b" * 32)
    shutil.copytree(fast, slow, symlinks=True)  # its _metadata name the fast job's files: all there
    newest = max(m.stat().st_mtime for m in fast.rglob("_metadata"))
    for m in slow.rglob("_metadata"):
        os.utime(m, (newest - 7200, newest - 7200))
    between = slow / "shared" / "uploaded-for-the-slow-jobs-next-checkpoint"
    between.write_bytes(b"sst")
    os.utime(between, (newest - 3600, newest - 3600))
    plan = plan_json(str(tenant), "--older-than", "0s", "--margin", "0s", "--force", *rebase_args(sc, moves))
    reasons = {d["path"]: d["reason"] for d in plan["candidates"] + plan["protected"]}
    assert reasons[f"file:{between}"] == "in-flight"


def referenced_by_flink_in(sc: Scenario, chk: Path) -> set[str]:
    """The files Flink's own reading of checkpoint ``chk`` (of this scenario) references, and its _metadata."""
    rel = chk.relative_to(sc.root)
    expected = REPO / sc.entry["expected_dir"]
    out = {"file:" + str(chk / "_metadata")}
    for r in json.loads((expected / rel.parent / (rel.name + ".json")).read_text())["references"]:
        path = r["path"].removeprefix("file:")
        if path.startswith(sc.original):
            out.add("file:" + str(sc.root) + path[len(sc.original) :])
    return out


def pin_oldest_checkpoint(sc: Scenario, pins: Path) -> tuple[Path, Path]:
    """``ln -s <root>/<job>/chk-7 <pins>/release-42``: an operator keeps a release checkpoint by a
    directory symlink in the savepoints directory instead of copying it."""
    job = sc.jobs()[0]
    oldest = min((p for p in job.iterdir() if completed_chk(p)), key=lambda p: int(p.name[4:]))
    assert oldest != newest_chk(job)  # --keep-last 1 expires it
    pins.mkdir(parents=True, exist_ok=True)
    link = pins / "release-42"
    link.symlink_to(oldest, target_is_directory=True)
    return oldest, link


def completed_chk(p: Path) -> bool:
    return p.name.startswith("chk-") and (p / "_metadata").is_file()


@pytest.mark.parametrize("scope", ["--savepoints", "second-root"])
def test_a_checkpoint_pinned_by_a_symlink_from_another_scope_keeps_its_files(
    tmp_path: Path, scope: str
) -> None:
    """Attacked: the ``aliased-path`` guard. ``walk_local`` detects a directory reached under two
    names with a ``seen`` map that is private to one walk (one root), so a directory symlink from
    ``--savepoints`` (or a second ROOT) to a ``chk-N`` in a root is no alias: the pinned checkpoint
    is discovered and retained under the link's name only (its ``_metadata`` and exclusive files
    live as ``<pins>/release-42/…``), while under its real name ``--keep-last 1`` expires it and
    gc deletes its ``_metadata`` and exclusive files: the pinned checkpoint cannot be restored.

    Tracker: redteam4."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    pins = tmp_path / "savepoints"
    oldest, link = pin_oldest_checkpoint(sc, pins)
    live = referenced_by_flink_in(sc, oldest)
    where = ["--savepoints", str(pins)] if scope == "--savepoints" else [str(pins)]
    plan_apply_then_assert_kept(tmp_path, live, str(sc.checkpoints), *where, *OLD, "--keep-last", "1", "--force",
                                *sc_rebase(sc))  # fmt: skip
    assert (link / "_metadata").is_file()


def test_control_a_checkpoint_pinned_by_a_symlink_inside_the_root_is_refused(tmp_path: Path) -> None:
    """Control: the same pin made inside the root (``<root>/pins/release-42``) is an alias the walk
    sees: the plan is blocked (``aliased-path``) and nothing is deleted.

    Tracker: redteam4."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    oldest, link = pin_oldest_checkpoint(sc, sc.checkpoints / "pins")
    live = referenced_by_flink_in(sc, oldest)
    exit_code = plan_apply_then_assert_kept(tmp_path, live, str(sc.checkpoints), *OLD, "--keep-last", "1", "--force",
                                            *sc_rebase(sc))  # fmt: skip
    assert exit_code == 1
    plan = plan_json(str(sc.checkpoints), *OLD, "--keep-last", "1", "--force", *sc_rebase(sc), expect=1)
    assert "aliased-path" in codes(plan)
    assert (link / "_metadata").is_file()


def test_check_sees_a_broken_checkpoint_below_a_hex_named_tenants_shared_dir(tmp_path: Path) -> None:
    """The gate's side of the red-team attack: a truncated _metadata of job 2, whose root lies in
    ``<fleet>/<tenant>/shared``, fails check (it used to be skipped, like row 9)."""
    sc = Scenario("2.2.0", "claim", tmp_path)
    fleet, moves = fleet_with_tenant(sc, tmp_path, TENANT_ID)
    meta = newest_chk(moves[f"checkpoints/{CLAIM_JOB_2}"]) / "_metadata"
    meta.write_bytes(meta.read_bytes()[:100])
    report = json.loads(ckptctl("check", str(fleet), "--json", *rebase_args(sc, moves), expect=1).stdout)
    assert str(meta.parent) in json.dumps(report)
    # and gc: the plan reads it, cannot, and blocks; the plan says how it was found
    plan = plan_json(str(fleet), *OLD, "--force", *rebase_args(sc, moves), expect=1)
    assert "unreadable-metadata" in codes(plan)
    assert f"file:{meta.parent}" in plan["discovery"]["found_by_listing_only"]


# ---------------------------------------------------------------------------------------------
# review of the walk: links to the root's ancestors, loops, a collected dead job's directories


def test_a_symlink_to_an_ancestor_is_an_alias_not_a_walk_of_the_machine(tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    (sc.checkpoints / "up").symlink_to("/", target_is_directory=True)
    (sc.checkpoints / "loop").symlink_to(sc.checkpoints / "loop")  # ELOOP: a link, kept
    started = time.monotonic()
    plan = plan_json(str(sc.checkpoints), *OLD, "--force", *sc_rebase(sc), expect=1)
    assert time.monotonic() - started < 30
    assert "aliased-path" in codes(plan)
    assert {d["path"] for d in plan["discovery"]["not_descended"]} == {f"file:{sc.checkpoints}/up"}
    assert {p["path"]: p["reason"] for p in plan["protected"]}.get(f"file:{sc.checkpoints}/loop") in (
        "symlink",
        "not-flink-file",
    )  # kept either way: a link that loops is never followed
    ckptctl("ls", str(sc.checkpoints), *sc_rebase(sc))
    ckptctl("check", str(sc.checkpoints), *sc_rebase(sc))


def test_a_collected_dead_job_leaves_no_directories_that_look_like_a_starting_job(tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    _not_flink, orphans = tenant_and_dead_job(sc)
    then = time.time() - 10 * 86400
    for d in [p for p in sc.checkpoints.rglob("*") if p.is_dir()]:
        os.utime(d, (then, then))  # the dead job died long ago: its directories are old too
    args = [str(sc.checkpoints), *OLD, "--keep-last", "1", "--force", "--collect-dead-jobs", *sc_rebase(sc)]
    plan, path = plan_to_file(tmp_path, *args)
    assert {sc.uri(p) for p in orphans} <= candidates(plan)
    apply_plan(path)
    assert not (sc.checkpoints / ("d" * 32) / "shared").exists()  # what this run emptied is gone
    again = plan_json(*args)  # and the next plan is not blocked by its empty directories
    assert "job-starting" not in codes(again)
