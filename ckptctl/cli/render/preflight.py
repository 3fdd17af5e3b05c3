"""``ckptctl preflight``: the verdict, the operators and every finding that is not as-is."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ckptctl.cli.output import human_bytes
from ckptctl.cli.terminal import styled

if TYPE_CHECKING:
    from ckptctl.preflight import PreflightReport

_STYLE = {
    "as-is": "ok",
    "migration": "warning",
    "dropped": "warning",
    "unknown": "warning",
    "incompatible": "error",
}
_VERDICT = {"restores": "ok", "restores-with-migration": "warning", "unknown": "warning", "fails": "error"}


def report(console: Any, r: PreflightReport, named: str, against: str) -> None:
    """The operators of SNAPSHOT and NEW (one row each), then the findings that matter, the
    assumptions, the verdict."""
    from ckptctl.cli.output import Table

    console.print(f"preflight {named} against {against} (Flink {r.target_flink}, {r.target_flink_source})",
                  style="bold")  # fmt: skip
    table = Table(title=None, show_edge=False)
    for h in ("operator", "mapping", "p / max p", "state", "outcome"):
        table.add_column(h, overflow="fold", justify="right" if h == "state" else "left")
    for o in r.operators:
        label = o.uid or o.name or o.operator_id
        label = f"{label} ({o.operator_id[:8]}…)" if (o.uid or o.name) else label
        mapping = "kept" if o.in_snapshot and o.in_new else ("missing in NEW" if o.in_snapshot else "new")
        old = f"{o.snapshot_parallelism}/{o.snapshot_max_parallelism}" if o.in_snapshot else "-"
        new = f"{o.parallelism}/{o.max_parallelism}" if o.in_new else "-"
        style = _STYLE.get(o.outcome, "warning")
        table.add_row(label, mapping, f"{old} → {new}", human_bytes(o.state_bytes) if o.has_state else "-",
                      styled(f"[{style}]{{}}[/{style}]", o.outcome))  # fmt: skip
    console.print(table)
    for f in r.findings:
        if f.outcome == "as-is":
            continue
        style = _STYLE.get(f.outcome, "warning")
        who = f.uid or f.name or f.operator_id
        where = f"{who}" + (f" / {f.state}" if f.state else "")
        amount = f" ({human_bytes(f.bytes)})" if f.bytes and f.outcome in ("dropped", "migration") else ""
        console.print(
            styled(
                f"[{style}]{{}}[/{style}] {{}} {{}}: {{}}{{}}", f.outcome, f.check, where, f.detail, amount
            )
        )
        if f.flink_error:
            console.print(f"  Flink: {f.flink_error}", overflow="fold")
        if f.blocking_class:
            console.print(f"  blocked by {f.blocking_class}", overflow="fold")
    for a in r.assumptions:
        console.print(f"assumed: {a}")
    if r.dropped_bytes:
        console.print(f"dropped with --allowNonRestoredState: {human_bytes(r.dropped_bytes)}")
    style = _VERDICT[r.verdict]
    console.print(styled(f"[{style}]{{}}[/{style}]", r.verdict))
