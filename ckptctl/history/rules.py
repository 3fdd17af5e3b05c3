"""``--fail-if``: the CI rules of ``history`` and their verdicts.

A rule is ``[job|operator] METRIC OP VALUE``:

* ``growth > 20%/d`` (percent of the window's mean per day), ``growth > 1GiB/d`` (bytes per day),
  ``growth > 5%/chk`` or ``growth > 10MiB/chk`` (per checkpoint, when times cannot tell days); any
  duration of ckptctl's one grammar after the slash (``/12h``, ``/w``);
* ``full > 500GiB``: the newest checkpoint's full bytes; ``uploaded > 2GiB``: its uploaded bytes
  (sizes in the grammar of ``--max-orphan-bytes``);
* OP is one of ``>``, ``>=``, ``<``, ``<=``.

Growth rules apply to each operator unless they say ``job``; size rules to the job's total unless
they say ``operator``. A broken rule names the rule, the job and the operator.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from typing import Any

from ckptctl.errors import CkptError
from ckptctl.sizes import parse_bytes  # the size grammar of --max-orphan-bytes

_RULE = re.compile(
    r"^\s*(?:(job|operator)\s+)?(growth|full|uploaded)\s*(>=|<=|>|<)\s*(\S(?:.*\S)?)\s*$", re.IGNORECASE
)
_OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}
EXAMPLES = "e.g. 'growth > 20%/d', 'full > 500GiB', 'uploaded > 2GiB', 'operator full > 10GiB'"


@dataclass(frozen=True)
class Rule:
    text: str
    scope: str  # job | operator
    metric: str  # growth | full | uploaded
    op: str
    limit: float
    unit: str  # bytes | percent
    per: float | None  # growth: seconds of the rate's denominator; None: per checkpoint

    def holds(self, value: float | None) -> bool | None:
        """Whether ``value`` breaks the rule (``None``: not measurable, e.g. no time axis)."""
        return None if value is None else _OPS[self.op](value, self.limit)

    def measure(self, figures: dict[str, Any]) -> float | None:
        """The rule's value from a job's or an operator's figures (``full_bytes``,
        ``uploaded_bytes``, ``growth``: a :class:`~ckptctl.history.growth.Growth`)."""
        if self.metric != "growth":
            return figures[f"{self.metric}_bytes"]
        g = figures["growth"]
        if self.per is None:
            if self.unit == "bytes":
                return g.bytes_per_checkpoint
            mean = figures.get("mean_bytes")
            return None if g.bytes_per_checkpoint is None or not mean else g.bytes_per_checkpoint / mean * 100
        scale = self.per / 86400.0
        if self.unit == "bytes":
            return None if g.bytes_per_day is None else g.bytes_per_day * scale
        return None if g.percent_per_day is None else g.percent_per_day * scale


def parse_rule(text: str, option: str = "--fail-if") -> Rule:
    from ckptctl.durations import parse_seconds

    m = _RULE.match(text)
    if not m:
        raise CkptError(f"{option} expects METRIC OP VALUE ({EXAMPLES}), got '{text}'")
    scope, metric, op, value = m.group(1), m.group(2).lower(), m.group(3), m.group(4)
    scope = (scope or ("operator" if metric == "growth" else "job")).lower()
    per = None
    if metric == "growth":
        amount, slash, rate = value.partition("/")
        if not slash:
            raise CkptError(f"{option} '{text}': growth is a rate, e.g. 20%/d, 1GiB/d or 5%/chk")
        rate = rate.strip()
        if rate.lower() not in ("chk", "checkpoint"):
            per = parse_seconds(rate if rate[:1].isdigit() else "1" + rate, option)
        value = amount.strip()
    if value.endswith("%"):
        if metric != "growth":
            raise CkptError(f"{option} '{text}': {metric} is a size (e.g. 500GiB), not a percentage")
        try:
            limit, unit = float(value[:-1]), "percent"
        except ValueError:
            raise CkptError(f"{option} '{text}': '{value}' is not a percentage") from None
    else:
        limit, unit = float(parse_bytes(value, option)), "bytes"
    return Rule(text.strip(), scope, metric, op, limit, unit, per)


def verdicts(rules: list[Rule], job: dict[str, Any], operators: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per (rule, subject): its value, and whether it is broken (``None``: unmeasurable)."""
    out = []
    for rule in rules:
        subjects = [(None, job)] if rule.scope == "job" else [(o, o) for o in operators]
        for op, figures in subjects:
            value = rule.measure(figures)
            out.append(
                {
                    "rule": rule.text, "job_id": job["job_id"],
                    "operator": None if op is None else op["display"],
                    "operator_id": None if op is None else op["operator_id"],
                    "value": value, "limit": rule.limit, "unit": rule.unit, "broken": rule.holds(value),
                    "per": rule.text.rpartition("/")[2].strip() if rule.metric == "growth" else None,
                }
            )  # fmt: skip
    return out


def junit_xml(report: dict[str, Any]) -> str:
    """JUnit XML, in the form ``check --junit`` writes: one testcase per (job, rule), failing with
    the operators (or the job) that broke it."""
    import xml.etree.ElementTree as ET

    suites = ET.Element("testsuites")
    cases = [(job, rule) for job in report["jobs"] for rule in report["rules"]]
    broken = {
        (job["job_id"], rule): [v for v in job["verdicts"] if v["rule"] == rule and v["broken"]]
        for job, rule in cases
    }
    suite = ET.SubElement(
        suites, "testsuite", name="ckptctl history", tests=str(len(cases)),
        failures=str(sum(1 for b in broken.values() if b)), errors="0", time=f"{report['elapsed_seconds']:.3f}",
    )  # fmt: skip
    ET.SubElement(ET.SubElement(suite, "properties"), "property", name="root", value=report["root"])
    for job, rule in cases:
        case = ET.SubElement(
            suite, "testcase", classname=f"ckptctl.history.{job['job_id'] or 'savepoints'}", name=rule
        )
        bad = broken[(job["job_id"], rule)]
        if bad:
            lines = [f"{v['operator'] or 'job'}: {v['value']} (limit {v['limit']} {v['unit']})" for v in bad]
            f = ET.SubElement(case, "failure", type="history", message=f"{rule}: broken by {lines[0]}")
            f.text = "\n".join(lines)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
