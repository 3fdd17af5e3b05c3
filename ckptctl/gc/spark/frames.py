"""The Spark planner's per-file outcome: decisions in a DataFrame, read by the conclusion through
the interface of :class:`~ckptctl.gc.listed.Tally` (the local planner's outcome), answered by
aggregates on executors or, for a small plan, from the decisions on the driver."""

from __future__ import annotations

import json
from collections.abc import Iterable

from ckptctl.checkpoint.flink39964 import SavepointFiles
from ckptctl.checkpoint.layout import place_of
from ckptctl.errors import CkptError
from ckptctl.gc.listed import Tally
from ckptctl.gc.spark.columns import ORDER, uri_parent
from ckptctl.gc.spark.decided import Decided, ReasonTotals
from ckptctl.gc.spark.labels import Labels
from ckptctl.gc.spark.plan import SparkFiles, SparkPlan
from ckptctl.gc.spark.summary import Summary
from ckptctl.gc.spark.work import SparkWork

MISSING_BOUND = 100_000  # live files missing from the listing collected to the driver at most


class Frames(Tally):
    """The Spark planner's outcome: decisions in a DataFrame, aggregates computed on executors."""

    def __init__(self, work: SparkWork, listed: list[str], joined, files, decisions, in_python, fold_df, live_paths,
                 summary: Summary, counted: dict[str, list[int]], by_reason: list[ReasonTotals], labels: Labels,
                 referenced_rows: int, late: bool, decided: Decided | None = None) -> None:  # fmt: skip
        """``counted``: (files, bytes) of the live files and of the candidates, ``by_reason`` the
        lists' totals, from the decisions; the listing's totals are the summary's;
        ``referenced_rows`` the fold's rows of live paths and segments (counted as made);
        ``late``: checkpoints were folded after the summary (its count of missing files is short);
        ``decided``: a small plan's decisions on the driver, read instead of ``decisions``."""
        self.by_reason, self.labels = by_reason, labels
        self.work, self.listed, self.joined, self.files, self.decisions = (
            work,
            listed,
            joined,
            files,
            decisions,
        )
        self.in_python = in_python  # the decisions made on Python workers (segments' files among them)
        self.live_paths = live_paths  # files and segments' files retained checkpoints reference
        self.live_files, self.live_bytes = counted["live"]
        self.candidates = tuple(counted["candidates"])
        self.total_files, self.total_bytes = summary.total_files, summary.total_bytes
        self.future = summary.future
        self.summary, self.late = summary, late
        # one row per live (or segment's) path and slice of checkpoints: at least as many rows as
        # distinct paths, counted without a shuffle; those are counted only when that is not enough
        self.referenced = fold_df.filter("kind in ('live', 'span')").select("kind", "path")
        self.referenced_rows = referenced_rows
        self.relived: set[str] = set()
        self.decided = decided

    def missing_paths(self) -> set[str]:
        from pyspark.sql import functions as F

        # every listed live file was found once (the local planner's test, on the distinct paths),
        # or the summary counted no referenced file missing (references folded since: counted here)
        if self.live_files >= self.referenced_rows or (not self.late and not self.summary.missing):
            return set()
        if self.late and self.live_files >= self.referenced.distinct().count():
            return set()
        missing = self.joined.filter(
            (F.col("kg") == "f") & (F.col("n_f") == 0) & (F.col("live") | F.col("has_span"))
        )
        rows = missing.select("uri").limit(MISSING_BOUND + 1).collect()
        if len(rows) > MISSING_BOUND:
            raise CkptError(
                f"more than {MISSING_BOUND:,} files retained checkpoints reference are missing from the listing "
                "(a wrong --rebase or a renamed directory?): look at the checkpoints with `ckptctl verify`"
            )
        return {r.uri for r in rows}

    def savepoint_files(self, names: set[str]) -> SavepointFiles:
        from pyspark.sql import functions as F

        listed = self.listed
        rows = self.files.filter(F.substring_index("uri", "/", -1).isin(sorted(names))).collect()
        found = SavepointFiles()
        for r in rows:
            if place_of(listed[r.root_idx], r.uri.rpartition("/")[0]).area == "savepoint":
                found.add_file(r.uri, r.size)
        return found

    def relive(self, paths: set[str]) -> None:
        from pyspark.sql import functions as F

        if self.decided is not None:
            n, size = self.decided.relive(paths)
        else:
            gone = self.decisions.filter(
                (F.col("outcome") == "protected") & F.col("path").isin(sorted(paths))
            )
            n, size = gone.agg(F.count(F.lit(1)), F.sum("size")).first()
        self.live_files += n
        self.live_bytes += size or 0
        self.relived |= paths

    def lists(self):
        """The candidates and protected files (without those made live again)."""
        from pyspark.sql import functions as F

        listed = self.decisions.filter(F.col("outcome").isin("candidates", "protected"))
        if self.relived:
            listed = listed.filter(
                ~((F.col("outcome") == "protected") & F.col("path").isin(sorted(self.relived)))
            )
        return listed

    def future_files(self) -> tuple[int, str | None]:
        return self.future

    def first_collision(self, names: dict[str, str]) -> str | None:
        from pyspark.sql import functions as F

        if self.decided is not None:
            return self.decided.first_candidate_named(names)
        hits = self.decisions.filter(
            (F.col("outcome") == "candidates") & F.substring_index("path", "/", -1).isin(sorted(names))
        )
        first = hits.agg(F.min(F.struct(*ORDER))).first()[0]
        return first.path if first is not None else None

    def candidate_totals(self) -> tuple[int, int]:
        return self.candidates

    def live_set_empty(self) -> bool:
        return not self.referenced_rows

    def kept_paths_since(self, since: float) -> Iterable[str]:
        from pyspark.sql import functions as F

        if self.decided is not None:
            return self.decided.kept_paths_since(since)
        kept = self.lists().filter(
            (F.col("outcome") == "protected") & (F.col("mtime").isNull() | (F.col("mtime") >= since))
        )
        # one path per directory and kind (file, directory marker): all the guard looks at
        keys = kept.groupBy(uri_parent("path"), F.col("path").endswith("/"))
        return [r[0] for r in keys.agg(F.min("path")).select("min(path)").collect()]

    def metadata_being_written(self, since: float) -> tuple[int, str | None]:
        from pyspark.sql import functions as F

        from ckptctl.checkpoint.layout import METADATA_IN_PROGRESS

        # a filter of the kept rows per URI by name (no string is sorted: the first is looked for
        # only when there is one)
        if since == self.summary.cutoff and not self.summary.being_written:
            return 0, None  # the summary's pass found none that may be
        named = F.substring_index("uri", "/", -1).startswith(METADATA_IN_PROGRESS)
        hits = self.files.filter(named & (F.col("mtime").isNull() | (F.col("mtime") >= since)))
        n = hits.count()
        return n, (hits.agg(F.min("uri")).first()[0] if n else None)

    def plan(
        self, options, now, now_source, cutoff, retained, expired, external, missing, *rest
    ) -> SparkPlan:
        from pyspark.sql import functions as F

        if not self.work.segments:
            rows = []
        elif self.decided is not None:
            rows = self.decided.partial()
        else:
            rows = self.in_python.filter(F.col("outcome") == "partial").orderBy(*ORDER).collect()
        partial = [
            {"path": r.path, "size": r.size, **json.loads(r.evidence)} for r in rows
        ]  # live_bytes, dead_bytes
        # the lists are decided again from the planner's cached frames each time they are read: those
        # stay with the plan until it is released. Files made live again: the lists' totals counted again.
        # Their tasks: each of the two kinds of decisions (SQL, Python) reads the cached rows per URI
        # (counted on the cached frame: on the lists, Spark would run their broadcasts and shuffles to tell)
        files = SparkFiles.of(self.lists(), self.labels, self.work.cached, None if self.relived else self.by_reason,
                              tasks=2 * self.files.rdd.getNumPartitions(), decided=self.decided)  # fmt: skip
        return SparkPlan(options, now, now_source, cutoff, retained, expired, [], [], self.live_files,
                         self.live_bytes, self.total_files, self.total_bytes, external, missing, partial, *rest,
                         files=files, engine={"kind": "spark", "master": self.work.master})  # fmt: skip
