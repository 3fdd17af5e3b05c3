"""``gc plan --engine spark``: the plan :func:`ckptctl.gc.plan.build_plan` makes, with the files on executors.

The local planner holds every listed file in one process (~200 bytes each): a bucket of 10^8 objects
cannot be planned that way. Here the driver holds what is proportional to checkpoints, jobs and
directories only, and the same code decides:

* driver: options, clock, discovery (fresh pruned walks for ``_metadata``, never a full listing),
  retention, the per-directory contexts (:class:`ckptctl.gc.contexts._Contexts`, computed for the
  distinct directories and broadcast), every refusal and warning (:meth:`_Planner.finish`);
* executors: decoding the checkpoints (:func:`fold_references` over slices of them) into the live
  DataFrame; listing the scopes (S3: one task per sub-prefix of a root, as
  :func:`ckptctl.storage.s3list.list_prefix` splits them; local roots: one walk, which must see every
  directory to find aliases) or reading the S3 Inventory's data files; the files and the
  references brought together in one shuffle by URI (:meth:`_SparkPlanner.per_uri`), summarised in
  one pass (:meth:`_SparkPlanner.summarise`), and :meth:`FileRule.verdicts` over each Arrow batch
  of the files not live; aggregates.

What costs at 10^7 files is the number of passes over them and the bytes each row carries, not the
rule (~0.3 µs a file): every aggregate over the files is a hash aggregate where it can be (a sort
of 10^7 strings costs more than the pass), live files never cross to Python, and decisions carry
numbers where they would repeat a string (:class:`Labels`).

Every file has an order key (scope, part of the listing, position, path) that reproduces the local
planner's listing order, so "first: …" in messages and the order of the lists are the same.
The per-file lists are written as Parquet next to the plan (:meth:`SparkPlan.write`).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import pickle
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from ckptctl import storage as st
from ckptctl.engine.spark import executor_error
from ckptctl.errors import CkptError
from ckptctl.flink39964 import SavepointFiles
from ckptctl.gc.activity import JobActivity
from ckptctl.gc.contexts import (
    JobEvidence,
    _forst_parents,
    changelog_ids,
    chk_dir_jobs,
    metadata_jobs,
    referenced_jobs,
)
from ckptctl.gc.decisions import Verdicts
from ckptctl.gc.options import GcOptions
from ckptctl.gc.plan import (
    FileDecision,
    FileRule,
    Folded,
    GcPlan,
    Tally,
    _Planner,
    fold_references,
    moved_refusals,
)
from ckptctl.gc.reasons import Reason, Refusal
from ckptctl.gc.rule import RuleColumns, partially_live
from ckptctl.gc.spark_decided import (
    WRITTEN_SCHEMA,
    Decided,
    ReasonTotals,
    hash_total,
    merge_totals,
    tied_reasons,
)
from ckptctl.layout import place_of
from ckptctl.pycollector import paused_collector
from ckptctl.storage import FileInfo, Storage, StorageOptions
from ckptctl.storage.listing import PLAUSIBLE_MTIME

MISSING_BOUND = 100_000  # live files missing from the listing collected to the driver at most
INLINE_FILES = 100_000  # plans with at most this many listed decisions also inline them in the JSON
COLLECT_FILES = INLINE_FILES  # plans of at most this many listed files are decided once onto the driver (spark_decided)
WRITE_FILES = 2_000  # a Spark plan's lists are written without a shuffle when that makes at most this many files
LISTING_SCHEMA = (
    "kind string, root_idx int, part int, pos long, uri string, size long, mtime double, is_link boolean, "
    "extra string"
)
FOLD_SCHEMA = "kind string, path string, offset long, size long, part int, blob binary"
# a decision's evidence (JSON) and job are numbers into :class:`Labels`: 10^7 rows persisted with
# their strings cost several times the rule itself; ``evidence`` holds the text only where no
# label has it (a partially live file's bytes)
DECISION_SCHEMA = (
    "outcome string, root_idx int, part int, pos long, path string, size long, mtime double, reason string, "
    "verdict int, evidence string, job int"
)
ORDER = ("root_idx", "part", "pos", "path")


def build_plan_spark(storage: Storage, options: GcOptions, master: str) -> SparkPlan:
    """:func:`ckptctl.gc.plan.build_plan` on Spark: the same plan, the per-file lists in a DataFrame."""
    from ckptctl.engine.spark import spark_session

    spark = spark_session(master)
    with paused_collector():
        return _SparkPlanner(storage, options, spark, master).run()


# ---------------------------------------------------------------------------------------------
# executors: listing, folding, deciding


def _list_partition(storage_options: StorageOptions, tasks: Iterable[tuple]) -> Iterator[Any]:
    """Arrow record batches of :data:`LISTING_SCHEMA`: files (``f``), and for local walks what they
    saw besides (``d`` directory, ``l`` followed symlink, ``a`` alias, ``m`` mount), or inventory
    read statistics (``s``)."""
    from ckptctl.engine.spark import arrow_batches

    storage = Storage.shared(storage_options)
    for task in tasks:
        if task[0] == "inventory":
            yield from _inventory_batches(storage, task)
        else:
            yield from arrow_batches(_listed_rows(storage, task), LISTING_SCHEMA)


def _listed_rows(storage: Storage, task: tuple) -> Iterator[tuple]:
    """The rows of one listing task (tuples of :data:`LISTING_SCHEMA`)."""
    kind = task[0]
    if kind == "local":  # every local scope in one walk: an alias across scopes is one too
        seen: dict = {}
        for root_idx, root in task[1]:
            notes = st.WalkNotes(seen=seen)
            for pos, f in enumerate(storage.list_files(root, notes)):
                yield ("f", root_idx, 0, pos, _utf8(f.uri), f.size, _seconds(f.mtime), bool(f.is_link), None)
            # each in the walk's order (pos): the first alias is the one reported
            for pos, (d, mtime) in enumerate(notes.dirs.items()):
                yield ("d", root_idx, 0, pos, _utf8(d), 0, _seconds(mtime), False, None)
            for pos, (link, target) in enumerate(notes.followed):
                yield ("l", root_idx, 0, pos, _utf8(link), 0, None, False, _utf8(target))
            for pos, (uri, first) in enumerate(notes.aliases):
                yield ("a", root_idx, 0, pos, _utf8(uri), 0, None, False, _utf8(first))
            for pos, m in enumerate(notes.mounts):
                yield ("m", root_idx, 0, pos, _utf8(m), 0, None, False, None)
    elif kind == "s3":
        from fsspec.asyn import sync

        from ckptctl.storage.s3list import list_below

        _kind, root_idx, part, uri, prefix, sub = task
        fs, path = storage.fs(uri)
        bucket = path.partition("/")[0]
        try:
            objects = sync(fs.loop, list_below, fs, bucket, prefix, sub)
        except Exception as e:  # noqa: BLE001 - botocore errors are not OSErrors
            raise st.StorageError(st.s3_problem(e) or f"cannot list: {type(e).__name__}: {e}",
                                  path=f"s3://{bucket}/{sub}") from None  # fmt: skip
        for pos, (key, size, modified) in enumerate(objects):
            yield ("f", root_idx, part, pos, f"s3://{bucket}/{key}", size,
                   modified.timestamp() if modified else None, False, None)  # fmt: skip
    else:  # another fsspec store: one listing
        _kind, root_idx, root = task
        for pos, f in enumerate(storage.list_files(root)):
            yield ("f", root_idx, 0, pos, f.uri, f.size, _seconds(f.mtime), bool(f.is_link), None)


def _inventory_batches(storage: Storage, task: tuple) -> Iterator[Any]:
    """An inventory data file's current objects under the scopes as ``f`` rows, column by column
    (10^7 of them: no Python object per row), then its read statistics (one ``s`` row). The order
    key is (scope, 0, 0, uri): the local planner sorts an inventory's files by URI."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ckptctl.engine.spark import arrow_batches, arrow_schema
    from ckptctl.inventory import ReadStats, iter_batches

    _kind, inv, scopes = task
    stats = ReadStats()
    schema = arrow_schema(LISTING_SCHEMA)
    for batch in iter_batches(storage, inv, scopes, stats):
        uri, n = batch.column("uri"), batch.num_rows
        root_idx = pa.nulls(n, pa.int32())
        for i in reversed(range(len(scopes))):  # the first scope the file is under
            root_idx = pc.if_else(pc.starts_with(uri, scopes[i].rstrip("/") + "/"), pa.scalar(i, pa.int32()), root_idx)
        yield _record_batch(schema, n, kind="f", root_idx=root_idx, part=0, pos=0, uri=uri, size=batch.column("size"),
                            mtime=batch.column("mtime"), is_link=False)  # fmt: skip
    yield from arrow_batches([("s", 0, 0, stats.rows_kept, None, stats.rows_read, None, False, None)], LISTING_SCHEMA)


