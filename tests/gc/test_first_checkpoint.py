"""Issue 45 row 1: a job with no retained checkpoint is anchored at its newest ``chk-N``.

Built from real Flink output: a fixture's job with every ``chk-N`` but the newest removed and
the newest's ``_metadata`` taken away, which is what a job looks like while its first checkpoint
uploads (a NO_CLAIM restore of a large savepoint, checkpoints timing out under backpressure):
``chk-N`` created when the checkpoint began, its files and the ``shared/`` ones it will
reference written since. Such a job had no in-flight anchor: ``gc plan ROOT --collect-dead-jobs
--older-than 1h`` (which the plan's own warning suggests), or the job directory named as ROOT,
made every file of that checkpoint a candidate, and ``gc apply`` removed the job directory.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from tests.support.fixture_cases import REPO
from tests.support.gc_plans import apply, candidates, codes, plan_to_file, protected
from tests.support.gc_support import Scenario, add_job, ckptctl, plan_json

MIN = 60.0


def chk_number(p: Path) -> int:
    return int(p.name[4:])


def first_checkpoint_uploading(sc: Scenario, started_ago: float, dir_ago: float | None = None,
                               others_ago: float | None = None) -> tuple[Path, Path, set[str]]:  # fmt: skip
    """The scenario's job as it is while its first checkpoint uploads: its newest ``chk-N``
    without ``_metadata``, every older one gone. Every file written ``started_ago`` seconds ago
    (the chk-N directory ``dir_ago``: files may still be arriving; the files outside chk-N
    ``others_ago``: a changelog job's materialization, uploaded before the checkpoint began).
    Returns (job, chk-N, what that checkpoint references by Flink's own reading, as URIs)."""
    (job,) = sc.jobs()
    chks = sorted((p for p in job.iterdir() if p.name.startswith("chk-")), key=chk_number)
    newest = chks[-1]
    for old in chks[:-1]:
        shutil.rmtree(old)
    (newest / "_metadata").unlink()
    now = time.time()
    for p in job.rglob("*"):
        if p.is_file():
            t = now - (started_ago if others_ago is None or newest in p.parents else others_ago)
            os.utime(p, (t, t))
    t = now - (started_ago if dir_ago is None else dir_ago)
    os.utime(newest, (t, t))
    rel = newest.relative_to(sc.root)
    expected = json.loads((REPO / sc.entry["expected_dir"] / rel.parent / (rel.name + ".json")).read_text())
    refs = set()
    for r in expected["references"]:
        path = r["path"].removeprefix("file:")
        if path.startswith(sc.original):
            refs.add("file:" + str(sc.root) + path[len(sc.original) :])
    refs.discard(sc.uri(newest / "_metadata"))
    assert refs and all(Path(u[5:]).is_file() for u in refs)
    return job, newest, refs


def with_a_healthy_job(sc: Scenario) -> tuple[Path, list[str]]:
    """A job with retained checkpoints beside it (a root of jobs: something is live, or the plan
    is refused as deleting everything): its directory and --rebase."""
    return add_job(sc, "1.20.3", "unaligned")


def files_of(job: Path) -> set[str]:
    return {"file:" + str(p) for p in job.rglob("*") if p.is_file()}


@pytest.mark.parametrize("version", ["1.20.3", "2.2.0"])
@pytest.mark.parametrize("how", ["collect-dead-jobs", "job-as-root"])
def test_a_job_taking_its_first_checkpoint_is_kept_whole(tmp_path: Path, version: str, how: str) -> None:
    """Its newest chk-N began 95 minutes ago, less than --older-than 1h + --margin 1h: it may be
    running, so nothing of it is collected, as a dead job or as a ROOT, and apply keeps it."""
    sc = Scenario(version, "basic", tmp_path)
    job, chk, refs = first_checkpoint_uploading(sc, 95 * MIN)
    healthy, rebase = with_a_healthy_job(sc)
    roots = (
        [str(sc.checkpoints), "--collect-dead-jobs"]
        if how == "collect-dead-jobs"
        else [str(job), str(healthy)]
    )
    args = [*roots, *sc.rebase, *rebase, "--older-than", "1h", "--force"]
    before = files_of(job)
    plan = plan_json(*args)
    assert not candidates(plan)
    assert {protected(plan).get(u) for u in before} == {"job-active"}
    assert not plan["dead_jobs"] and any("job-active" in w for w in plan["warnings"])
    apply(plan_to_file(tmp_path, *args))
    assert files_of(job) == before and chk.is_dir()
    assert refs <= before


@pytest.mark.parametrize("version", ["1.20.3", "2.2.0"])
def test_a_quiet_job_is_anchored_at_its_newest_checkpoints_start(tmp_path: Path, version: str) -> None:
    """Past --older-than + --margin (95 minutes against 1h + 10m) the job is collected, but what
    it wrote since its newest chk-N began, less the margin, may be that checkpoint's: in flight.
    An orphan of an earlier attempt, five hours old, goes."""
    sc = Scenario(version, "basic", tmp_path)
    job, chk, refs = first_checkpoint_uploading(sc, 95 * MIN)
    orphan = sc.plant(f"checkpoints/{job.name}/shared/orphan-of-an-aborted-attempt", time.time() - 5 * 3600)
    _healthy, rebase = with_a_healthy_job(sc)
    args = [str(sc.checkpoints), "--collect-dead-jobs", *sc.rebase, *rebase, "--older-than", "1h", "--margin", "10m",
            "--force"]  # fmt: skip
    plan = plan_json(*args)
    assert not plan["blocked"], codes(plan)
    assert {c for c in candidates(plan) if c.startswith(sc.uri(job) + "/")} == {sc.uri(orphan)}
    kept = protected(plan)
    assert {kept.get(u) for u in refs} == {"in-flight"}
    evidence = {json.dumps(p["evidence"]) for p in plan["protected"] if p["path"] in refs}
    assert {json.loads(e)["newest_checkpoint_started"] for e in evidence} == {sc.uri(chk)}
    apply(plan_to_file(tmp_path, *args))
    assert all(Path(u[5:]).is_file() for u in refs) and not orphan.exists()


def test_a_checkpoint_discarded_beside_does_not_hide_the_one_in_flight(tmp_path: Path) -> None:
    """Concurrent checkpoints: chk-N-1, aborted, was discarded 80 minutes ago and left its empty
    directory (that time is its last); chk-N has been uploading for 95. The checkpoint that
    began last by its directory's time is not the one in flight: the highest-numbered one's
    start anchors too, and the earlier of the two holds."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    job, chk, refs = first_checkpoint_uploading(sc, 95 * MIN)
    leftover = job / f"chk-{chk_number(chk) - 1}"
    leftover.mkdir()
    os.utime(leftover, (time.time() - 80 * MIN, time.time() - 80 * MIN))
    _healthy, rebase = with_a_healthy_job(sc)
    args = [str(sc.checkpoints), "--collect-dead-jobs", *sc.rebase, *rebase, "--older-than", "1h", "--margin", "10m",
            "--force"]  # fmt: skip
    plan = plan_json(*args)
    assert not {c for c in candidates(plan) if c.startswith(sc.uri(job) + "/")}
    assert {protected(plan).get(u) for u in refs} == {"in-flight"}


def test_a_checkpoint_directory_whose_files_keep_arriving_is_the_newest_evidence(tmp_path: Path) -> None:
    """Its files were written 95 minutes ago, but the chk-N directory changed 20 minutes ago (a
    file arrived, or is arriving): the job is at work, kept whole."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    job, _chk, _refs = first_checkpoint_uploading(sc, 95 * MIN, dir_ago=20 * MIN)
    _healthy, rebase = with_a_healthy_job(sc)
    args = [str(sc.checkpoints), "--collect-dead-jobs", *sc.rebase, *rebase, "--older-than", "1h", "--margin", "10m",
            "--force"]  # fmt: skip
    plan = plan_json(*args)
    assert not candidates(plan)
    assert {protected(plan).get(u) for u in files_of(job)} == {"job-active"}


def test_a_changelog_jobs_materialization_before_its_first_checkpoint_is_kept(tmp_path: Path) -> None:
    """A changelog job materializes its state (here into taskowned/) on its own schedule: the
    files its first checkpoint will reference were uploaded before that checkpoint began. Kept
    while the job wrote within --older-than + --margin: its chk-N, or its changelog (DSTL)
    files in the scanned --changelog-dir, which it writes while it runs."""
    sc = Scenario("1.20.3", "changelog", tmp_path)
    job, chk, _refs = first_checkpoint_uploading(sc, 95 * MIN, others_ago=150 * MIN)
    materialized = files_of(job / "taskowned")
    assert materialized and not any(chk.iterdir())  # an empty chk-N: its directory is all it shows
    _healthy, rebase = with_a_healthy_job(sc)
    dstl = sc.root / "dstl"
    args = [str(sc.checkpoints), "--changelog-dir", str(dstl), "--collect-dead-jobs", *sc.rebase, *rebase,
            "--older-than", "1h", "--force"]  # fmt: skip
    plan = plan_json(*args)
    assert not candidates(plan), codes(plan)
    assert {protected(plan).get(u) for u in materialized} == {"job-active"}
    apply(plan_to_file(tmp_path, *args))
    assert files_of(job / "taskowned") == materialized
    # past --older-than + --margin by its own files, it still writes its changelog: at work
    for p in (dstl / job.name).rglob("*"):
        if p.is_file():
            os.utime(p, (time.time() - 5 * MIN, time.time() - 5 * MIN))
    logging = plan_json(*args, "--margin", "10m")
    assert {protected(logging).get(u) for u in materialized} == {"job-active"}


def test_a_job_without_any_checkpoint_directory_fails_closed(tmp_path: Path) -> None:
    """No chk-N at all (the job has not begun a checkpoint, or Flink discarded the aborted ones):
    nothing says when a checkpoint began, so the job's own files are the evidence: written 95
    minutes ago, it is kept whole when named as ROOT. Quiet for --older-than + --margin, it is
    collected as before (tests/gc/test_dead_jobs.py, row 17)."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    job, chk, _refs = first_checkpoint_uploading(sc, 95 * MIN)
    shutil.rmtree(chk)
    healthy, rebase = with_a_healthy_job(sc)
    before = files_of(job)
    args = [str(job), str(healthy), *sc.rebase, *rebase, "--older-than", "1h", "--force"]
    plan = plan_json(*args)
    assert not plan["blocked"] and not {c for c in candidates(plan) if c.startswith(sc.uri(job) + "/")}
    assert {protected(plan).get(u) for u in before} == {"job-active"}
    apply(plan_to_file(tmp_path, *args))
    assert files_of(job) == before
    quiet = plan_json(*args, "--margin", "10m")
    assert {c for c in candidates(quiet) if c.startswith(sc.uri(job) + "/")} == before


# --- on S3: a "directory" has no time; its first object (or S3A's marker) is when it began ---------


def upload_first_checkpoint(s3_server, bucket: str, marker: bool) -> dict:
    """A moto bucket holding a healthy job (1.20.3 unaligned, complete) and the 2.2.0 basic job
    taking its first checkpoint, uploaded in order, a second apart: an orphan of an earlier
    attempt; then chk-9 begins (S3A's ``chk-9/`` marker, or its first objects); then the rest of
    what chk-9 references (its ``_metadata`` never lands: a multipart upload in progress is
    invisible). Returns the URIs by kind and the ``gc plan`` arguments that reach them."""
    from tests.support.fixture_cases import manifest
    from tests.support.s3_clock import next_second

    def entry(version: str, scenario: str) -> dict:
        return next(
            e for e in manifest()["entries"] if e["flink_version"] == version and e["scenario"] == scenario
        )

    s3_server.create_bucket(bucket)
    fs = s3_server.filesystem()
    healthy, flight = entry("1.20.3", "unaligned"), entry("2.2.0", "basic")
    data = REPO / healthy["data_dir"]
    fs.pipe({f"{bucket}/healthy/{p.relative_to(data).as_posix()}": p.read_bytes()
             for p in sorted(data.rglob("*")) if p.is_file()})  # fmt: skip
    next_second()
    (job,) = flight["job_ids"]
    base = f"{bucket}/checkpoints/{job}"
    orphan = f"{base}/shared/orphan-of-an-aborted-attempt"
    fs.pipe_file(orphan, b"sst of an attempt before")
    next_second()
    expected = json.loads((REPO / flight["expected_dir"] / "checkpoints" / job / "chk-9.json").read_text())
    own = f"{flight['original_root']}/checkpoints/{job}/"
    refs = {r["path"].removeprefix("file:")[len(own) :] for r in expected["references"]}
    refs.discard("chk-9/_metadata")
    data = REPO / flight["data_dir"] / "checkpoints" / job
    own_files = sorted(f"{base}/{r}" for r in refs if r.startswith("chk-9/"))
    first = {f"{base}/chk-9/"} if marker else set(own_files[:1])
    if marker:
        fs.pipe_file(f"{base}/chk-9/", b"")
    else:
        fs.pipe({k: (data / k[len(base) + 1 :]).read_bytes() for k in first})
    next_second()
    # the shared files, then chk-9's own: only what began chk-9 dates them all
    for batch in ({f"{base}/{r}" for r in refs} - set(own_files), set(own_files) - first):
        fs.pipe({k: (data / k[len(base) + 1 :]).read_bytes() for k in batch})
        next_second()
    rest = {f"{base}/{r}" for r in refs} - first
    args = [f"s3://{bucket}/checkpoints", f"s3://{bucket}/healthy/checkpoints", "--s3-endpoint", s3_server.endpoint,
            "--rebase", f"{flight['original_root']}=s3://{bucket}", "--rebase", f"{healthy['original_root']}=s3://{bucket}/healthy",
            "--collect-dead-jobs", "--force"]  # fmt: skip
    return {"fs": fs, "args": args, "orphan": f"s3://{orphan}", "job": f"s3://{base}",
            "in_flight": {f"s3://{k}" for k in rest | (set() if marker else first)}}  # fmt: skip


@pytest.mark.parametrize("marker", [False, True], ids=["first-object", "marker"])
def test_on_s3_a_first_checkpoint_is_anchored_at_its_first_object(
    s3_server, tmp_path: Path, marker: bool
) -> None:
    """--older-than 0s --margin 0s: every object is old enough, and only the anchor holds what
    was uploaded since chk-9 began (its first object, or the marker, which is itself kept as
    no file's name); the orphan uploaded before it goes. With --margin 1h the job wrote within
    --older-than + --margin: kept whole."""
    from tests.support.s3_copied import exists

    up = upload_first_checkpoint(s3_server, f"first-chk-{'marker' if marker else 'object'}", marker)
    args = [*up["args"], "--older-than", "0s", "--margin", "0s"]
    plan = plan_json(*args)
    assert not plan["blocked"], codes(plan)
    mine = {c for c in candidates(plan) if c.startswith(up["job"] + "/")}
    assert mine == {up["orphan"]}
    assert {protected(plan).get(u) for u in up["in_flight"]} == {"in-flight"}
    whole = plan_json(*up["args"], "--older-than", "0s", "--margin", "1h")
    assert not {c for c in candidates(whole) if c.startswith(up["job"] + "/")}
    assert {protected(whole).get(u) for u in up["in_flight"] | {up["orphan"]}} == {"job-active"}
    ckptctl("gc", "apply", str(plan_to_file(tmp_path, *args)), "--yes", "--s3-endpoint", up["args"][3])
    assert all(exists(up["fs"], u) for u in up["in_flight"]) and not exists(up["fs"], up["orphan"])
