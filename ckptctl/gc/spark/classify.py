"""``gc plan --engine spark``: every listed file decided on executors, by the rule's SQL form
(:mod:`ckptctl.gc.spark.rule`) or, for the few files the rule reads one by one, by
:meth:`~ckptctl.gc.rule.FileRule.verdicts` on Python workers; the per-directory contexts made on the
driver and broadcast; the totals the conclusion needs counted on executors (or, for a small plan,
from the decisions brought to the driver once: :mod:`ckptctl.gc.spark.decided`)."""

from __future__ import annotations

import functools
import itertools

from ckptctl.gc.activity import JobActivity
from ckptctl.gc.contexts import JobEvidence, chk_dir_jobs, forst_parents, metadata_jobs
from ckptctl.gc.folding import Folded
from ckptctl.gc.rule import FileRule
from ckptctl.gc.spark.columns import (
    DECIDE_COLUMNS,
    DECISION_SCHEMA,
    FOLD_SCHEMA,
    PER_URI,
    as_per_uri,
    group_per_uri,
    has_span,
    with_spans,
)
from ckptctl.gc.spark.decided import Decided, merge_totals
from ckptctl.gc.spark.executors import changelog_partition, decide_batches, referenced_partition
from ckptctl.gc.spark.frames import Frames
from ckptctl.gc.spark.labels import Labels
from ckptctl.gc.spark.plan import reason_totals, release
from ckptctl.gc.spark.summary import Summary
from ckptctl.gc.spark.work import SparkWork
from ckptctl.gc.steps import PlanSteps

COLLECT_FILES = 100_000  # plans of at most this many listed files are decided once onto the driver (:mod:`ckptctl.gc.spark.decided`)


def classify_on_executors(work: SparkWork, steps: PlanSteps, now, now_source, cutoff, rule: FileRule, retention, folded: Folded, fold_df,
                          joined, summary: Summary):  # fmt: skip
    from pyspark.sql import functions as F

    listed = steps.state.scopes.listed
    late = [("live", p, None, None, -1, None) for p in folded.live]
    late += [("span", p, o, s, -1, None) for p, spans in folded.spans.items() for o, s in spans]
    if late:  # checkpoints fold_late read on the driver (found by the listing only)
        late_df = work.spark.createDataFrame(late, FOLD_SCHEMA)
        fold_df = fold_df.union(late_df)
        stale = joined
        joined = work.materialise_rows(group_per_uri(joined.select(*PER_URI).unionByName(as_per_uri(late_df)),
                                                      exact=False))  # fmt: skip
    live_paths = fold_df.filter("kind in ('live', 'span')").select("path")
    files = joined.filter((F.col("kg") == "f") & (F.col("n_f") > 0))
    # the live files are counted, never decided: they stay in the JVM
    live = (
        summary.live if not late else list(files.filter("live").agg(F.count(F.lit(1)), F.sum("size")).first())
    )
    if late:  # the regrouped rows are kept now: the first grouping is not read again
        release([stale])

    # the contexts of every directory, in listing order (the first overlap found is reported)
    dirs = summary.dirs
    sources = {
        "metadata": lambda: metadata_jobs(retention),
        "chk-dir": lambda: chk_dir_jobs(steps.state.notes, ((listed[d.root_idx], d.key) for d in dirs)),
        "referenced": lambda: set(live_paths.rdd.mapPartitions(referenced_partition).distinct().collect()),
        "changelog": lambda: changelog_ids_of(work, files, steps.state.options.changelog_dirs),
    }
    # the fold's tasks found the ForSt directories of theirs; those of the checkpoints folded late are added
    forst = work.forst_parents | forst_parents(itertools.chain(folded.live, folded.spans))
    # per directory the summary's newest and oldest plausible mtimes, as the local planner reads its runs
    activity = JobActivity(steps.state.scopes, retention.newest_retained,
                           lambda: ((d.key, lambda d=d: (d.newest, d.oldest, d.undated > 0)) for d in dirs),
                           steps.state.notes, steps.conclusion.quiet_before(rule))  # fmt: skip
    contexts = steps.conclusion.contexts(now, retention, JobEvidence(sources), activity, lambda: forst)
    shipped = {}
    for d in dirs:
        ctx = contexts.get(d.key)
        stats = ctx[4]
        stats[0] += d.files
        stats[1] += d.bytes
        shipped[d.key] = ctx
    job_of = {id(s): job for job, s in contexts.job_stats.items()}
    labels = Labels.of(shipped.values(), rule, job_of)
    shipped = {p: (*c[:4], labels.job_id.get(job_of.get(id(c[4]))), *c[5:]) for p, c in shipped.items()}
    broadcast = work.sc.broadcast((shipped, labels))

    # not persisted: deciding again from the cached rows per URI in the JVM costs less than
    # keeping 10^7 decided rows (each consumer -- the totals here, the written lists -- reads them once)
    live_rows = work.fold_counts[0] + len(folded.live)  # the fold's rows and those of `late`
    span_rows = work.fold_counts[1] + len(late) - len(folded.live)
    # the summary's count of files Python may decide holds for the rows it read: not after `late`
    python = summary.may_need_python if not late else None
    decisions, in_python = decide(work, files, fold_df, rule, labels, shipped, broadcast, span_rows, python)
    # one job (no row sorted): the candidates of each job (the caps), all of them, the live
    # files, and the lists' totals by reason -- counted on the executors, or for a small plan
    # from every decision brought to the driver once (read there from then on: ckptctl.gc.spark.decided)
    counted = {"live": [live[0], live[1] or 0], "candidates": [0, 0]}
    decided = None
    if summary.total_files <= COLLECT_FILES:
        decided = Decided(
            decisions.withColumn("h", F.xxhash64("path", "size", "mtime", "reason")).collect(), labels
        )
        rows = decided.groups()
        by_reason = merge_totals(rows)
    else:
        rows, by_reason = reason_totals(decisions.groupBy("outcome", "job", "reason"))
    for r in rows:
        if r.outcome not in counted:
            continue
        total = counted[r.outcome]
        total[0] += r.live_n if r.outcome == "live" else r.n
        total[1] += r.bytes or 0
        if r.outcome == "candidates" and r.job is not None:
            stats = contexts.job_stats[labels.jobs[r.job]]
            stats[2] += r.n
            stats[3] += r.bytes
    tally = Frames(work, listed, joined, files, decisions, in_python, fold_df, live_paths, summary, counted, by_reason,
                    labels, live_rows + span_rows, bool(late), decided)  # fmt: skip
    return steps.conclusion.finish(now, now_source, cutoff, retention, folded, contexts, tally)


