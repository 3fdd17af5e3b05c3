"""``ckptctl plan-rescale``: one simulated restore (``-p N``) or the cost of each parallelism."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ckptctl.cli.output import human_bytes, styled

if TYPE_CHECKING:
    from ckptctl.rescale import RescalePlan, RescaleSweep


def plan(console: Any, report: RescalePlan) -> None:
    """``-p N``: per operator, each new subtask's key groups, the handles it receives, its base
    and the bytes it downloads; the totals and the critical path."""
    from ckptctl.cli.output import Table

    plan = report.plan

    console.print(styled(
        "[bold]restore of checkpoint {} at parallelism {}[/bold] — Flink {} rules ({})",
        plan["checkpoint_id"], plan["new_parallelism"], plan["flink_family"], plan["family_from"],
    ))  # fmt: skip
    for op in plan["operators"]:
        if not op["keyed"] and not op["operator_state"]:
            continue
        title = f"{op['operator_id']}" + (f" {op['name']}" if op.get("name") else "")
        title += f"  {op['old_parallelism']} → {op['new_parallelism']} (max {op['max_parallelism']})"
        if op["keyed"]:
            t = Table(title=title, title_justify="left")
            columns = [
                "subtask",
                "key groups",
                "handles received (overlap, fraction)",
                "base",
                "clip",
                "copied",
                "download",
            ]
            if "data" in op:  # --data-aware: measured bytes instead of uniform key groups
                columns += ["keeps", "clipped", "copied bytes"]
            for col in columns:
                left = col in (
                    "key groups",
                    "handles received (overlap, fraction)",
                    "base",
                    "clip",
                    "copied",
                )
                t.add_column(col, justify="left" if left else "right")
            for s in op["subtasks"]:
                handles = (
                    ", ".join(
                        f"{h['key_group_range'][0]}-{h['key_group_range'][1]} ({h['overlap']}/{h['fraction']:.2f})"
                        for h in s["handles"]
                    )
                    or "-"
                )
                base = s["base"]
                base_text = {
                    "direct": "direct restore (history kept)"
                    if s["incremental_history_kept"]
                    else "direct restore",
                    "empty": styled("[warning]empty DB[/warning]"),
                    "ingest": "ingest all (import)",
                    "full": "full snapshot read",
                    "none": "-",
                }.get(s["mode"]) or f"{base['key_group_range'][0]}-{base['key_group_range'][1]}"
                clip = ", ".join(f"{a}-{b}" for a, b in s["clip"]) or "-"
                copied = ", ".join(f"{c['copy_range'][0]}-{c['copy_range'][1]}" for c in s["copied"]) or "-"
                extra = []
                if "data" in s:
                    d = s["data"]
                    extra = [
                        human_bytes(d["keep_bytes"]),
                        human_bytes(d["clip_bytes"]),
                        human_bytes(d["copy_bytes"]),
                    ]
                t.add_row(
                    str(s["index"]), f"{s['key_group_range'][0]}-{s['key_group_range'][1]}", handles, base_text,
                    clip, copied, human_bytes(s["download_bytes"]), *extra,
                )  # fmt: skip
            console.print(t)
        for osp in op["operator_state"]:
            modes = ", ".join(
                f"{st['name']} ({st['mode'].lower()}, {st['elements']})" for st in osp["states"]
            )
            reads = ", ".join(human_bytes(b) for b in osp["bytes_per_subtask"])
            console.print(f"  operator state of {op['operator_id'][:8]}: {modes}; read per subtask: {reads}")
    skew = f"{plan['skew']:.2f}" if plan["skew"] else "-"
    console.print(
        f"total download {human_bytes(plan['download_bytes'])}; critical path subtask {plan['critical_subtask']} "
        f"({human_bytes(plan['max_subtask_bytes'])}); skew {skew}; subtasks merging RocksDB instances: "
        f"{plan['merging_subtasks']}"
    )


def sweep(console: Any, report: RescaleSweep) -> None:
    """``-p LOW..HIGH``: the restore cost of each parallelism (a bar for the critical path) and
    the recommendation."""
    from ckptctl.cli.output import Table

    result = report.sweep
    rows = result["rows"]
    peak = max((r["max_subtask_bytes"] for r in rows), default=0) or 1
    t = Table(
        title="restore cost by parallelism (bar: largest subtask download = critical path)",
        title_justify="left",
    )
    data_aware = bool(result.get("data_aware"))
    columns = ["parallelism", "critical path", "", "total", "merging", "skew"]
    if data_aware:  # measured bytes (verify --deep --histogram)
        columns += ["clipped", "copied bytes"]
    for col in columns:
        t.add_column(col, justify="left" if col == "" else "right", no_wrap=True)
    # the bar gets what the numbers leave of the terminal (80 columns included), never cut
    width = max(8, min(40, console.width - (90 if data_aware else 64)))
    for r in rows:
        bar = "█" * max(1, round(width * r["max_subtask_bytes"] / peak)) if r["max_subtask_bytes"] else ""
        style = "ok" if r["merging_subtasks"] == 0 else "warning"
        extra = (
            [human_bytes(r["data"]["clip_bytes"]), human_bytes(r["data"]["copy_bytes"])] if data_aware else []
        )
        t.add_row(
            f"{r['parallelism']}{' (now)' if r.get('current') else ''}", human_bytes(r["max_subtask_bytes"]),
            styled(f"[{style}]{{}}[/{style}]", bar),
            human_bytes(r["download_bytes"]), str(r["merging_subtasks"]), f"{r['skew']:.2f}" if r["skew"] else "-",
            *extra,
        )  # fmt: skip
    console.print(t)
    if result["no_merge"]:
        console.print(
            f"no merging of RocksDB instances at parallelism: {', '.join(map(str, result['no_merge']))}"
        )
    tie = "fewest copied bytes" if data_aware else "fewest merges"
    console.print(f"recommended (smallest critical path, {tie}): {result['recommended']}")
