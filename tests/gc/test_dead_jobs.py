"""Invariant 7: a job is Flink's only on evidence, and the files of a job gc cannot see the
checkpoints of (a dead job, another job's changelog files) are kept unless asked."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.support.fixture_cases import REPO
from tests.support.gc_plans import OLD, apply, candidates, codes, plan_to_file, protected
from tests.support.gc_support import T0, Scenario, add_job, plan_json

# ---------------------------------------------------------------------------------------------
# row 17: the old job of a CLAIM restore whose new job writes to another root


@pytest.mark.parametrize("version", ["1.20.3", "2.2.0"])
def test_claim_old_job_alone_is_listed_dead_and_both_roots_keep_borrowed_files(
    tmp_path: Path, version: str
) -> None:
    """Job 2 was restored from job 1 in CLAIM mode and its checkpoints borrow job 1's SSTs.
    Job 2 now lives in another root. Job 1 keeps none of its own checkpoints (as with
    num-retained 1: its last one was claimed and later subsumed by job 2).

    Tracker: row17."""
    sc = Scenario(version, "claim", tmp_path)
    job1_id, job2_id = sc.entry["job_ids"]
    assert sc.entry["jobs"][1]["restored_from"].startswith(f"{sc.original}/checkpoints/{job1_id}/")
    job1 = sc.checkpoints / job1_id
    new_root = tmp_path / "new-root"
    new_root.mkdir()
    job2 = new_root / job2_id
    (sc.checkpoints / job2_id).rename(job2)
    for m in job1.glob("chk-*/_metadata"):
        shutil.rmtree(m.parent)
    assert not list(job1.glob("chk-*/_metadata"))
    healthy, healthy_rebase = add_job(sc, "1.20.3", "basic")  # the old root still has a live job
    job2_rebase = ["--rebase", f"{sc.original}/checkpoints/{job2_id}={job2}"]

    # what job 2's retained checkpoints reference, by Flink's own reading, where it is now
    job2_refs = set()
    for exp in (REPO / sc.entry["expected_dir"] / "checkpoints" / job2_id).glob("*.json"):
        for r in json.loads(exp.read_text())["references"]:
            p = r["path"].removeprefix("file:")
            own = f"{sc.original}/checkpoints/{job2_id}/"
            job2_refs.add(
                "file:"
                + (
                    str(job2) + "/" + p[len(own) :]
                    if p.startswith(own)
                    else str(sc.root) + p[len(sc.original) :]
                )
            )
    borrowed = {r for r in job2_refs if r.startswith(sc.uri(job1) + "/")}
    assert borrowed

    # the old root alone: job 1 has no retained checkpoint; its files are kept, even when dead
    # jobs are collected (nothing but its name says it is Flink's: its checkpoint dirs are gone)
    job1_files = [p for p in job1.rglob("*") if p.is_file()]
    for extra in ([], ["--collect-dead-jobs"]):
        old_alone = plan_json(str(sc.checkpoints), *sc.rebase, *healthy_rebase, *OLD, "--force", *extra)
        assert not {c for c in candidates(old_alone) if c.startswith(sc.uri(job1) + "/")}
        assert {sc.uri(p) for p in job1_files} <= set(protected(old_alone))
    # named as a ROOT, job 1 is collected: listed by name with its files and bytes, and the warning
    named = plan_json(str(job1), *sc.rebase, *OLD, "--force", expect=1)
    assert codes(named) == {"empty-live-set"}  # and alone it has nothing live: the plan blocks
    dead = {d["job"]: d for d in named["dead_jobs"]}
    assert set(dead) == {sc.uri(job1)} and dead[sc.uri(job1)]["collected"]
    assert dead[sc.uri(job1)]["files"] == len(job1_files)
    assert dead[sc.uri(job1)]["bytes"] == sum(p.stat().st_size for p in job1_files)
    assert any("claim" in w.lower() for w in named["warnings"])

    # both roots: nothing job 2 references is a candidate, and apply keeps all of it
    args = [str(sc.checkpoints), str(new_root), *job2_rebase, *sc.rebase, *healthy_rebase, *OLD, "--force"]
    both = plan_json(*args)
    assert not both["blocked"]
    assert not borrowed & candidates(both) and not job2_refs & candidates(both)
    apply(plan_to_file(tmp_path, *args))
    for uri in job2_refs:
        assert Path(uri[5:]).exists(), f"file borrowed by the CLAIM job deleted: {uri}"


# --- F1: a cluster-wide changelog dir, one job's checkpoint root scanned -----------------------


def test_changelog_files_of_a_job_whose_checkpoints_are_not_scanned_are_kept(tmp_path: Path) -> None:
    """state.changelog.dstl.dfs.base-path is usually cluster-wide; the operator scans one job's
    checkpoint root with --changelog-dir. Another job's DSTL files (referenced by its checkpoints,
    per Flink's own reading in fixtures/expected) have no anchor: they must be kept and say why.

    Tracker: f1."""
    mine = Scenario("1.20.3", "changelog", tmp_path / "a")
    other = Scenario("2.2.0", "changelog", tmp_path / "b")  # its checkpoints live in a root not scanned
    dstl = mine.root / "dstl"
    (other_job,) = list((other.root / "dstl").iterdir())
    shutil.copytree(other_job, dstl / other_job.name)
    for p in (dstl / other_job.name).rglob("*"):
        if p.is_file():
            os.utime(p, (T0, T0))
    needed = {
        u.replace(f"file:{other.root}/dstl", f"file:{dstl}")
        for u in other.referenced_by_flink()
        if "/dstl/" in u
    }
    assert needed and all(Path(u[5:]).exists() for u in needed)

    args = (str(mine.checkpoints), "--changelog-dir", str(dstl), *mine.rebase, *OLD, "--force")
    plan = plan_json(*args)
    kept = {p["path"]: p["reason"] for p in plan["protected"]}
    assert all(kept.get(u) == "changelog-unscanned-job" for u in needed), [kept.get(u) for u in needed]
    apply(plan_to_file(tmp_path, *args))
    gone = {u for u in needed if not Path(u[5:]).exists()}
    assert not gone, f"{len(gone)} DSTL files another job's checkpoints reference were deleted"


# --- a fixed job id: two deployments of it write one changelog dir, one of them is scanned ----

FIXED_IDS = ["0" * 32, "ffffffff8e2d96d90000000000000000"]  # Flink <= 1.15; JobID("my-cluster".hashCode(), 0)


def fixed_id_deployments(tmp_path: Path, fixed: str) -> tuple[Scenario, list[tuple[str, str]], set[str]]:
    """Deployment A (1.20.3, scanned) and B (2.2.0, its root not scanned) of one fixed job id,
    sharing A's changelog dir: B's DSTL files copied there under the id, older than every
    checkpoint of A. Returns (A, the --rebase mappings that put A where it is, B's DSTL files its
    checkpoints reference by Flink's own reading, where they are now)."""
    a = Scenario("1.20.3", "changelog", tmp_path / "a")
    b = Scenario("2.2.0", "changelog", tmp_path / "b")
    (a_job,) = [p for p in a.checkpoints.iterdir() if p.is_dir()]
    (a_dstl,) = list((a.root / "dstl").iterdir())
    (b_dstl,) = list((b.root / "dstl").iterdir())
    os.rename(a_job, a.checkpoints / fixed)  # A ran as the fixed id, its DSTL files under that id
    os.rename(a_dstl, a.root / "dstl" / fixed)
    mappings = [(a.original, str(a.root)), (f"{a.original}/checkpoints/{a_job.name}", str(a.checkpoints / fixed)),
                (f"{a.original}/dstl/{a_dstl.name}", str(a.root / "dstl" / fixed))]  # fmt: skip
    oldest_a = min(m.stat().st_mtime for m in (a.checkpoints / fixed).rglob("_metadata"))
    needed = set()
    for u in b.referenced_by_flink():  # B's DSTL files, moved where B (as the fixed id) wrote them
        if f"/dstl/{b_dstl.name}/" in u:
            moved = a.root / "dstl" / fixed / u[len(f"file:{b_dstl}/") :]
            moved.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(u[5:], moved)
            os.utime(moved, (oldest_a - 86400, oldest_a - 86400))
            needed.add(f"file:{moved}")
    assert needed
    return a, mappings, needed


@pytest.mark.parametrize("fixed", FIXED_IDS)
def test_changelog_files_of_a_fixed_job_id_another_deployment_uses_are_kept(
    tmp_path: Path, fixed: str
) -> None:
    """Attacked (a red-team helper): application mode with HA gives every deployment of a cluster
    id one JobID (before Flink 1.16 all zeros, for every deployment), and a cluster-wide
    ``dstl.dfs.base-path`` then holds ``<id>/dstl/`` files of several deployments. Deployment A is
    scanned; B (another root, same id) is not, and its retained checkpoints reference its DSTL
    files there. The changelog guard tied the files to A by the id alone: B's files, older than
    A's newest checkpoint, went as ``unreferenced-changelog`` in a plan without refusal. Files of a
    fixed id are now kept (``changelog-fixed-job-id``) unless the operator says every deployment
    of the id is scanned (``--collect-fixed-id-changelog``)."""
    a, mappings, needed = fixed_id_deployments(tmp_path, fixed)
    rebase = [x for old, new in mappings for x in ("--rebase", f"{old}={new}")]
    args = (str(a.checkpoints), "--changelog-dir", str(a.root / "dstl"), *rebase, *OLD, "--force")
    plan = plan_json(*args)
    assert not plan["blocked"], codes(plan)
    kept = protected(plan)
    assert {kept.get(u) for u in needed} == {"changelog-fixed-job-id"}
    assert any("--collect-fixed-id-changelog" in w and fixed in w for w in plan["warnings"])
    apply(plan_to_file(tmp_path, *args))
    gone = {u for u in needed if not Path(u[5:]).exists()}
    assert not gone, f"{len(gone)} DSTL files deployment B's checkpoints reference were deleted"
    # asked explicitly (every deployment of the id scanned, the operator says): they are garbage to A
    collected = plan_json(*args, "--collect-fixed-id-changelog")
    assert needed <= candidates(collected)
    assert not any("--collect-fixed-id-changelog" in w for w in collected["warnings"])
