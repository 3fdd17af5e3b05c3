"""What the executors' records add up to: problems per path and check, counts, the histogram."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ckptctl.checkpoint.flink39964 import repairable
from ckptctl.verify.checks import CHECKS, KeyGroupCount
from ckptctl.verify.tasks import FileRefs, HandleRef
from ckptctl.words import plural


def reads(quick: bool) -> str:
    """What a verification read of the files, as its ``--json`` says (``reads``)."""
    return "none: existence and sizes only (--quick)" if quick else "footers and metadata files"


@dataclass
class VerifyResult:
    checkpoints: list[str]
    files: dict[str, FileRefs]
    handles: list[HandleRef]
    histogram: list[tuple]  # (checkpoint, operator_id, subtask, column_family, key_group, entries, bytes)
    problems: list[dict[str, Any]]
    counts: dict[str, int]
    engine: str
    master: str | None
    elapsed: float
    misanchored: list[Any] = field(
        default_factory=list
    )  # FLINK-39964 handles (ckptctl.checkpoint.flink39964)
    unreadable: dict[str, str] = field(default_factory=dict)  # checkpoint dir -> why its _metadata is not
    moved: list[dict[str, Any]] = field(default_factory=list)  # written elsewhere: what Flink will read
    what_if: list[str] = field(default_factory=list)  # explicit --rebase: not what Flink reads itself
    quick: bool = False  # existence and sizes only: no file was read
    records: list[tuple] = field(default_factory=list, repr=False)  # the engine's, in task order
    _checks: list[tuple] | None = field(default=None, repr=False)

    @property
    def checks(self) -> list[tuple]:
        """Every check, ``(path, check, ok, detail, checkpoints)`` (a handle's once per owner), in
        the engine's order. Made when first asked for (``--report``): a row per check of every file
        costs as much as a tenth of the checks themselves, and most runs never read them."""
        if self._checks is None:
            self._checks = check_rows(self.records, self.files, self.handles)
        return self._checks

    @property
    def ok(self) -> bool:
        return not self.problems and not self.unreadable

    def per_checkpoint(self) -> list[dict[str, Any]]:
        """One verdict per checkpoint, broken first: sound, or broken and why (the first problem)."""
        out: dict[str, dict[str, Any]] = {
            c: {"checkpoint": c, "ok": True, "files": 0, "problems": 0, "why": None} for c in self.checkpoints
        }
        for f in self.files.values():
            for c in f.checkpoints:
                if c in out:
                    out[c]["files"] += 1
        for p in self.problems:
            for c in p.get("checkpoints", ()):
                e = out.get(c)
                if e is None:
                    continue
                e["ok"] = False
                e["problems"] += 1
                if p.get("moved_to"):
                    e["moved"] = e.get("moved", 0) + 1  # said as one count below, not file by file
                elif e["why"] is None:
                    e["why"] = f"{p['check']}: {p.get('detail') or p['path']}"
        for e in out.values():
            moved = e.pop("moved", 0)
            if moved and e["why"] is None:
                e["why"] = (
                    f"exists: {plural(moved, 'file')} not found where Flink will read them (written elsewhere)"
                )
        for c, error in self.unreadable.items():
            out[c] = {
                "checkpoint": c,
                "ok": False,
                "files": 0,
                "problems": 1,
                "why": f"unreadable _metadata: {error}",
            }
        return sorted(out.values(), key=lambda e: (e["ok"], e["checkpoint"]))

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "engine": self.engine,
            "master": self.master,
            "checkpoints": self.checkpoints,
            "checked": self.counts,
            "problem_count": len(self.problems),
            "problems": self.problems,
            "repairable": repairable(self.misanchored),
            "verdicts": self.per_checkpoint(),
            "unreadable": [{"checkpoint": c, "error": e} for c, e in sorted(self.unreadable.items())],
            "moved": self.moved,
            "what_if": self.what_if,
            "elapsed_seconds": round(self.elapsed, 3),
            "reads": reads(self.quick),
        }


def check_rows(records: list[tuple], files: dict[str, FileRefs], handles: list[HandleRef]) -> list[tuple]:
    """:attr:`VerifyResult.checks` from the engine's records."""
    checks: list[tuple] = []
    add = checks.append
    last_key: Any = None
    cks: list[str] = []
    for rec in records:
        if rec.__class__ is KeyGroupCount:
            continue
        key, check, ok, detail = rec
        if key.__class__ is str:  # a file (the bulk); else a handle's index
            if key != last_key:  # a file's records come together: its checkpoints sorted once
                last_key, cks = key, sorted(files[key].checkpoints)
            add((key, check, ok, detail, cks.copy()))  # a list each
        else:
            ref = handles[key]
            for ck, op, sub in ref.owners:
                where = f"operator {op} subtask {sub} key groups [{ref.key_group_start}, {ref.key_group_end}]"
                add((ck, check, ok, f"{where}: {detail}" if detail else where, [ck]))
    return checks


def assemble(checkpoints, n_rows, files, handles, records, engine, master, elapsed) -> VerifyResult:
    histogram: list[tuple] = []
    problems: list[dict[str, Any]] = []
    counts = {
        "checkpoints": len(checkpoints),
        "references": n_rows,
        "files": len(files),
        "handles": len(handles),
    }
    counts.update({c: 0 for c in CHECKS})
    for rec in records:
        if rec.__class__ is KeyGroupCount:
            index, cf, kg, n, nbytes = rec
            for ck, op, sub in handles[index].owners:
                histogram.append((ck, op, sub, cf, kg, n, nbytes))
            continue
        key, check, ok, detail = rec
        counts[check] += 1
        if ok:
            continue
        if key.__class__ is str:
            problems.append(
                {"path": key, "check": check, "detail": detail, "checkpoints": sorted(files[key].checkpoints)}
            )
        else:
            ref = handles[key]
            for ck, op, sub in ref.owners:
                where = f"operator {op} subtask {sub} key groups [{ref.key_group_start}, {ref.key_group_end}]"
                problems.append(
                    {"path": ck, "check": check, "detail": f"{where}: {detail}", "checkpoints": [ck],
                     "operator_id": op, "subtask": sub}
                )  # fmt: skip
    problems.sort(key=lambda p: (p["path"], CHECKS.index(p["check"]), p.get("subtask") or 0))
    return VerifyResult(
        checkpoints, files, handles, histogram, problems, counts, engine, master, elapsed, records=records
    )
