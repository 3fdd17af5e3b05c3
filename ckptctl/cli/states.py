"""``ckptctl states``: which states each operator holds, how big, and how much of it is stale (TTL)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ckptctl.cli import (
    Command,
    EndpointOpt,
    EngineOpt,
    JsonOpt,
    MasterOpt,
    RebaseOpt,
    _context,
    app,
    command,
    engine_choice,
)


@app.command("states", cls=Command)
@command
def states_command(
    path: Annotated[
        str,
        typer.Argument(
            metavar="CHECKPOINT", help="A checkpoint or savepoint directory, or its _metadata file."
        ),
    ],
    deep: Annotated[
        bool,
        typer.Option(
            "--deep", help="Also open every keyed RocksDB instance: entries, bytes and TTL ages per state."
        ),
    ] = False,
    ttl: Annotated[
        list[str] | None,
        typer.Option(
            "--ttl",
            metavar="[NAME=]DURATION",
            help="With --deep: count TTL entries older than this (7d, 12h, 30m) as expired; NAME=7d for one "
            "state. Repeatable. The checkpoint does not store the TTL.",
        ),
    ] = None,  # fmt: skip
    now: Annotated[
        str | None,
        typer.Option(
            "--now",
            metavar="TIME",
            help="With --deep: the time ages are measured from (epoch millis or ISO-8601; default: the "
            "_metadata modification time).",
        ),
    ] = None,  # fmt: skip
    master: MasterOpt = "local[*]",
    engine: EngineOpt = "spark",
    histogram: Annotated[
        str | None,
        typer.Option(
            "--histogram",
            metavar="FILE",
            help="With --deep: entries/bytes per state and key group, and per TTL age bucket (Parquet).",
        ),
    ] = None,  # fmt: skip
    as_json: JsonOpt = False,
    s3_endpoint: EndpointOpt = None,
    rebase: RebaseOpt = None,
) -> None:
    """Which states each operator keeps (name, kind, TTL, serializers, size); --deep: entries and stale TTL state."""
    from ckptctl.cli.inspect import checked_path, warn_moved
    from ckptctl.cli.output import make_output
    from ckptctl.errors import CkptError
    from ckptctl.refs import load_checkpoint
    from ckptctl.states import catalog, deep_scan, parse_now, parse_ttls, write_histogram

    engine = engine_choice(engine)
    for opt, given in (("--histogram", histogram), ("--ttl", ttl), ("--now", now)):
        if given and not deep:
            raise CkptError(f"{opt} needs --deep")
    ttl_default, ttl_named = parse_ttls(ttl or [])
    now_ms = parse_now(now) if now is not None else None
    out = make_output(as_json)
    storage, mappings = _context(s3_endpoint, rebase)
    ck = load_checkpoint(storage, checked_path(storage, path), mappings)
    warn_moved(out, ck)
    cat = catalog(storage, ck)
    result = None
    if deep:
        if engine == "spark":
            from ckptctl.verify import spark_session

            with out.status(f"starting Spark ({master}) …"):
                spark_session(master)
        result = deep_scan(
            storage, ck, cat, now_ms=now_ms, ttl_default=ttl_default, ttl_named=ttl_named, engine=engine,
            master=master,
        )  # fmt: skip
        if histogram:
            write_histogram(result, ck.location.uri, histogram)
    report = states_report(ck, cat, result)
    if as_json:
        out.json(report)
    else:
        _render(out, report, path)
    if result is not None and result.problems:
        raise typer.Exit(1)


def states_report(ck, cat, result) -> dict[str, Any]:
    md = ck.metadata
    ops = []
    for oc in cat:
        if not oc.has_state:
            continue
        view = oc.to_json()
        if result is not None:
            for s in view["states"]:
                u = result.usage.get((oc.operator_id, s["name"]))
                s["usage"] = u.to_json() if u is not None else None
        ops.append(view)
    deep = None
    if result is not None:
        deep = {
            "engine": result.engine, "now_ms": result.now_ms, "now_source": result.now_source,
            "handles": result.handles, "problems": result.problems, "not_scanned": result.not_scanned,
            "elapsed_seconds": round(result.elapsed, 3),
        }  # fmt: skip
    return {
        "path": ck.location.uri,
        "checkpoint_id": md.checkpoint_id,
        "kind": ck.kind,
        "savepoint_format": md.properties.savepoint_format if md.properties else None,
        "operators": ops,
        "stateless_operators": sum(1 for oc in cat if not oc.has_state),
        "deep": deep,
    }


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


def _render(out, report: dict[str, Any], named: str) -> None:
    from rich import box

    from ckptctl.cli.output import Col, _escape, fitted_table, human_bytes

    deep = report["deep"]
    kind = (report["savepoint_format"] or "").lower() + " " if report["savepoint_format"] else ""
    out.out.print(
        _escape(f"states of {kind}{report['kind']} {report['checkpoint_id']} ({named})"), style="bold"
    )
    if deep:
        out.out.print(
            _escape(f"ages measured from {_ms_time(deep['now_ms'])} ({deep['now_source']}); "
                    f"{deep['handles']} RocksDB instances on {deep['engine']} in {deep['elapsed_seconds']:.1f}s")
        )  # fmt: skip
    if not report["operators"]:
        out.out.print("no operator holds state")
    for op in report["operators"]:
        title = op["name"] or op["uid"] or op["operator_id"]
        parts = [f"{op['operator_id'][:8]}…" if op["name"] or op["uid"] else None, f"p={op['parallelism']}"]
        if op["keyed_handles"]:
            parts.append(f"keyed {human_bytes(op['keyed_bytes'])} in {op['keyed_handles']} handles "
                         f"({op['keyed_backend']})")  # fmt: skip
        if op["operator_handles"]:
            parts.append(f"operator state {human_bytes(op['operator_bytes'])}")
        if op["key_serializer"]:
            from ckptctl.states import short_class

            parts.append(f"key {short_class(op['key_serializer']['class'])}")
        out.out.print()
        out.out.print(f"[bold]{_escape(title)}[/bold]  " + _escape("  ".join(p for p in parts if p)))
        states = list(op["states"])

        def size_of(s):
            u = s.get("usage")
            return (u or {}).get("bytes") if u else s["bytes"]

        states.sort(key=lambda s: (-(size_of(s) or 0), s["name"]))
        cols: dict[str, list[str]] = {
            h: [] for h in ("state", "kind", "entries", "size", "stale", "serializer")
        }
        for s in states:
            u = s.get("usage")
            name = s["name"]
            if s["timers"] and name.startswith("_timer_state/"):
                name = name[len("_timer_state/") :]  # the kind says "timers"
            cols["state"].append(_escape(name))
            cols["kind"].append(
                s["kind"].lower().replace("split_distribute", "split")
                + (" [cyan]ttl[/cyan]" if s["ttl"] else "")
            )
            if u is not None:
                cols["entries"].append(f"{u['entries']:,}")
            elif s["elements"] is not None:
                cols["entries"].append(f"{s['elements']:,} el.")
            else:
                cols["entries"].append("-")
            cols["size"].append(human_bytes(size_of(s)))
            cols["stale"].append(_stale(s, u))
            # compact: "List<Ttl, Long, Long>" for ListSerializer<TtlSerializer, LongSerializer, LongSerializer>
            ser = (s["serializer_summary"].get("VALUE_SERIALIZER") or "").replace("Serializer", "")
            cols["serializer"].append(_escape(ser))
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
            out.out, columns, drop=("serializer", "entries"), box=box.SIMPLE_HEAD, pad_edge=False,
            collapse_padding=True,
        )  # fmt: skip
        out.out.print(table)
        for s in states:  # the age histogram of each TTL state, oldest bucket last
            hist = (s.get("usage") or {}).get("age_histogram") or []
            if hist:
                total = sum(b["elements"] for b in hist) or 1
                cells = ", ".join(f"{b['bucket']} {b['elements'] * 100 / total:.0f}%" for b in hist)
                out.out.print(_escape(f"  {s['name']} last access: {cells}"), overflow="fold")
    if deep:
        for line in deep["not_scanned"]:
            out.warn(_escape(line))
        for p in deep["problems"]:
            out.error(p)


def _stale(s: dict[str, Any], u: dict[str, Any] | None) -> str:
    from ckptctl.cli.output import human_bytes

    if u is None or not s["ttl"]:
        return ""
    decoded = u["ttl_elements_decoded"]
    if not decoded:
        return "[yellow]not decodable[/yellow]" if u["ttl_entries_not_decodable"] else "-"
    if u["expired_elements"] is None:
        return f"oldest {_age(u['oldest_age_ms'])}"
    frac = u["expired_elements"] / decoded
    text = f"{_bar(frac)} {frac * 100:.0f}% >{_age(u['ttl_ms'])} {human_bytes(u['expired_bytes'])}"
    if u["ttl_entries_not_decodable"]:
        text += f" (+{u['ttl_entries_not_decodable']} not decodable)"
    return text


def _ms_time(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"
