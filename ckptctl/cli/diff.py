"""``ckptctl diff``: parses, compares the two checkpoints (:func:`ckptctl.inspect.diff.diff_checkpoints`),
renders (:mod:`ckptctl.cli.render.diff`)."""

from __future__ import annotations

from typing import Annotated

import typer

from ckptctl.cli.base import (
    Command,
    EndpointOpt,
    RebaseOpt,
    app,
    command,
    get_output,
    storage_and_rebase,
    warn_moved,
)


@app.command("diff", cls=Command)
@command
def diff_command(
    a: Annotated[str, typer.Argument(metavar="A", help="The older checkpoint (directory or _metadata).")],
    b: Annotated[str, typer.Argument(metavar="B", help="The newer checkpoint (directory or _metadata).")],
    s3_endpoint: EndpointOpt = None,
    rebase: RebaseOpt = None,
) -> None:
    """Files added, removed and reused between two checkpoints, and the bytes each uploaded."""
    from ckptctl.cli.render import diff as render
    from ckptctl.inspect.diff import diff_checkpoints

    out = get_output()
    storage, mappings = storage_and_rebase(s3_endpoint, rebase)
    diff = diff_checkpoints(storage, a, b, mappings)
    warn_moved(out, *diff.checkpoints)
    for warning in diff.warnings:
        out.warn(warning)
    out.result(diff, render.report)
