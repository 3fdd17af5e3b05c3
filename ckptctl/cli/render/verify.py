"""``ckptctl verify``: will it restore? The checks, the verdict per checkpoint, the problems."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ckptctl.cli.output import QUICK_NOTE, styled
from ckptctl.cli.render.repairable import detail_once, print_repairable

if TYPE_CHECKING:
    from ckptctl.cli.terminal import Terminal
    from ckptctl.verify import VerifyResult


def report(console: Any, result: VerifyResult, root: str, named: str, term: Terminal) -> None:
    """``verify``: paths shown relative to ``root``, the target as the user ``named`` it; what
    was checked where (moved checkpoints, --rebase what-ifs) goes to the terminal (stderr)."""
    from ckptctl.cli.output import Table
    from ckptctl.inspect.views import short_uri
    from ckptctl.verify import CHECKS
    from ckptctl.verify.run import moved_lines
    from ckptctl.words import plural

    c = result.counts
    where = result.engine + (f" on {result.master}" if result.master else "")
    grid = Table(title=f"verify {named}", title_justify="left", show_header=True)
    grid.add_column("check")
    grid.add_column("checked", justify="right")
    grid.add_column("problems", justify="right")
    by_check: dict[str, int] = {}
    for p in result.problems:
        by_check[p["check"]] = by_check.get(p["check"], 0) + 1
    for check in CHECKS:
        if c[check]:
            n = by_check.get(check, 0)
            grid.add_row(check, f"{c[check]:,}", styled("[error]{}[/error]", f"{n:,}") if n else "0")
    console.print(grid)
    counted = (
        f"{plural(c['checkpoints'], 'checkpoint')}, {plural(c['references'], 'reference')}, "
        f"{plural(c['files'], 'file')}"
        + (f", {plural(c['handles'], 'RocksDB handle')}" if c["handles"] else "")
        + f" — {where}, {result.elapsed:.1f}s"
    )
    console.print(styled("{}" + (QUICK_NOTE if result.quick else ""), counted))
    verdicts = result.per_checkpoint()
    if len(verdicts) > 1 or not result.ok:
        per = Table(title="per checkpoint (broken first)", title_justify="left")
        per.add_column("checkpoint", overflow="fold")
        per.add_column("files", justify="right", no_wrap=True)
        per.add_column("result", overflow="fold")
        for v in verdicts:
            why = (v["why"] or "").split("; fix: ckptctl repair ")[0]  # the summary below gives it once
            status = styled("[ok]sound[/ok]") if v["ok"] else styled("[error]broken[/error]: {}", why)
            per.add_row(short_uri(v["checkpoint"], root), f"{v['files']:,}", status)
        console.print(per)
    for m in result.moved:
        if not m["missing_files"]:  # the written location still has them: Flink reads them there
            term.warn(
                f"{plural(len(m['checkpoints']), 'checkpoint')} {'was' if len(m['checkpoints']) == 1 else 'were'} "
                f"written at another location: Flink reads the paths "
                f"as written, so they are checked there (to check this copy instead, as a what-if: --rebase "
                f"{' --rebase '.join(m['rebase'])})"
            )
    if result.what_if:
        term.warn(
            f"what-if: paths mapped with --rebase {', '.join(result.what_if)}; Flink itself reads the paths as "
            "written in _metadata"
        )
    for line in moved_lines(result.moved):
        console.print(styled("[error]exists[/error]: {}", line))
    listed = [p for p in result.problems if not p.get("moved_to")]  # the moved ones: one line above
    if listed:
        table = Table(title=plural(len(listed), "problem"), title_justify="left")
        table.add_column("path", overflow="fold", ratio=3)
        table.add_column("check", no_wrap=True)
        table.add_column("detail", overflow="fold", ratio=2)
        for p in listed[:200]:
            table.add_row(short_uri(p["path"], root), p["check"], detail_once(p))
        console.print(table)
        if len(listed) > 200:
            console.print(f"… and {len(listed) - 200} more (use --json or --report)")
    if not result.ok:
        print_repairable(console, result.to_json()["repairable"], root)
        broken = sum(1 for v in verdicts if not v["ok"])
        console.print(
            styled(
                "[error]NOT SOUND[/error]: {} of {} would fail to restore",
                broken,
                plural(len(verdicts), "checkpoint"),
            )
        )
    else:
        if result.quick:
            console.print(
                styled(
                    "[ok]sound[/ok]: every file is present with its recorded size (--quick: contents not read)"
                )
            )
        else:
            console.print(styled("[ok]sound[/ok]: every file is present, complete and well-formed"))
