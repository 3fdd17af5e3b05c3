"""The ``preflight`` report: one finding per check, the verdict they add up to, JUnit XML."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# outcomes of one check
AS_IS, MIGRATION, INCOMPATIBLE, UNKNOWN, DROPPED = "as-is", "migration", "incompatible", "unknown", "dropped"
# verdicts
RESTORES, RESTORES_WITH_MIGRATION, FAILS, VERDICT_UNKNOWN = (
    "restores",
    "restores-with-migration",
    "fails",
    "unknown",
)


@dataclass
class Finding:
    """One check of one operator (and state): what Flink reaches, and what it says when it fails."""

    operator_id: str | None  # None: the snapshot as a whole (its metadata version)
    check: str  # mapping | parallelism | max-parallelism | backend | metadata-version | kind |
    #             key-serializer | namespace-serializer | value-serializer | user-key-serializer | ttl | mode
    outcome: str  # as-is | migration | incompatible | unknown | dropped
    detail: str
    uid: str | None = None
    name: str | None = None
    state: str | None = None
    flink_error: str | None = None  # "<exception class>: <message>" when incompatible
    blocking_class: str | None = None  # unknown: the serializer snapshot class that blocks it
    bytes: int | None = None  # dropped / migrated: the bytes concerned

    def to_json(self) -> dict[str, Any]:
        return {
            "operator_id": self.operator_id, "uid": self.uid, "name": self.name, "state": self.state,
            "check": self.check, "outcome": self.outcome, "detail": self.detail,
            "flink_error": self.flink_error, "blocking_class": self.blocking_class, "bytes": self.bytes,
        }  # fmt: skip


@dataclass
class OperatorRow:
    """One operator of SNAPSHOT or NEW and how it maps."""

    operator_id: str
    uid: str | None
    name: str | None
    in_snapshot: bool
    in_new: bool
    has_state: bool
    state_bytes: int
    parallelism: int | None  # NEW's
    max_parallelism: int | None  # NEW's
    snapshot_parallelism: int | None
    snapshot_max_parallelism: int | None
    outcome: str  # the worst outcome of its findings

    def to_json(self) -> dict[str, Any]:
        return {
            "operator_id": self.operator_id, "uid": self.uid, "name": self.name,
            "in_snapshot": self.in_snapshot, "in_new": self.in_new, "has_state": self.has_state,
            "state_bytes": self.state_bytes, "parallelism": self.parallelism,
            "max_parallelism": self.max_parallelism, "snapshot_parallelism": self.snapshot_parallelism,
            "snapshot_max_parallelism": self.snapshot_max_parallelism, "outcome": self.outcome,
        }  # fmt: skip


@dataclass
class PreflightReport:
    """``preflight``: :meth:`to_json` is the ``--json`` document."""

    snapshot: str
    new: str
    verdict: str
    target_flink: str | None
    target_flink_source: str  # given | inferred | assumed
    allow_non_restored_state: bool
    assumptions: list[str]
    operators: list[OperatorRow]
    findings: list[Finding]
    dropped_bytes: int = 0
    migrated_bytes: int = 0
    elapsed_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def failures(self) -> list[Finding]:
        return [f for f in self.findings if f.outcome == INCOMPATIBLE]

    @property
    def unknowns(self) -> list[Finding]:
        return [f for f in self.findings if f.outcome == UNKNOWN]

    def to_json(self) -> dict[str, Any]:
        return {
            "snapshot": self.snapshot, "new": self.new, "verdict": self.verdict,
            "target_flink": self.target_flink, "target_flink_source": self.target_flink_source,
            "allow_non_restored_state": self.allow_non_restored_state, "assumptions": self.assumptions,
            "dropped_bytes": self.dropped_bytes, "migrated_bytes": self.migrated_bytes,
            "operators": [o.to_json() for o in self.operators],
            "findings": [f.to_json() for f in self.findings], "notes": self.notes,
            "elapsed_seconds": self.elapsed_seconds,
        }  # fmt: skip


def verdict_of(findings: list[Finding]) -> str:
    """Any incompatible finding: fails; else any unknown: unknown; else any migration:
    restores-with-migration; else restores. (Unknown never hides a failure found elsewhere.)"""
    outcomes = {f.outcome for f in findings}
    if INCOMPATIBLE in outcomes:
        return FAILS
    if UNKNOWN in outcomes:
        return VERDICT_UNKNOWN
    if MIGRATION in outcomes:
        return RESTORES_WITH_MIGRATION
    return RESTORES


def junit_xml(report: dict[str, Any]) -> str:
    """JUnit XML (as ``check --junit`` writes it): one testcase per operator of SNAPSHOT and NEW;
    an incompatible finding is a failure, an unknown one an error (never a pass)."""
    import xml.etree.ElementTree as ET

    by_op: dict[str, list[dict[str, Any]]] = {}
    for f in report["findings"]:
        by_op.setdefault(f["operator_id"], []).append(f)
    ops = list(report["operators"])
    if None in by_op:  # findings about the snapshot as a whole (its metadata version)
        ops.insert(0, {"operator_id": None, "uid": None, "name": "snapshot"})
    failures = sum(
        1 for o in ops if any(f["outcome"] == INCOMPATIBLE for f in by_op.get(o["operator_id"], ()))
    )
    errors = sum(
        1
        for o in ops
        if not any(f["outcome"] == INCOMPATIBLE for f in by_op.get(o["operator_id"], ()))
        and any(f["outcome"] == UNKNOWN for f in by_op.get(o["operator_id"], ()))
    )
    suites = ET.Element("testsuites")
    suite = ET.SubElement(
        suites, "testsuite", name="ckptctl preflight", tests=str(len(ops)), failures=str(failures),
        errors=str(errors), time=f"{report['elapsed_seconds']:.3f}",
    )  # fmt: skip
    props = ET.SubElement(suite, "properties")
    for k in ("snapshot", "new", "verdict", "target_flink"):
        ET.SubElement(props, "property", name=k, value=str(report[k]))
    for o in ops:
        label = o["uid"] or o["name"] or o["operator_id"]
        case = ET.SubElement(
            suite, "testcase", classname="ckptctl.preflight", name=f"{label} ({o['operator_id']})"
        )
        found = by_op.get(o["operator_id"], [])
        bad = [f for f in found if f["outcome"] == INCOMPATIBLE]
        unknown = [f for f in found if f["outcome"] == UNKNOWN]
        lines = [_line(f) for f in found]
        if bad:
            first = bad[0]
            el = ET.SubElement(
                case, "failure", type=first["check"], message=first["flink_error"] or first["detail"]
            )
            el.text = "\n".join(lines)
        elif unknown:
            el = ET.SubElement(case, "error", type="unknown", message=unknown[0]["detail"])
            el.text = "\n".join(lines)
        elif lines:
            ET.SubElement(case, "system-out").text = "\n".join(lines)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _line(f: dict[str, Any]) -> str:
    where = f" state {f['state']}" if f["state"] else ""
    error = f" -> {f['flink_error']}" if f["flink_error"] else ""
    return f"{f['check']}{where}: {f['outcome']}: {f['detail']}{error}"
