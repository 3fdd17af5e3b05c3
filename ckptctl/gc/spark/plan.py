"""A plan made on Spark: the header of every plan (:class:`~ckptctl.gc.decisions.GcPlan`), the
per-file lists in a DataFrame (:class:`SparkFiles`) with their totals, written as Parquet next to the
plan's JSON and checked by row counts and digests when read back (:func:`read_lists`)."""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from typing import Any

from ckptctl.errors import CkptError
from ckptctl.gc.decisions import FileDecision, GcPlan
from ckptctl.gc.reasons import Reason
from ckptctl.gc.spark.columns import ORDER
from ckptctl.gc.spark.decided import (
    WRITTEN_SCHEMA,
    Decided,
    ReasonTotals,
    hash_total,
    merge_totals,
    tied_reasons,
)
from ckptctl.gc.spark.labels import Labels

INLINE_FILES = 100_000  # plans with at most this many listed decisions also inline them in the JSON
WRITE_FILES = (
    2_000  # a Spark plan's lists are written without a shuffle when that makes at most this many files
)


@dataclass
class SparkFiles:
    """The per-file lists of a Spark plan: a DataFrame of :data:`DECISION_SCHEMA` rows (lists
    ``candidates`` and ``protected``), and their totals computed once on executors."""

    frame: Any
    labels: Labels
    totals: dict[str, Any]
    cached: list = field(
        default_factory=list
    )  # the persisted frames ``frame`` is made of, released with the plan
    tasks: int = 0  # the tasks that decide ``frame``: a write without a shuffle makes up to this many files a directory
    decided: Decided | None = None  # a small plan's decisions on the driver: read there, written from there

    @classmethod
    def of(cls, frame, labels: Labels, cached: list | None = None, totals: list[ReasonTotals] | None = None,
           tasks: int = 0, decided: Decided | None = None) -> SparkFiles:  # fmt: skip
        """The lists' totals: ``totals`` by list and reason when the planner counted them already
        (:func:`reason_totals`, with the caps' counts: one job), else counted here (on the driver
        for a small plan)."""
        if totals is None and decided is not None:
            totals = decided.totals()
        elif totals is None:  # one job for both lists
            _rows, totals = reason_totals(frame.groupBy("outcome", "reason"))
        by_reason: dict[str, list[ReasonTotals]] = {"candidates": [], "protected": []}
        for r in totals:
            if r.outcome in by_reason:
                by_reason[r.outcome].append(r)
        out: dict[str, Any] = {}
        for which, rows in by_reason.items():
            # Counter.most_common(): by count, ties in order of first appearance
            if decided is not None:
                first = decided.first_of_ties(which, tied_reasons(rows))
            else:
                first = _first_of_ties(frame, which, rows)
            rows.sort(key=lambda r: (-r.n, first.get(r.reason, ())))
            out[which] = {
                "files": sum(r.n for r in rows), "bytes": sum(r.bytes or 0 for r in rows),
                "by_reason": {r.reason: r.n for r in rows},
                "oldest": min((r.oldest for r in rows if r.oldest), default=None),
                "newest": max((r.newest for r in rows if r.newest), default=None),
                "digest": _digest_text(sum(int(r.digest or 0) for r in rows)),
            }  # fmt: skip
        return cls(frame, labels, out, cached or [], tasks, decided)

    def labelled(self):
        """The lists with their evidence and job names (:meth:`Labels.attach`)."""
        return self.labels.attach(self.frame)

    def decisions(self) -> dict[str, list[FileDecision]]:
        """Both lists, each in the local planner's order, on the driver (small plans, tests): one
        Spark job (a small plan is some 30 jobs; two collects here were two of them), or none
        when they are on the driver already."""
        if self.decided is not None:
            return self.decided.decisions()
        frame = self.labelled()
        rows = (
            frame.filter(frame.outcome.isin("candidates", "protected")).orderBy("outcome", *ORDER).collect()
        )
        cache: dict[str, Any] = {}
        lists: dict[str, list[FileDecision]] = {"candidates": [], "protected": []}
        for r in rows:
            evidence = cache.get(r.evidence)
            if evidence is None:
                evidence = cache[r.evidence] = json.loads(r.evidence)
            lists[r.outcome].append(FileDecision(r.path, r.size, r.mtime, Reason(r.reason), evidence))
        return lists


