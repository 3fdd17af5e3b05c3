"""``ckptctl ls``: parses, lists the root (:func:`ckptctl.inspect.ls.list_root`), renders
(:mod:`ckptctl.cli.render.ls`)."""

from __future__ import annotations

from functools import partial
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


@app.command("ls", cls=Command)
@command
def ls_command(
    root: Annotated[
        str,
        typer.Argument(metavar="ROOT", help="A checkpoint root, a job directory, or a savepoint directory."),
    ],
    s3_endpoint: EndpointOpt = None,
    rebase: RebaseOpt = None,
) -> None:
    """List jobs, checkpoints and savepoints with format version, sizes and file counts."""
    from ckptctl.cli.render import ls as render
    from ckptctl.inspect.ls import list_root

    out = get_output()
    storage, mappings = storage_and_rebase(s3_endpoint, rebase)
    listing = list_root(storage, root, mappings, out.term.iterate("reading _metadata"))
    warn_moved(out, inferred=listing.inferred)
    if not listing.rows:
        out.warn(f"no checkpoints or savepoints found under {listing.root}")
    out.result(listing, partial(render.report, named=root))
    if listing.errors:
        for error in listing.errors:
            out.error(error)
        raise typer.Exit(1)
