"""``gc apply`` on Spark executors (issue 23): a plan's candidates deleted by numbered batches
after one fresh listing per directory, with a manifest per batch that lets a re-run finish.

S3 is a moto server on loopback, reached through a proxy that logs (and may disturb) every
request; Spark is one embedded ``local[*]`` session for the module. Plans are made by the local
planner on the real Flink fixtures.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from ckptctl.gc import build_plan
from ckptctl.gc.spark.delete import SparkApplyFailed, delete_on_executors
from ckptctl.storage import Storage, StorageOptions
from tests.support.executor_apply import (
    CountingProxy,
    bulk_bucket,
    is_delete,
    manifest_records,
    objects,
    rows,
    s3_plan,
)
from tests.support.faulty_proxy import FaultyProxy, Rule
from tests.support.gc_support import Scenario, ckptctl
from tests.support.s3_clock import next_second
from tests.support.s3_copied import upload_scenario

# ---------------------------------------------------------------------------------------------
# S3: exactly the unchanged candidates go, in ceil(n/1000) DeleteObjects and one LIST per directory


def test_s3_deletes_exactly_the_unchanged_candidates_in_few_requests(
    s3_server, spark, tmp_path: Path
) -> None:
    bucket = "spark-apply-bulk"
    up = bulk_bucket(s3_server, bucket, {"shared": 500, "taskowned": 400, "chk-78": 300})
    plan = s3_plan(up, bucket, s3_server.endpoint)
    candidates = {c.path for c in plan.candidates}
    assert len(candidates) > 1200 and not candidates & up["referenced"]  # two DeleteObjects at least
    # between the plan and apply: one candidate rewritten with another size, one deleted and re-created
    modified = f"s3://{bucket}/checkpoints/{up['job']}/shared/bulk-0003"
    recreated = f"s3://{bucket}/checkpoints/{up['job']}/taskowned/bulk-0004"
    next_second()
    up["fs"].pipe_file(modified[5:], b"rewritten, longer")
    up["fs"].rm_file(recreated[5:])
    up["fs"].pipe_file(recreated[5:], b"x" * (4 % 7 + 1))  # same size, a later mtime
    before = objects(up, bucket)

    with CountingProxy(s3_server.endpoint) as proxy:
        result = delete_on_executors(
            spark,
            StorageOptions.from_env(proxy.endpoint),
            rows(plan),
            plan.options.scopes(),
            str(tmp_path / "m"),
        ).to_json()
    n = len(candidates)
    assert result["deleted_files"] == n - 2 and result["failed_files"] == 0
    assert {s["path"]: s["reason"] for s in result["skipped"]} == {
        modified: "changed since the plan (size or mtime of the object now)",
        recreated: "changed since the plan (size or mtime of the object now)",
    }
    assert objects(up, bucket) == before - (candidates - {modified, recreated})
    assert proxy.deletes() <= math.ceil(n / 1000), proxy.deletes()
    directories = {c.rpartition("/")[0] for c in candidates}
    assert proxy.lists() <= len(directories), (proxy.lists(), directories)
    assert len(proxy.log) == proxy.deletes() + proxy.lists(), "no HEAD or GET per file"
    recorded = manifest_records(tmp_path / "m")
    assert sorted(r["path"] for r in recorded) == sorted(candidates)


def test_s3_throttling_and_5xx_change_nothing_in_the_outcome(s3_server, spark, tmp_path: Path) -> None:
    bucket = "spark-apply-faulty"
    up = bulk_bucket(s3_server, bucket, {"shared": 40, "chk-78": 30})
    plan = s3_plan(up, bucket, s3_server.endpoint)
    candidates = {c.path for c in plan.candidates}
    before = objects(up, bucket)
    with FaultyProxy(s3_server.endpoint, fault_rate=0.3) as proxy:
        result = delete_on_executors(
            spark, StorageOptions.from_env(proxy.endpoint), rows(plan), plan.options.scopes(), str(tmp_path / "m"),
            batch=25,
        ).to_json()  # fmt: skip
    assert proxy.faults >= 5, "the proxy must actually have injected failures"
    assert result["deleted_files"] == len(candidates) and not result["failed"] and not result["skipped"]
    assert objects(up, bucket) == before - candidates


def test_s3_a_crash_half_way_is_finished_by_a_rerun(s3_server, spark, tmp_path: Path) -> None:
    """The third DeleteObjects goes through, then the manifests cannot be written: the job dies
    with a batch deleted and not recorded. The same apply again finishes; nothing live goes."""
    bucket = "spark-apply-crash"
    up = bulk_bucket(s3_server, bucket, {"shared": 36, "taskowned": 24})
    plan = s3_plan(up, bucket, s3_server.endpoint)
    candidates = {c.path for c in plan.candidates}
    before = objects(up, bucket)
    manifests = tmp_path / "manifests"
    seen = []

    def third_delete_on(method: str, path: str) -> bool:
        if is_delete(method, path):
            seen.append(path)
        return is_delete(method, path) and len(seen) >= 3

    def break_manifest_dir() -> None:
        manifests.rename(tmp_path / "aside")
        manifests.write_text("not a directory: every later manifest write fails")

    crash = Rule(match=third_delete_on, before=break_manifest_dir)
    with FaultyProxy(s3_server.endpoint, fault_rate=0.0, rules=[crash]) as proxy:
        options = StorageOptions.from_env(proxy.endpoint)
        manifests.mkdir()
        with pytest.raises(SparkApplyFailed, match="run the same apply again"):
            delete_on_executors(spark, options, rows(plan), plan.options.scopes(), str(manifests), batch=10)
        assert crash.fired
        manifests.unlink()
        (tmp_path / "aside").rename(manifests)
        crash.match = lambda method, path: False
        after_crash = {r["path"] for r in manifest_records(manifests)}
        assert after_crash and after_crash < candidates
        result = delete_on_executors(
            spark, options, rows(plan), plan.options.scopes(), str(manifests), batch=10
        )
    out = result.to_json()
    assert out["failed_files"] == 0 and out["skipped_files"] == 0
    assert out["gone_files"] >= 1, "the batch deleted before the crash is found gone, counted as done"
    assert sum(out["settled_by_earlier_runs"].values()) == len(after_crash)
    assert out["deleted_files"] + out["gone_files"] + len(after_crash) == len(candidates)
    assert objects(up, bucket) == before - candidates
    recorded = manifest_records(manifests)
    assert {r["path"] for r in recorded} == candidates
    assert all(r["outcome"] in ("deleted", "gone") for r in recorded)


def test_s3_keys_deleteobjects_refuses_are_failed_never_deleted(s3_server, spark, tmp_path: Path) -> None:
    import boto3

    bucket = "spark-apply-denied"
    up = upload_scenario(s3_server, bucket)
    plan = s3_plan(up, bucket, s3_server.endpoint)
    denied = min(o for o in up["orphans"] if "/shared/planted-" in o)
    client = boto3.client("s3", endpoint_url=s3_server.endpoint, region_name="us-east-1")
    client.put_bucket_policy(Bucket=bucket, Policy=json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Deny", "Principal": "*", "Action": "s3:DeleteObject",
                       "Resource": f"arn:aws:s3:::{denied[5:]}"}],
    }))  # fmt: skip
    try:
        result = delete_on_executors(
            spark,
            StorageOptions.from_env(s3_server.endpoint),
            rows(plan),
            plan.options.scopes(),
            str(tmp_path / "m"),
        ).to_json()
    finally:
        client.delete_bucket_policy(Bucket=bucket)
    assert [f["path"] for f in result["failed"]] == [denied] and "AccessDenied" in result["failed"][0][
        "error"
    ]
    assert result["deleted_files"] == len(plan.candidates) - 1
    assert objects(up, bucket) & {c.path for c in plan.candidates} == {denied}
    assert [r["outcome"] for r in manifest_records(tmp_path / "m") if r["path"] == denied] == ["failed"]


# ---------------------------------------------------------------------------------------------
# local files: the same outcomes through the O_NOFOLLOW remover


def test_local_changed_files_and_a_swapped_in_symlink_are_never_deleted(spark, tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0]
    shared = [sc.plant(f"checkpoints/{job.name}/shared/orphan-{i}") for i in range(6)]
    owned = [sc.plant(f"checkpoints/{job.name}/taskowned/orphan-{i}") for i in range(4)]
    plan = build_plan(Storage(), sc.gc_options())
    assert {sc.uri(p) for p in shared + owned} <= {c.path for c in plan.candidates}
    shared[0].write_bytes(b"rewritten")  # another size
    size, mtime = shared[1].stat().st_size, shared[1].stat().st_mtime
    shared[1].unlink()
    shared[1].write_bytes(os.urandom(size))  # re-created: same size, another mtime
    assert shared[1].stat().st_mtime != mtime
    outside = tmp_path / "outside"  # the link's target: same names, not ours
    outside.mkdir()
    for p in owned:
        (outside / p.name).write_bytes(b"not ours")
    (job / "taskowned").rename(tmp_path / "taskowned-moved-away")
    (job / "taskowned").symlink_to(outside, target_is_directory=True)
    strays = [  # rows no planner writes: outside the roots, not in normal form
        (
            sc.uri(outside / owned[0].name),
            8,
            (outside / owned[0].name).stat().st_mtime,
            "unreferenced-shared",
        ),
        (
            sc.uri(job) + "/shared/../shared/" + shared[2].name,
            100,
            shared[2].stat().st_mtime,
            "unreferenced-shared",
        ),
    ]

    result = delete_on_executors(
        spark, StorageOptions(), rows(plan) + strays, plan.options.scopes(), str(tmp_path / "m")
    ).to_json()
    assert all((outside / p.name).read_bytes() == b"not ours" for p in owned)
    assert shared[0].exists() and shared[1].exists()
    assert not any(p.exists() for p in shared[2:])
    assert {f["path"] for f in result["failed"]} == {sc.uri(p) for p in owned}
    assert all("symbolic link" in f["error"] for f in result["failed"])
    skipped = {s["path"]: s["reason"] for s in result["skipped"]}
    assert skipped[sc.uri(shared[0])].startswith("changed since the plan")
    assert skipped[sc.uri(shared[1])].startswith("changed since the plan")
    assert skipped[strays[0][0]] == "outside the scanned roots: refusing to delete"
    assert skipped[strays[1][0]] == "path not in normal form: refusing to delete"
    assert all(Path(u[5:]).exists() for u in sc.referenced_by_flink())


def test_local_plan_applied_on_executors_leaves_every_retained_checkpoint_restorable(
    spark, tmp_path: Path
) -> None:
    """End to end on a real Flink root: --keep-last 1 expires two checkpoints; the plan's candidates
    are read back from Parquet as a DataFrame; the expired _metadata go first, in a batch of their
    own on the driver; then `ckptctl verify` passes on every retained checkpoint."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0]
    for i in range(5):
        sc.plant(f"checkpoints/{job.name}/shared/orphan-{i}")
    plan = build_plan(Storage(), sc.gc_options(keep_last=1))
    assert not plan.refusals and len(plan.expired) == 2
    expired_metadata = {e["path"] + "/_metadata" for e in plan.expired}
    assert expired_metadata <= {c.path for c in plan.candidates}

    # the candidates as the Spark planner hands them over: Parquet, partitioned by job
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({
        "path": [r[0] for r in rows(plan)], "size": [r[1] for r in rows(plan)], "mtime": [r[2] for r in rows(plan)],
        "reason": [r[3] for r in rows(plan)], "job": [job.name] * len(plan.candidates),
    })  # fmt: skip
    pq.write_to_dataset(table, str(tmp_path / "candidates"), partition_cols=["job"])
    frame = spark.read.parquet(str(tmp_path / "candidates"))

    result = delete_on_executors(
        spark, StorageOptions(), frame, plan.options.scopes(), str(tmp_path / "m"), batch=3
    ).to_json()
    assert result["deleted_files"] == len(plan.candidates) and not result["failed"] and not result["skipped"]
    assert not any(Path(c.path[5:]).exists() for c in plan.candidates)
    first = [r for r in manifest_records(tmp_path / "m") if r["batch"].endswith("-m0")]
    assert {r["path"] for r in first} == expired_metadata
    for retained in plan.retained:
        verified = ckptctl("verify", retained["path"], *sc.rebase, "--engine", "local", "--json")
        assert json.loads(verified.stdout)["ok"] is True


