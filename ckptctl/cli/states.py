"""``ckptctl states``: which states each operator holds, how big, and how much of it is stale (TTL)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from ckptctl.cli.base import (
    Command,
    EndpointOpt,
    EngineOpt,
    MasterOpt,
    RebaseOpt,
    app,
    command,
    engine_choice,
    get_output,
    storage_and_rebase,
    writable_outputs,
)
from ckptctl.cli.params import EPOCH_MILLIS, TTL

if TYPE_CHECKING:
    from ckptctl.states import StatesReport


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
            "--deep",
            help="Also read every keyed handle (RocksDB, heap snapshots): entries, bytes and TTL ages per state.",
        ),
    ] = False,
    ttl: Annotated[
        list[Any] | None,  # (state name or None, milliseconds): params.TTL
        typer.Option(
            "--ttl",
            parser=TTL,
            metavar="[NAME=]DURATION",
            help="With --deep: count TTL entries older than this (7d, 12h, 30m) as expired; NAME=7d for one "
            "state. Repeatable. The checkpoint does not store the TTL.",
        ),
    ] = None,  # fmt: skip
    now: Annotated[
        Any,  # epoch milliseconds: params.EPOCH_MILLIS
        typer.Option(
            "--now",
            parser=EPOCH_MILLIS,
            metavar="TIME",
            help="With --deep: the time ages are measured from (epoch millis or ISO-8601; default: the "
            "_metadata modification time).",
        ),
    ] = None,  # fmt: skip
    master: MasterOpt = None,
    engine: EngineOpt = "auto",
    histogram: Annotated[
        str | None,
        typer.Option(
            "--histogram",
            metavar="FILE",
            help="With --deep: entries/bytes per state and key group, and per TTL age bucket (Parquet).",
        ),
    ] = None,  # fmt: skip
    s3_endpoint: EndpointOpt = None,
    rebase: RebaseOpt = None,
) -> None:
    """Which states each operator keeps (name, kind, TTL, serializers, size); --deep: entries and stale TTL state."""
    from functools import partial

    from ckptctl.checkpoint.targets import one_checkpoint
    from ckptctl.cli.base import warn_moved
    from ckptctl.cli.render import states as render
    from ckptctl.errors import CkptError
    from ckptctl.states import catalog, deep_scan, write_histogram

    chosen = engine_choice(engine, master)
    writable_outputs(histogram)
    for opt, given in (("--histogram", histogram), ("--ttl", ttl), ("--now", now)):
        if given and not deep:
            raise CkptError(f"{opt} needs --deep")
    ttl_named = {name: ms for name, ms in ttl or () if name is not None}
    ttl_default = next((ms for name, ms in reversed(ttl or ()) if name is None), None)
    out = get_output()
    storage, mappings = storage_and_rebase(s3_endpoint, rebase)
    ck = one_checkpoint(storage, path, mappings)
    warn_moved(out, ck)
    cat = catalog(storage, ck)
    result = None
    if deep:
        result = deep_scan(
            storage, ck, cat, now_ms=now, ttl_default=ttl_default, ttl_named=ttl_named, engine=chosen,
        )  # fmt: skip
        if histogram:
            write_histogram(result, ck.location.uri, histogram)
    report = states_report(ck, cat, result)
    _add_paimon(out, storage, ck, report)
    out.result(report, partial(render.report, named=path, term=out.term))
    if result is not None and result.problems:
        raise typer.Exit(1)


def states_report(ck, cat, result) -> StatesReport:
    from ckptctl.states import StatesReport

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
    return StatesReport(
        path=ck.location.uri,
        checkpoint_id=md.checkpoint_id,
        kind=ck.kind,
        savepoint_format=md.properties.savepoint_format if md.properties else None,
        operators=ops,
        stateless_operators=sum(1 for oc in cat if not oc.has_state),
        deep=deep,
    )


def _add_paimon(out, storage, ck, report: StatesReport) -> None:
    """An operator of Paimon's Flink sink gets ``paimon``: its commit user and the committables its
    state holds, decoded (what a restore hands to Paimon; ``ckptctl paimon`` judges them)."""
    from ckptctl.errors import CkptError
    from ckptctl.paimon.sinkstate import read_sink_state, sink_handles

    if next(sink_handles(ck), None) is None:
        return
    try:
        state = read_sink_state(storage, ck)
    except CkptError as e:
        out.warn(f"Paimon sink state not decodable: {e}")
        return
    by_id = {op.operator_id: op for op in state.operators}
    for view in report.operators:
        op = by_id.get(view["operator_id"])
        if op is None:
            continue
        view["paimon"] = {
            "commit_user": op.commit_user, "commit_users": op.distinct_commit_users,
            "committables": [
                {"identifier": c.identifier, "watermark": c.watermark, "messages": len(c.messages),
                 "files": sum(len(v) for m in c.messages for v in m.lists.values()),
                 "manifest_version": c.manifest_version, "message_version": c.message_version}
                for c in op.committables
            ],
            "pending_tag_ids": op.tag_ids, "writer_states": len(op.writer_states), "problems": op.problems,
        }  # fmt: skip
