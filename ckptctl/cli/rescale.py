"""``ckptctl plan-rescale``: what a restore at another parallelism will do and cost."""

from __future__ import annotations

import os
import re
from typing import Annotated, Any

import typer

from ckptctl.cli import Command, EndpointOpt, JsonOpt, RebaseOpt, _context, app, command

_RANGE = re.compile(r"^\s*(\d+)\s*(?:\.\.|-)\s*(\d+)\s*$")


def parse_parallelism(text: str) -> list[int]:
    from ckptctl.errors import CkptError

    m = _RANGE.match(text)
    if m:
        lo, hi = int(m.group(1)), int(m.group(2))
        if lo < 1 or hi < lo or hi - lo > 4096:
            raise CkptError(f"--parallelism range '{text}' must be LOW..HIGH with 1 <= LOW <= HIGH")
        return list(range(lo, hi + 1))
    if text.strip().isdigit():
        return [int(text)]
    raise CkptError(f"--parallelism expects N or LOW..HIGH, got '{text}'")


@app.command("plan-rescale", cls=Command)
@command
def plan_rescale_command(
    checkpoint: Annotated[
        str,
        typer.Argument(metavar="CHECKPOINT", help="A checkpoint or savepoint directory, or its _metadata."),
    ],
    parallelism: Annotated[
        str,
        typer.Option(
            "--parallelism", "-p", metavar="N|LOW..HIGH", help="New parallelism N, or a sweep LOW..HIGH."
        ),
    ],
    operator: Annotated[
        str | None,
        typer.Option("--operator", metavar="OPERATOR", help="Only this operator (32-hex id, name or uid)."),
    ] = None,
    flink_version: Annotated[
        str | None,
        typer.Option(
            "--flink-version",
            metavar="MAJOR.MINOR",
            help="Flink version of the restore, e.g. 1.20 (default: inferred).",
        ),
    ] = None,
    overlap_threshold: Annotated[
        float | None,
        typer.Option(
            "--overlap-threshold",
            metavar="FRACTION",
            help="state.backend.rocksdb.restore-overlap-fraction-threshold, 0..1 (1.16+).",
        ),
    ] = None,
    ingest_db: Annotated[
        bool, typer.Option("--ingest-db", help="Flink 2.x state.backend.rocksdb.use-ingest-db-restore-mode.")
    ] = False,
    max_parallelism: Annotated[
        int | None,
        typer.Option("--max-parallelism", metavar="N", help="Refuse if it differs from the checkpoint's."),
    ] = None,
    data_aware: Annotated[
        str | None,
        typer.Option(
            "--data-aware",
            metavar="HISTOGRAM",
            help="Histogram Parquet of `verify --deep --histogram`: real bytes per key group.",
        ),
    ] = None,
    as_json: JsonOpt = False,
    s3_endpoint: EndpointOpt = None,
    rebase: RebaseOpt = None,
) -> None:
    """Each new subtask's key groups, the old handles it receives, the base RocksDB handle, and bytes."""
    from ckptctl.cli.inspect import checked_path
    from ckptctl.cli.output import make_output
    from ckptctl.refs import load_checkpoint
    from ckptctl.rescale import apply_histogram, family_of, plan_rescale, sweep

    values = parse_parallelism(parallelism)
    if flink_version is not None:
        family_of(flink_version)  # refuse an unknown version before reading anything
    histogram = _histogram_rows(data_aware) if data_aware else None
    out = make_output(as_json)
    storage, mappings = _context(s3_endpoint, rebase)
    ck = load_checkpoint(storage, checked_path(storage, checkpoint), mappings)
    kwargs: dict[str, Any] = dict(
        operator=operator, flink_version=flink_version, overlap_threshold=overlap_threshold,
        ingest_db=ingest_db, max_parallelism=max_parallelism,
    )  # fmt: skip
    if len(values) == 1:
        plan = plan_rescale(ck.metadata, values[0], **kwargs)
        plan["checkpoint"] = ck.location.uri
        if histogram is not None:
            apply_histogram(plan, histogram, ck.location.uri)
        if as_json:
            out.json(plan)
        else:
            _render_plan(out, plan)
        return
    result = sweep(ck.metadata, values, histogram=histogram, checkpoint=ck.location.uri, **kwargs)
    result["checkpoint"] = ck.location.uri
    if as_json:
        out.json(result)
    else:
        _render_sweep(out, result)


