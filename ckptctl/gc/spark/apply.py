"""``gc apply`` of a plan made on Spark: re-plan on Spark, keep the unchanged candidates on the executors."""

from __future__ import annotations

import functools
from typing import Any

from ckptctl import storage as st
from ckptctl.gc.reasons import Reason
from ckptctl.gc.revalidation import CHANGED, CHANGED_WHY, WAITING, WAITING_WHY
from ckptctl.gc.spark.plan import SparkPlan, read_lists, release
from ckptctl.gc.spark.planner import build_plan_spark
from ckptctl.storage import Storage


def revalidate_spark(storage: Storage, plan_data: dict[str, Any], plan_file: str, master: str):
    """:func:`ckptctl.gc.apply.revalidate` for a plan made on Spark: re-plan on Spark with the
    plan's options (:func:`ckptctl.gc.revalidation.replanned`); the candidates still candidates
    with the same size and mtime are found by a join on executors (:func:`unchanged_candidates`,
    the rule of :func:`ckptctl.gc.revalidation.still_candidates`) and stay there
    (:func:`candidates_to_apply`).
    Returns (fresh plan, :class:`ckptctl.gc.spark.delete.ToApply`)."""
    from pyspark import StorageLevel

    from ckptctl.gc.planfile import options_from_plan, validate
    from ckptctl.gc.revalidation import replanned

    fresh = replanned(
        plan_data, validate, lambda: build_plan_spark(storage, options_from_plan(plan_data), master)
    )
    # read by several jobs below: decided once (the plan's lists are decided again at each read)
    proposed = fresh.files.frame.filter("outcome = 'candidates'").persist(StorageLevel.MEMORY_AND_DISK)
    try:
        spark = fresh.files.frame.sparkSession
        if plan_data.get("files") and not plan_data["files"].get("inline"):
            old = read_lists(spark, plan_file, plan_data["files"])
        else:  # the plan's lists are inline (at most INLINE_FILES): already on the driver
            rows = [(c["path"], c["size"], None if c["mtime"] is None else float(c["mtime"]))
                    for c in plan_data["candidates"]]  # fmt: skip
            old = spark.createDataFrame(rows, "path string, size long, mtime double").selectExpr(
                "'candidates' as outcome", "*"
            )
        from ckptctl.gc.spark.delete import why_dropped_on_executors

        unchanged, skipped = unchanged_candidates(old, proposed)
        why = why_dropped_on_executors(storage.options, skipped, fresh.files.frame)
        return fresh, candidates_to_apply(fresh, unchanged, why)
    finally:
        release([proposed])
        fresh.release()  # what goes is persisted on its own


def unchanged_candidates(old, fresh):
    """(unchanged, skipped): DataFrames of the old plan's candidates that the fresh plan still
    proposes with the same size and mtime (the fresh rows), and of the others (path, code, reason:
    both null for those the fresh plan no longer proposes, decided by
    :func:`ckptctl.gc.spark.delete.why_dropped_on_executors`)."""
    from pyspark.sql import functions as F

    o = old.filter(F.col("outcome") == "candidates").select("path", F.col("size").alias("o_size"),
                                                            F.col("mtime").alias("o_mtime"))  # fmt: skip
    f = fresh.filter(F.col("outcome") == "candidates")
    joined = o.join(f, "path", "left")
    same = (
        F.col("size").isNotNull()
        & (F.col("size") == F.col("o_size"))
        & F.col("mtime").eqNullSafe(F.col("o_mtime"))
    )
    unchanged = joined.filter(same).select(*[c for c in f.columns])
    changed = F.col("size").isNotNull()
    skipped = joined.filter(~same).select(
        "path",
        F.when(changed, F.lit(CHANGED)).alias("code"),
        F.when(changed, F.lit(CHANGED_WHY)).alias("reason"),
    )
    return unchanged, skipped


def candidates_to_apply(fresh: SparkPlan, unchanged, skipped):
    """:func:`ckptctl.gc.apply.order_for_deletion` on executors: nothing of an expired checkpoint
    whose ``_metadata`` does not go (the driver looks up only the expired ``_metadata``, one per
    expired checkpoint). The ``_metadata`` go first by :func:`ckptctl.gc.spark.delete.delete_on_executors`,
    which also lists every directory again: the check that an inventory plan's candidates are
    unchanged now (a HEAD per file on the driver in-process) is that listing's."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from ckptctl.checkpoint.layout import METADATA_FILE
    from ckptctl.gc.spark.delete import SAMPLE, ToApply

    expired_metadata = sorted(st.join(e["path"], METADATA_FILE) for e in fresh.expired)
    going = {r.path for r in unchanged.filter(F.col("path").isin(expired_metadata)).select("path").collect()}
    stuck = sorted({st.parent(m) for m in expired_metadata if m not in going})
    waits = F.lit(False)
    if stuck:
        under = functools.reduce(lambda a, b: a | b, [F.col("path").startswith(s + "/") for s in stuck])
        waits = (F.col("reason") == str(Reason.EXPIRED_ONLY)) | (
            (F.col("reason") == str(Reason.EXPIRED_CHECKPOINT)) & under
        )
    go = (
        unchanged.filter(~waits)
        .select("path", "size", "mtime", "reason")
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    files, size = go.agg(F.count(F.lit(1)), F.sum("size")).first()
    skipped = skipped.union(
        unchanged.filter(waits).select(
            "path", F.lit(WAITING).alias("code"), F.lit(WAITING_WHY).alias("reason")
        )
    )
    skipped = skipped.persist(StorageLevel.MEMORY_AND_DISK)  # decided once: a listing per directory
    try:
        by_code = {r.code: r["count"] for r in skipped.groupBy("code").count().collect()}
        skips = [r.asDict() for r in skipped.orderBy("path").limit(SAMPLE).collect()]
    finally:
        skipped.unpersist()
    return ToApply(go, files, size or 0, sum(by_code.values()), skips, by_code)
