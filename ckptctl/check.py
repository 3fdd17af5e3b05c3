"""``check``: the CI gate over a whole root.

Every ``_metadata`` parses, every reference resolves (the shallow file checks of
:mod:`ckptctl.verify` on the local engine), and the orphaned bytes gc would collect stay below a
limit. The root is scanned once (:class:`ckptctl.checkpoint.scan.RootScan`: one listing, each ``_metadata``
read once) and that scan serves all three: verify gets its loaded checkpoints, the FLINK-39964
diagnosis its listing, and gc's planner its read-only storage view for the orphan count.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ckptctl import storage as st
from ckptctl.checkpoint.flink39964 import repairable
from ckptctl.checkpoint.rebase import Rebase, with_inferred
from ckptctl.checkpoint.scan import RootScan
from ckptctl.errors import CkptError
from ckptctl.storage import Storage
from ckptctl.verify import verify
from ckptctl.verify.result import reads
from ckptctl.words import plural


@dataclass
class CheckReport:
    """``check``: the CI gate's report over a root; :meth:`to_json` is the ``--json`` document."""

    root: str
    ok: bool
    checked: dict[str, int]
    checkpoints: list[dict[str, Any]]
    orphans: dict[str, Any]
    problems: list[dict[str, Any]]
    repairable: list[dict[str, Any]]
    moved: Any
    what_if: list[str]
    warnings: list[str]
    elapsed_seconds: float
    quick: bool = False  # existence and sizes only: no file was read but the _metadata

    def to_json(self) -> dict[str, Any]:
        return {
            "root": self.root, "ok": self.ok, "checked": self.checked, "checkpoints": self.checkpoints,
            "orphans": self.orphans, "problem_count": len(self.problems), "problems": self.problems,
            "repairable": self.repairable, "moved": self.moved, "what_if": self.what_if,
            "warnings": self.warnings, "elapsed_seconds": self.elapsed_seconds,
            "reads": reads(self.quick),
        }  # fmt: skip


def run_check(
    storage: Storage,
    root: str,
    rebase: Rebase,
    max_orphan_bytes: int | None,
    savepoint_dirs: Iterable[str] = (),
    quick: bool = False,
) -> CheckReport:
    """Every ``_metadata`` parses, every reference resolves (local engine, shallow; ``quick``:
    existence and sizes from the one listing, no file read), orphans within a limit."""
    started = time.monotonic()
    scan = RootScan.of(storage, root, rebase, apply_inferred=False)  # judge what Flink will open
    if not any(loc.complete for loc in scan.layout.locations()):
        # a gate that passes on a path with nothing to check would hide a wrong path in CI
        raise CkptError(f"no checkpoints under {scan.root}: no completed checkpoint or savepoint to check")
    entries: list[dict[str, Any]] = []
    for loc in scan.layout.locations():
        if not loc.complete:
            continue
        error = scan.unreadable.get(loc.uri)
        entries.append({"path": loc.uri, "job_id": loc.job_id, "kind": loc.kind, "ok": error is None,
                        "error": None if error is None else str(error), "files": 0, "problems": []})  # fmt: skip
    loaded = scan.loaded
    warnings: list[str] = []
    mappings = with_inferred(rebase, (ck.inferred_rebase for ck in loaded))  # for the orphan count
    result = verify(
        scan.storage, loaded, engine="local", roots=[scan.root], savepoint_dirs=savepoint_dirs,
        listings=scan.listings(), quick=quick,
    )  # fmt: skip
    by_ck = {e["path"]: e for e in entries}
    for f in result.files.values():
        for ck_uri in f.checkpoints:
            by_ck[ck_uri]["files"] += 1
    for p in result.problems:
        for ck_uri in p["checkpoints"]:
            e = by_ck[ck_uri]
            e["ok"] = False
            e["problems"].append({k: v for k, v in p.items() if k != "checkpoints"})
    problems = list(result.problems)
    for e in entries:
        if e["error"]:
            problems.append({"path": st.join(e["path"], "_metadata"), "check": "metadata", "detail": e["error"],
                             "checkpoints": [e["path"]]})  # fmt: skip

    orphans = measure_orphans(scan, mappings, max_orphan_bytes, warnings)
    if max_orphan_bytes is not None and orphans["bytes"] > max_orphan_bytes:
        orphans["ok"] = False
        problems.append({"path": scan.root, "check": "orphans", "checkpoints": [],
                         "detail": f"{orphans['bytes']} orphaned bytes in {orphans['files']} files, "
                                   f"above --max-orphan-bytes {max_orphan_bytes}"})  # fmt: skip
    elif not orphans["ok"]:
        problems.append(
            {"path": scan.root, "check": "orphans", "detail": orphans["error"], "checkpoints": []}
        )
    checked = dict(result.counts)
    checked["checkpoints"] = len(entries)
    checked["metadata"] = len(entries)
    return CheckReport(
        root=scan.root,
        ok=not problems,
        checked=checked,
        checkpoints=entries,
        orphans=orphans,
        problems=problems,
        repairable=repairable(result.misanchored),
        moved=result.moved,
        what_if=result.what_if,
        warnings=warnings + moved_notes(result.moved, problems) + what_if_notes(result.what_if),
        elapsed_seconds=round(time.monotonic() - started, 3),
        quick=quick,
    )