def reason_totals(grouped) -> tuple[list, list[ReasonTotals]]:
    """Decisions grouped (by outcome and reason, and perhaps job) counted, with hash aggregates
    only (no row is sorted): (the groups' rows, their :class:`ReasonTotals` over jobs)."""
    from pyspark.sql import functions as F

    rows = grouped.agg(
        F.count(F.lit(1)).alias("n"),
        F.sum("size").alias("bytes"),
        F.min("mtime").alias("oldest"),
        F.max("mtime").alias("newest"),
        *_hash_sums(),
        F.sum("pos").alias("live_n"),
    )
    rows = rows.collect()
    return rows, merge_totals(rows)


def _first_of_ties(frame, which: str, rows: list[ReasonTotals]) -> dict[str, tuple]:
    """The first decision (listing order) of each reason whose count another reason of the list
    shares: the order of equal counts. Asked only for those (a sort of their rows)."""
    from pyspark.sql import functions as F

    tied = tied_reasons(rows)
    if not tied:
        return {}
    firsts = frame.filter((F.col("outcome") == which) & F.col("reason").isin(tied)).groupBy("reason").agg(
        F.min(F.struct(*ORDER)).alias("first")
    )  # fmt: skip
    return {r.reason: tuple(r.first) for r in firsts.collect()}


def _hash_sums():
    """The sum of ``xxhash64(path, size, mtime, reason)`` over rows, exact, as two sums of longs:
    of each hash's high (signed) and low (unsigned) 32 bits. Each fits a long for 2^31 rows, and
    a long's sum is a hash aggregate (a decimal(38,0) sum, which needs no split, costs a Java
    BigDecimal per row). :func:`ckptctl.gc.spark.decided.hash_total` puts them together."""
    from pyspark.sql import functions as F

    h = F.xxhash64("path", "size", "mtime", "reason")
    return F.sum(F.shiftright(h, 32)).alias("hash_hi"), F.sum(h.bitwiseAND(0xFFFFFFFF)).alias("hash_lo")


def _digest_text(value: int) -> str:
    return f"xxhash64-sum:{value}"


def _digest(frame) -> str:
    """An order-independent checksum of decision rows (path, size, mtime, reason): sums of
    :func:`_hash_sums` add up, so lists are summed by reason in one job (:meth:`SparkFiles.of`)."""
    return _digest_text(hash_total(*frame.agg(*_hash_sums()).first()) or 0)


