"""``check``: the CI gate over a whole root.

Every ``_metadata`` parses, every reference resolves (the shallow file checks of
:mod:`ckptctl.verify` on the local engine), and the orphaned bytes gc would collect stay below a
limit.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from ckptctl.errors import CkptError
from ckptctl.rebase import Rebase
from ckptctl.refs import LoadedCheckpoint, reference_rows
from ckptctl.repair import explain_missing
from ckptctl.storage import Storage
from ckptctl.verify import assemble, file_refs, repairable, run_local


def run_check(
    storage: Storage,
    root: str,
    rebase: Rebase,
    max_orphan_bytes: int | None,
    savepoint_dirs: Iterable[str] = (),
) -> dict[str, Any]:
    """Every ``_metadata`` parses, every reference resolves (local engine, shallow), orphans within a limit."""
    from ckptctl import storage as st
    from ckptctl.gc import GcOptions, build_plan
    from ckptctl.layout import scan_root
    from ckptctl.rebase import moved_warnings, with_inferred
    from ckptctl.refs import load_checkpoint

    started = time.monotonic()
    root = st.normalize_uri(root)
    listed = list(storage.list_files(root))  # kept: the FLINK-39964 diagnosis searches it for savepoint files
    layout = scan_root(storage, root, listed)
    if not any(loc.complete for loc in layout.locations()):
        # a gate that passes on a path with nothing to check would hide a wrong path in CI
        raise CkptError(f"no checkpoints under {layout.root}: no completed checkpoint or savepoint to check")
    warnings: list[str] = []
    loaded: list[LoadedCheckpoint] = []
    entries: list[dict[str, Any]] = []
    for loc in layout.locations():
        if not loc.complete:
            continue
        entry = {"path": loc.uri, "job_id": loc.job_id, "kind": loc.kind, "ok": True, "error": None,
                 "files": 0, "problems": []}  # fmt: skip
        entries.append(entry)
        try:
            ck = load_checkpoint(storage, loc, rebase)
        except CkptError as e:
            entry["ok"], entry["error"] = False, str(e)
            continue
        loaded.append(ck)
    warnings += moved_warnings(ck.inferred_rebase for ck in loaded)
    mappings = with_inferred(rebase, (ck.inferred_rebase for ck in loaded))  # for the orphan count
    rows: list[tuple] = []
    for ck in loaded:
        rows.extend(reference_rows(ck))
    files = file_refs(rows)
    records = run_local(storage.options, [f.task() for f in files.values()])
    result = assemble([ck.location.uri for ck in loaded], len(rows), files, [], records, "local", None, 0.0)
    misanchored = explain_missing(
        storage, loaded, result.problems, [layout.root], savepoint_dirs, {layout.root: listed}
    )
    by_ck = {e["path"]: e for e in entries}
    for f in files.values():
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

    orphans: dict[str, Any] = {"files": 0, "bytes": 0, "limit": max_orphan_bytes, "ok": True, "error": None}
    try:
        plan = build_plan(
            storage,
            GcOptions(
                (layout.root,), older_than=0.0, margin=0.0, force=True, allow_external=True,
                rebase=mappings.mappings,
            ),
        )  # fmt: skip
        orphans["files"], orphans["bytes"] = len(plan.candidates), plan.candidate_bytes
    except CkptError as e:
        orphans["error"] = f"cannot measure orphans: {e}"
        if max_orphan_bytes is not None:
            orphans["ok"] = False
        else:
            warnings.append(orphans["error"])
    if max_orphan_bytes is not None and orphans["bytes"] > max_orphan_bytes:
        orphans["ok"] = False
        problems.append({"path": layout.root, "check": "orphans", "checkpoints": [],
                         "detail": f"{orphans['bytes']} orphaned bytes in {orphans['files']} files, "
                                   f"above --max-orphan-bytes {max_orphan_bytes}"})  # fmt: skip
    elif not orphans["ok"]:
        problems.append(
            {"path": layout.root, "check": "orphans", "detail": orphans["error"], "checkpoints": []}
        )
    checked = dict(result.counts)
    checked["checkpoints"] = len(entries)
    checked["metadata"] = len(entries)
    return {
        "root": layout.root,
        "ok": not problems,
        "checked": checked,
        "checkpoints": entries,
        "orphans": orphans,
        "problem_count": len(problems),
        "problems": problems,
        "repairable": repairable(misanchored),
        "warnings": warnings,
        "elapsed_seconds": round(time.monotonic() - started, 3),
    }


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
    out.text = f"{o['bytes']} bytes in {o['files']} orphaned files; limit {o['limit']}"
    if not o["ok"]:
        f = ET.SubElement(case, "failure", type="orphans", message=o["error"] or out.text)
        f.text = out.text
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
