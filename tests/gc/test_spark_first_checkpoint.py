"""Issue 45 row 1 on Spark: the Spark planner anchors a job with no retained checkpoint at its
newest ``chk-N`` exactly as the local one (tests/gc/test_first_checkpoint.py builds the jobs), on
local roots and on S3, file by file (:func:`tests.gc.test_spark_plan.assert_same_plan`)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from ckptctl.checkpoint.rebase import Rebase
from ckptctl.gc import GcOptions
from ckptctl.storage import Storage, StorageOptions
from tests.gc.test_first_checkpoint import MIN, files_of, first_checkpoint_uploading, upload_first_checkpoint
from tests.gc.test_spark_plan import CLOCK, assert_same_plan, fixed_clock  # noqa: F401 (fixtures)
from tests.support.gc_support import Scenario, add_job


def reasons(plan: dict) -> dict[str, str]:
    return {d["path"]: d["reason"] for d in plan["candidates"] + plan["protected"]}


@pytest.mark.parametrize("margin", [3600.0, 600.0], ids=["margin-1h", "margin-10m"])
@pytest.mark.usefixtures("spark")
def test_spark_anchors_jobs_without_a_retained_checkpoint_as_in_process(tmp_path: Path, margin) -> None:
    """Four jobs without a retained checkpoint in one plan, --collect-dead-jobs --older-than 1h:
    the first checkpoint of a job uploading for 95 minutes (its root a directory of jobs, beside
    a healthy job), the same whose chk-N directory changed 20 minutes ago (named as ROOT), a
    changelog job whose materialization is older than its chk-N, a job with no chk-N at all
    (named as ROOT). With --margin 1h each is kept whole; with 10m the quiet ones are anchored
    at their newest chk-N, and the one with none is collected."""
    a, b = Scenario("2.2.0", "basic", tmp_path), Scenario("1.20.3", "basic", tmp_path)
    c, d = Scenario("1.20.3", "changelog", tmp_path), Scenario("2.2.0", "unaligned", tmp_path)
    a_job, a_chk, a_refs = first_checkpoint_uploading(a, 95 * MIN)
    a.plant(f"checkpoints/{a_job.name}/shared/orphan-of-an-aborted-attempt", time.time() - 5 * 3600)
    b_job, _b_chk, _ = first_checkpoint_uploading(b, 95 * MIN, dir_ago=20 * MIN)
    c_job, _c_chk, _ = first_checkpoint_uploading(c, 95 * MIN, others_ago=150 * MIN)
    d_job, d_chk, _ = first_checkpoint_uploading(d, 95 * MIN)
    shutil.rmtree(d_chk)
    _healthy, rebase = add_job(a, "1.20.3", "unaligned")
    CLOCK[0] = time.time()
    options = GcOptions(
        (str(a.checkpoints), str(b_job), str(c.checkpoints), str(d_job)), changelog_dirs=(str(c.root / "dstl"),),
        older_than=3600.0, margin=margin, force=True, collect_dead_jobs=True, max_delete_fraction=1.0,
        rebase=Rebase.of([*((sc.original, str(sc.root)) for sc in (a, b, c, d)), tuple(rebase[1].split("="))]),
    )  # fmt: skip
    plan = assert_same_plan(Storage(), options, on_executors=(False, True))
    why = reasons(plan)
    if margin == 3600.0:
        for job in (a_job, b_job, c_job, d_job):
            assert {why[u] for u in files_of(job)} == {"job-active"}, job
    else:
        assert {why[u] for u in a_refs} == {"in-flight"}
        assert {why[u] for u in files_of(b_job)} == {"job-active"}  # its chk-N changed 20 minutes ago
        assert {why[u] for u in files_of(d_job)} == {"unreferenced-shared"}


@pytest.mark.usefixtures("spark")
def test_spark_anchors_a_first_checkpoint_on_s3_as_in_process(s3_server) -> None:
    """The S3 job of tests/gc/test_first_checkpoint.py (S3A's marker began chk-9): the same plan."""
    up = upload_first_checkpoint(s3_server, "spark-first-chk", marker=True)
    CLOCK[0] = time.time()
    bucket = "s3://spark-first-chk"
    options = GcOptions((f"{bucket}/checkpoints", f"{bucket}/healthy/checkpoints"), older_than=0.0, margin=0.0,
                        force=True, collect_dead_jobs=True,
                        rebase=Rebase.of([tuple(up["args"][i].split("=", 1)) for i in (5, 7)]))  # fmt: skip
    plan = assert_same_plan(Storage(StorageOptions.from_env(s3_server.endpoint)), options)
    why = reasons(plan)
    assert {why[u] for u in up["in_flight"]} == {"in-flight"} and why[up["orphan"]] == "unreferenced-shared"
