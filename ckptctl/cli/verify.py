"""``ckptctl verify``: will it restore? On Spark or in-process (:func:`ckptctl.verify.verify`), rendered by
:mod:`ckptctl.cli.render.verify`."""

from __future__ import annotations

from typing import Annotated

import typer

from ckptctl.cli.base import (
    Command,
    EndpointOpt,
    EngineOpt,
    MasterOpt,
    RebaseOpt,
    SavepointsOpt,
    app,
    command,
    engine_choice,
    get_output,
    storage_and_rebase,
    writable_outputs,
)


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
    quick: Annotated[
        bool,
        typer.Option(
            "--quick",
            help="Existence and sizes only, from listings: no file is read (on S3 about one request per "
            "1,000 files instead of one per SST).",
        ),
    ] = False,
    master: MasterOpt = None,
    engine: EngineOpt = "auto",
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
    s3_endpoint: EndpointOpt = None,
    rebase: RebaseOpt = None,
) -> None:
    """Will it restore? Every needed file exists with its recorded size and is sound (--deep: RocksDB key groups)."""
    from functools import partial

    from ckptctl.checkpoint.targets import checkpoints_at, display_base
    from ckptctl.cli.render import verify as render
    from ckptctl.errors import CkptError
    from ckptctl.verify import verify, write_histogram, write_report
    from ckptctl.verify.run import QUICK_AND_DEEP

    chosen = engine_choice(engine, master)
    writable_outputs(report, histogram)
    for option, value in (("--report", report), ("--histogram", histogram)):
        if value and not value.lower().endswith(".parquet"):
            raise CkptError(f"{option} writes Parquet: name the file *.parquet (got {value})")
    if histogram and not deep:
        raise CkptError("--histogram needs --deep")
    if quick and deep:
        raise CkptError(QUICK_AND_DEEP)
    out = get_output()
    storage, mappings = storage_and_rebase(s3_endpoint, rebase)
    unreadable: dict[str, str] = {}
    # the paths as Flink will open them: an inferred mapping is reported, never applied
    checkpoints, root = checkpoints_at(
        storage,
        path,
        mappings,
        out.term.iterate("reading _metadata"),
        apply_inferred=False,
        unreadable=unreadable,
    )
    with out.term.bar("verifying" + (" (deep)" if deep else " (sizes only)" if quick else "")) as bar:
        result = verify(
            storage, checkpoints, deep=deep, quick=quick, engine=chosen,
            progress=bar.callback, on_total=bar.total,
            roots=[] if len(checkpoints) == 1 and checkpoints[0].location.uri == root else [root],
            savepoint_dirs=savepoints or (),
        )  # fmt: skip
    result.unreadable = unreadable
    if report:
        write_report(result, report)
    if histogram:
        write_histogram(result, histogram)
    base = display_base(root, checkpoints)
    out.result(result, partial(render.report, root=base, named=path, term=out.term))
    if not result.ok:
        raise typer.Exit(1)