def test_cli_gc_apply_engine_spark_deletes_on_executors_and_removes_emptied_checkpoints(
    spark, tmp_path: Path
) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0]
    orphans = [sc.plant(f"checkpoints/{job.name}/shared/orphan-{i}") for i in range(3)]
    plan_file = tmp_path / "plan.json"
    ckptctl("gc", "plan", str(sc.checkpoints), *sc.rebase, "--older-than", "1d", "--margin", "10m", "--force",
            "--keep-last", "1", "-o", str(plan_file))  # fmt: skip
    plan = json.loads(plan_file.read_text())
    out = json.loads(ckptctl("gc", "apply", str(plan_file), "--yes", "--json", "--engine", "spark").stdout)
    assert out["engine"] == "spark" and out["deleted_files"] == len(plan["candidates"]) and not out["failed"]
    assert out["manifest"] == "file:" + str(plan_file) + ".manifest.d"
    assert {r["path"] for r in manifest_records(Path(str(plan_file) + ".manifest.d"))} == {
        c["path"] for c in plan["candidates"]
    }
    assert not any(o.exists() for o in orphans)
    assert sorted(p.name for p in job.iterdir() if p.name.startswith("chk-")) == ["chk-9"], "emptied chk-N go"


def test_a_manifest_dir_in_a_root_or_holding_other_files_is_refused_before_anything_goes(
    spark, tmp_path: Path
) -> None:
    from ckptctl.gc.revalidation import GcApplyRefused

    sc = Scenario("2.2.0", "basic", tmp_path)
    orphan = sc.plant(f"checkpoints/{sc.jobs()[0].name}/shared/orphan")
    plan = build_plan(Storage(), sc.gc_options())
    inside = sc.checkpoints / "manifests"
    with pytest.raises(GcApplyRefused, match="overlapping scopes"):
        delete_on_executors(spark, StorageOptions(), rows(plan), plan.options.scopes(), str(inside))
    foreign = tmp_path / "m"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(GcApplyRefused, match="not a gc batch manifest"):
        delete_on_executors(spark, StorageOptions(), rows(plan), plan.options.scopes(), str(foreign))
    assert orphan.exists() and not inside.exists()