@dataclass
class SparkPlan(GcPlan):
    """A :class:`GcPlan` whose per-file lists live in :class:`SparkFiles` (``candidates`` and
    ``protected`` stay empty in memory): the same header, the lists in Parquet."""

    files: SparkFiles | None = None
    engine: dict[str, Any] = field(default_factory=dict)
    written: dict[str, Any] | None = None  # where write() put the lists

    @property
    def candidate_bytes(self) -> int:
        return self.files.totals["candidates"]["bytes"]

    def summary(self) -> dict[str, Any]:
        c, p = self.files.totals["candidates"], self.files.totals["protected"]
        return {
            **super().summary(),
            "candidate_files": c["files"], "candidate_bytes": c["bytes"],
            "protected_files": p["files"], "protected_bytes": p["bytes"],
            "oldest_candidate_mtime": c["oldest"], "newest_candidate_mtime": c["newest"],
        }  # fmt: skip

    def _make_header(self) -> dict[str, Any]:
        head = super()._make_header()
        head["candidates_by_reason"] = self.files.totals["candidates"]["by_reason"]
        head["protected_by_reason"] = self.files.totals["protected"]["by_reason"]
        head["engine"] = self.engine
        if self.written is not None:
            head["files"] = self.written
        return head

    def materialise(self, *, if_small: bool = False) -> None:
        """Bring the lists to the driver, once (for small plans and tests); ``if_small``: only when
        the plan is small enough to inline them."""
        if self.candidates or self.protected or (if_small and not self.small()):
            return
        lists = self.files.decisions()
        self.candidates, self.protected = lists["candidates"], lists["protected"]

    def release(self) -> None:
        """Drop the cached lists from the executors (the plan is written or no longer needed)."""
        if self.files is not None:
            # unpersist() of a frame derived from a cached one (a filter of it) drops nothing
            release(self.files.cached)
            self.files.cached = []

    def small(self) -> bool:
        return (
            self.files.totals["candidates"]["files"] + self.files.totals["protected"]["files"] <= INLINE_FILES
        )

    def to_json(self) -> dict[str, Any]:
        self.materialise()
        return super().to_json()

    def write_json(self, out) -> None:
        """The JSON plan; its lists inline when the plan is small, else empty (see :meth:`write`)."""
        self.materialise(if_small=True)
        super().write_json(out)

    def write(self, plan_file: str) -> None:
        """``PLAN.json`` and, next to it, ``PLAN.parquet/`` (the lists, partitioned by list and job id)."""
        target = os.path.splitext(plan_file)[0] + ".parquet"
        if self.files.decided is not None:  # on the driver already: one small file per directory
            self.files.decided.write(os.path.abspath(target))
        else:
            self._write_lists(target)
        c, p = self.files.totals["candidates"], self.files.totals["protected"]
        self.written = {
            "format": "parquet", "path": os.path.basename(target), "partitioned_by": ["outcome", "job_id"],
            "columns": ["path", "size", "mtime", "reason", "evidence", "root_idx", "part", "pos"],
            "candidates": c["files"], "protected": p["files"],
            "candidates_digest": c["digest"], "protected_digest": p["digest"], "inline": self.small(),
        }  # fmt: skip
        self._header = None
        with open(plan_file, "wb") as f:
            self.write_json(f)

    def _write_lists(self, target: str) -> None:
        """The lists written by the executors."""
        frame = self.files.labelled().drop("job")
        # written as decided, without a shuffle (of 8M rows: as long as the rest of the write), when
        # that makes a file per task and directory (list and job) of at most WRITE_FILES; each
        # task's writers open side by side (spark.sql.maxConcurrentOutputFileWriters: else each
        # task sorts its rows by directory first). Many tasks and jobs: a task per directory.
        if self.files.tasks * 2 * (len(self.files.labels.jobs) + 1) > WRITE_FILES:
            frame = frame.repartition("outcome", "job_id")
        # no dictionary for the paths (each is written once): Parquet built one per column chunk and
        # threw it away for plain pages when it outgrew a page -- the same bytes written, a third
        # of the write's time (7.9M rows, 160 files: 20.7-22.2 s -> 13.4-15.0 s)
        writer = frame.write.mode("overwrite").option("maxRecordsPerFile", 1_000_000)
        writer.option("parquet.enable.dictionary#path", "false").partitionBy("outcome", "job_id").parquet(
            os.path.abspath(target)
        )


def release(frames: list) -> None:
    """Drop persisted frames from the executors' storage: cached ones, and the rows of locally
    checkpointed ones (:meth:`ckptctl.gc.spark.work.SparkWork.materialise_rows`), which ``unpersist()`` does not
    know (they are an RDD of the frame's plan, not in the cache)."""
    for frame in frames:
        # a Spark context that died (a task's OutOfMemoryError) refuses unpersist too: that error
        # would hide the one that stopped the plan
        with contextlib.suppress(Exception):
            frame.unpersist()
            plan = frame._jdf.logicalPlan()
            if plan.getClass().getSimpleName() == "LogicalRDD" and plan.rdd().isLocallyCheckpointed():
                plan.rdd().unpersist(False)


def read_lists(spark, plan_file: str, record: dict[str, Any]):
    """A Spark plan's Parquet lists, checked against the row counts and digests its JSON records."""
    path = os.path.join(os.path.dirname(os.path.abspath(plan_file)), record["path"])
    if not os.path.isdir(path):
        raise CkptError(f"the plan's file lists are not there ({path})", path=plan_file)
    # with their schema: lists without a row are a directory without a file (Spark infers no schema
    # from it), and a job id of digits stays the string it is (Spark would infer a number)
    frame = spark.read.schema(WRITTEN_SCHEMA).parquet(path)
    for which in ("candidates", "protected"):
        rows = frame.filter(frame.outcome == which)
        if rows.count() != record[which] or _digest(rows) != record[f"{which}_digest"]:
            raise CkptError(
                f"the plan's {which} in {path} are not those it was written with (edited?)", path=plan_file
            )
    return frame
