"""The decisions of a small Spark plan, brought to the driver once and read there.

A plan's lists are read several times after they are decided: their totals by list, job and
reason (the caps), the first candidate named like an external reference, the young protected
files (--keep-last's guard), the lists themselves (the JSON inlines up to
:data:`ckptctl.gc.spark.plan.INLINE_FILES` of them) and the Parquet written next to the plan. At bucket
scale each read is a Spark job over the decided rows, which stay on the executors. A plan of at
most :data:`ckptctl.gc.spark.classify.COLLECT_FILES` listed files has at most that many decisions, and the
JSON brings them to the driver anyway: there each further Spark job cost more than its rows
(~0.2-0.8 s each for a few hundred rows: planning, broadcasts, a write of one small file per
directory), so the rows are collected once, each with its hash (Spark's ``xxhash64``, the
digest :func:`ckptctl.gc.spark.read_lists` checks), and every later read is a loop here. The
outcome is the plan the Spark reads give (tests compare both against the local planner).
"""

from __future__ import annotations

import json
import os
import uuid
from collections import Counter
from collections.abc import Iterable
from typing import Any, NamedTuple

from ckptctl.gc.decisions import FileDecision
from ckptctl.gc.reasons import Reason

LISTS = ("candidates", "protected")


# the lists as written (:meth:`ckptctl.gc.spark.SparkPlan.write`, :meth:`Decided.write`) and read
# back (:func:`ckptctl.gc.spark.read_lists`), their partition columns last
WRITTEN_SCHEMA = (
    "root_idx int, part int, pos long, path string, size long, mtime double, reason string, evidence string, "
    "outcome string, job_id string"
)
_FILE_COLUMNS = [tuple(c.split()) for c in WRITTEN_SCHEMA.split(", ")][
    :-2
]  # (name, type) in each Parquet file


class ReasonTotals(NamedTuple):
    """Decisions of one list (``outcome``) and reason, over every job."""

    outcome: str
    reason: str | None
    n: int
    bytes: int | None
    oldest: float | None
    newest: float | None
    digest: int | None  # the sum of :func:`ckptctl.gc.spark._hash_sums`


class Group(NamedTuple):
    """The aggregates of decisions of one (outcome, job, reason), as the Spark grouping names them."""

    outcome: str
    job: int | None
    reason: str | None
    n: int
    bytes: int | None
    oldest: float | None
    newest: float | None
    hash_hi: int | None
    hash_lo: int | None
    live_n: int | None


def hash_total(hi: int | None, lo: int | None) -> int | None:
    """The exact sum of the hashes summed in halves (``None``: no rows)."""
    return None if hi is None else (hi << 32) + lo


def _either(combine, a, b):
    """``combine(a, b)``, or the one of them that is not ``None`` (SQL aggregates' nulls)."""
    return b if a is None else a if b is None else combine(a, b)


def merge_totals(groups: Iterable[Any]) -> list[ReasonTotals]:
    """Groups by (outcome, job, reason) -- Spark rows or :class:`Group` -- summed over jobs."""
    merged: dict[tuple, ReasonTotals] = {}
    for r in groups:
        was = merged.get((r.outcome, r.reason))
        digest = hash_total(r.hash_hi, r.hash_lo)
        if was is None:
            merged[r.outcome, r.reason] = ReasonTotals(
                r.outcome, r.reason, r.n, r.bytes, r.oldest, r.newest, digest
            )
            continue
        merged[r.outcome, r.reason] = ReasonTotals(
            r.outcome, r.reason, was.n + r.n, _either(int.__add__, was.bytes, r.bytes),
            _either(min, was.oldest, r.oldest), _either(max, was.newest, r.newest),
            _either(int.__add__, was.digest, digest),
        )  # fmt: skip
    return list(merged.values())


class Row(NamedTuple):
    """A decision as :data:`ckptctl.gc.spark.DECISION_SCHEMA` has it, with its evidence's text and
    job's name looked up (:class:`ckptctl.gc.spark.labels.Labels`) and its hash."""

    outcome: str
    root_idx: int | None
    part: int | None
    pos: int | None
    path: str | None
    size: int | None
    mtime: float | None
    reason: str | None
    evidence: str | None
    job: int | None
    job_name: str | None
    h: int


def _order(r: Row) -> tuple:
    """The listing order (root_idx, part, pos, path), nulls first as Spark sorts them ascending."""
    return tuple((v is not None, v) for v in (r.root_idx, r.part, r.pos, r.path))