def _histogram_rows(path: str) -> list[tuple]:
    from ckptctl.errors import CkptError

    names = ("checkpoint", "operator_id", "subtask", "column_family", "key_group", "entries", "bytes")
    if "://" not in path and not os.path.isfile(path):
        raise CkptError("no such file" if not os.path.exists(path) else "not a file", path=path)
    try:
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        return list(zip(*(table.column(n).to_pylist() for n in names), strict=True))
    except (OSError, KeyError, ValueError) as e:
        raise CkptError(f"not a verify histogram: {e}", path=path) from None


def _render_plan(out, plan: dict[str, Any]) -> None:
    from rich.table import Table

    from ckptctl.cli.output import _escape, human_bytes

    out.out.print(
        f"[bold]restore of checkpoint {plan['checkpoint_id']} at parallelism {plan['new_parallelism']}[/bold] "
        f"— Flink {plan['flink_family']} rules ({_escape(plan['family_from'])})"
    )
    for op in plan["operators"]:
        if not op["keyed"] and not op["operator_state"]:
            continue
        title = f"{op['operator_id']}" + (f" {op['name']}" if op.get("name") else "")
        title += f"  {op['old_parallelism']} → {op['new_parallelism']} (max {op['max_parallelism']})"
        if op["keyed"]:
            t = Table(title=_escape(title), title_justify="left")
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
                left = col in ("key groups", "handles received (overlap, fraction)", "base", "clip", "copied")
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
                    "empty": "[yellow]empty DB[/yellow]",
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
            out.out.print(t)
        for osp in op["operator_state"]:
            modes = ", ".join(
                f"{st['name']} ({st['mode'].lower()}, {st['elements']})" for st in osp["states"]
            )
            reads = ", ".join(human_bytes(b) for b in osp["bytes_per_subtask"])
            out.out.print(
                f"  operator state of {op['operator_id'][:8]}: {_escape(modes)}; read per subtask: {reads}"
            )
    skew = f"{plan['skew']:.2f}" if plan["skew"] else "-"
    out.out.print(
        f"total download {human_bytes(plan['download_bytes'])}; critical path subtask {plan['critical_subtask']} "
        f"({human_bytes(plan['max_subtask_bytes'])}); skew {skew}; subtasks merging RocksDB instances: "
        f"{plan['merging_subtasks']}"
    )


def _render_sweep(out, result: dict[str, Any]) -> None:
    from rich.table import Table

    from ckptctl.cli.output import human_bytes

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
    width = max(8, min(40, out.out.width - (90 if data_aware else 64)))
    for r in rows:
        bar = "█" * max(1, round(width * r["max_subtask_bytes"] / peak)) if r["max_subtask_bytes"] else ""
        style = "green" if r["merging_subtasks"] == 0 else "yellow"
        extra = (
            [human_bytes(r["data"]["clip_bytes"]), human_bytes(r["data"]["copy_bytes"])] if data_aware else []
        )
        t.add_row(
            str(r["parallelism"]), human_bytes(r["max_subtask_bytes"]), f"[{style}]{bar}[/{style}]",
            human_bytes(r["download_bytes"]), str(r["merging_subtasks"]), f"{r['skew']:.2f}" if r["skew"] else "-",
            *extra,
        )  # fmt: skip
    out.out.print(t)
    if result["no_merge"]:
        out.out.print(
            f"no merging of RocksDB instances at parallelism: {', '.join(map(str, result['no_merge']))}"
        )
    tie = "fewest copied bytes" if data_aware else "fewest merges"
    out.out.print(f"recommended (smallest critical path, {tie}): {result['recommended']}")