def _record_batch(schema, n: int, **columns) -> Any:
    """A record batch of ``n`` rows of ``schema``: ``columns`` by name, each an Arrow array or a
    value every row has; the others null."""
    import pyarrow as pa

    def column(f) -> Any:
        value = columns.get(f.name)
        if value is None:
            return pa.nulls(n, f.type)
        return value if isinstance(value, (pa.Array, pa.ChunkedArray)) else pa.repeat(pa.scalar(value, f.type), n)

    return pa.RecordBatch.from_arrays([column(f) for f in schema], schema=schema)


def _utf8(uri: str, what: str = "a name that is not UTF-8 cannot be planned on Spark: rename it") -> str:
    """``uri``, which Spark can hold: a local name of bytes that are no UTF-8 (a surrogate escape
    in Python), or a path a ``_metadata`` spells with a lone surrogate (Java strings may hold one),
    is one line naming it, not a task's traceback (an Arrow or Spark string is UTF-8; the
    in-process planner plans such names)."""
    if not uri.isascii():
        try:
            uri.encode()
        except UnicodeEncodeError:
            raise st.StorageError(f"{what}, or plan with --engine local",
                                  path=uri.encode(errors="backslashreplace").decode()) from None  # fmt: skip
    return uri


def _seconds(mtime) -> float | None:
    """An mtime as Spark's DoubleType takes it (an int is refused)."""
    return None if mtime is None else float(mtime)


def _fold_partition(storage_options, retained_set, rebase, prefixes, rows: Iterable[tuple]) -> Iterator[Any]:
    """Arrow batches of :data:`FOLD_SCHEMA` for a slice of the checkpoints (in order): the live
    paths, the segments, the paths only expired checkpoints reference, and one ``small`` row with
    the rest of the :class:`Folded` (pickled; proportional to checkpoints and external
    references), with the counts of live and segment rows and the live paths' possible ForSt
    directories: each a Spark job of its own when the driver asked for them later (three of a
    small plan's ~40). The paths go to Arrow a column at a time: a tuple per path cost a quarter
    of decoding them (2M live paths at 10^7 files)."""
    import pyarrow as pa

    from ckptctl.engine.spark import arrow_batches, arrow_schema

    indexed = list(rows)
    if not indexed:
        return
    out = fold_references(storage_options, [loc for _i, loc in indexed], retained_set, rebase, prefixes)
    part = indexed[0][0]
    for p in itertools.chain(out.live, out.spans, out.expired_refs):
        if not p.isascii():
            _utf8(p, "a checkpoint references a path that is not UTF-8 (a lone surrogate): Spark cannot hold it")
    schema = arrow_schema(FOLD_SCHEMA)
    for kind, paths in (("live", out.live), ("expired", out.expired_refs)):
        paths = list(paths)
        for at in range(0, len(paths), 1 << 16):
            chunk = pa.array(paths[at : at + (1 << 16)], pa.string())
            yield _record_batch(schema, len(chunk), kind=kind, path=chunk, part=part)
    yield from arrow_batches(((("span", p, offset, size, part, None) for p, spans in out.spans.items()
                              for offset, size in spans)), FOLD_SCHEMA)  # fmt: skip
    counts = (len(out.live), sum(len(spans) for spans in out.spans.values()))
    forst = _forst_parents(itertools.chain(out.live, out.spans))
    out.live, out.spans, out.expired_refs = set(), {}, set()
    out.refusals = [r for r in out.refusals if r[0] != Refusal.MOVED_DIRECTORY.value]  # merged on the driver
    yield from arrow_batches([("small", None, None, None, part, pickle.dumps(_FoldSmall(out, *counts, forst)))],
                             FOLD_SCHEMA)  # fmt: skip


class _FoldSmall(NamedTuple):
    """A fold task's ``small`` row: what it folded but the paths, and what the driver needs of
    the paths it keeps (counted as they were made, not by a later pass)."""

    folded: Folded
    live_rows: int
    span_rows: int
    forst_parents: set[str]


def _decide_batches(rule: FileRule, contexts, batches: Iterable[Any]) -> Iterator[Any]:
    """:meth:`FileRule.verdicts` over the Arrow batches of a partition of joined rows. Arrow
    batches of :data:`DECISION_SCHEMA` rows: candidates, protected, partially live files, and one
    ``live`` row per batch counting its live files (``pos``) and bytes (``size``). Each row's
    directory is found in Arrow (a split at the last ``/``, dictionary-encoded: a context per
    distinct directory); no file becomes a Python object but a segment's file and the names
    :func:`ckptctl.gc.rule._by_name` reads."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ckptctl.engine.spark import arrow_batches, arrow_schema

    schema = arrow_schema(DECISION_SCHEMA)
    shipped, labels = contexts.value
    get = shipped.get
    verdicts = Verdicts()
    reasons: list[str] = []
    ids: list[int | None] = []  # each verdict's evidence as a label, or
    inline: list[str | None] = []  # its text, when no label has it

    def rows(outcome: str, batch, codes, jobs, mask) -> Any:
        at = pc.filter(codes, mask)
        return pa.RecordBatch.from_arrays([
            pa.repeat(outcome, len(at)), *(pc.filter(batch.column(n), mask) for n in
                                                                   ("root_idx", "part", "pos", "uri", "size", "mtime")),
            pc.take(pa.array(reasons, pa.string()), at), pc.take(pa.array(ids, pa.int32()), at),
            pc.take(pa.array(inline, pa.string()), at), pc.filter(jobs, mask),
        ], schema=schema)  # fmt: skip

    for batch in batches:
        live = pc.fill_null(batch.column("live"), False)
        live_files = pc.sum(pc.cast(live, "int64")).as_py() or 0
        live_bytes = pc.sum(pc.filter(batch.column("size"), live)).as_py() or 0
        segment = pc.and_(pc.fill_null(pc.greater(pc.list_value_length(batch.column("spans")), 0), False),
                          pc.invert(live))  # fmt: skip
        partial = []
        for i in pc.indices_nonzero(segment).to_pylist():  # file-merging files some checkpoint uses a part of
            row = {c: batch.column(c)[i].as_py() for c in ("root_idx", "part", "pos", "uri", "size", "spans")}
            part = partially_live(row["size"], [(s["offset"], s["size"]) for s in row["spans"]])
            live_files += 1
            live_bytes += row["size"]
            if part:
                partial.append(("partial", row["root_idx"], row["part"], row["pos"], row["uri"], row["size"], None,
                                None, None, json.dumps(part), None))  # fmt: skip
        split = pc.split_pattern(batch.column("uri"), "/", max_splits=1, reverse=True)
        dirs = pc.dictionary_encode(pc.list_element(split, 0))
        ctxs = [get(d) for d in dirs.dictionary.to_pylist()]
        codes, taken, kept = rule.verdicts(
            RuleColumns(ctxs, dirs.indices, pc.list_element(split, 1), batch.column("mtime"), batch.column("is_link"),
                        pc.or_(live, segment), batch.column("expired")), verdicts,
        )  # fmt: skip
        for reason, ev in verdicts.pairs[len(reasons) :]:
            text = json.dumps(ev or {})
            reasons.append(str(reason))
            ids.append(labels.evidence_id.get(text))
            inline.append(None if ids[-1] is not None else text)
        jobs = pc.take(pa.array([c[4] for c in ctxs], pa.int32()), dirs.indices)
        yield rows("candidates", batch, codes, jobs, taken)
        yield rows("protected", batch, codes, jobs, kept)
        yield from arrow_batches(partial, DECISION_SCHEMA)
        yield from arrow_batches([("live", 0, 0, live_files, None, live_bytes, None, None, None, None, None)],
                                 DECISION_SCHEMA)  # fmt: skip


def _unpickled(fn, ddl: str | None, batches) -> Iterator[Any]:
    """:meth:`_SparkPlanner.on_executors` in a task: its items unpickled, ``fn``'s rows in Arrow
    batches of ``ddl`` (``None``: ``fn`` yields record batches itself)."""
    from ckptctl.engine.spark import arrow_batches

    items = (pickle.loads(b) for batch in batches for b in batch.column(0).to_pylist())  # noqa: S301 - the driver's
    out = fn(items)
    yield from out if ddl is None else arrow_batches(out, ddl)


def _parent(column: str, name: str | None = None):
    """The URI's directory, as ``uri.rpartition("/")[0]`` says. Cut as bytes, before its last
    part (``name``, a column, when it is cut already): the last ``/`` is an ASCII byte, never
    inside a character. By characters, a substring counts them through the string, twice (2.6
    times as long over 10^7 URIs). No regex: a ``.`` stops at a line break in a directory's name."""
    from pyspark.sql import functions as F

    last = name or f"substring_index({column}, '/', -1)"
    return F.expr(f"cast(substring(cast({column} as binary), 1, octet_length({column}) - octet_length({last}) - 1) as string)")


