"""What the driver knows of the files before deciding: one row per directory (listing order,
counts, bytes, its ``_metadata``), the walks' notes, the inventory's read statistics, in one pass
of hash aggregates over the rows per URI (:func:`summarise`)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

from ckptctl.gc.spark.columns import (
    METADATA_FIELDS,
    NAME_BYTES,
    ORDER,
    name_key,
    order_key,
    summary_counts,
)
from ckptctl.storage import FileInfo


def in_listing_order(dirs: list, by_name: bool) -> list | None:
    """The directories (summary rows with ``k1`` and ``k2``: :func:`order_key`) in the order of
    their first files, or ``None`` when the keys cannot tell it.

    By a listing's position, k1 alone orders them (no two files share one). By name (an
    inventory), directories of one root compare as ``key/`` and the name's first bytes, which
    order their first files whenever the two differ within what both know; when one is a
    prefix of the other (a subdirectory named like the other's first file begins) they cannot."""

    def order(d) -> tuple:
        return (d.k1, (d.key.encode() + b"/" + d.k2.to_bytes(NAME_BYTES, "big")) if by_name else b"")

    keyed = sorted(((order(d), d) for d in dirs), key=lambda kd: kd[0])
    for ((ka, ta), _), ((kb, tb), _) in itertools.pairwise(keyed):
        if ka == kb and (not by_name or ta == tb[: len(ta)] or tb == ta[: len(tb)]):
            return None
    return [d for _k, d in keyed]


def nested_dirs(keys: Iterable[str]) -> set[str]:
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


MISSING_KG = "x:"  # the summary's group of referenced files the listing lacks (no note has this kind)


class DirRow:
    """One row of the summary (a directory of files, a note of a walk, inventory statistics)."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


class Summary:
    """What :func:`summarise` collected: a row per directory of files (``kg`` "f",
    ``key`` the directory), per note of a walk and per inventory statistics; proportional to
    directories."""

    def __init__(self, rows: list, dirs: list, first_future: str | None, cutoff: float) -> None:
        """``dirs``: the rows of directories of files, in listing order; ``first_future``: the
        first file (listing order) dated in the future; ``cutoff``: the one the count of
        ``_metadata`` being written took."""
        self.dirs = dirs
        self.cutoff = cutoff
        self.being_written = sum(d.being_written for d in dirs)  # at most; none is sure
        self.missing = sum(r.files for r in rows if r.kg == MISSING_KG)  # referenced, not listed
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


def summarise(joined, tolerance_limit: float, cutoff: float, by_name: bool) -> Summary:
    """Everything the driver needs before deciding, by directory (listing order, files, bytes,
    the ``_metadata`` in each), the walks' notes, the inventory's read statistics, the totals,
    the files dated in the future, and for the guards the referenced files not listed and the
    ``_metadata`` being written (:func:`summary_rows`): one pass of hash aggregates over the
    rows per URI (each guard's own pass was a Spark job of every plan).

    A minimum of strings or structs is a sort-based aggregate: sorting 10^7 rows by directory
    cost more than the pass. So each directory's first file is not taken; its least order key
    is, as two longs (:func:`order_key`), and the driver orders the directories by them
    (:func:`in_listing_order`). A directory has one ``_metadata`` (a URI is one row), taken
    field by field. The first file in the future is looked for only when there is one."""
    from pyspark.sql import functions as F

    rows, future, is_metadata, being_written = summary_rows(joined, tolerance_limit, cutoff)
    k1, fits = order_key()
    of_metadata = [
        F.max(F.when(is_metadata, F.col(c))).alias(f"m_{c}") for c in METADATA_FIELDS if c != "uri"
    ]
    counted = rows.groupBy("kg", "key").agg(
        *summary_counts(future, being_written), F.min(k1).alias("k1"), F.count_if(~fits).alias("unfit"),
        F.count_if(is_metadata).alias("n_metadata"), *of_metadata,
    ).collect()  # fmt: skip
    dirs = [DirRow(**r.asDict(), k2=0) for r in counted if r.kg == "f"]
    if any(d.unfit or d.n_metadata > 1 for d in dirs):  # order keys beyond two longs: the sorting aggregates
        return summarise_sorting(joined, tolerance_limit, cutoff)
    nested = nested_dirs(d.key for d in dirs) if by_name else set()
    if nested:  # only there can a name's first bytes order two directories: read for those alone
        at = {d.key: d for d in dirs}
        firsts = rows.filter((F.col("kg") == "f") & F.col("key").isin(sorted(nested)))
        for r in firsts.groupBy("key").agg(F.min(name_key()).alias("k2")).collect():
            at[r.key].k2 = r.k2
    ordered = in_listing_order(dirs, by_name)
    if ordered is None:  # tied: the sorting aggregates
        return summarise_sorting(joined, tolerance_limit, cutoff)
    for d in ordered:
        d.metadata = (
            (d.m_part, d.m_pos, f"{d.key}/_metadata", d.m_size, d.m_mtime, d.m_is_link)
            if d.n_metadata
            else None
        )
    first_future = None
    if any(d.future for d in dirs):
        first = rows.filter((F.col("kg") == "f") & future).agg(F.min(F.struct(*ORDER[:3], "uri"))).first()[0]
        first_future = first.uri
    return Summary([DirRow(**r.asDict()) for r in counted if r.kg != "f"], ordered, first_future, cutoff)


def summary_rows(joined, tolerance_limit: float, cutoff: float):
    """The rows the summary reads (listed files and the walks' notes; the referenced files
    missing from the listing as one group of their own, :data:`MISSING_KG`), and the
    conditions "in the future", "a _metadata" and "perhaps a _metadata being written" (a
    young file whose URI holds the temporary name: a superset, as a substring test costs no
    cut of every name; :meth:`ckptctl.gc.spark.frames.Frames.metadata_being_written` looks closer when any is)."""
    from pyspark.sql import functions as F

    from ckptctl.checkpoint.layout import METADATA_IN_PROGRESS

    is_file, mtime = F.col("kg") == "f", F.col("mtime")
    missing = is_file & (F.col("n_f") == 0) & (F.col("live") | F.col("has_span"))
    rows = joined.filter(~is_file | (F.col("n_f") > 0) | missing).withColumns({
        "kg": F.when(missing, F.lit(MISSING_KG)).otherwise(F.col("kg")),
        "key": F.when(missing, F.lit("")).otherwise(F.col("key")),
    })  # fmt: skip
    being_written = (is_file & F.col("uri").contains("/" + METADATA_IN_PROGRESS)
                     & (mtime.isNull() | (mtime >= cutoff)))  # fmt: skip
    return rows, mtime > tolerance_limit, F.col("uri").endswith("/_metadata"), being_written


def summarise_sorting(joined, tolerance_limit: float, cutoff: float) -> Summary:
    """:func:`summarise` in one pass whose structs and strings sort the rows (the order keys
    of some file did not fit two longs, or could not tell two directories apart)."""
    from pyspark.sql import functions as F

    rows, future, is_metadata, being_written = summary_rows(joined, tolerance_limit, cutoff)
    order = F.struct(*ORDER[:3], "uri")
    counted = rows.groupBy("kg", "key").agg(
        *summary_counts(future, being_written), F.min(order).alias("first"), F.min(F.when(future, order)).alias("first_future"),
        F.max(F.when(is_metadata, F.struct(*METADATA_FIELDS))).alias("metadata"),
    ).collect()  # fmt: skip
    dirs = sorted((DirRow(**r.asDict()) for r in counted if r.kg == "f"), key=lambda d: d.first)
    firsts = [d.first_future for d in dirs if d.first_future is not None]
    return Summary([DirRow(**r.asDict()) for r in counted if r.kg != "f"], dirs,
                    min(firsts).uri if firsts else None, cutoff)  # fmt: skip
