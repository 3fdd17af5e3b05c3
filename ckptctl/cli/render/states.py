"""``ckptctl states``: each operator's states, sizes and (``--deep``) stale TTL state."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ckptctl.cli.output import Col, fitted_table, human_bytes, styled

if TYPE_CHECKING:
    from ckptctl.cli.terminal import Terminal
    from ckptctl.states import StatesReport


def report(console: Any, r: StatesReport, named: str, term: Terminal) -> None:
    """``states``: each operator's states, sizes and (--deep) stale TTL state; what the deep scan
    could not read goes to the terminal (stderr)."""
    from rich import box

    deep = r.deep
    kind = (r.savepoint_format or "").lower() + " " if r.savepoint_format else ""
    console.print(f"states of {kind}{r.kind} {r.checkpoint_id} ({named})", style="bold")
    if deep:
        console.print(
            f"ages measured from {_ms_time(deep['now_ms'])} ({deep['now_source']}); "
            f"{deep['handles']} keyed handles read on {deep['engine']} in {deep['elapsed_seconds']:.1f}s"
        )  # fmt: skip
    if not r.operators:
        console.print("no operator holds state")
    for op in r.operators:
        title = op["name"] or op["uid"] or op["operator_id"]
        parts = [
            f"{op['operator_id'][:8]}…" if op["name"] or op["uid"] else None,
            f"p={op['parallelism']}",
        ]
        if op["keyed_handles"]:
            parts.append(f"keyed {human_bytes(op['keyed_bytes'])} in {op['keyed_handles']} handles "
                         f"({op['keyed_backend']})")  # fmt: skip
        if op["operator_handles"]:
            parts.append(f"operator state {human_bytes(op['operator_bytes'])}")
        if op["key_serializer"]:
            from ckptctl.states import short_class

            parts.append(f"key {short_class(op['key_serializer']['class'])}")
        console.print()
        console.print(styled("[bold]{}[/bold]  {}", title, "  ".join(p for p in parts if p)))
        if op.get("paimon"):
            pm = op["paimon"]
            ids = [c["identifier"] for c in pm["committables"]]
            files = sum(c["files"] for c in pm["committables"])
            line = f"Paimon sink: commit user {pm['commit_user'] or ', '.join(map(str, pm['commit_users']))}"
            if ids:
                line += f"; {len(ids)} uncommitted committable(s) {', '.join(map(str, ids))} naming {files} file(s)"
            if pm["pending_tag_ids"]:
                line += f"; savepoint tags pending: {', '.join(map(str, pm['pending_tag_ids']))}"
            console.print(line)
            for problem in pm["problems"]:
                console.print(styled("[error]{}[/error]", problem))
        states = list(op["states"])

        def size_of(s):
            u = s.get("usage")
            return (u or {}).get("bytes") if u else s["bytes"]

        states.sort(key=lambda s: (-(size_of(s) or 0), s["name"]))
        cols: dict[str, list[Any]] = {
            h: [] for h in ("state", "kind", "entries", "size", "stale", "serializer")
        }
        for s in states:
            u = s.get("usage")
            name = s["name"]
            if s["timers"] and name.startswith("_timer_state/"):
                name = name[len("_timer_state/") :]  # the kind says "timers"
            cols["state"].append(name)
            cols["kind"].append(
                styled("{}" + (" [accent]ttl[/accent]" if s["ttl"] else ""),
                       s["kind"].lower().replace("split_distribute", "split"))
            )  # fmt: skip
            if u is not None:
                cols["entries"].append(f"{u['entries']:,}")
            elif s["elements"] is not None:
                cols["entries"].append(f"{s['elements']:,} el.")
            else:
                cols["entries"].append("-")
            cols["size"].append(human_bytes(size_of(s)))
            cols["stale"].append(_stale(s, u))
            # compact: "List<Ttl<Long>>" for ListSerializer<TtlSerializer<LongSerializer>>
            ser = (s["serializer_summary"].get("VALUE_SERIALIZER") or "").replace("Serializer", "")
            cols["serializer"].append(ser)
        if not deep:
            del cols["stale"]
            for h in ("entries", "size"):
                if all(c == "-" for c in cols[h]):
                    del cols[h]
        for h in ("stale", "serializer"):
            if h in cols and not any(cols[h]):
                del cols[h]
        columns = [
            Col(
                h,
                cells,
                justify="right" if h in ("entries", "size") else "left",
                fold=h in ("state", "serializer"),
            )
            for h, cells in cols.items()
        ]
        table = fitted_table(
            console, columns, drop=("serializer", "entries"), box=box.SIMPLE_HEAD, pad_edge=False,
            collapse_padding=True,
        )  # fmt: skip
        console.print(table)
        for s in states:  # the age histogram of each TTL state, oldest bucket last
            hist = (s.get("usage") or {}).get("age_histogram") or []
            if hist:
                total = sum(b["elements"] for b in hist) or 1
                cells = ", ".join(f"{b['bucket']} {b['elements'] * 100 / total:.0f}%" for b in hist)
                console.print(f"  {s['name']} last access: {cells}", overflow="fold")
    if deep:
        for line in deep["not_scanned"]:
            term.warn(line)
        for p in deep["problems"]:
            term.error(p)


def _age(ms: int | None) -> str:
    if ms is None:
        return "-"
    s = ms / 1000
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= n:
            return f"{s / n:.3g}{unit}"
    return f"{s:.3g}s"


def _bar(frac: float, width: int = 5) -> str:
    full = round(frac * width)
    return "█" * full + "░" * (width - full)


def _stale(s: dict[str, Any], u: dict[str, Any] | None) -> Any:
    if u is None or not s["ttl"]:
        return ""
    decoded = u["ttl_elements_decoded"]
    if not decoded:
        return styled("[warning]not decodable[/warning]") if u["ttl_entries_not_decodable"] else "-"
    if u["expired_elements"] is None:
        return f"oldest {_age(u['oldest_age_ms'])}"
    frac = u["expired_elements"] / decoded
    text = f"{_bar(frac)} {frac * 100:.0f}% >{_age(u['ttl_ms'])} {human_bytes(u['expired_bytes'])}"
    if u["ttl_entries_not_decodable"]:
        text += f" (+{u['ttl_entries_not_decodable']} not decodable)"
    return text


def _ms_time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"