def _referenced_partition(rows) -> Iterator[str]:
    yield from referenced_jobs(r[0] for r in rows)


def _changelog_partition(rows) -> Iterator[str]:
    yield from changelog_ids(r[0] for r in rows)


# ---------------------------------------------------------------------------------------------
# one row per URI: the listing and the references together

PER_URI = ("kg", "uri", "root_idx", "part", "pos", "n_f", "size", "mtime", "is_link", "live", "has_span", "expired",
           "rows_read", "rows_kept")  # fmt: skip
DECIDE_COLUMNS = ("root_idx", "part", "pos", "uri", "size", "mtime", "is_link", "live", "spans", "expired")
SPAN_LIST = "array<struct<offset:bigint,size:bigint>>"
BROADCAST_SPANS = 200_000  # segments' rows at most broadcast to the deciding tasks; more are joined


def _as_per_uri(fold_rows):
    """The references of :data:`FOLD_SCHEMA` rows in the columns of :func:`_group_per_uri`."""
    from pyspark.sql import functions as F

    kind, none = F.col("kind"), F.lit(None)
    return fold_rows.filter("kind in ('live', 'span', 'expired')").select(
        F.lit("f").alias("kg"), F.col("path").alias("uri"), none.cast("int").alias("root_idx"),
        none.cast("int").alias("part"), none.cast("long").alias("pos"), F.lit(0).alias("n_f"),
        none.cast("long").alias("size"), none.cast("double").alias("mtime"), none.cast("boolean").alias("is_link"),
        (kind == "live").alias("live"), (kind == "span").alias("has_span"), (kind == "expired").alias("expired"),
        none.cast("long").alias("rows_read"), none.cast("long").alias("rows_kept"),
    )  # fmt: skip


def _group_per_uri(frame, *, exact: bool):
    """Rows of :data:`PER_URI` grouped by (``uri``, ``kg``), after one shuffle by ``uri``, with
    their ``key`` (a file's directory, a note's URI) and a file's ``marks`` (its name as the rule
    may read it: :func:`ckptctl.gc.spark_rule.name_marks`). ``exact``: of several listing rows of one
    key, the largest (size, mtime, is_link) speaks whole (a struct: sort-based); else each
    field's maximum (hash aggregates only).

    The directory is cut out of the URI here, once: every later pass over the rows (summary,
    decisions, the written lists) reads it, and cutting it (character counts of a string) cost
    as much as the rest of such a pass."""
    from pyspark.sql import functions as F

    from ckptctl.gc.spark_rule import name_marks

    carries = (F.col("n_f") > 0) | (F.col("kg") != "f")  # a listed file or a walk's note, not a reference
    if exact:
        values = [F.max(F.when(carries, F.struct("size", "mtime", "is_link"))).alias("v")]
    else:
        values = [F.max(c).alias(c) for c in ("size", "mtime", "is_link")]
    grouped = frame.repartition("uri").groupBy("uri", "kg").agg(
        *[F.max(c).alias(c) for c in ("root_idx", "part", "pos")], F.sum("n_f").alias("n_f"), *values,
        *[F.max(c).alias(c) for c in ("live", "has_span", "expired")],
        *[F.sum(c).alias(c) for c in ("rows_read", "rows_kept")],
    )  # fmt: skip
    if exact:
        grouped = grouped.select("*", "v.size", "v.mtime", "v.is_link").drop("v")
    is_file = F.col("kg") == "f"
    grouped = grouped.select(*PER_URI, F.substring_index("uri", "/", -1).alias("name"))  # cut once, read twice
    return grouped.select(*PER_URI, F.when(is_file, _parent("uri", "name")).otherwise(F.col("uri")).alias("key"),
                          F.when(is_file, name_marks("name")).alias("marks"))


def _with_spans(files, fold_df, n: int) -> tuple[Any, int]:
    """``files`` with the spans of each segment's file (``spans``: null for others), and the
    number of segments (``n``, the fold's rows of them). The segments are few or none in most
    buckets: then they go to every deciding task (or nowhere) and the files are not shuffled again."""
    from pyspark.sql import functions as F

    spans = fold_df.filter("kind = 'span'")
    if not n:
        return files.withColumn("spans", F.lit(None).cast(SPAN_LIST)), 0
    lists = spans.groupBy(F.col("path").alias("uri")).agg(F.collect_list(F.struct("offset", "size")).alias("spans"))
    return files.join(F.broadcast(lists) if n <= BROADCAST_SPANS else lists, "uri", "left"), n


_METADATA_FIELDS = ("part", "pos", "uri", "size", "mtime", "is_link")  # as metadata_listing reads them


def _counts(future, being_written) -> list:
    """The summary's counts and sums by directory (or note): hash aggregates."""
    from pyspark.sql import functions as F

    mtime = F.col("mtime")
    dated = F.coalesce(~F.isnan(mtime) & (mtime >= PLAUSIBLE_MTIME), F.lit(False))

    return [
        F.count_if(being_written).alias("being_written"),
        F.max("root_idx").alias("root_idx"), F.count(F.lit(1)).alias("files"), F.sum("size").alias("bytes"),
        F.count_if(future).alias("future"), F.count_if(F.col("n_f") > 1).alias("duplicated"),
        F.count_if("live").alias("live_files"), F.sum(F.when(F.col("live"), F.col("size"))).alias("live_bytes"),
        F.sum("rows_read").alias("rows_read"), F.sum("rows_kept").alias("rows_kept"), F.max("mtime").alias("mtime"),
        F.max("pos").alias("pos"), F.count_if(_may_need_python()).alias("may_need_python"),
        # the times ckptctl.gc.activity.dated() reads of a directory's files
        F.max(F.when(dated, mtime)).alias("newest"), F.min(F.when(dated, mtime)).alias("oldest"),
        F.count_if(~dated).alias("undated"),
    ]  # fmt: skip


def _has_span():
    """Whether a row's file holds segments of a retained checkpoint (null: no reference reached it).
    Such a file goes to Python (its spans), in :meth:`_SparkPlanner.decide` and in the summary's
    count of what may: one spelling for both."""
    from pyspark.sql import functions as F

    return F.coalesce(F.col("has_span"), F.lit(False))


def _may_need_python():
    """A superset of the files :meth:`_SparkPlanner.decide` sends to Python workers, whatever
    their directory's context: a file not live with spans or whose name
    :func:`ckptctl.gc.spark_rule.name_may_need_python` (beside its twin, ``needs_python``) flags."""
    from pyspark.sql import functions as F

    from ckptctl.gc.spark_rule import name_may_need_python

    return ~F.coalesce(F.col("live"), F.lit(False)) & (_has_span() | name_may_need_python())


