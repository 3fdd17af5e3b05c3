"""``gc apply`` of a Spark plan: the candidates go from the re-validating join to the executors'
deletion without passing through the driver (issue 23). A real plan and apply through the CLI,
every value Spark returns to the driver recorded: of hundreds of candidates, only the few the
plan's aggregates name (the first file per reason, the expired ``_metadata``) are ever seen."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from tests.support.executor_apply import manifest_records
from tests.support.gc_support import Scenario, ckptctl

MASTER = "local[*]"


class DriverResults:
    """Everything Spark hands to the driver (DataFrame and RDD collects, local iterators, takes),
    kept as text to search for paths."""

    def __init__(self, monkeypatch) -> None:
        from pyspark import RDD
        from pyspark.sql.classic.dataframe import DataFrame  # not pyspark.sql.DataFrame: its base

        self.texts: list[str] = []
        for cls, names in (
            (DataFrame, ("collect", "toLocalIterator", "toArrow")),
            (RDD, ("collect", "toLocalIterator", "take")),
        ):
            for name in names:
                monkeypatch.setattr(cls, name, self.recording(getattr(cls, name)))

    def recording(self, method):
        def recorded(*args, **kwargs):
            out = method(*args, **kwargs)
            if not isinstance(out, list):  # an iterator or a table: recorded whole, handed on
                out = list(out) if not hasattr(out, "to_pylist") else out
            self.texts.append(repr(out.to_pylist() if hasattr(out, "to_pylist") else out))
            return iter(out) if method.__name__ == "toLocalIterator" else out

        return recorded

    def paths_seen(self, paths: set[str]) -> set[str]:
        blob = "\n".join(self.texts)
        return {p for p in paths if p in blob}


def test_apply_of_a_spark_plan_never_brings_the_candidates_to_the_driver(
    spark, tmp_path: Path, monkeypatch
) -> None:
    import ckptctl.gc.spark.classify as spark_classify
    import ckptctl.gc.spark.plan as spark_plan

    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0].name
    planted = [sc.plant(f"checkpoints/{job}/shared/orphan-{i:04d}") for i in range(300)]
    planted += [sc.plant(f"checkpoints/{job}/taskowned/orphan-{i:04d}") for i in range(100)]
    monkeypatch.setattr(spark_plan, "INLINE_FILES", 100)  # the lists in Parquet only, as at bucket scale
    monkeypatch.setattr(spark_classify, "COLLECT_FILES", 100)  # and read and written on the executors
    plan_file = tmp_path / "plan.json"
    ckptctl("gc", "plan", str(sc.checkpoints), *sc.rebase, "--older-than", "1d", "--margin", "10m", "--force",
            "--keep-last", "1", "--engine", "spark", "--master", MASTER, "-o", str(plan_file))  # fmt: skip
    written = json.loads(plan_file.read_text())
    assert not written["candidates"] and written["files"]["inline"] is False
    lists = pq.read_table(tmp_path / "plan.parquet", filters=[("outcome", "=", "candidates")]).to_pylist()
    candidates = {r["path"] for r in lists}
    assert {sc.uri(p) for p in planted} <= candidates and len(candidates) == written["files"]["candidates"]
    changed = planted[7]
    changed.write_bytes(b"rewritten since the plan")

    seen = DriverResults(monkeypatch)
    out = json.loads(ckptctl("gc", "apply", str(plan_file), "--yes", "--json", "--batch-size", "100").stdout)

    assert out["engine"] == "spark" and out["failed_files"] == 0 and out["not_attempted_files"] == 0
    assert out["deleted_files"] == len(candidates) - 1 and out["batches"] >= 4
    assert out["skipped_files"] == 1 and out["skipped"][0]["path"] == sc.uri(changed)
    assert changed.exists() and not any(p.exists() for p in planted if p != changed)
    recorded = {r["path"] for r in manifest_records(Path(str(plan_file) + ".manifest.d"))}
    assert recorded == candidates - {sc.uri(changed)}
    on_driver = seen.paths_seen(candidates)
    assert seen.texts and len(on_driver) <= 10, sorted(on_driver)[:20]
