"""``ckptctl refs``: parses, reads the checkpoints (:func:`ckptctl.inspect.refs.read_references`),
renders the table or JSON (:mod:`ckptctl.cli.render.refs`) or writes the chosen format
(:func:`ckptctl.inspect.refs.write_references`)."""

from __future__ import annotations

import sys
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
    writable_outputs,
)


@app.command("refs", cls=Command)
@command
def refs_command(
    path: Annotated[
        str,
        typer.Argument(
            metavar="CHECKPOINT|ROOT",
            help="A checkpoint/savepoint (directory or _metadata) or a root to scan.",
        ),
    ],
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format",
            "-f",
            metavar="FORMAT",
            help="table, json, ndjson, csv or parquet (default: table, or from the -o file's extension).",
        ),
    ] = None,
    output_file: Annotated[
        str | None,
        typer.Option(
            "--output",
            "-o",
            metavar="FILE",
            help="Write to FILE instead of stdout; .json, .ndjson, .csv or .parquet sets the format.",
        ),
    ] = None,
    s3_endpoint: EndpointOpt = None,
    rebase: RebaseOpt = None,
) -> None:
    """The reference map: one row per (checkpoint, operator, subtask, handle, file)."""
    from ckptctl.inspect.refs import read_references, reference_map, refs_format, write_references

    fmt = refs_format(fmt, as_json(), output_file)
    writable_outputs(output_file)
    out = get_output(json=fmt != "table")
    storage, mappings = storage_and_rebase(s3_endpoint, rebase)
    refs = read_references(storage, path, mappings, out.term.iterate("reading _metadata"))
    warn_moved(out, *refs.checkpoints)
    if fmt in ("table", "json") and not output_file:
        from ckptctl.cli.render import refs as render

        out.result(reference_map(refs), partial(render.report, named=path))
    else:
        write_references(fmt, refs, output_file, sys.stdout)
    if refs.unreadable:  # the readable ones were written; each unreadable one is named, and the exit says so
        for error in refs.unreadable.values():
            out.warn(f"not in the reference map: {error}")
        raise typer.Exit(1)