def what_if_notes(what_if: list[str]) -> list[str]:
    if not what_if:
        return []
    return [
        f"what-if: paths mapped with --rebase {', '.join(what_if)}; Flink itself reads the paths as written"
    ]


def moved_notes(moved: list[dict[str, Any]], problems: list[dict[str, Any]]) -> list[str]:
    """One line per mapping of checkpoints written elsewhere whose files Flink still finds there."""
    failing = {c for p in problems for c in p.get("checkpoints", ())}
    notes = []
    for m in moved:
        fine = [c for c in m["checkpoints"] if c not in failing]
        if fine:
            notes.append(
                f"{plural(len(fine), 'checkpoint')} {'was' if len(fine) == 1 else 'were'} written at another location ({', '.join(m['rebase'])}): Flink reads "
                "their files there, not here; they pass because that location still has them"
            )
    return notes


def measure_orphans(
    scan: RootScan, mappings: Rebase, max_orphan_bytes: int | None, warnings: list[str]
) -> dict[str, Any]:
    """What gc would collect right now (no age guards, external references allowed), planned on
    the scan: gc's planner lists and reads through :attr:`RootScan.storage`, which answers from
    the scan and refuses to write."""
    from ckptctl.gc import GcOptions, build_plan

    orphans: dict[str, Any] = {"files": 0, "bytes": 0, "limit": max_orphan_bytes, "ok": True, "error": None}
    try:
        plan = build_plan(
            scan.storage,
            GcOptions(
                (scan.root,), older_than=0.0, margin=0.0, force=True, allow_external=True,
                rebase=mappings, collect_dead_jobs=True,
            ),
        )  # fmt: skip
        unreadable = [r for r in plan.refusals if r["code"] == "unreadable-metadata"]
        if unreadable:
            # what an unreadable checkpoint references is unknown: its files are not orphans
            raise CkptError(f"an unreadable _metadata hides what is live ({unreadable[0]['message']})")
        orphans["files"], orphans["bytes"] = len(plan.candidates), plan.candidate_bytes
    except CkptError as e:
        orphans["error"] = f"cannot measure orphans: {e}"
        if max_orphan_bytes is not None:
            orphans["ok"] = False
        else:
            warnings.append(orphans["error"])
    return orphans


def junit_xml(report: dict[str, Any]) -> str:
    """JUnit XML: one testcase per checkpoint, plus one for the orphan bytes."""
    import xml.etree.ElementTree as ET

    suites = ET.Element("testsuites")
    cases = report["checkpoints"]
    failures = sum(1 for c in cases if not c["ok"]) + (0 if report["orphans"]["ok"] else 1)
    suite = ET.SubElement(
        suites, "testsuite", name="ckptctl check", tests=str(len(cases) + 1), failures=str(failures),
        errors="0", time=f"{report['elapsed_seconds']:.3f}",
    )  # fmt: skip
    ET.SubElement(ET.SubElement(suite, "properties"), "property", name="root", value=report["root"])
    for c in cases:
        name = c["path"][len(report["root"]) :].lstrip("/") or c["path"]
        case = ET.SubElement(
            suite, "testcase", classname=f"ckptctl.check.{c['job_id'] or c['kind']}", name=name
        )
        if c["error"]:
            f = ET.SubElement(case, "failure", message=f"unreadable _metadata: {c['error']}", type="metadata")
            f.text = c["error"]
        elif not c["ok"]:
            first = c["problems"][0]
            f = ET.SubElement(
                case, "failure", type=first["check"],
                message=f"{len(c['problems'])} problems; first: {first['check']} {first['path']}: {first['detail']}",
            )  # fmt: skip
            f.text = "\n".join(f"{p['check']}: {p['path']}: {p['detail']}" for p in c["problems"])
    o = report["orphans"]
    case = ET.SubElement(suite, "testcase", classname="ckptctl.check", name="orphan bytes")
    out = ET.SubElement(case, "system-out")
    limit = "no limit" if o["limit"] is None else f"limit {o['limit']} bytes"
    out.text = f"{o['bytes']} bytes in {o['files']} orphaned files; {limit}"
    if not o["ok"]:
        f = ET.SubElement(case, "failure", type="orphans", message=o["error"] or out.text)
        f.text = out.text
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
