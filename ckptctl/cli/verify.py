"""``ckptctl verify`` (will it restore? on Spark or in-process) and ``ckptctl check`` (a CI gate)."""

from __future__ import annotations

import re
from typing import Annotated, Any

import typer

from ckptctl.cli import (
    Command,
    EndpointOpt,
    EngineOpt,
    JsonOpt,
    MasterOpt,
    RebaseOpt,
    SavepointsOpt,
    _context,
    app,
    command,
    engine_choice,
)

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b)?\s*$", re.IGNORECASE)
_UNIT = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}


def parse_bytes(text: str, option: str) -> int:
    """``1048576``, ``512MiB``, ``10G`` (binary units) as a number of bytes."""
    from ckptctl.errors import CkptError

    m = _SIZE.match(text)
    if not m:
        raise CkptError(f"{option} expects a number of bytes like 1048576, 512MiB or 10G, got '{text}'")
    return int(float(m.group(1)) * _UNIT[m.group(2).lower()])


class _Bar:
    """A Rich progress bar on a terminal (stderr), nothing otherwise."""

    def __init__(self, out, label: str) -> None:
        self.out, self.label = out, label
        self.bar = self.task = None

    def __enter__(self) -> _Bar:
        return self

    def total(self, n: int) -> None:
        if not self.out.err.is_terminal or n < 2:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=self.out.err, transient=True,
        )  # fmt: skip
        self.bar.start()
        self.task = self.bar.add_task(self.label, total=n)

    def advance(self, n: int) -> None:
        if self.bar is not None:
            self.bar.advance(self.task, n)

    def __exit__(self, *exc: Any) -> None:
        if self.bar is not None:
            self.bar.stop()

    @property
    def callback(self):
        return self.advance if self.out.err.is_terminal else None


@app.command("verify", cls=Command)
@command
def verify_command(
    path: Annotated[
        str,
        typer.Argument(
            metavar="CHECKPOINT|ROOT",
            help="A checkpoint/savepoint (directory or _metadata) or a root to scan.",
        ),
    ],
    deep: Annotated[
        bool,
        typer.Option("--deep", help="Also rebuild every keyed RocksDB instance and check its key groups."),
    ] = False,
    master: MasterOpt = "local[*]",
    engine: EngineOpt = "spark",
    report: Annotated[
        str | None, typer.Option("--report", help="Write every check to this Parquet file.", metavar="FILE")
    ] = None,
    histogram: Annotated[
        str | None,
        typer.Option(
            "--histogram",
            help="With --deep: entries/bytes per key group and column family (Parquet).",
            metavar="FILE",
        ),
    ] = None,  # fmt: skip
    savepoints: SavepointsOpt = None,
    as_json: JsonOpt = False,
    s3_endpoint: EndpointOpt = None,
    rebase: RebaseOpt = None,
) -> None:
    """Will it restore? Every needed file exists with its recorded size and is sound (--deep: RocksDB key groups)."""
    from ckptctl.cli.inspect import checkpoints_at, display_base, warn_moved
    from ckptctl.cli.output import make_output
    from ckptctl.errors import CkptError
    from ckptctl.verify import verify, write_histogram, write_report

    engine = engine_choice(engine)
    if histogram and not deep:
        raise CkptError("--histogram needs --deep")
    out = make_output(as_json)
    storage, mappings = _context(s3_endpoint, rebase)
    checkpoints, root = checkpoints_at(storage, path, mappings, out)
    warn_moved(out, *checkpoints)
    if not checkpoints:
        raise CkptError(f"no completed checkpoints or savepoints under {root}")
    if engine == "spark":  # the JVM takes seconds to start: say so instead of a bar stuck at 0
        from ckptctl.verify import spark_session

        with out.status(f"starting Spark ({master}) …"):
            spark_session(master)
    with _Bar(out, "verifying" + (" (deep)" if deep else "")) as bar:
        result = verify(
            storage, checkpoints, deep=deep, engine=engine, master=master,
            progress=bar.callback, on_total=bar.total,
            roots=[] if len(checkpoints) == 1 and checkpoints[0].location.uri == root else [root],
            savepoint_dirs=savepoints or (),
        )  # fmt: skip
    if report:
        write_report(result, report)
    if histogram:
        write_histogram(result, histogram)
    if as_json:
        out.json(result.to_json())
    else:
        _render_verify(out, result, display_base(root, checkpoints), path)
    if not result.ok:
        raise typer.Exit(1)


def _render_verify(out, result, root: str, named: str) -> None:
    from rich.table import Table

    from ckptctl.cli.output import _escape
    from ckptctl.verify import CHECKS
    from ckptctl.views import short_uri

    c = result.counts
    where = result.engine + (f" on {result.master}" if result.master else "")
    grid = Table(title=_escape(f"verify {named}"), title_justify="left", show_header=True)
    grid.add_column("check")
    grid.add_column("checked", justify="right")
    grid.add_column("problems", justify="right")
    by_check: dict[str, int] = {}
    for p in result.problems:
        by_check[p["check"]] = by_check.get(p["check"], 0) + 1
    for check in CHECKS:
        if c[check]:
            n = by_check.get(check, 0)
            grid.add_row(check, f"{c[check]:,}", f"[red]{n:,}[/red]" if n else "0")
    out.out.print(grid)
    out.out.print(
        f"{c['checkpoints']} checkpoints, {c['references']:,} references, {c['files']:,} files"
        + (f", {c['handles']:,} RocksDB handles" if c["handles"] else "")
        + f" — {where}, {result.elapsed:.1f}s"
    )
    if result.problems:
        table = Table(title=f"{len(result.problems)} problems", title_justify="left")
        table.add_column("path", overflow="fold", ratio=3)
        table.add_column("check", no_wrap=True)
        table.add_column("detail", overflow="fold", ratio=2)
        for p in result.problems[:200]:
            table.add_row(_escape(short_uri(p["path"], root)), p["check"], _escape(p["detail"] or ""))
        out.out.print(table)
        if len(result.problems) > 200:
            out.out.print(f"… and {len(result.problems) - 200} more (use --json or --report)")
        _render_repairable(out, result.to_json()["repairable"], root)
        out.out.print("[red]NOT SOUND[/red]: these checkpoints would fail to restore")
    else:
        out.out.print("[green]sound[/green]: every file is present, complete and well-formed")


