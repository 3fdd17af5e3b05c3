"""``ckptctl show``: parses, reads the checkpoint (:func:`ckptctl.inspect.show.show_checkpoint`),
renders (:mod:`ckptctl.cli.render.show`)."""

from __future__ import annotations

from functools import partial
from typing import Annotated

import typer

from ckptctl.cli.base import (
    Command,
    EndpointOpt,
    RebaseOpt,
    app,
    as_json,
    command,
    get_output,
    storage_and_rebase,
    warn_moved,
)


@app.command("show", cls=Command)
@command
def show_command(
    path: Annotated[
        str,
        typer.Argument(
            metavar="CHECKPOINT", help="A checkpoint or savepoint directory, or its _metadata file."
        ),
    ],
    s3_endpoint: EndpointOpt = None,
    rebase: RebaseOpt = None,
) -> None:
    """Show one checkpoint: operators → subtasks → state handles, key groups, sizes and files."""
    from ckptctl.cli.render import show as render
    from ckptctl.inspect.show import show_checkpoint

    out = get_output()
    storage, mappings = storage_and_rebase(s3_endpoint, rebase)
    shown = show_checkpoint(storage, path, mappings, states=as_json())  # the states catalog: JSON only
    warn_moved(out, shown.checkpoint)
    for warning in shown.warnings:
        out.warn(warning)
    out.result(shown, partial(render.report, named=path))