# an order key (root_idx, part, pos) packed in a long: 11, 21 and 31 bits
_ROOT_BITS, _PART_BITS, _POS_BITS = 11, 21, 31
_NAME_BYTES = 7  # the first bytes of a name in a long (56 bits: never negative)


def _order_key():
    """(k1, fits): a file's place in the listing order, (root_idx, part, pos, uri), as far as a
    long holds it -- (root_idx, part, pos) packed -- and whether it fits (else the summary sorts).
    Where the order is by name (an inventory, whose files all have part and pos 0), the name's
    first bytes (:func:`_name_key`) come next. Within a directory every file has the same root
    and the URIs differ by their names, so the least (k1, k2) is the first file or ties with
    it; ties are broken by the exact order."""
    from pyspark.sql import functions as F

    r, p, q = (F.coalesce(F.col(c).cast("long"), F.lit(0)) for c in ("root_idx", "part", "pos"))
    fits = (
        (r >= 0) & (r < 1 << _ROOT_BITS) & (p >= 0) & (p < 1 << _PART_BITS) & (q >= 0) & (q < 1 << _POS_BITS)
    )
    return F.shiftleft(r, _PART_BITS + _POS_BITS).bitwiseOR(F.shiftleft(p, _POS_BITS)).bitwiseOR(q), fits


def _name_key():
    """k2: the first bytes of a file's name as a long (big-endian, zero-padded)."""
    from pyspark.sql import functions as F

    head = F.substring(F.substring_index("uri", "/", -1).cast("binary"), 1, _NAME_BYTES)
    return F.conv(F.rpad(F.hex(head), 2 * _NAME_BYTES, "0"), 16, 10).cast("long")


def _in_listing_order(dirs: list, by_name: bool) -> list | None:
    """The directories (summary rows with ``k1`` and ``k2``: :func:`_order_key`) in the order of
    their first files, or ``None`` when the keys cannot tell it.

    By a listing's position, k1 alone orders them (no two files share one). By name (an
    inventory), directories of one root compare as ``key/`` and the name's first bytes, which
    order their first files whenever the two differ within what both know; when one is a
    prefix of the other (a subdirectory named like the other's first file begins) they cannot."""

    def order(d) -> tuple:
        return (d.k1, (d.key.encode() + b"/" + d.k2.to_bytes(_NAME_BYTES, "big")) if by_name else b"")

    keyed = sorted(((order(d), d) for d in dirs), key=lambda kd: kd[0])
    for ((ka, ta), _), ((kb, tb), _) in itertools.pairwise(keyed):
        if ka == kb and (not by_name or ta == tb[: len(ta)] or tb == ta[: len(tb)]):
            return None
    return [d for _k, d in keyed]


def _nested(keys: Iterable[str]) -> set[str]:
    """The directories inside another of ``keys`` and those others: the only ones whose order
    (by their first files' URIs) the directories' own names, with ``/`` after them, do not tell."""
    keys = set(keys)
    out = set()
    for key in keys:
        at = key.find("/")
        while at != -1:
            if key[:at] in keys:
                out.update((key, key[:at]))
            at = key.find("/", at + 1)
    return out


_MISSING_KG = "x:"  # the summary's group of referenced files the listing lacks (no note has this kind)