# ---------------------------------------------------------------------------------------------
# check: the CI gate


@app.command("check", cls=Command)
@command
def check_command(
    root: Annotated[
        str,
        typer.Argument(metavar="ROOT", help="A checkpoint root (every job and savepoint below is checked)."),
    ],
    max_orphan_bytes: Annotated[
        str | None,
        typer.Option(
            "--max-orphan-bytes",
            help="Fail when orphaned files exceed this many bytes (e.g. 10GiB).",
            metavar="N",
        ),
    ] = None,  # fmt: skip
    savepoints: SavepointsOpt = None,
    junit: Annotated[
        str | None, typer.Option("--junit", help="Write a JUnit XML report to this file.", metavar="FILE")
    ] = None,
    as_json: JsonOpt = False,
    s3_endpoint: EndpointOpt = None,
    rebase: RebaseOpt = None,
) -> None:
    """CI gate: every _metadata parses, every reference resolves, orphan bytes stay below a limit."""
    from ckptctl.check import run_check
    from ckptctl.cli.output import make_output

    limit = parse_bytes(max_orphan_bytes, "--max-orphan-bytes") if max_orphan_bytes is not None else None
    out = make_output(as_json)
    storage, mappings = _context(s3_endpoint, rebase)
    from ckptctl.cli.inspect import checked_path

    report = run_check(storage, checked_path(storage, root), mappings, limit, savepoints or ())
    for w in report["warnings"]:
        out.warn(w)
    if junit:
        from ckptctl.check import junit_xml

        with open(junit, "w", encoding="utf-8") as f:
            f.write(junit_xml(report))
    if as_json:
        out.json(report)
    else:
        _render_check(out, report, root)
    if not report["ok"]:
        raise typer.Exit(1)


def _render_check(out, report: dict[str, Any], named: str) -> None:
    from rich.table import Table

    from ckptctl.cli.output import _escape, human_bytes
    from ckptctl.views import short_uri

    root = report["root"]
    table = Table(title=_escape(f"check {named}"), title_justify="left")
    table.add_column("checkpoint", overflow="fold")
    table.add_column("files", justify="right", no_wrap=True)
    table.add_column("result")
    for ck in report["checkpoints"]:
        n = len(ck["problems"])
        status = "[green]ok[/green]" if ck["ok"] else f"[red]{n} problem{'s' if n != 1 else ''}[/red]"
        if ck["error"]:
            status = "[red]unreadable _metadata[/red]"  # the problem lines below say why, once
        table.add_row(_escape(short_uri(ck["path"], root)), str(ck["files"]), status)
    o = report["orphans"]
    amount = human_bytes(o["bytes"]) + (
        "" if o["limit"] is None else f" of {human_bytes(o['limit'])} allowed"
    )
    if o["error"]:
        status = f"[red]{_escape(o['error'])}[/red]" if not o["ok"] else "[yellow]not measured[/yellow]"
    elif not o["ok"]:
        status = f"[red]{amount}: over the limit[/red]"
    else:
        status = f"[green]ok[/green] ({amount})"
    table.add_row("orphans", f"{o['files']:,}", status)
    out.out.print(table)
    for p in report["problems"][:100]:
        path = short_uri(p["path"], root)
        detail = (p["detail"] or "").removeprefix(p["path"] + ": ")  # metadata errors name the file already
        out.out.print(f"[red]{p['check']}[/red] {_escape(path)}: {_escape(detail)}")
    _render_repairable(out, report["repairable"], root)
    out.out.print("[green]passed[/green]" if report["ok"] else "[red]FAILED[/red]")


def _render_repairable(out, repairable: list[dict[str, Any]], root: str) -> None:
    """What FLINK-39964 did to which checkpoint, and the command that repairs it."""
    from ckptctl.cli.output import _escape
    from ckptctl.views import short_uri

    for r in repairable:
        where = _escape(short_uri(r["checkpoint"], root))
        if r["found"] == r["handles"]:
            dirs = ", ".join(_escape(short_uri(d, root)) for d in r["savepoint_dirs"])
            out.out.print(
                f"[yellow]FLINK-39964[/yellow] {where}: {r['handles']} files reused from a CLAIM-restored "
                f"NATIVE savepoint are recorded by relative name only, so Flink looks for them in this "
                f"checkpoint's directory and cannot restore it; they are in {dirs}. "
                f"Repair: [bold]ckptctl repair {_escape(r['checkpoint'])} -o DEST[/bold]"
            )
        else:
            out.out.print(
                f"[yellow]FLINK-39964[/yellow] {where}: {r['handles'] - r['found']} of {r['handles']} files reused "
                "from a CLAIM-restored NATIVE savepoint were found in no savepoint directory; pass it with --savepoints"
            )