class Decided:
    """Every decision of a small plan (lists, partially live files, live counts) on the driver."""

    def __init__(self, rows: list, labels) -> None:
        """``rows``: collected Spark rows of the decision schema with ``h``; ``labels``: the
        plan's :class:`ckptctl.gc.spark.labels.Labels`."""
        texts, jobs = labels.evidence, labels.jobs
        self.rows = [
            Row(r.outcome, r.root_idx, r.part, r.pos, r.path, r.size, r.mtime, r.reason,
                r.evidence if r.evidence is not None else (texts[r.verdict] if r.verdict is not None else None),
                r.job, jobs[r.job] if r.job is not None else None, r.h)
            for r in rows
        ]  # fmt: skip
        self.relived: set[str] = set()

    def groups(self, rows: Iterable[Row] | None = None) -> list[Group]:
        """The aggregates :func:`ckptctl.gc.spark.reason_totals` makes, by (outcome, job, reason),
        of every decision (or of ``rows``)."""
        acc: dict[tuple, list] = {}
        for r in self.rows if rows is None else rows:
            g = acc.get((r.outcome, r.job, r.reason))
            if g is None:
                g = acc[r.outcome, r.job, r.reason] = [0, None, None, None, 0, 0, None]
            g[0] += 1
            if r.size is not None:
                g[1] = r.size if g[1] is None else g[1] + r.size
            if r.mtime is not None:
                g[2] = r.mtime if g[2] is None else min(g[2], r.mtime)
                g[3] = r.mtime if g[3] is None else max(g[3], r.mtime)
            g[4] += r.h >> 32
            g[5] += r.h & 0xFFFFFFFF
            if r.pos is not None:
                g[6] = r.pos if g[6] is None else g[6] + r.pos
        return [Group(*key, *g) for key, g in acc.items()]

    def listed(self, which: str | None = None) -> list[Row]:
        """The rows of the lists (one of them), without the files made live again."""
        wanted = (which,) if which else LISTS
        return [r for r in self.rows if r.outcome in wanted
                and not (r.outcome == "protected" and r.path in self.relived)]  # fmt: skip

    def totals(self) -> list[ReasonTotals]:
        """The lists' totals by list and reason (what :meth:`groups` gives, over jobs)."""
        return merge_totals(self.groups(self.listed()))

    def relive(self, paths: set[str]) -> tuple[int, int]:
        """Protected files live after all: (how many, bytes) leave the protected list."""
        gone = [r for r in self.listed("protected") if r.path in paths]
        self.relived |= paths
        return len(gone), sum(r.size or 0 for r in gone)

    def first_of_ties(self, which: str, reasons: list[str]) -> dict[str, tuple]:
        """The first decision (listing order) of each of ``reasons`` in list ``which``."""
        firsts: dict[str, tuple] = {}
        for r in self.listed(which):
            if r.reason in reasons:
                key = _order(r)
                if r.reason not in firsts or key < firsts[r.reason]:
                    firsts[r.reason] = key
        return firsts

    def first_candidate_named(self, names: dict[str, str]) -> str | None:
        hits = [r for r in self.listed("candidates") if r.path.rpartition("/")[2] in names]
        return min(hits, key=_order).path if hits else None

    def kept_paths_since(self, since: float) -> list[str]:
        return [r.path for r in self.listed("protected") if r.mtime is None or r.mtime >= since]

    def partial(self) -> list[Row]:
        return sorted((r for r in self.rows if r.outcome == "partial"), key=_order)

    def decisions(self) -> dict[str, list[FileDecision]]:
        """Both lists in the local planner's order."""
        cache: dict[str, Any] = {}
        lists: dict[str, list[FileDecision]] = {which: [] for which in LISTS}
        for r in sorted(self.listed(), key=lambda r: (r.outcome, _order(r))):
            evidence = cache.get(r.evidence)
            if evidence is None:
                evidence = cache[r.evidence] = json.loads(r.evidence)
            lists[r.outcome].append(FileDecision(r.path, r.size, r.mtime, Reason(r.reason), evidence))
        return lists

    def write(self, target: str) -> None:
        """The lists as Spark writes them (:meth:`ckptctl.gc.spark.SparkPlan.write`): Parquet
        partitioned by ``outcome`` and ``job_id``, directory names escaped as Spark escapes them,
        the same columns and types, a ``_SUCCESS`` marker; one file per directory."""
        import shutil

        import pyarrow as pa
        import pyarrow.parquet as pq

        types = {"int": pa.int32(), "long": pa.int64(), "double": pa.float64(), "string": pa.string()}
        schema = pa.schema([(name, types[kind]) for name, kind in _FILE_COLUMNS])
        by_dir: dict[tuple[str, str], list[Row]] = {}
        for r in self.listed():
            job_id = r.job_name.rpartition("/")[2] if r.job_name is not None else "none"
            by_dir.setdefault((r.outcome, job_id), []).append(r)
        shutil.rmtree(target, ignore_errors=True)
        os.makedirs(target)
        name = f"part-00000-{uuid.uuid4()}.c000.snappy.parquet"
        for (outcome, job_id), rows in sorted(by_dir.items()):
            directory = os.path.join(
                target, f"outcome={escape_path_name(outcome)}", f"job_id={escape_path_name(job_id)}"
            )
            os.makedirs(directory)
            columns = [[getattr(r, name) for r in rows] for name in schema.names]
            pq.write_table(
                pa.table(columns, schema=schema), os.path.join(directory, name), compression="snappy"
            )
        with open(os.path.join(target, "_SUCCESS"), "wb"):
            pass


# the characters Spark's ExternalCatalogUtils.escapePathName writes as %XX in a partition directory
_ESCAPED = {chr(c) for c in range(1, 0x20)} | set("\"#%'*/:=?\\\x7f{[]^")


def escape_path_name(value: str) -> str:
    """A partition value as Spark names its directory (``ExternalCatalogUtils.escapePathName``;
    an empty value is Hive's default partition, read back as null)."""
    if not value:
        return "__HIVE_DEFAULT_PARTITION__"
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)


def tied_reasons(rows: list[ReasonTotals]) -> list[str]:
    """The reasons whose count another reason of the list shares (their order needs the first of each)."""
    counts = Counter(r.n for r in rows)
    return sorted(r.reason for r in rows if counts[r.n] > 1)
