"""``gc plan --engine spark``: the driver. It holds the parts every planner holds
(:class:`~ckptctl.gc.steps.PlanSteps`: discovery, retention, guards, the late reads, the conclusion)
and folds, lists and classifies on executors (:mod:`ckptctl.gc.spark.executors`,
:mod:`ckptctl.gc.spark.classify`)."""

from __future__ import annotations

import functools
import pickle
from dataclasses import replace
from typing import Any

from ckptctl import storage as st
from ckptctl.engine.spark import executor_error
from ckptctl.errors import CkptError
from ckptctl.gc.folding import Folded, moved_refusals
from ckptctl.gc.options import GcOptions
from ckptctl.gc.reasons import Refusal
from ckptctl.gc.retention import retain
from ckptctl.gc.spark.classify import classify_on_executors
from ckptctl.gc.spark.columns import FOLD_SCHEMA, LISTING_SCHEMA, as_per_uri, group_per_uri
from ckptctl.gc.spark.executors import FoldSmall, fold_partition, list_partition
from ckptctl.gc.spark.plan import SparkPlan, release
from ckptctl.gc.spark.summary import Summary, summarise
from ckptctl.gc.spark.work import SparkWork
from ckptctl.gc.steps import PlanSteps
from ckptctl.pycollector import paused_collector
from ckptctl.storage import Storage


