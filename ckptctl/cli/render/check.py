"""``ckptctl check``: the CI gate's report over a root."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ckptctl.cli.output import QUICK_NOTE, human_bytes, styled
from ckptctl.cli.render.repairable import detail_once, print_repairable

if TYPE_CHECKING:
    from ckptctl.check import CheckReport


def report(console: Any, r: CheckReport, named: str) -> None:
    """``check``: one row per checkpoint and one for the orphans, the problems, the verdict."""
    from ckptctl.cli.output import Table
    from ckptctl.inspect.views import short_uri
    from ckptctl.verify.run import moved_lines

    root = r.root
    table = Table(title=f"check {named}", title_justify="left")
    table.add_column("checkpoint", overflow="fold")
    table.add_column("files", justify="right", no_wrap=True)
    table.add_column("result")
    for ck in r.checkpoints:
        n = len(ck["problems"])
        status = styled("[ok]ok[/ok]" if ck["ok"] else f"[error]{n} problem{'s' if n != 1 else ''}[/error]")
        if ck["error"]:
            status = styled("[error]unreadable _metadata[/error]")  # the problem lines below say why, once
        table.add_row(short_uri(ck["path"], root), str(ck["files"]), status)
    o = r.orphans
    amount = human_bytes(o["bytes"]) + (
        "" if o["limit"] is None else f" of {human_bytes(o['limit'])} allowed"
    )
    if o["error"]:
        status = (
            styled("[error]{}[/error]", o["error"])
            if not o["ok"]
            else styled("[warning]not measured[/warning]")
        )
    elif not o["ok"]:
        status = styled("[error]{}: over the limit[/error]", amount)
    else:
        status = styled("[ok]ok[/ok] ({})", amount)
    table.add_row("orphans", f"{o['files']:,}", status)
    console.print(table)
    for line in moved_lines(r.moved):
        console.print(styled("[error]exists[/error]: {}", line))
    for p in [p for p in r.problems if not p.get("moved_to")][:100]:  # the moved ones: one line above
        path = short_uri(p["path"], root)
        detail = detail_once(p).removeprefix(p["path"] + ": ")  # metadata errors name the file already
        console.print(styled("[error]{}[/error] {}: {}", p["check"], path, detail))
    print_repairable(console, r.repairable, root)
    console.print(
        styled(("[ok]passed[/ok]" if r.ok else "[error]FAILED[/error]") + (QUICK_NOTE if r.quick else ""))
    )
