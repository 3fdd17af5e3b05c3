"""``ckptctl check``: the CI gate (:func:`ckptctl.check.run_check`), rendered by :mod:`ckptctl.cli.render.check`."""

from __future__ import annotations

from typing import Annotated

import typer

from ckptctl.cli.base import (
    Command,
    EndpointOpt,
    RebaseOpt,
    SavepointsOpt,
    app,
    command,
    get_output,
    storage_and_rebase,
    writable_outputs,
)
from ckptctl.cli.params import BYTES


@app.command("check", cls=Command)
@command
def check_command(
    root: Annotated[
        str,
        typer.Argument(metavar="ROOT", help="A checkpoint root (every job and savepoint below is checked)."),
    ],
    max_orphan_bytes: Annotated[
        int | None,
        typer.Option(
            "--max-orphan-bytes",
            parser=BYTES,
            help="Fail when orphaned files exceed this many bytes (e.g. 10GiB).",
            metavar="N",
        ),
    ] = None,  # fmt: skip
    savepoints: SavepointsOpt = None,
    quick: Annotated[
        bool,
        typer.Option(
            "--quick",
            help="Existence and sizes only, from the root's one listing: no file is read (no SST footer).",
        ),
    ] = False,
    junit: Annotated[
        str | None, typer.Option("--junit", help="Write a JUnit XML report to this file.", metavar="FILE")
    ] = None,
    ledger: Annotated[
        str | None,
        typer.Option(
            "--ledger",
            metavar="LEDGER",
            help="Also append the checkpoints new since the last run to this history ledger (see `history`).",
        ),
    ] = None,  # fmt: skip
    s3_endpoint: EndpointOpt = None,
    rebase: RebaseOpt = None,
) -> None:
    """CI gate: every _metadata parses, every reference resolves, orphan bytes stay below a limit."""
    from functools import partial

    from ckptctl.check import run_check
    from ckptctl.checkpoint.targets import checked_path
    from ckptctl.cli.render import check as render

    writable_outputs(junit)
    out = get_output()
    storage, mappings = storage_and_rebase(s3_endpoint, rebase)
    report = run_check(
        storage, checked_path(storage, root), mappings, max_orphan_bytes, savepoints or (), quick
    )
    for w in report.warnings:
        out.warn(w)
    if ledger is not None:  # run often, the gate keeps the history num-retained deletes (history.ledger)
        from ckptctl.history.ledger import update_ledger

        update = update_ledger(storage, root, ledger, mappings)
        for f in update.failed:
            out.warn(f"{f['path']}: not in the history ledger: {f['error']}")
    if junit:
        from ckptctl.check import junit_xml

        with open(junit, "w", encoding="utf-8") as f:
            f.write(junit_xml(report.to_json()))
    out.result(report, partial(render.report, named=root))
    if not report.ok:
        raise typer.Exit(1)