class SparkPlanner:
    """The driver of a plan on Spark: it holds the parts every planner holds (:class:`PlanSteps`)
    and the Spark side of the plan (:class:`SparkWork`), and folds, lists and classifies on executors."""

    def __init__(self, storage: Storage, options: GcOptions, spark, master: str) -> None:
        self.steps = PlanSteps.of(storage, options)
        self.state = self.steps.state
        self.work = SparkWork(spark, master)

    def run(self) -> SparkPlan:
        """The plan; the frames it cached go with it (:meth:`SparkPlan.release`), or are
        released here when there is no plan."""
        try:
            return self._run()
        except BaseException as e:
            release(self.work.cached)
            if isinstance(e, CkptError) or not isinstance(e, Exception):
                raise
            raise executor_error(e) or e from None  # a task's error comes back as a PythonException

    def _run(self) -> SparkPlan:
        steps, state = self.steps, self.state
        now, now_source, cutoff = steps.discovery.start()
        discovered = steps.discovery.discover(
            {}
        )  # pruned walks (delimiter listings on S3), never the universe
        retention = retain(state, discovered, now, cutoff)
        state.warnings.extend(retention.notes)
        folded, fold_df = self.fold_on_executors(retention)
        rule = steps.conclusion.rule(now, cutoff, True)
        rows = self.listing_rows()
        by_name = state.inventory is not None
        joined = self.per_uri(rows, fold_df, exact=False)
        summary = summarise(joined, rule.tolerance_limit, cutoff, by_name)
        if summary.duplicated:  # keys an inventory lists twice: the newest row speaks, as in-process
            release([joined])
            joined = self.per_uri(rows, fold_df, exact=True)
            summary = summarise(joined, rule.tolerance_limit, cutoff, by_name)
        self.take_listing(summary)
        for code, message in folded.refusals:
            state.refuse(Refusal(code), message)
        listed = state.scopes.listed
        hidden = steps.guards.check_checkpoints_unchanged(discovered, summary.metadata_listing(listed),
                                                          ((listed[d.root_idx], d.key) for d in summary.dirs))  # fmt: skip
        steps.late.fold_late([f for f in hidden if st.parent(f.uri) not in discovered], retention, folded)
        steps.late.fold_siblings(retention, folded)
        steps.guards.check_no_aliases()
        steps.guards.check_mounts(retention)
        plan = classify_on_executors(
            self.work, steps, now, now_source, cutoff, rule, retention, folded, fold_df, joined, summary
        )
        if state.inventory is not None:
            steps.report.check_metadata_after_plan()
        return plan

    # -- fold ------------------------------------------------------------------------------
    def fold_on_executors(self, retention) -> tuple[Folded, Any]:
        """Decode the checkpoints on executors, in order, a slice per task. The driver keeps what
        is proportional to checkpoints; the live paths stay in the returned DataFrame."""

        ordered = retention.retained + retention.expired
        retained_set = {loc.uri for loc in retention.retained}
        slices = max(1, min(len(ordered), self.work.sc.defaultParallelism * 2))
        fn = functools.partial(fold_partition, self.state.storage.options, retained_set, self.state.options.rebase,
                               self.state.scopes.prefixes)  # fmt: skip
        fold_df = self.work.materialise_rows(
            self.work.on_executors(list(enumerate(ordered)), slices, fn, FOLD_SCHEMA, arrow=True)
        )
        folded = Folded(set(), {}, set(), {}, {}, [])
        moved: dict[str, list[str]] = {}
        for row in sorted(fold_df.filter("kind = 'small'").select("part", "blob").collect()):
            small: FoldSmall = pickle.loads(row.blob)  # noqa: S301 - written by this run's executors
            part = small.folded
            self.work.fold_counts[0] += small.live_rows
            self.work.fold_counts[1] += small.span_rows
            self.work.forst_parents |= small.forst_parents
            folded.refusals.extend(part.refusals)
            for path, ref in part.external.items():
                folded.external.setdefault(path, ref)
            folded.info.update(part.info)
            for mapping, cks in part.moved.items():
                moved.setdefault(mapping, []).extend(cks)
        folded.refusals.extend(moved_refusals(moved))
        return folded, fold_df

    # -- list ------------------------------------------------------------------------------
    def listing_rows(self):
        """The file universe as the executors list (or read) it: a lazy DataFrame of
        :data:`LISTING_SCHEMA` rows (``f`` files, and what local walks saw besides, ``s`` the
        inventory's read statistics). Evaluated by :meth:`per_uri`'s cache, once (again only for
        the exact grouping, when a key is listed twice): each evaluation lists again."""
        listed = self.state.scopes.listed
        tasks: list[tuple] = []
        driver_rows: list[tuple] = []
        if self.state.inventory is not None:
            tasks = [
                ("inventory", replace(self.state.inventory, files=(df,)), tuple(listed))
                for df in self.state.inventory.files
            ]
        else:
            local = [(i, r) for i, r in enumerate(listed) if st.scheme_of(r) == "file"]
            if local:
                tasks.append(("local", local))
            for i, root in enumerate(listed):
                if st.scheme_of(root) == "s3":
                    rows, subs = self.s3_level(i, root)
                    driver_rows.extend(rows)
                    tasks.extend(subs)
                elif st.scheme_of(root) != "file":
                    tasks.append(("any", i, root))
        rows = self.work.on_executors(tasks, max(1, len(tasks)), functools.partial(list_partition, self.state.storage.options),
                                 LISTING_SCHEMA, arrow=True)  # fmt: skip
        if driver_rows:
            rows = rows.union(self.work.spark.createDataFrame(driver_rows, LISTING_SCHEMA))
        return rows

    def per_uri(self, rows, fold_df, *, exact: bool):
        """The listing and the checkpoints' references in one row per URI, by one shuffle: what
        was a deduplication of the listing, a grouping of the references and a join of the two.
        Every aggregate is a hash aggregate (no strings, no structs: those sort 10^7 rows), so
        two rows of one key in an inventory take each field's maximum; :func:`~ckptctl.gc.spark.summary.summarise` counts
        such keys and :meth:`_run` asks again with ``exact`` (the newest row speaks, as the local
        planner sorts: a sort-based aggregate) when there are any. Rows that are not files keep
        their kind (and its detail) in ``kg``; files and references have ``kg = 'f'``, ``n_f``
        the number of listing rows (0: referenced, not listed)."""
        from pyspark.sql import functions as F

        kind = F.col("kind")
        is_file, stat = kind == "f", kind == "s"
        listing = rows.select(
            F.when(is_file, F.lit("f")).otherwise(F.concat(kind, F.lit(":"), F.coalesce("extra", F.lit("")))).alias("kg"),
            "uri", "root_idx", "part", F.when(~stat, F.col("pos")).alias("pos"),
            is_file.cast("int").alias("n_f"), F.when(~stat, F.col("size")).alias("size"), "mtime", "is_link",
            F.lit(False).alias("live"), F.lit(False).alias("has_span"), F.lit(False).alias("expired"),
            F.when(stat, F.col("size")).alias("rows_read"), F.when(stat, F.col("pos")).alias("rows_kept"),
        )  # fmt: skip
        return self.work.materialise_rows(
            group_per_uri(listing.unionByName(as_per_uri(fold_df)), exact=exact)
        )

    def take_listing(self, summary: Summary) -> None:
        """The walks' notes into ``self.state.notes``, the inventory's statistics recorded, every ROOT
        checked to hold something."""
        listed = self.state.scopes.listed
        seen: dict = {}
        for root in listed:
            self.state.notes[root] = st.WalkNotes(seen=seen)
        for kind, r in summary.notes:
            notes = self.state.notes[listed[r.root_idx]]
            uri, extra = r.key, r.kg[2:]
            if kind == "d":
                notes.dirs[uri] = r.mtime
            elif kind == "l":
                notes.followed.append((uri, extra))
            elif kind == "a":
                notes.aliases.append((uri, extra))
            elif kind == "m":
                notes.mounts.append(uri)
        if self.state.inventory is not None:
            self.steps.report.record_inventory(summary.rows_read, summary.rows_kept)
        for i, root in enumerate(listed):
            self.steps.guards.check_listed(root, summary.files_in(i) > 0)

    def s3_level(self, root_idx: int, root: str) -> tuple[list[tuple], list[tuple]]:
        """The first delimiter listing of an S3 root, on the driver: its own objects (rows) and one
        listing task per sub-prefix, in the order :func:`ckptctl.storage.s3list.list_prefix` lists them."""
        from fsspec.asyn import sync

        from ckptctl.storage.s3list import list_level

        fs, path = self.state.storage.fs(root)
        bucket, _, prefix = path.partition("/")
        prefix = prefix.rstrip("/") + "/" if prefix.strip("/") else ""
        try:
            objects, subs = sync(fs.loop, list_level, fs, bucket, prefix)
        except Exception as e:  # noqa: BLE001 - botocore errors are not OSErrors
            if st.s3_problem(e):
                raise st.StorageError(st.s3_problem(e), path=f"s3://{path}") from None
            if "NoSuchBucket" in str(e) or isinstance(e, FileNotFoundError):
                raise st.StorageError("no such bucket", path=f"s3://{bucket}") from None
            raise st.StorageError(f"cannot list: {type(e).__name__}: {e}", path=f"s3://{path}") from None
        rows = [("f", root_idx, 0, pos, f"s3://{bucket}/{key}", size, modified.timestamp() if modified else None,
                 False, None) for pos, (key, size, modified) in enumerate(objects)]  # fmt: skip
        return rows, [("s3", root_idx, i + 1, root, prefix, sub) for i, sub in enumerate(subs)]


def build_plan_spark(storage: Storage, options: GcOptions, master: str) -> SparkPlan:
    """:func:`ckptctl.gc.plan.build_plan` on Spark: the same plan, the per-file lists in a DataFrame."""
    from ckptctl.engine.spark import spark_session

    spark = spark_session(master)
    with paused_collector():
        return SparkPlanner(storage, options, spark, master).run()
