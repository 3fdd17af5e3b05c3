"""``ckptctl history``: per job, its operators ranked by growth with a sparkline of full bytes,
then its checkpoints (uploaded vs reused), the budget and the ``--fail-if`` verdicts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ckptctl.cli.output import Col, fitted_table, human_bytes
from ckptctl.cli.terminal import styled

if TYPE_CHECKING:
    from ckptctl.history.report import HistoryReport

BARS = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 24


def sparkline(values: Sequence[float], width: int = SPARK_WIDTH) -> str:
    """The last ``width`` values as bars, scaled between their own min and max (flat: all low)."""
    vs = list(values)[-width:]
    if not vs:
        return ""
    lo, hi = min(vs), max(vs)
    if hi <= lo:
        return BARS[0] * len(vs)
    return "".join(BARS[min(len(BARS) - 1, int((v - lo) / (hi - lo) * (len(BARS) - 1) + 0.5))] for v in vs)


def rate(bytes_per_day: float | None, pct: float | None, per_checkpoint: float | None) -> str:
    if bytes_per_day is None:
        return "—" if per_checkpoint is None else f"{_signed(per_checkpoint)}/chk"
    out = f"{_signed(bytes_per_day)}/d"
    return out if pct is None else f"{out} ({pct:+.1f}%/d)"


def _signed(n: float) -> str:
    return ("-" if n < 0 else "+") + human_bytes(int(abs(n)))


def _pct(p: float | None) -> str:
    return "—" if p is None else f"{p:+.1f}%"


def days(d: float | None) -> str:
    if d is None:
        return "—"
    return "now" if d == 0 else (f"{d:.1f} d" if d < 100 else f"{d:.0f} d")


def report(console: Any, r: HistoryReport, named: str) -> None:
    for job in r.jobs:
        title = f"history {named}: " + (f"job {job['job_id']}" if job["job_id"] else "savepoints")
        cks = job["checkpoints"]
        ops = job["operators"]
        budget = job["budget_bytes"] is not None
        cols = [
            Col("#", [str(o["rank"]) for o in ops], "right"),
            Col("operator", [o["display"] for o in ops], fold=True),
            Col("full", [human_bytes(o["full_bytes"]) for o in ops], "right"),
            Col("growth", [rate(o["growth"].bytes_per_day, None, o["growth"].bytes_per_checkpoint) for o in ops], "right"),
            Col(f"full, last {SPARK_WIDTH}", [sparkline([s["full_bytes"] for s in o["series"]]) for o in ops]),
            Col("%/d", [_pct(o["growth"].percent_per_day) for o in ops], "right"),
            Col("uploaded", [human_bytes(o["uploaded_bytes"]) for o in ops], "right"),
            Col("kinds", [",".join(o["state_kinds"]) for o in ops]),
            Col("subtasks", [str(o["subtasks"]) for o in ops], "right"),
            Col("skew", ["—" if o["skew"] is None else f"{o['skew']:.2f}" for o in ops], "right"),
        ]  # fmt: skip
        if budget:
            cols.insert(5, Col("budget in", [days(o["days_to_budget"]) for o in ops], "right"))
        drop = ("kinds", "skew", "subtasks", "%/d", "uploaded", "budget in", f"full, last {SPARK_WIDTH}")
        table = fitted_table(console, cols, drop=drop, title=title, title_justify="left")
        console.print(table)
        g = job["growth"]
        last = cks[-1] if cks else None
        if last is not None:
            ratio = last["reuse_ratio"]
            console.print(
                f"{len(cks)} checkpoints ({cks[0]['checkpoint_id']}..{last['checkpoint_id']}); "
                f"newest {last['checkpoint_id']}: full {human_bytes(last['full_bytes'])}, "
                f"uploaded {human_bytes(last['uploaded_bytes'])}, reused {human_bytes(last['reused_bytes'])}"
                + ("" if ratio is None else f" ({ratio:.0%} reused)")
                + f"; growth {rate(g.bytes_per_day, g.percent_per_day, g.bytes_per_checkpoint)}"
            )
            console.print("uploaded " + sparkline([c["uploaded_bytes"] for c in cks], 48))
        for c in cks if not job["job_id"] else ():  # savepoints: one id may name several, told by directory
            console.print(
                styled(
                    "savepoint {} {}: full {}",
                    c["checkpoint_id"],
                    c.get("path", ""),
                    human_bytes(c["full_bytes"]),
                )
            )
        if job["budget_bytes"] is not None:
            console.print(
                f"budget {human_bytes(job['budget_bytes'])} reached in {days(job['days_to_budget'])}"
            )
        if job["missing_checkpoint_ids"]:
            console.print(
                styled(
                    "[warning]missing[/warning] (failed or not recorded): {}",
                    _ids(job["missing_checkpoint_ids"]),
                )
            )
        if job["incomplete_checkpoint_ids"]:
            console.print(
                styled(
                    "[warning]incomplete[/warning] (no _metadata): {}", _ids(job["incomplete_checkpoint_ids"])
                )
            )
        _files(console, job, ops)
        top = job["operators"][0] if job["operators"] else None
        if top is not None and top["suspect"]:
            console.print(styled("[warning]{}[/warning]: {}", top["display"], top["suspect"]))
        for v in job["verdicts"]:
            if v["broken"]:
                who = f"operator {v['operator']}" if v["operator"] else "job"
                console.print(styled("[error]broken[/error] {}: {} at {}", v["rule"], who, _value(v)))
    if r.ledger:
        console.print(f"ledger {r.ledger}: {r.added} checkpoints added")
    if r.rules:
        console.print(styled("[ok]passed[/ok]") if r.ok else styled("[error]FAILED[/error]"))


def _files(console: Any, job: dict[str, Any], ops: list[dict[str, Any]]) -> None:
    """What ``--states`` read: per operator its states (largest first), file merging, problems."""
    if job["states_checkpoint_id"] is None:
        return
    for o in ops:
        if not o["states"]:
            continue
        shown = "; ".join(
            f"{s['name']} {s['kind']} {_count(s['entries'])} {human_bytes(s['bytes']) if s['bytes'] is not None else '—'}"
            + (
                ""
                if s["scope"] != "keyed" or s["kind"] == "TIMERS"
                else (", TTL" if s["ttl"] else ", no TTL")
            )
            for s in o["states"]
            if s["kind"] != "TIMERS" or s["entries"]
        )
        console.print(
            styled("states of {} (checkpoint {}): {}", o["display"], job["states_checkpoint_id"], shown)
        )
    fm = job["file_merging"]
    if fm is not None:
        ratio = fm["space_amplification"]
        console.print(
            f"file merging: {fm['physical_files']} physical files, {human_bytes(fm['physical_bytes'])} for "
            f"{human_bytes(fm['referenced_bytes'])} of segments referenced by checkpoints "
            f"{_ids(fm['checkpoint_ids'])}"
            + ("" if ratio is None else f" ({ratio:.2f}x space amplification)")
        )
        if fm["suspect"]:
            console.print(styled("[warning]{}[/warning]", fm["suspect"]))
    for p in job["files_problems"] or ():
        console.print(styled("[warning]not read[/warning]: {}", p))


def _count(n: int | None) -> str:
    return "—" if n is None else f"{n:,} entries"


def _value(v: dict[str, Any]) -> str:
    shown = f"{v['value']:.1f}%" if v["unit"] == "percent" else human_bytes(int(v["value"]))
    return shown if v["per"] is None else f"{shown}/{v['per']}"


def _ids(ids: list[int], most: int = 20) -> str:
    shown = ", ".join(str(i) for i in ids[:most])
    return shown + (f" and {len(ids) - most} more" if len(ids) > most else "")
