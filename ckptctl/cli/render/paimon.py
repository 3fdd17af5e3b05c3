"""``ckptctl paimon``: each checkpoint against the Paimon table, and the orphan plan."""

from __future__ import annotations

from typing import Any

from ckptctl.cli.output import human_bytes, styled
from ckptctl.views import short_uri

_CODE_TEXT = {
    "A": "re-commits after expiration",
    "B": "files a restore needs",
    "C": "rewinds committed data",
}


def _ids(ids: list[int]) -> str:
    if not ids:
        return "-"
    shown = ",".join(str(i) for i in ids[:6])
    return shown + (f",+{len(ids) - 6}" if len(ids) > 6 else "")


def _name(checkpoint: str, root: str) -> str:
    """Below the root it is relative; the one checkpoint named (the root itself) is its directory's
    name, the full URI being in the title already."""
    return checkpoint.rstrip("/").rpartition("/")[2] if checkpoint == root else short_uri(checkpoint, root)


def report(console: Any, r: Any) -> None:
    from rich.table import Table

    table = Table(title=f"paimon {r.root} -> {r.table}", title_justify="left")
    for name, justify in (("checkpoint", "left"), ("commit user", "left"), ("user's latest", "right"),
                          ("holds", "left"), ("restore commits", "left"), ("verdict", "left")):  # fmt: skip
        table.add_column(name, justify=justify, overflow="fold")
    for f in r.forecasts:
        latest = "-" if f.latest is None else f"#{f.latest.id} (id {f.latest.commit_identifier})"
        if f.latest is None and f.commit_user:
            latest = styled("[warning]none[/warning]")
        codes = sorted({h.code for h in f.hazards if h.severe})
        if f.problems:
            verdict = styled("[error]unreadable state[/error]")
        elif codes:
            verdict = styled("[error]hazard {}[/error]" + (" (gate)" if f.gated else ""), ",".join(codes))
        elif f.hazards:
            verdict = styled("[warning]safe, see notes[/warning]")
        else:
            verdict = styled("[ok]safe[/ok]")
        user = (f.commit_user or "?")[:8]
        table.add_row(
            styled("{}" + (" [dim](savepoint)[/dim]" if f.kind == "savepoint" else ""), _name(f.checkpoint, r.root)),
            user, latest, _ids([c.identifier for c in f.committables]),
            _ids([c.identifier for c in f.committables if c.recommitted]), verdict,
        )  # fmt: skip
    console.print(table)
    for f in r.forecasts:
        name = _name(f.checkpoint, r.root)
        for p in f.problems:
            console.print(styled("[error]state[/error] {}: {}", name, p))
        for h in f.hazards:
            style = "error" if h.severe else "warning"
            console.print(styled(f"[{style}]{{}}[/{style}] {{}}: {{}}", h.code, name, h.message))
    for uri, err in r.unreadable.items():
        console.print(styled("[error]unreadable[/error] {}: {}", short_uri(uri, r.root), err))
    if r.without_sink:
        console.print(f"{len(r.without_sink)} checkpoint(s) hold no Paimon committer state for this table")
    for t in r.tags:
        where = "its savepoint is here" if t["checkpoint_present"] else "no savepoint of it here"
        console.print(f"tag {t['name']} -> snapshot {t['snapshot']} ({where})")
    console.print(styled("[ok]passed[/ok]" if r.ok else "[error]FAILED[/error]"))


def orphans(console: Any, plan: Any) -> None:
    from rich.table import Table

    from ckptctl.paimon.anchors import iso_time

    table = Table(title=f"paimon orphans {plan.table}", title_justify="left")
    table.add_column("file", overflow="fold")
    table.add_column("size", justify="right")
    table.add_column("decision")
    for c in plan.candidates[:50]:
        table.add_row(plan.relative(c.path), human_bytes(c.size), styled("[ok]delete[/ok]"))
    for h in plan.held[:50]:
        table.add_row(h["path"], human_bytes(h["size"]),
                      styled("[warning]keep: checkpoint {} holds it[/warning]", _ids(h["checkpoints"])))  # fmt: skip
    for u in plan.undated[:50]:
        table.add_row(plan.relative(u["path"]), human_bytes(u["size"]),
                      styled("[warning]keep: no age (mtime missing or before 2016)[/warning]"))  # fmt: skip
    for f in plan.in_flight[:50]:
        table.add_row(plan.relative(f["path"]), human_bytes(f["size"]),
                      styled("[warning]keep: not older than a writer's newest checkpoint less --margin (in flight)[/warning]"))  # fmt: skip
    for f in plan.after_last_commit[:50]:
        table.add_row(plan.relative(f["path"]), human_bytes(f["size"]),
                      styled("[warning]keep: written after the table's latest commit less --margin[/warning]"))  # fmt: skip
    console.print(table)
    hidden = sum(max(0, len(rows) - 50) for rows in (plan.candidates, plan.held, plan.undated, plan.in_flight,
                                                      plan.after_last_commit))  # fmt: skip
    if hidden:
        console.print(f"... and {hidden} more rows (--json lists every file)")
    if plan.in_flight_from is not None and plan.in_flight:
        console.print(f"in flight: files from {iso_time(plan.in_flight_from)} (a scanned writer's newest checkpoint "
                      f"less --margin {plan.margin:g}s) are kept")  # fmt: skip
    if plan.after_commit_from is not None and plan.after_last_commit:
        console.print(f"after the latest commit: data, changelog and index files from {iso_time(plan.after_commit_from)} "
                      f"({plan.latest_commit['snapshot']} less --margin) are kept")  # fmt: skip
    for r in plan.refusals:
        console.print(styled("[error]refused[/error] {}", r["message"]))
    for w in plan.warnings:
        console.print(styled("[warning]warning[/warning] {}", w))
    total = sum(c.size for c in plan.candidates)
    console.print(
        f"{len(plan.candidates)} Paimon orphan(s), {human_bytes(total)} to delete; {len(plan.held)} kept because a "
        "Flink checkpoint still holds them"
        + (f", {len(plan.undated)} without an age" if plan.undated else "")
        + (f", {len(plan.in_flight)} possibly in flight" if plan.in_flight else "")
        + (
            f", {len(plan.after_last_commit)} written after the latest commit"
            if plan.after_last_commit
            else ""
        )
    )
    if plan.refusals:
        console.print(styled("[error]blocked: nothing may be deleted[/error]"))
    elif plan.written_to:
        console.print(f"review, then: ckptctl gc apply {plan.written_to}")