def test_local_trash_on_executors_keeps_the_whole_path_and_never_overwrites(spark, tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0]
    orphans = [sc.plant(f"checkpoints/{job.name}/shared/orphan-{i}") for i in range(3)]
    plan = build_plan(Storage(), sc.gc_options())
    trash = tmp_path / "trash"
    occupied = trash / "file" / str(orphans[0]).lstrip("/")  # a file of an earlier run, same name
    occupied.parent.mkdir(parents=True)
    occupied.write_bytes(b"earlier")
    contents = {o: o.read_bytes() for o in orphans}

    result = delete_on_executors(
        spark, StorageOptions(), rows(plan), plan.options.scopes(), str(tmp_path / "m"), trash=str(trash)
    ).to_json()
    assert result["deleted_files"] == len(plan.candidates) and result["trash"] == "file:" + str(trash)
    assert occupied.read_bytes() == b"earlier"
    assert Path(str(occupied) + ".~1~").read_bytes() == contents[orphans[0]]
    for o in orphans[1:]:
        assert (trash / "file" / str(o).lstrip("/")).read_bytes() == contents[o]
    assert not any(o.exists() for o in orphans)
    moved = {r["path"]: r["trash_path"] for r in manifest_records(tmp_path / "m")}
    assert moved[sc.uri(orphans[0])] == "file:" + str(occupied) + ".~1~"
