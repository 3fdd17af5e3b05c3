"""``ckptctl states``: which states each operator holds, how big, and how much of it is stale (TTL)."""

from __future__ import annotations

from typing import Annotated, Any

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
    from ckptctl.states.document import states_report

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
    report = states_report(
        storage, ck, deep=deep, now_ms=now, ttl_default=ttl_default, ttl_named=ttl_named, engine=chosen,
        histogram=histogram,
    )  # fmt: skip
    for warning in report.warnings:
        out.warn(warning)
    out.result(report, partial(render.report, named=path, term=out.term))
    if report.deep is not None and report.deep["problems"]:
        raise typer.Exit(1)
