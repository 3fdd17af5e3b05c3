"""``ckptctl paimon``: each checkpoint against the Paimon table, and the orphan plan."""

from __future__ import annotations

from typing import Any

from ckptctl.cli.output import human_bytes
from ckptctl.cli.terminal import styled
from ckptctl.inspect.views import short_uri

_CODE_TEXT = {
    "A": "re-commits after expiration",
    "B": "files a restore needs are gone",
    "C": "rewinds committed data",
    "D": "files a restore needs are Paimon orphans",
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


def _base(r: Any) -> str:
    """What rows are named relative to: the root, or the one job directory every checkpoint below
    it lies in (rows then read chk-N, not a job id folded over four lines)."""
    parents = {f.checkpoint.rstrip("/").rpartition("/")[0] for f in r.forecasts}
    if len(parents) == 1 and len(r.forecasts) > 1:
        (parent,) = parents
        if parent.startswith(r.root.rstrip("/") + "/"):
            return parent
    return r.root


def report(console: Any, r: Any) -> None:
    from ckptctl.cli.output import Table

    base = _base(r)
    users = {f.commit_user for f in r.forecasts}
    one_user = len(users) == 1
    table = Table(title=f"paimon {base} -> {r.table}", title_justify="left")
    for name, justify in (("checkpoint", "left"), ("commit user", "left"), ("user's latest", "right"),
                          ("holds", "left"), ("restore commits", "left"), ("verdict", "left")):  # fmt: skip
        if name == "commit user" and one_user:
            continue  # one user: named whole below the table (a UUID column would fold every row)
        table.add_column(name, justify=justify, overflow="fold")
    for f in r.forecasts:
        latest = "-" if f.latest is None else f"#{f.latest.id} (id {f.latest.commit_identifier})"
        if f.latest is None and f.commit_user:
            latest = styled("[warning]none[/warning]")
        codes = sorted({h.code for h in f.hazards if h.severe})
        if f.problems:
            verdict = styled("[error]unreadable state[/error]")
        elif codes:
            verdict = styled("[error]hazard {}[/error]{}", ",".join(codes), " (gate)" if f.gated else "")
        elif f.hazards:
            verdict = styled("[warning]safe, see notes[/warning]")
        else:
            verdict = styled("[ok]safe[/ok]")
        cells = [
            styled("{} [dim](savepoint)[/dim]", _name(f.checkpoint, base)) if f.kind == "savepoint" else _name(f.checkpoint, base),
            *([] if one_user else [f.commit_user or "?"]), latest,
            _ids([c.identifier for c in f.committables]),
            _ids([c.identifier for c in f.committables if c.recommitted]), verdict,
        ]  # fmt: skip
        table.add_row(*cells)
    console.print(table)
    if one_user and r.forecasts:
        console.print(f"commit user {next(iter(users)) or '?'}", overflow="fold")
    for f in r.forecasts:
        name = _name(f.checkpoint, base)
        for p in f.problems:
            console.print(styled("[error]state[/error] {}: {}", name, p))
        if f.latest is None and f.recommit_reason and not any(h.code == "A" for h in f.hazards):
            console.print(f"note {name}: {f.recommit_reason}")
        for h in f.hazards:
            style = "error" if h.severe else "warning"
            console.print(styled(f"[{style}]{{}}[/{style}] {{}}: {{}}", h.code, name, h.message))
            for path in h.files:
                console.print(f"  {path}", overflow="fold")
    for uri, err in r.unreadable.items():
        console.print(styled("[error]unreadable[/error] {}: {}", short_uri(uri, r.root), err))
    if r.without_sink:
        console.print(f"{len(r.without_sink)} checkpoint(s) hold no Paimon committer state for this table")
    for t in r.tags:
        where = "its savepoint is here" if t["checkpoint_present"] else "no savepoint of it here"
        console.print(f"tag {t['name']} -> snapshot {t['snapshot']} ({where})")
    for s in r.newest_safe:
        console.print(_newest_safe(s, base))
    console.print(styled("[ok]passed[/ok]") if r.ok else styled("[error]FAILED[/error]"))


def _newest_safe(s: dict[str, Any], root: str) -> Any:
    from ckptctl.paimon.restore import Replay, replay_text

    job = f"job {s['job_id']}" if s["job_id"] else "the job"
    if s["checkpoint"] is None:
        return styled("[error]no retained checkpoint of {} restores safely[/error]", job)
    name = _name(s["checkpoint"], root)
    what = (
        "newest safe checkpoint"
        if s["safe"]
        else "[warning]no safe checkpoint[/warning]; the newest that restores"
    )
    taken = " (the one a restore takes)" if s["is_the_restored"] else ""
    replay = Replay(**{k: v for k, v in s["replay"].items() if k != "commit_identifiers"},
                    identifiers=s["replay"]["commit_identifiers"])  # fmt: skip
    again = f"commits {_ids(s['recommits'])} again and " if s["recommits"] else ""
    replays = (
        f"writes again {replay_text(replay)}" if replay.snapshots else "replays nothing already committed"
    )
    return styled(what + " of {}: {}{}; restoring it {}{}", job, name, taken, again, replays)


def orphans(console: Any, plan: Any) -> None:
    from ckptctl.cli.output import Table
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