class _DirRow:
    """One row of the summary (a directory of files, a note of a walk, inventory statistics)."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


class _Summary:
    """What :meth:`_SparkPlanner.summarise` collected: a row per directory of files (``kg`` "f",
    ``key`` the directory), per note of a walk and per inventory statistics; proportional to
    directories."""

    def __init__(self, rows: list, dirs: list, first_future: str | None, cutoff: float) -> None:
        """``dirs``: the rows of directories of files, in listing order; ``first_future``: the
        first file (listing order) dated in the future; ``cutoff``: the one the count of
        ``_metadata`` being written took."""
        self.dirs = dirs
        self.cutoff = cutoff
        self.being_written = sum(d.being_written for d in dirs)  # at most; none is sure
        self.missing = sum(r.files for r in rows if r.kg == _MISSING_KG)  # referenced, not listed
        self.notes = sorted(((r.kg[0], r) for r in rows if r.kg[:1] in ("d", "l", "a", "m") and r.kg[1:2] == ":"),
                            key=lambda n: (n[1].root_idx, n[1].pos))  # fmt: skip
        stats = [r for r in rows if r.kg == "s:"]
        self.rows_read = sum(r.rows_read or 0 for r in stats)
        self.rows_kept = sum(r.rows_kept or 0 for r in stats)
        self.total_files = sum(d.files for d in self.dirs)
        self.total_bytes = sum(d.bytes or 0 for d in self.dirs)
        self.future = sum(d.future for d in self.dirs), first_future
        self.duplicated = sum(d.duplicated for d in self.dirs)
        self.live = [sum(d.live_files for d in self.dirs), sum(d.live_bytes or 0 for d in self.dirs)]
        self.may_need_python = sum(d.may_need_python for d in self.dirs)  # files; none: no Python decides

    def files_in(self, root_idx: int) -> int:
        return sum(d.files for d in self.dirs if d.root_idx == root_idx)

    def metadata_listing(self, listed: list[str]) -> list[tuple[str, list[FileInfo]]]:
        """The listed ``_metadata`` files per scope, in listing order (all
        :meth:`ckptctl.gc.guards.Guards.check_checkpoints_unchanged` reads)."""
        found = sorted((d.root_idx, tuple(d.metadata)) for d in self.dirs if d.metadata is not None)
        out: list[tuple[str, list[FileInfo]]] = [(root, []) for root in listed]
        for root_idx, (_part, _pos, uri, size, mtime, is_link) in found:
            out[root_idx][1].append(FileInfo(uri, size, mtime, is_link))
        return out


# ---------------------------------------------------------------------------------------------
# the driver


class _SparkPlanner(_Planner):
    def __init__(self, storage: Storage, options: GcOptions, spark, master: str) -> None:
        super().__init__(storage, options, None)
        self.spark, self.master = spark, master
        self.sc = spark.sparkContext
        self.cached: list = []  # frames cached while planning, released with the plan (or by run())
        self.segments = 0  # the segments retained checkpoints use: without any, no file is partially live
        self.fold_counts = [0, 0]  # the fold's rows of live paths and of segments
        self.forst_parents: set[str] = set()  # directories of live paths a ForSt working directory's may be

    def cache(self, frame):
        """``frame`` kept (memory, spilling to disk) while the plan is made, released after: a
        long-lived session (a test run, a notebook) making many plans must not fill its executors'
        storage with old listings until aggregations run out of memory."""
        from pyspark import StorageLevel

        frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
        self.cached.append(frame)
        return frame

    def materialise_rows(self, frame):
        """``frame``'s rows kept as they are (serialized, in memory, spilling to disk) while the
        plan is made: the rows per URI, read by every later pass. A cache would keep them as
        compressed columns, and building those cost 16 s of a 10^7-row plan's 105
        (bench/bucket_bench.py; 26 s to shuffle, group and keep the rows this way, 42 s cached).
        Kept by the first pass that reads them (not eagerly: the summary's aggregation and the
        keeping are one pass, a scan of 10^7 kept rows less: 118.6 -> 109.0 s). Kept rows are
        not recomputed: if an executor holding some is lost, the next pass fails
        (:func:`executor_error`'s line) -- a plan made again, never one made of fewer rows."""
        from pyspark import StorageLevel

        frame = frame.localCheckpoint(eager=False, storageLevel=StorageLevel.MEMORY_AND_DISK)
        self.cached.append(frame)
        return frame

    def on_executors(self, items: list, slices: int, fn, ddl: str, *, arrow: bool = False):
        """The rows (tuples of ``ddl``) ``fn`` makes of each of ``slices`` slices of ``items`` (in
        order), on executors, handed to the JVM in Arrow batches: a pickled Python row each costs
        more than making it (10^7 listed files). ``arrow``: ``fn`` yields the record batches of
        ``ddl`` itself (rows read as columns stay columns)."""
        from ckptctl.engine.spark import map_in_arrow

        pickled = self.sc.parallelize([(pickle.dumps(x),) for x in items], slices)
        return map_in_arrow(self.spark.createDataFrame(pickled, "item binary"),
                            functools.partial(_unpickled, fn, None if arrow else ddl), ddl)  # fmt: skip

    def run(self) -> SparkPlan:
        """The plan; the frames it cached go with it (:meth:`SparkPlan.release`), or are
        released here when there is no plan."""
        try:
            return self._run()
        except BaseException as e:
            release(self.cached)
            if isinstance(e, CkptError) or not isinstance(e, Exception):
                raise
            raise executor_error(e) or e from None  # a task's error comes back as a PythonException

    def _run(self) -> SparkPlan:
        now, now_source, cutoff = self.start()
        discovered = self.discover({})  # pruned walks (delimiter listings on S3), never the universe
        retention = self.retain(discovered, now, cutoff)
        self.warnings.extend(retention.notes)
        folded, fold_df = self.fold_on_executors(retention)
        rule = self.rule(now, cutoff, True)
        rows = self.listing_rows()
        joined = self.per_uri(rows, fold_df, exact=False)
        summary = self.summarise(joined, rule.tolerance_limit, cutoff)
        if summary.duplicated:  # keys an inventory lists twice: the newest row speaks, as in-process
            release([joined])
            joined = self.per_uri(rows, fold_df, exact=True)
            summary = self.summarise(joined, rule.tolerance_limit, cutoff)
        self.take_listing(summary)
        for code, message in folded.refusals:
            self.refuse(Refusal(code), message)
        listed = self.scopes.listed
        hidden = self.check_checkpoints_unchanged(discovered, summary.metadata_listing(listed),
                                                  ((listed[d.root_idx], d.key) for d in summary.dirs))
        self.fold_late([f for f in hidden if st.parent(f.uri) not in discovered], retention, folded)
        self.fold_siblings(retention, folded)
        self.check_no_aliases()
        self.check_mounts(retention)
        plan = self.classify_on_executors(now, now_source, cutoff, rule, retention, folded, fold_df, joined, summary)
        if self.inventory is not None:
            self.check_metadata_after_plan()
        return plan

    # -- fold ------------------------------------------------------------------------------
    def fold_on_executors(self, retention) -> tuple[Folded, Any]:
        """Decode the checkpoints on executors, in order, a slice per task. The driver keeps what
        is proportional to checkpoints; the live paths stay in the returned DataFrame."""

        ordered = retention.retained + retention.expired
        retained_set = {loc.uri for loc in retention.retained}
        slices = max(1, min(len(ordered), self.sc.defaultParallelism * 2))
        fn = functools.partial(_fold_partition, self.storage.options, retained_set, self.options.rebase,
                               self.scopes.prefixes)  # fmt: skip
        fold_df = self.materialise_rows(self.on_executors(list(enumerate(ordered)), slices, fn, FOLD_SCHEMA, arrow=True))
        folded = Folded(set(), {}, set(), {}, {}, [])
        moved: dict[str, list[str]] = {}
        for row in sorted(fold_df.filter("kind = 'small'").select("part", "blob").collect()):
            small: _FoldSmall = pickle.loads(row.blob)  # noqa: S301 - written by this run's executors
            part = small.folded
            self.fold_counts[0] += small.live_rows
            self.fold_counts[1] += small.span_rows
            self.forst_parents |= small.forst_parents
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
        listed = self.scopes.listed
        tasks: list[tuple] = []
        driver_rows: list[tuple] = []
        if self.inventory is not None:
            tasks = [("inventory", replace(self.inventory, files=(df,)), tuple(listed)) for df in self.inventory.files]
        else:
            local = [(i, r) for i, r in enumerate(listed) if st.scheme_of(r) == "file"]
            if local:
                tasks.append(("local", local))
            for i, root in enumerate(listed):
                if st.scheme_of(root) == "s3":
                    rows, subs = self._s3_level(i, root)
                    driver_rows.extend(rows)
                    tasks.extend(subs)
                elif st.scheme_of(root) != "file":
                    tasks.append(("any", i, root))
        rows = self.on_executors(tasks, max(1, len(tasks)), functools.partial(_list_partition, self.storage.options),
                                 LISTING_SCHEMA, arrow=True)  # fmt: skip
        if driver_rows:
            rows = rows.union(self.spark.createDataFrame(driver_rows, LISTING_SCHEMA))
        return rows

    def per_uri(self, rows, fold_df, *, exact: bool):
        """The listing and the checkpoints' references in one row per URI, by one shuffle: what
        was a deduplication of the listing, a grouping of the references and a join of the two.
        Every aggregate is a hash aggregate (no strings, no structs: those sort 10^7 rows), so
        two rows of one key in an inventory take each field's maximum; :meth:`summarise` counts
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
        return self.materialise_rows(_group_per_uri(listing.unionByName(_as_per_uri(fold_df)), exact=exact))

    def summarise(self, joined, tolerance_limit: float, cutoff: float) -> _Summary:
        """Everything the driver needs before deciding, by directory (listing order, files, bytes,
        the ``_metadata`` in each), the walks' notes, the inventory's read statistics, the totals,
        the files dated in the future, and for the guards the referenced files not listed and the
        ``_metadata`` being written (:meth:`_summary_rows`): one pass of hash aggregates over the
        rows per URI (each guard's own pass was a Spark job of every plan).

        A minimum of strings or structs is a sort-based aggregate: sorting 10^7 rows by directory
        cost more than the pass. So each directory's first file is not taken; its least order key
        is, as two longs (:func:`_order_key`), and the driver orders the directories by them
        (:func:`_in_listing_order`). A directory has one ``_metadata`` (a URI is one row), taken
        field by field. The first file in the future is looked for only when there is one."""
        from pyspark.sql import functions as F

        rows, future, is_metadata, being_written = self._summary_rows(joined, tolerance_limit, cutoff)
        by_name = self.inventory is not None
        k1, fits = _order_key()
        of_metadata = [F.max(F.when(is_metadata, F.col(c))).alias(f"m_{c}") for c in _METADATA_FIELDS if c != "uri"]
        counted = rows.groupBy("kg", "key").agg(
            *_counts(future, being_written), F.min(k1).alias("k1"), F.count_if(~fits).alias("unfit"),
            F.count_if(is_metadata).alias("n_metadata"), *of_metadata,
        ).collect()  # fmt: skip
        dirs = [_DirRow(**r.asDict(), k2=0) for r in counted if r.kg == "f"]
        if any(d.unfit or d.n_metadata > 1 for d in dirs):  # order keys beyond two longs: the sorting aggregates
            return self._summarise_sorting(joined, tolerance_limit, cutoff)
        nested = _nested(d.key for d in dirs) if by_name else set()
        if nested:  # only there can a name's first bytes order two directories: read for those alone
            at = {d.key: d for d in dirs}
            firsts = rows.filter((F.col("kg") == "f") & F.col("key").isin(sorted(nested)))
            for r in firsts.groupBy("key").agg(F.min(_name_key()).alias("k2")).collect():
                at[r.key].k2 = r.k2
        ordered = _in_listing_order(dirs, by_name)
        if ordered is None:  # tied: the sorting aggregates
            return self._summarise_sorting(joined, tolerance_limit, cutoff)
        for d in ordered:
            d.metadata = (d.m_part, d.m_pos, f"{d.key}/_metadata", d.m_size, d.m_mtime, d.m_is_link) if d.n_metadata else None
        first_future = None
        if any(d.future for d in dirs):
            first = rows.filter((F.col("kg") == "f") & future).agg(F.min(F.struct(*ORDER[:3], "uri"))).first()[0]
            first_future = first.uri
        return _Summary([_DirRow(**r.asDict()) for r in counted if r.kg != "f"], ordered, first_future, cutoff)

    def _summary_rows(self, joined, tolerance_limit: float, cutoff: float):
        """The rows the summary reads (listed files and the walks' notes; the referenced files
        missing from the listing as one group of their own, :data:`_MISSING_KG`), and the
        conditions "in the future", "a _metadata" and "perhaps a _metadata being written" (a
        young file whose URI holds the temporary name: a superset, as a substring test costs no
        cut of every name; :meth:`_Frames.metadata_being_written` looks closer when any is)."""
        from pyspark.sql import functions as F

        from ckptctl.layout import METADATA_IN_PROGRESS

        is_file, mtime = F.col("kg") == "f", F.col("mtime")
        missing = is_file & (F.col("n_f") == 0) & (F.col("live") | F.col("has_span"))
        rows = joined.filter(~is_file | (F.col("n_f") > 0) | missing).withColumns({
            "kg": F.when(missing, F.lit(_MISSING_KG)).otherwise(F.col("kg")),
            "key": F.when(missing, F.lit("")).otherwise(F.col("key")),
        })  # fmt: skip
        being_written = (is_file & F.col("uri").contains("/" + METADATA_IN_PROGRESS)
                         & (mtime.isNull() | (mtime >= cutoff)))  # fmt: skip
        return rows, mtime > tolerance_limit, F.col("uri").endswith("/_metadata"), being_written

    def _summarise_sorting(self, joined, tolerance_limit: float, cutoff: float) -> _Summary:
        """:meth:`summarise` in one pass whose structs and strings sort the rows (the order keys
        of some file did not fit two longs, or could not tell two directories apart)."""
        from pyspark.sql import functions as F

        rows, future, is_metadata, being_written = self._summary_rows(joined, tolerance_limit, cutoff)
        order = F.struct(*ORDER[:3], "uri")
        counted = rows.groupBy("kg", "key").agg(
            *_counts(future, being_written), F.min(order).alias("first"), F.min(F.when(future, order)).alias("first_future"),
            F.max(F.when(is_metadata, F.struct(*_METADATA_FIELDS))).alias("metadata"),
        ).collect()  # fmt: skip
        dirs = sorted((_DirRow(**r.asDict()) for r in counted if r.kg == "f"), key=lambda d: d.first)
        firsts = [d.first_future for d in dirs if d.first_future is not None]
        return _Summary([_DirRow(**r.asDict()) for r in counted if r.kg != "f"], dirs,
                        min(firsts).uri if firsts else None, cutoff)  # fmt: skip

    def take_listing(self, summary: _Summary) -> None:
        """The walks' notes into ``self.notes``, the inventory's statistics recorded, every ROOT
        checked to hold something."""
        listed = self.scopes.listed
        seen: dict = {}
        for root in listed:
            self.notes[root] = st.WalkNotes(seen=seen)
        for kind, r in summary.notes:
            notes = self.notes[listed[r.root_idx]]
            uri, extra = r.key, r.kg[2:]
            if kind == "d":
                notes.dirs[uri] = r.mtime
            elif kind == "l":
                notes.followed.append((uri, extra))
            elif kind == "a":
                notes.aliases.append((uri, extra))
            elif kind == "m":
                notes.mounts.append(uri)
        if self.inventory is not None:
            self.record_inventory(summary.rows_read, summary.rows_kept)
        for i, root in enumerate(listed):
            self.check_listed(root, summary.files_in(i) > 0)

    def _s3_level(self, root_idx: int, root: str) -> tuple[list[tuple], list[tuple]]:
        """The first delimiter listing of an S3 root, on the driver: its own objects (rows) and one
        listing task per sub-prefix, in the order :func:`ckptctl.storage.s3list.list_prefix` lists them."""
        from fsspec.asyn import sync

        from ckptctl.storage.s3list import list_level

        fs, path = self.storage.fs(root)
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

    # -- classify --------------------------------------------------------------------------
    def classify_on_executors(self, now, now_source, cutoff, rule: FileRule, retention, folded: Folded, fold_df,
                              joined, summary: _Summary):  # fmt: skip
        from pyspark.sql import functions as F

        listed = self.scopes.listed
        late = [("live", p, None, None, -1, None) for p in folded.live]
        late += [("span", p, o, s, -1, None) for p, spans in folded.spans.items() for o, s in spans]
        if late:  # checkpoints fold_late read on the driver (found by the listing only)
            late_df = self.spark.createDataFrame(late, FOLD_SCHEMA)
            fold_df = fold_df.union(late_df)
            stale = joined
            joined = self.materialise_rows(_group_per_uri(joined.select(*PER_URI).unionByName(_as_per_uri(late_df)),
                                                          exact=False))  # fmt: skip
        live_paths = fold_df.filter("kind in ('live', 'span')").select("path")
        files = joined.filter((F.col("kg") == "f") & (F.col("n_f") > 0))
        # the live files are counted, never decided: they stay in the JVM
        live = summary.live if not late else list(files.filter("live").agg(F.count(F.lit(1)), F.sum("size")).first())
        if late:  # the regrouped rows are kept now: the first grouping is not read again
            release([stale])

        # the contexts of every directory, in listing order (the first overlap found is reported)
        dirs = summary.dirs
        sources = {
            "metadata": lambda: metadata_jobs(retention),
            "chk-dir": lambda: chk_dir_jobs(self.notes, ((listed[d.root_idx], d.key) for d in dirs)),
            "referenced": lambda: set(live_paths.rdd.mapPartitions(_referenced_partition).distinct().collect()),
            "changelog": lambda: self._changelog_ids(files),
        }
        # the fold's tasks found the ForSt directories of theirs; those of the checkpoints folded late are added
        forst = self.forst_parents | _forst_parents(itertools.chain(folded.live, folded.spans))
        # per directory the summary's newest and oldest plausible mtimes, as the local planner reads its runs
        activity = JobActivity(self.scopes, retention.newest_retained,
                               lambda: ((d.key, lambda d=d: (d.newest, d.oldest, d.undated > 0)) for d in dirs),
                               self.notes, self.quiet_before(rule))  # fmt: skip
        contexts = self.contexts(now, retention, JobEvidence(sources), activity, lambda: forst)
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
        broadcast = self.sc.broadcast((shipped, labels))

        # not persisted: deciding again from the cached rows per URI in the JVM costs less than
        # keeping 10^7 decided rows (each consumer -- the totals here, the written lists -- reads them once)
        live_rows = self.fold_counts[0] + len(folded.live)  # the fold's rows and those of `late`
        span_rows = self.fold_counts[1] + len(late) - len(folded.live)
        # the summary's count of files Python may decide holds for the rows it read: not after `late`
        python = summary.may_need_python if not late else None
        decisions, in_python = self.decide(files, fold_df, rule, labels, shipped, broadcast, span_rows, python)
        # one job (no row sorted): the candidates of each job (the caps), all of them, the live
        # files, and the lists' totals by reason -- counted on the executors, or for a small plan
        # from every decision brought to the driver once (read there from then on: spark_decided)
        counted = {"live": [live[0], live[1] or 0], "candidates": [0, 0]}
        decided = None
        if summary.total_files <= COLLECT_FILES:
            decided = Decided(decisions.withColumn("h", F.xxhash64("path", "size", "mtime", "reason")).collect(), labels)
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
        tally = _Frames(self, joined, files, decisions, in_python, fold_df, live_paths, summary, counted, by_reason,
                        labels, live_rows + span_rows, bool(late), decided)  # fmt: skip
        return self.finish(now, now_source, cutoff, retention, folded, contexts, tally)

    def decide(self, files, fold_df, rule: FileRule, labels: Labels, shipped: dict[str, tuple], broadcast,
               span_rows: int, python: int | None):  # fmt: skip
        """The files not live decided, as :data:`DECISION_SCHEMA` rows: in the JVM by the rule's
        SQL form (:mod:`ckptctl.gc.spark_rule`), but for the segments' files and the names the
        rule reads one by one, which go to :meth:`FileRule.verdicts` on Python workers. Returns
        (every decision, those made in Python: the only ones of outcome ``partial``).

        ``python``: how many files the summary found that may go to Python (``None``: not
        known). No file does in most buckets, and finding them is a pass over every file of its
        own (the Python decisions are kept, so they are made once): 7.4 s of a 10^7-file plan."""
        from pyspark.sql import functions as F

        from ckptctl.engine.spark import map_in_arrow
        from ckptctl.gc.spark_rule import CONTEXT_SCHEMA, context_rows, needs_python, sql_verdicts

        contexts = self.spark.createDataFrame(context_rows(shipped, labels, rule), CONTEXT_SCHEMA)
        open_ = files.filter(~F.col("live")).join(F.broadcast(contexts), F.col("key") == contexts.dir, "left")
        to_python = _has_span() | needs_python()
        if python == 0:
            in_python, self.segments = self.spark.createDataFrame([], DECISION_SCHEMA), span_rows
        else:
            spanned, self.segments = _with_spans(open_.filter(to_python).select(*files.columns), fold_df, span_rows)
            # few rows, decided once (the SQL's are decided again at each read of the lists)
            in_python = self.cache(map_in_arrow(spanned.select(*DECIDE_COLUMNS),
                                                functools.partial(_decide_batches, rule, broadcast), DECISION_SCHEMA))  # fmt: skip
        taken, reason, verdict = sql_verdicts(rule, labels)
        in_sql = open_.filter(~to_python).select(
            F.when(taken, "candidates").otherwise("protected").alias("outcome"), "root_idx", "part", "pos",
            F.col("uri").alias("path"), "size", "mtime", reason.alias("reason"), verdict.alias("verdict"),
            F.lit(None).cast("string").alias("evidence"), F.col("dir_job").alias("job"),
        )  # fmt: skip
        return in_sql.unionByName(in_python), in_python

    def _changelog_ids(self, files) -> set[str]:
        from pyspark.sql import functions as F

        prefixes = [c.rstrip("/") + "/" for c in self.options.changelog_dirs]
        if not prefixes:
            return set()
        cond = functools.reduce(lambda a, b: a | b, [F.col("uri").startswith(p) for p in prefixes])
        return set(files.filter(cond).select("uri").rdd.mapPartitions(_changelog_partition).distinct().collect())


class _Frames(Tally):
    """The Spark planner's outcome: decisions in a DataFrame, aggregates computed on executors."""

    def __init__(self, planner: _SparkPlanner, joined, files, decisions, in_python, fold_df, live_paths,
                 summary: _Summary, counted: dict[str, list[int]], by_reason: list[ReasonTotals], labels: Labels,
                 referenced_rows: int, late: bool, decided: Decided | None = None) -> None:  # fmt: skip
        """``counted``: (files, bytes) of the live files and of the candidates, ``by_reason`` the
        lists' totals, from the decisions; the listing's totals are the summary's;
        ``referenced_rows`` the fold's rows of live paths and segments (counted as made);
        ``late``: checkpoints were folded after the summary (its count of missing files is short);
        ``decided``: a small plan's decisions on the driver, read instead of ``decisions``."""
        self.by_reason, self.labels = by_reason, labels
        self.planner, self.joined, self.files, self.decisions = planner, joined, files, decisions
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
        missing = self.joined.filter((F.col("kg") == "f") & (F.col("n_f") == 0) & (F.col("live") | F.col("has_span")))
        rows = missing.select("uri").limit(MISSING_BOUND + 1).collect()
        if len(rows) > MISSING_BOUND:
            raise CkptError(
                f"more than {MISSING_BOUND:,} files retained checkpoints reference are missing from the listing "
                "(a wrong --rebase or a renamed directory?): look at the checkpoints with `ckptctl verify`"
            )
        return {r.uri for r in rows}

    def savepoint_files(self, names: set[str]) -> SavepointFiles:
        from pyspark.sql import functions as F

        listed = self.planner.scopes.listed
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
            gone = self.decisions.filter((F.col("outcome") == "protected") & F.col("path").isin(sorted(paths)))
            n, size = gone.agg(F.count(F.lit(1)), F.sum("size")).first()
        self.live_files += n
        self.live_bytes += size or 0
        self.relived |= paths

    def lists(self):
        """The candidates and protected files (without those made live again)."""
        from pyspark.sql import functions as F

        listed = self.decisions.filter(F.col("outcome").isin("candidates", "protected"))
        if self.relived:
            listed = listed.filter(~((F.col("outcome") == "protected") & F.col("path").isin(sorted(self.relived))))
        return listed

    def future_files(self) -> tuple[int, str | None]:
        return self.future

    def first_collision(self, names: dict[str, str]) -> str | None:
        from pyspark.sql import functions as F

        if self.decided is not None:
            return self.decided.first_candidate_named(names)
        hits = self.decisions.filter((F.col("outcome") == "candidates") & F.substring_index("path", "/", -1).isin(sorted(names)))
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
        kept = self.lists().filter((F.col("outcome") == "protected") & (F.col("mtime").isNull() | (F.col("mtime") >= since)))
        # one path per directory and kind (file, directory marker): all the guard looks at
        keys = kept.groupBy(_parent("path"), F.col("path").endswith("/"))
        return [r[0] for r in keys.agg(F.min("path")).select("min(path)").collect()]

    def metadata_being_written(self, since: float) -> tuple[int, str | None]:
        from pyspark.sql import functions as F

        from ckptctl.layout import METADATA_IN_PROGRESS

        # a filter of the kept rows per URI by name (no string is sorted: the first is looked for
        # only when there is one)
        if since == self.summary.cutoff and not self.summary.being_written:
            return 0, None  # the summary's pass found none that may be
        named = F.substring_index("uri", "/", -1).startswith(METADATA_IN_PROGRESS)
        hits = self.files.filter(named & (F.col("mtime").isNull() | (F.col("mtime") >= since)))
        n = hits.count()
        return n, (hits.agg(F.min("uri")).first()[0] if n else None)

    def plan(self, options, now, now_source, cutoff, retained, expired, external, missing, *rest) -> SparkPlan:
        from pyspark.sql import functions as F

        if not self.planner.segments:
            rows = []
        elif self.decided is not None:
            rows = self.decided.partial()
        else:
            rows = self.in_python.filter(F.col("outcome") == "partial").orderBy(*ORDER).collect()
        partial = [{"path": r.path, "size": r.size, **json.loads(r.evidence)} for r in rows]  # live_bytes, dead_bytes
        # the lists are decided again from the planner's cached frames each time they are read: those
        # stay with the plan until it is released. Files made live again: the lists' totals counted again.
        # Their tasks: each of the two kinds of decisions (SQL, Python) reads the cached rows per URI
        # (counted on the cached frame: on the lists, Spark would run their broadcasts and shuffles to tell)
        files = SparkFiles.of(self.lists(), self.labels, self.planner.cached, None if self.relived else self.by_reason,
                              tasks=2 * self.files.rdd.getNumPartitions(), decided=self.decided)  # fmt: skip
        return SparkPlan(options, now, now_source, cutoff, retained, expired, [], [], self.live_files,
                         self.live_bytes, self.total_files, self.total_bytes, external, missing, partial, *rest,
                         files=files, engine={"kind": "spark", "master": self.planner.master})  # fmt: skip


# ---------------------------------------------------------------------------------------------
# the plan and its files


@dataclass
class Labels:
    """The evidence texts and job names decisions point to by number (:data:`DECISION_SCHEMA`),
    made on the driver from the directories' contexts and the rule: a handful per job."""

    evidence: list[str]
    jobs: list[str]
    evidence_id: dict[str, int]
    job_id: dict[str, int]

    @classmethod
    def of(cls, contexts: Iterable[tuple], rule: FileRule, job_of: dict[int, str]) -> Labels:
        """Every evidence :meth:`FileRule.verdicts` can give (a directory's, the young and
        after-inventory ones, none) and every job of the directories."""
        contexts = list(contexts)
        texts = {json.dumps(c[3] or {}) for c in contexts} | {"{}"}
        texts |= {json.dumps(ev or {}) for ev in (rule.young_evidence, rule.after_evidence)}
        jobs = sorted({job for c in contexts if (job := job_of.get(id(c[4]))) is not None})
        evidence = sorted(texts)
        return cls(evidence, jobs, {t: i for i, t in enumerate(evidence)}, {j: i for i, j in enumerate(jobs)})

    def attach(self, frame):
        """``frame`` (:data:`DECISION_SCHEMA`) with ``evidence`` the text, ``job`` the name and
        ``job_id`` its last part (``none``: no job): two small tables sent to every task, the
        decisions not shuffled."""
        from pyspark.sql import functions as F

        spark = frame.sparkSession
        texts = spark.createDataFrame(list(enumerate(self.evidence)), "verdict int, text string")
        names = spark.createDataFrame([(i, job, job.rpartition("/")[2]) for i, job in enumerate(self.jobs)],
                                      "job int, name string, job_id string")  # fmt: skip
        out = frame.join(F.broadcast(texts), "verdict", "left").join(F.broadcast(names), "job", "left")
        return out.select(*KEPT_COLUMNS, F.coalesce("evidence", "text").alias("evidence"), F.col("name").alias("job"),
                          F.coalesce("job_id", F.lit("none")).alias("job_id"))  # fmt: skip


# what the lists keep of a decision as it is (its evidence and job come from Labels)
KEPT_COLUMNS = ("outcome", "root_idx", "part", "pos", "path", "size", "mtime", "reason")


@dataclass
class SparkFiles:
    """The per-file lists of a Spark plan: a DataFrame of :data:`DECISION_SCHEMA` rows (lists
    ``candidates`` and ``protected``), and their totals computed once on executors."""

    frame: Any
    labels: Labels
    totals: dict[str, Any]
    cached: list = field(default_factory=list)  # the persisted frames ``frame`` is made of, released with the plan
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
        rows = frame.filter(frame.outcome.isin("candidates", "protected")).orderBy("outcome", *ORDER).collect()
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

    rows = grouped.agg(F.count(F.lit(1)).alias("n"), F.sum("size").alias("bytes"), F.min("mtime").alias("oldest"),
                       F.max("mtime").alias("newest"), *_hash_sums(), F.sum("pos").alias("live_n"))
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
    BigDecimal per row). :func:`ckptctl.gc.spark_decided.hash_total` puts them together."""
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
        return self.files.totals["candidates"]["files"] + self.files.totals["protected"]["files"] <= INLINE_FILES

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
    checkpointed ones (:meth:`_SparkPlanner.materialise_rows`), which ``unpersist()`` does not
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
            raise CkptError(f"the plan's {which} in {path} are not those it was written with (edited?)", path=plan_file)
    return frame


# ---------------------------------------------------------------------------------------------
# apply: re-plan on Spark, keep the unchanged candidates on the executors


WAITING = "its expired checkpoint's _metadata is not deleted this time"


def revalidate_spark(storage: Storage, plan_data: dict[str, Any], plan_file: str, master: str):
    """:func:`ckptctl.gc.apply.revalidate` for a plan made on Spark: re-plan on Spark with the
    plan's options; the candidates still candidates with the same size and mtime are found by a
    join on executors (:func:`unchanged_candidates`) and stay there (:func:`candidates_to_apply`).
    Returns (fresh plan, :class:`ckptctl.gc.spark_apply.ToApply`)."""
    from ckptctl.gc.apply import GcApplyRefused
    from ckptctl.gc.planfile import BlockedPlan, options_from_plan, validate

    validate(plan_data)
    if plan_data["blocked"]:
        raise BlockedPlan("this plan was blocked and can never be applied; run `ckptctl gc plan` again")
    from pyspark import StorageLevel

    fresh = build_plan_spark(storage, options_from_plan(plan_data), master)
    # read by several jobs below: decided once (the plan's lists are decided again at each read)
    proposed = fresh.files.frame.filter("outcome = 'candidates'").persist(StorageLevel.MEMORY_AND_DISK)
    try:
        if fresh.refusals:
            raise GcApplyRefused("the re-validated plan is blocked: " + fresh.refusals[0]["message"])
        spark = fresh.files.frame.sparkSession
        if plan_data.get("files") and not plan_data["files"].get("inline"):
            old = read_lists(spark, plan_file, plan_data["files"])
        else:  # the plan's lists are inline (at most INLINE_FILES): already on the driver
            rows = [(c["path"], c["size"], None if c["mtime"] is None else float(c["mtime"]))
                    for c in plan_data["candidates"]]  # fmt: skip
            old = spark.createDataFrame(rows, "path string, size long, mtime double").selectExpr(
                "'candidates' as outcome", "*"
            )
        from ckptctl.gc.spark_apply import why_dropped_on_executors

        unchanged, skipped = unchanged_candidates(old, proposed)
        return fresh, candidates_to_apply(fresh, unchanged, why_dropped_on_executors(storage.options, skipped, fresh.files.frame))
    finally:
        release([proposed])
        fresh.release()  # what goes is persisted on its own


def unchanged_candidates(old, fresh):
    """(unchanged, skipped): DataFrames of the old plan's candidates that the fresh plan still
    proposes with the same size and mtime (the fresh rows), and of the others (path, code, reason:
    both null for those the fresh plan no longer proposes, decided by
    :func:`ckptctl.gc.spark_apply.why_dropped_on_executors`)."""
    from pyspark.sql import functions as F

    from ckptctl.gc.apply import CHANGED

    o = old.filter(F.col("outcome") == "candidates").select("path", F.col("size").alias("o_size"),
                                                            F.col("mtime").alias("o_mtime"))  # fmt: skip
    f = fresh.filter(F.col("outcome") == "candidates")
    joined = o.join(f, "path", "left")
    same = F.col("size").isNotNull() & (F.col("size") == F.col("o_size")) & F.col("mtime").eqNullSafe(F.col("o_mtime"))
    unchanged = joined.filter(same).select(*[c for c in f.columns])
    changed = F.col("size").isNotNull()
    skipped = joined.filter(~same).select(
        "path",
        F.when(changed, F.lit(CHANGED)).alias("code"),
        F.when(changed, F.lit("changed since the plan (size or mtime)")).alias("reason"),
    )
    return unchanged, skipped


def candidates_to_apply(fresh: SparkPlan, unchanged, skipped):
    """:func:`ckptctl.gc.apply.order_for_deletion` on executors: nothing of an expired checkpoint
    whose ``_metadata`` does not go (the driver looks up only the expired ``_metadata``, one per
    expired checkpoint). The ``_metadata`` go first by :func:`ckptctl.gc.spark_apply.delete_on_executors`,
    which also lists every directory again: the check that an inventory plan's candidates are
    unchanged now (a HEAD per file on the driver in-process) is that listing's."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from ckptctl.gc.apply import WAITING as WAITING_CODE
    from ckptctl.gc.spark_apply import SAMPLE, ToApply
    from ckptctl.layout import METADATA_FILE

    expired_metadata = sorted(st.join(e["path"], METADATA_FILE) for e in fresh.expired)
    going = {r.path for r in unchanged.filter(F.col("path").isin(expired_metadata)).select("path").collect()}
    stuck = sorted({st.parent(m) for m in expired_metadata if m not in going})
    waits = F.lit(False)
    if stuck:
        under = functools.reduce(lambda a, b: a | b, [F.col("path").startswith(s + "/") for s in stuck])
        waits = (F.col("reason") == str(Reason.EXPIRED_ONLY)) | ((F.col("reason") == str(Reason.EXPIRED_CHECKPOINT)) & under)
    go = unchanged.filter(~waits).select("path", "size", "mtime", "reason").persist(StorageLevel.MEMORY_AND_DISK)
    files, size = go.agg(F.count(F.lit(1)), F.sum("size")).first()
    skipped = skipped.union(unchanged.filter(waits).select("path", F.lit(WAITING_CODE).alias("code"),
                                                           F.lit(WAITING).alias("reason")))  # fmt: skip
    skipped = skipped.persist(StorageLevel.MEMORY_AND_DISK)  # decided once: a listing per directory
    try:
        by_code = {r.code: r["count"] for r in skipped.groupBy("code").count().collect()}
        skips = [r.asDict() for r in skipped.orderBy("path").limit(SAMPLE).collect()]
    finally:
        skipped.unpersist()
    return ToApply(go, files, size or 0, sum(by_code.values()), skips, by_code)
