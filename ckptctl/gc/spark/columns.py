"""The rows of a Spark plan: their schemas, their order, and the column expressions over them.

Every file has an order key (scope, part of the listing, position, path) that reproduces the local
planner's listing order (:data:`ORDER`), so "first: …" in messages and the order of the lists are
the same. The files and the references meet in one row per URI (:data:`PER_URI`,
:func:`group_per_uri`).
"""

from __future__ import annotations

from typing import Any

from ckptctl.storage.listing import PLAUSIBLE_MTIME

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


def uri_parent(column: str, name: str | None = None):
    """The URI's directory, as ``uri.rpartition("/")[0]`` says. Cut as bytes, before its last
    part (``name``, a column, when it is cut already): the last ``/`` is an ASCII byte, never
    inside a character. By characters, a substring counts them through the string, twice (2.6
    times as long over 10^7 URIs). No regex: a ``.`` stops at a line break in a directory's name."""
    from pyspark.sql import functions as F

    last = name or f"substring_index({column}, '/', -1)"
    return F.expr(
        f"cast(substring(cast({column} as binary), 1, octet_length({column}) - octet_length({last}) - 1) as string)"
    )


PER_URI = ("kg", "uri", "root_idx", "part", "pos", "n_f", "size", "mtime", "is_link", "live", "has_span", "expired",
           "rows_read", "rows_kept")  # fmt: skip
DECIDE_COLUMNS = ("root_idx", "part", "pos", "uri", "size", "mtime", "is_link", "live", "spans", "expired")
SPAN_LIST = "array<struct<offset:bigint,size:bigint>>"
BROADCAST_SPANS = 200_000  # segments' rows at most broadcast to the deciding tasks; more are joined


def as_per_uri(fold_rows):
    """The references of :data:`FOLD_SCHEMA` rows in the columns of :func:`group_per_uri`."""
    from pyspark.sql import functions as F

    kind, none = F.col("kind"), F.lit(None)
    return fold_rows.filter("kind in ('live', 'span', 'expired')").select(
        F.lit("f").alias("kg"), F.col("path").alias("uri"), none.cast("int").alias("root_idx"),
        none.cast("int").alias("part"), none.cast("long").alias("pos"), F.lit(0).alias("n_f"),
        none.cast("long").alias("size"), none.cast("double").alias("mtime"), none.cast("boolean").alias("is_link"),
        (kind == "live").alias("live"), (kind == "span").alias("has_span"), (kind == "expired").alias("expired"),
        none.cast("long").alias("rows_read"), none.cast("long").alias("rows_kept"),
    )  # fmt: skip


def group_per_uri(frame, *, exact: bool):
    """Rows of :data:`PER_URI` grouped by (``uri``, ``kg``), after one shuffle by ``uri``, with
    their ``key`` (a file's directory, a note's URI) and a file's ``marks`` (its name as the rule
    may read it: :func:`ckptctl.gc.spark.rule.name_marks`). ``exact``: of several listing rows of one
    key, the largest (size, mtime, is_link) speaks whole (a struct: sort-based); else each
    field's maximum (hash aggregates only).

    The directory is cut out of the URI here, once: every later pass over the rows (summary,
    decisions, the written lists) reads it, and cutting it (character counts of a string) cost
    as much as the rest of such a pass."""
    from pyspark.sql import functions as F

    from ckptctl.gc.spark.rule import name_marks

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
    grouped = grouped.select(
        *PER_URI, F.substring_index("uri", "/", -1).alias("name")
    )  # cut once, read twice
    return grouped.select(
        *PER_URI,
        F.when(is_file, uri_parent("uri", "name")).otherwise(F.col("uri")).alias("key"),
        F.when(is_file, name_marks("name")).alias("marks"),
    )


def with_spans(files, fold_df, n: int) -> tuple[Any, int]:
    """``files`` with the spans of each segment's file (``spans``: null for others), and the
    number of segments (``n``, the fold's rows of them). The segments are few or none in most
    buckets: then they go to every deciding task (or nowhere) and the files are not shuffled again."""
    from pyspark.sql import functions as F

    spans = fold_df.filter("kind = 'span'")
    if not n:
        return files.withColumn("spans", F.lit(None).cast(SPAN_LIST)), 0
    lists = spans.groupBy(F.col("path").alias("uri")).agg(
        F.collect_list(F.struct("offset", "size")).alias("spans")
    )
    return files.join(F.broadcast(lists) if n <= BROADCAST_SPANS else lists, "uri", "left"), n


METADATA_FIELDS = ("part", "pos", "uri", "size", "mtime", "is_link")  # as metadata_listing reads them


def summary_counts(future, being_written) -> list:
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
        F.max("pos").alias("pos"), F.count_if(may_need_python()).alias("may_need_python"),
        # the times ckptctl.gc.activity.dated() reads of a directory's files
        F.max(F.when(dated, mtime)).alias("newest"), F.min(F.when(dated, mtime)).alias("oldest"),
        F.count_if(~dated).alias("undated"),
    ]  # fmt: skip


def has_span():
    """Whether a row's file holds segments of a retained checkpoint (null: no reference reached it).
    Such a file goes to Python (its spans), in :func:`ckptctl.gc.spark.classify.decide` and in the summary's
    count of what may: one spelling for both."""
    from pyspark.sql import functions as F

    return F.coalesce(F.col("has_span"), F.lit(False))


def may_need_python():
    """A superset of the files :func:`ckptctl.gc.spark.classify.decide` sends to Python workers, whatever
    their directory's context: a file not live with spans or whose name
    :func:`ckptctl.gc.spark.rule.name_may_need_python` (beside its twin, ``needs_python``) flags."""
    from pyspark.sql import functions as F

    from ckptctl.gc.spark.rule import name_may_need_python

    return ~F.coalesce(F.col("live"), F.lit(False)) & (has_span() | name_may_need_python())


# an order key (root_idx, part, pos) packed in a long: 11, 21 and 31 bits
_ROOT_BITS, _PART_BITS, _POS_BITS = 11, 21, 31
NAME_BYTES = 7  # the first bytes of a name in a long (56 bits: never negative)


def order_key():
    """(k1, fits): a file's place in the listing order, (root_idx, part, pos, uri), as far as a
    long holds it -- (root_idx, part, pos) packed -- and whether it fits (else the summary sorts).
    Where the order is by name (an inventory, whose files all have part and pos 0), the name's
    first bytes (:func:`name_key`) come next. Within a directory every file has the same root
    and the URIs differ by their names, so the least (k1, k2) is the first file or ties with
    it; ties are broken by the exact order."""
    from pyspark.sql import functions as F

    r, p, q = (F.coalesce(F.col(c).cast("long"), F.lit(0)) for c in ("root_idx", "part", "pos"))
    fits = (
        (r >= 0) & (r < 1 << _ROOT_BITS) & (p >= 0) & (p < 1 << _PART_BITS) & (q >= 0) & (q < 1 << _POS_BITS)
    )
    return F.shiftleft(r, _PART_BITS + _POS_BITS).bitwiseOR(F.shiftleft(p, _POS_BITS)).bitwiseOR(q), fits


def name_key():
    """k2: the first bytes of a file's name as a long (big-endian, zero-padded)."""
    from pyspark.sql import functions as F

    head = F.substring(F.substring_index("uri", "/", -1).cast("binary"), 1, NAME_BYTES)
    return F.conv(F.rpad(F.hex(head), 2 * NAME_BYTES, "0"), 16, 10).cast("long")
