"""The per-file rule as Spark SQL: :meth:`ckptctl.gc.rule.FileRule.verdicts` for the files whose
name and bytes say nothing, decided in the JVM.

At 10^7 files, sending each file not live to a Python worker and back (its URI, size, mtime, and
the decision) cost several times deciding it: 39 s of a 96 s plan at 10^7 rows, on two cores.
The rule itself is a handful of comparisons against its directory's context, so it is written
here a second time, as expressions over the files joined with a small broadcast table of the
directories' contexts (:func:`context_rows`).

:meth:`FileRule.verdicts` stays the definition. The files it reads one by one -- the names
:func:`ckptctl.gc.rule._by_name` may judge otherwise in a candidate directory (``_metadata``,
``..``, backslashes, ForSt's control files: :func:`needs_python` selects a superset) and the
segments' files (their spans) -- still go to it on Python workers. ``tests/gc/test_spark_rule.py``
holds the two forms to the same answers over every combination of the rule's inputs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ckptctl.checkpoint.layout import FORST_CONTROL_PREFIXES
from ckptctl.gc.reasons import Reason
from ckptctl.gc.rule import SPECIAL_NAMES, FileRule
from ckptctl.storage.listing import PLAUSIBLE_MTIME

if TYPE_CHECKING:
    from ckptctl.gc.spark.labels import Labels

# a directory's context (:meth:`ckptctl.gc.contexts.DirContexts.get`) as the rule reads it, with its
# evidence and job as :class:`ckptctl.gc.spark.labels.Labels` numbers
CONTEXT_SCHEMA = (
    "dir string, cand boolean, dir_reason string, dir_verdict int, in_flight_at double, expired_only boolean, "
    "forst boolean, dir_job int"
)


def context_rows(shipped: Mapping[str, tuple], labels: Labels, rule: FileRule) -> list[tuple]:
    """Rows of :data:`CONTEXT_SCHEMA`, one per directory of ``shipped`` (directory -> context
    whose fifth field is the job's label, as the Spark planner ships them)."""
    rows = []
    for d, (reason, cand, anchor, evidence, job, unreferenced, forst) in shipped.items():
        in_flight_at = math.inf if anchor is None else anchor - rule.margin
        rows.append((d, bool(cand), str(reason), labels.evidence_id[json.dumps(evidence or {})], float(in_flight_at),
                     bool(cand and unreferenced and rule.check_expired), bool(forst), job))  # fmt: skip
    return rows


def name_marks(name: str = "name"):
    """What :meth:`FileRule.verdicts` may read in a file's ``name`` (a column: the last part of
    its URI), whatever its directory, as bits of a small int: 1 a special name or a backslash, 2
    the beginning of a ForSt control file's. Made once, where the rows per URI are cached, from
    the name cut out there for the directory: comparing the names again in each pass over 10^7
    files cost two of its five seconds (the totals, the written lists). Byte comparisons only
    (``instr`` counts characters: 2 s a scan of 10^7 URIs)."""
    from pyspark.sql import functions as F

    name = F.col(name)
    special = name.isin(*SPECIAL_NAMES) | name.contains("\\")
    control = F.lit(False)
    for prefix in FORST_CONTROL_PREFIXES:
        control = control | name.startswith(prefix)
    return (F.when(special, 1).otherwise(0) + F.when(control, 2).otherwise(0)).cast("tinyint")


def needs_python(marks: str = "marks"):
    """Whether :meth:`FileRule.verdicts` must read the file's name (a superset of the names it
    reads: the special names and backslashes in any candidate directory, and in a ForSt
    directory every name that begins like a control file), from its :func:`name_marks` and the
    columns of :data:`CONTEXT_SCHEMA`."""
    from pyspark.sql import functions as F

    m = _marks(marks)
    special, control = m.bitwiseAND(1) != 0, m.bitwiseAND(2) != 0
    return F.coalesce(F.col("cand") & (special | (F.col("forst") & control)), F.lit(False))


def name_may_need_python(marks: str = "marks"):
    """:func:`needs_python` without a directory's context (``cand``, ``forst``): a superset of
    it, which a pass with no context can count (a mark of either kind)."""
    return _marks(marks) != 0


def _marks(marks: str):
    from pyspark.sql import functions as F

    return F.coalesce(F.col(marks), F.lit(3))  # no marks: read the name (never decided blind)


def sql_verdicts(rule: FileRule, labels: Labels) -> tuple[Any, Any, Any]:
    """(taken, reason, verdict): :meth:`FileRule.verdicts` over rows with ``mtime``, ``is_link``
    and ``expired`` and the columns of :data:`CONTEXT_SCHEMA`, for files not settled and not
    :func:`needs_python`. The first guard that holds keeps the file, as in the Arrow form.

    Spark orders NaN above every number (Arrow: no comparison holds): a NaN mtime is caught as
    "no mtime" before any other comparison reads it."""
    from pyspark.sql import functions as F

    def ev(evidence: dict | None) -> Any:
        return F.lit(labels.evidence_id[json.dumps(evidence or {})])

    m = F.col("mtime")
    cand = F.coalesce(F.col("cand"), F.lit(False))
    guards = [  # (holds, reason, evidence)
        (F.coalesce(F.col("is_link"), F.lit(False)), F.lit(str(Reason.SYMLINK)), ev(None)),
        (m.isNull() | F.isnan(m) | (m < PLAUSIBLE_MTIME), F.lit(str(Reason.NO_MTIME)), ev(None)),
        (m > rule.tolerance_limit, F.lit(str(Reason.FUTURE_MTIME)), ev(None)),
        (m >= rule.young_limit,
         F.when(m >= rule.cutoff, str(Reason.YOUNG)).otherwise(str(Reason.AFTER_INVENTORY)),
         F.when(m >= rule.cutoff, ev(rule.young_evidence)).otherwise(ev(rule.after_evidence))),
        (m >= F.col("in_flight_at"), F.lit(str(Reason.IN_FLIGHT)), F.col("dir_verdict")),
    ]  # fmt: skip
    expired_only = F.col("expired_only") & F.coalesce(F.col("expired"), F.lit(False))
    reason = F.when(~cand, F.col("dir_reason"))
    verdict = F.when(~cand, F.col("dir_verdict"))
    held = F.lit(False)
    for holds, why, evidence in guards:
        reason, verdict = reason.when(holds, why), verdict.when(holds, evidence)
        held = held | holds
    reason = reason.when(expired_only, str(Reason.EXPIRED_ONLY)).otherwise(F.col("dir_reason"))
    verdict = verdict.otherwise(F.col("dir_verdict"))
    return cand & ~held, reason, verdict
