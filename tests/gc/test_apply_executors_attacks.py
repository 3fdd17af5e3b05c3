"""Attacks on ``gc apply`` on Spark executors: re-runs over stale manifests, the ``_metadata``-first
rule across runs, and whether the exit code tells the truth. Real Flink fixtures, one embedded
``local[*]`` session for the module."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ckptctl.gc import build_plan
from ckptctl.gc.spark.delete import delete_on_executors
from ckptctl.storage import Storage, StorageOptions
from tests.support.executor_apply import rows
from tests.support.gc_support import T0, Scenario, ckptctl


def touch_later(path: Path) -> None:
    """``path`` modified after the plan: same bytes, a later mtime (another file for the plan)."""
    mtime = path.stat().st_mtime + 60
    os.utime(path, (mtime, mtime))


def restorable(checkpoint: str, sc: Scenario) -> bool:
    verified = ckptctl("verify", checkpoint, *sc.rebase, "--engine", "local", "--json", expect=None)
    return verified.exit_code == 0 and json.loads(verified.stdout)["ok"] is True


def test_an_expired_metadata_skipped_once_still_stops_its_files_on_a_rerun(spark, tmp_path: Path) -> None:
    """Run 1: one expired checkpoint's _metadata changed since the plan: skipped, nothing else goes.
    Run 2 with the same manifest directory must not take that skip as settled and delete the
    checkpoint's files while its _metadata is still there."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    plan = build_plan(Storage(), sc.gc_options(keep_last=1))
    assert not plan.refusals and len(plan.expired) == 2
    kept = sorted(e["path"] for e in plan.expired)[0]
    touch_later(Path(kept[5:]) / "_metadata")
    args = (spark, StorageOptions(), rows(plan), plan.options.scopes(), str(tmp_path / "m"))

    first = delete_on_executors(*args)
    assert not first.complete and first.not_attempted > 0
    second = delete_on_executors(*args)
    assert not second.complete and second.not_attempted > 0
    assert second.to_json()["skipped"][0]["path"] == kept + "/_metadata"
    assert restorable(kept, sc), "the checkpoint whose _metadata stayed must stay restorable"