def decide(work: SparkWork, files, fold_df, rule: FileRule, labels: Labels, shipped: dict[str, tuple], broadcast,
           span_rows: int, python: int | None):  # fmt: skip
    """The files not live decided, as :data:`DECISION_SCHEMA` rows: in the JVM by the rule's
    SQL form (:mod:`ckptctl.gc.spark.rule`), but for the segments' files and the names the
    rule reads one by one, which go to :meth:`~ckptctl.gc.rule.FileRule.verdicts` on Python workers. Returns
    (every decision, those made in Python: the only ones of outcome ``partial``).

    ``python``: how many files the summary found that may go to Python (``None``: not
    known). No file does in most buckets, and finding them is a pass over every file of its
    own (the Python decisions are kept, so they are made once): 7.4 s of a 10^7-file plan."""
    from pyspark.sql import functions as F

    from ckptctl.engine.arrow import map_in_arrow
    from ckptctl.gc.spark.rule import CONTEXT_SCHEMA, context_rows, needs_python, sql_verdicts

    contexts = work.spark.createDataFrame(context_rows(shipped, labels, rule), CONTEXT_SCHEMA)
    open_ = files.filter(~F.col("live")).join(F.broadcast(contexts), F.col("key") == contexts.dir, "left")
    to_python = has_span() | needs_python()
    if python == 0:
        in_python, work.segments = work.spark.createDataFrame([], DECISION_SCHEMA), span_rows
    else:
        spanned, work.segments = with_spans(
            open_.filter(to_python).select(*files.columns), fold_df, span_rows
        )
        # few rows, decided once (the SQL's are decided again at each read of the lists)
        in_python = work.cache(map_in_arrow(spanned.select(*DECIDE_COLUMNS),
                                            functools.partial(decide_batches, rule, broadcast), DECISION_SCHEMA))  # fmt: skip
    taken, reason, verdict = sql_verdicts(rule, labels)
    in_sql = open_.filter(~to_python).select(
        F.when(taken, "candidates").otherwise("protected").alias("outcome"), "root_idx", "part", "pos",
        F.col("uri").alias("path"), "size", "mtime", reason.alias("reason"), verdict.alias("verdict"),
        F.lit(None).cast("string").alias("evidence"), F.col("dir_job").alias("job"),
    )  # fmt: skip
    return in_sql.unionByName(in_python), in_python


def changelog_ids_of(work: SparkWork, files, changelog_dirs) -> set[str]:
    from pyspark.sql import functions as F

    prefixes = [c.rstrip("/") + "/" for c in changelog_dirs]
    if not prefixes:
        return set()
    cond = functools.reduce(lambda a, b: a | b, [F.col("uri").startswith(p) for p in prefixes])
    return set(files.filter(cond).select("uri").rdd.mapPartitions(changelog_partition).distinct().collect())