def test_a_manifest_of_an_earlier_plan_settles_nothing_for_a_recreated_file(spark, tmp_path: Path) -> None:
    """The same manifest directory (e.g. `gc plan -o plan.json` run again) and a file deleted by the
    first run, re-created since and an orphan of the new plan: judged again, not reported as
    settled by the earlier run and left behind."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    rel = f"checkpoints/{sc.jobs()[0].name}/shared/orphan"
    orphan = sc.plant(rel)
    manifests = str(tmp_path / "m")
    plan = build_plan(Storage(), sc.gc_options())
    assert delete_on_executors(spark, StorageOptions(), rows(plan), plan.options.scopes(), manifests).complete
    assert not orphan.exists()

    orphan = sc.plant(rel, mtime=T0 - 7200)  # another mtime: another file
    again = build_plan(Storage(), sc.gc_options())
    assert [c.path for c in again.candidates] == [sc.uri(orphan)]
    result = delete_on_executors(
        spark, StorageOptions(), rows(again), again.options.scopes(), manifests
    ).to_json()
    assert result["settled_by_earlier_runs"] == {} and result["deleted_files"] == 1
    assert not orphan.exists()


def test_cli_exit_is_1_when_an_expired_metadata_changes_after_revalidation(
    spark, tmp_path: Path, monkeypatch
) -> None:
    """The driver re-validated the plan, then a checkpoint's _metadata changed before the executors
    listed it: nothing else may go and the command must not exit 0 (it did, with failed_files 0)."""
    import ckptctl.gc.spark.apply as gc_spark
    from tests.support.cli_runner import cli

    sc = Scenario("2.2.0", "basic", tmp_path)
    plan_file = tmp_path / "plan.json"
    ckptctl("gc", "plan", str(sc.checkpoints), *sc.rebase, "--older-than", "1d", "--margin", "10m", "--force",
            "--keep-last", "1", "-o", str(plan_file))  # fmt: skip
    expired = sorted(e["path"] for e in json.loads(plan_file.read_text())["expired"])
    revalidate = gc_spark.revalidate_spark  # --engine spark re-validates on Spark

    def then_a_change(*args, **kwargs):
        out = revalidate(*args, **kwargs)
        touch_later(Path(expired[0][5:]) / "_metadata")
        return out

    monkeypatch.setattr(gc_spark, "revalidate_spark", then_a_change)
    result = cli("gc", "apply", str(plan_file), "--yes", "--json", "--engine", "spark")
    assert result.exit_code == 1, result.output
    out = json.loads(result.stdout)
    assert out["not_attempted_files"] > 0 and out["failed_files"] == 0
    assert restorable(expired[0], sc)


def test_s3_an_object_recreated_in_the_second_it_was_planned_is_never_a_candidate(
    s3_server, tmp_path: Path, monkeypatch
) -> None:
    """Deleted and written again with the same size within the second it was first written, an
    object has the same size and LastModified: no listing tells it apart. It must never be a
    candidate, even with --older-than 0s: the plan's clock (S3's Date, read before the listing)
    makes it young, so neither the plan nor apply's re-validation lets it go.

    The first write goes where the plan reads its clock, and the clock read is the second S3 stamped
    it with: what a Date read right after the write says (the plan's own steps, hooked). The
    second write follows the plan's listing. A whole plan made between the two writes had to fit
    in one second, and on a loaded machine it never did ("could not plan and re-create the object
    within one second"); nor did a listing and two writes (2-4 s at a load of 25). So the second
    write shares the first one's LastModified when the machine is quick enough, and the plan's
    verdict, the point of the attack, is held either way: an object stamped in the second of the
    plan's clock is young."""
    from datetime import datetime

    from ckptctl.gc.discovery import Discovery
    from tests.support.s3_copied import exists, gc_args, upload_scenario

    bucket = "attack-same-second"
    up = upload_scenario(s3_server, bucket)
    fs, key = up["fs"], f"{bucket}/checkpoints/{next(iter(up['orphans'])).split('/')[4]}/shared/young"
    plan_file = tmp_path / "plan.json"
    seen: dict = {}
    real_clock, real_list = Discovery.clock, Storage.list_files

    def clock(self):
        fs.pipe_file(key, b"written before the plan")
        seen["second"] = datetime.timestamp(fs.info(key, refresh=True)["LastModified"])
        _now, source = real_clock(self)
        return seen["second"], source

    def list_files(self, uri, notes=None):
        listed = list(real_list(self, uri, notes))
        first = [f.mtime for f in listed if f.uri == "s3://" + key]
        if first and "listed" not in seen:
            seen["listed"] = first[0]  # as the plan saw it
            fs.rm_file(key)
            fs.pipe_file(key, b"written again, same size")
        yield from listed

    monkeypatch.setattr(Discovery, "clock", clock)
    monkeypatch.setattr(Storage, "list_files", list_files)
    ckptctl("gc", "plan", *gc_args(bucket, up["entry"], s3_server.endpoint), "-o", str(plan_file))
    assert seen["listed"] == seen["second"], seen  # the plan listed the first write, stamped at its clock
    monkeypatch.undo()
    plan = json.loads(plan_file.read_text())
    assert {c["path"] for c in plan["candidates"]} == up["orphans"]
    assert [p["reason"] for p in plan["protected"] if p["path"] == "s3://" + key] == ["young"]
    ckptctl(
        "gc",
        "apply",
        str(plan_file),
        "--yes",
        "--json",
        "--engine",
        "spark",
        "--s3-endpoint",
        s3_server.endpoint,
    )
    assert exists(fs, "s3://" + key) and fs.cat_file(key) == b"written again, same size"
    assert not any(exists(fs, o) for o in up["orphans"])


def test_local_a_file_replaced_after_it_was_judged_is_not_unlinked(tmp_path: Path) -> None:
    """Apply re-validates, then deletes batch after batch (on executors: after every directory was
    listed, minutes earlier on a big run). A candidate replaced in between (same size, another
    mtime) is another file: the unlink re-checks it on the descriptor it deletes through."""
    from ckptctl.gc import apply_plan, revalidate

    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0]
    for i in range(3):
        sc.plant(f"checkpoints/{job.name}/shared/orphan-{i}")
    storage = Storage()
    plan = build_plan(storage, sc.gc_options())
    plan_data = json.loads(
        json.dumps({**plan.header(), "candidates": [c.as_dict() for c in plan.candidates]})
    )
    fresh, go, skipped = revalidate(storage, plan_data)
    last = Path(go[-1].path[5:])
    replaced = []

    def replace_the_last_once(_n: int) -> None:
        if not replaced:
            size = last.stat().st_size
            last.unlink()
            last.write_bytes(os.urandom(size))
            os.utime(last, (T0 + 7, T0 + 7))
            replaced.append(last.read_bytes())

    result = apply_plan(
        storage, fresh, go, skipped, manifest=None, batch_size=1, on_batch=replace_the_last_once
    )
    assert last.exists() and last.read_bytes() == replaced[0]
    assert [f["path"] for f in result.failed] == [go[-1].path]
    assert result.failed[0]["error"].startswith("changed since it was judged")
    assert {d.path for d in result.deleted} == {d.path for d in go[:-1]}


def test_an_edited_manifest_refuses_the_run_naming_file_and_byte_before_anything_goes(
    spark, tmp_path: Path
) -> None:
    """A manifest line that no batch wrote (edited by hand, another tool's) used to kill the Spark
    job with "run the same apply again", which fails the same way forever."""
    from ckptctl.gc.revalidation import GcApplyRefused

    sc = Scenario("2.2.0", "basic", tmp_path)
    orphan = sc.plant(f"checkpoints/{sc.jobs()[0].name}/shared/orphan")
    plan = build_plan(Storage(), sc.gc_options())
    manifests = tmp_path / "m"
    manifests.mkdir()
    good = json.dumps(
        {"batch": "x-0", "path": sc.uri(orphan), "size": 100, "mtime": 1.0, "outcome": "deleted"}
    )
    (manifests / "batch-x-0.jsonl").write_text(good + "\n" + '{"path": ["not", "a", "path"]}\n')
    with pytest.raises(
        GcApplyRefused, match=rf"batch-x-0\.jsonl: byte {len(good) + 1}: not a line of a gc batch"
    ):
        delete_on_executors(spark, StorageOptions(), rows(plan), plan.options.scopes(), str(manifests))
    assert orphan.exists()


def test_s3_over_1000_candidates_in_one_directory_with_odd_names_across_listing_pages(
    s3_server, spark, tmp_path: Path
) -> None:
    """One directory of 1001 planted orphans between the job's live files, plus names that sort
    before digits and after ASCII (percent signs, spaces, NFC and NFD accents): the range listing
    crosses S3's 1000-key page, the deletions a DeleteObjects batch; every candidate goes, every
    live object stays, and the two spellings of "é" are two files."""
    from tests.support.executor_apply import CountingProxy, bulk_bucket, objects, s3_plan

    bucket = "attack-pages"
    odd = ["%41%2F..%2Fx", "with space", "zz-\u00e9", "zz-e\u0301", "!first"]
    up = bulk_bucket(s3_server, bucket, {"shared": 1001}, extra=odd)
    plan = s3_plan(up, bucket, s3_server.endpoint)
    candidates = {c.path for c in plan.candidates}
    shared = f"s3://{bucket}/checkpoints/{up['job']}/shared/"
    assert {shared + n for n in odd} | {shared + f"bulk-{i:04d}" for i in range(1001)} <= candidates
    before = objects(up, bucket)
    with CountingProxy(s3_server.endpoint) as proxy:
        result = delete_on_executors(
            spark,
            StorageOptions.from_env(proxy.endpoint),
            rows(plan),
            plan.options.scopes(),
            str(tmp_path / "m"),
        ).to_json()
    assert result["deleted_files"] == len(candidates) and not result["failed"] and not result["skipped"]
    assert objects(up, bucket) == before - candidates
    assert not (objects(up, bucket) - before) and up["referenced"] <= objects(up, bucket)
    assert proxy.lists() <= 3 + len({c.rpartition("/")[0] for c in candidates}), proxy.lists()


def test_a_trash_inside_a_root_or_around_one_is_refused_before_anything_goes(spark, tmp_path: Path) -> None:
    from ckptctl.gc.revalidation import GcApplyRefused

    sc = Scenario("2.2.0", "basic", tmp_path)
    orphan = sc.plant(f"checkpoints/{sc.jobs()[0].name}/shared/orphan")
    plan = build_plan(Storage(), sc.gc_options())
    for trash in (sc.checkpoints / "trash", tmp_path, sc.checkpoints / ".." / "checkpoints" / "t"):
        with pytest.raises(GcApplyRefused, match="overlapping scopes: --trash"):
            delete_on_executors(
                spark,
                StorageOptions(),
                rows(plan),
                plan.options.scopes(),
                str(tmp_path / "m"),
                trash=str(trash),
            )
    assert orphan.exists() and not (tmp_path / "m").exists()


def test_a_candidate_given_twice_is_deleted_and_counted_once(spark, tmp_path: Path) -> None:
    """Candidates from a DataFrame may repeat a row (a union of two plans' outputs): the counts and
    bytes reported must be those of the files, not of the rows (they were doubled)."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0]
    orphans = [sc.plant(f"checkpoints/{job.name}/shared/orphan-{i}", size=100 + i) for i in range(4)]
    plan = build_plan(Storage(), sc.gc_options())
    result = delete_on_executors(
        spark, StorageOptions(), rows(plan) * 2, plan.options.scopes(), str(tmp_path / "m"), batch=3
    ).to_json()
    assert result["deleted_files"] == len(plan.candidates) and result["gone_files"] == 0
    assert result["deleted_bytes"] == sum(c.size for c in plan.candidates)
    assert not any(o.exists() for o in orphans)
