"""Read-only commands: ``ls``, ``show``, ``refs``, ``diff``.

They only read ``_metadata`` files, so they work on a moved or copied directory: the mapping from
the paths Flink wrote to where the files are now is inferred, applied, and reported as a warning
together with the ``--rebase`` option that commands touching the files will need.
"""

from __future__ import annotations

import os
import sys
from functools import partial
from typing import Annotated

import typer

from ckptctl.cli.base import (
    Command,
    EndpointOpt,
    RebaseOpt,
    _context,
    app,
    as_json,
    command,
    get_output,
    writable_outputs,
)


def warn_moved(out, *checkpoints, inferred=()) -> None:
    """One warning per inferred mapping (not per checkpoint: a moved root has dozens), of the
    ``checkpoints`` and of mappings already taken from checkpoints no longer held (``inferred``)."""
    from ckptctl.checkpoint.rebase import moved_warnings

    for warning in moved_warnings([*inferred, *(ck.inferred_rebase for ck in checkpoints)]):
        out.warn(warning)


def _chk_number(metadata_uri: str) -> int:
    """N of the ``chk-N`` directory holding a ``_metadata`` (-1 for any other directory)."""
    from ckptctl.checkpoint.layout import CHK_RE

    m = CHK_RE.match(metadata_uri.rsplit("/", 2)[-2])
    return int(m.group(1)) if m else -1


def _not_a_checkpoint_hint(storage, path: str, error: Exception) -> str:
    """`show ROOT`: the error, plus what to type instead (ls, and the newest checkpoint below)."""
    from ckptctl.storage import StorageError, normalize_uri

    try:
        uri = normalize_uri(path)
        found = [] if storage.stat(uri) is not None else list(storage.find_metadata(uri))  # a file: no hint
    except StorageError:
        found = []
    if not found:
        return str(error)
    # the newest by time, equal times (a copy, a checkout) by checkpoint number
    newest = max(found, key=lambda f: (f.mtime or 0, _chk_number(f.uri), f.uri)).uri.rsplit("/", 1)[0]
    return (
        f"{path} is not a checkpoint but holds {len(found)} (list them: ckptctl ls {path}); "
        f"the newest is {newest}"
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
    from ckptctl import storage as st
    from ckptctl.checkpoint.layout import classify, scan_root
    from ckptctl.checkpoint.refs import load_checkpoint
    from ckptctl.cli.render import ls as render
    from ckptctl.errors import CkptError
    from ckptctl.storage import normalize_uri
    from ckptctl.views import Listing, incomplete_view, summary_view

    out = get_output()
    storage, mappings = _context(s3_endpoint, rebase)
    # what ls shows lives outside the jobs' shared/ and taskowned/: never list those (millions);
    # a plain file lists as nothing, and scan_root refuses it then (no request before the listing)
    unreadable: list[str] = []  # directories below ROOT it may not read: listed as such, the others too
    layout = scan_root(storage, root, storage.list_checkpoint_areas(normalize_uri(root), unreadable))
    locations = layout.locations()
    if not locations and not layout.jobs and not unreadable:  # one rule with check and gc: not "nothing"
        raise CkptError(f"no checkpoints under {layout.root}: no job, checkpoint or savepoint")
    rows = []
    failed = len(unreadable)
    inferred = []  # each checkpoint's inferred mapping, for the warnings: decoded ones are not kept (GBs)
    with out.term.progress(locations, len(locations), "reading _metadata") as items:
        for loc in items:
            if not loc.complete:
                rows.append(incomplete_view(loc))
                continue
            try:
                ck = load_checkpoint(storage, loc, mappings)
            except CkptError as e:
                failed += 1
                rows.append(incomplete_view(loc, error=str(e)))
                continue
            inferred.append(ck.inferred_rebase)
            rows.append(summary_view(ck))
            del ck
    for d in unreadable:  # in its place among its siblings (chk-8 between chk-7 and chk-9)
        row = incomplete_view(classify(d, None), error=f"{d}: permission denied")
        at = next((i for i, r in enumerate(rows) if r["path"] > d and st.parent(r["path"]) == st.parent(d)
                   and (r["checkpoint_id"] or 0) > (row["checkpoint_id"] or 0)), len(rows))  # fmt: skip
        rows.insert(at, row)
    warn_moved(out, inferred=inferred)
    if not rows:
        out.warn(f"no checkpoints or savepoints found under {layout.root}")
    out.result(Listing(layout.root, rows), partial(render.report, named=root))
    if failed:
        for r in rows:
            if r["error"]:
                out.error(r["error"])
        raise typer.Exit(1)


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
    from ckptctl.checkpoint.targets import one_checkpoint
    from ckptctl.cli.render import show as render
    from ckptctl.errors import LayoutError
    from ckptctl.views import CheckpointView, checkpoint_view

    out = get_output()
    storage, mappings = _context(s3_endpoint, rebase)
    try:
        ck = one_checkpoint(storage, path, mappings)
    except LayoutError as e:
        raise LayoutError(_not_a_checkpoint_hint(storage, path, e)) from None
    warn_moved(out, ck)
    view = checkpoint_view(ck)
    if as_json():
        add_states(out, storage, ck, view)
    out.result(CheckpointView(view), partial(render.report, named=path))


def add_states(out, storage, ck, view) -> None:
    """``show --json``: each operator gets ``states``, the catalog of ``ckptctl states`` (a list,
    empty for stateless operators; null when the state meta data cannot be read)."""
    from ckptctl.errors import CkptError
    from ckptctl.states import catalog

    try:
        by_id = {oc.operator_id: oc for oc in catalog(storage, ck)}
    except CkptError as e:
        out.warn(f"states not listed: {e}")
        by_id = None
    for op in view["operators"]:
        oc = by_id.get(op["operator_id"]) if by_id is not None else None
        op["states"] = None if by_id is None else [s.to_json() for s in oc.states.values()] if oc else []


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
    from ckptctl.checkpoint.targets import checkpoints_at

    fmt = refs_format(fmt, as_json(), output_file)
    writable_outputs(output_file)
    out = get_output(json=fmt != "table")
    storage, mappings = _context(s3_endpoint, rebase)
    unreadable: dict[str, str] = {}
    checkpoints, root = checkpoints_at(
        storage, path, mappings, out.term.iterate("reading _metadata"), unreadable=unreadable
    )
    warn_moved(out, *checkpoints)
    _emit_refs(out, fmt, output_file, checkpoints, root, path)
    if unreadable:  # the readable ones were written; each unreadable one is named, and the exit says so
        for error in unreadable.values():
            out.warn(f"not in the reference map: {error}")
        raise typer.Exit(1)


def _emit_refs(out, fmt: str, output_file: str | None, checkpoints, root: str, path: str) -> None:
    from ckptctl import export
    from ckptctl.checkpoint.refs import COLUMNS, reference_rows

    if fmt == "ndjson":  # the bulk format: encoded group by group, never as full rows
        from ckptctl.checkpoint.refs import GROUP_KEY, reference_groups

        def emit(f) -> None:
            for ck in checkpoints:
                export.write_ndjson_groups(COLUMNS, reference_groups(ck), f, GROUP_KEY)

        if output_file:
            with open(output_file, "wb") as f:
                emit(f)
        else:
            sys.stdout.flush()
            emit(sys.stdout.buffer)
            sys.stdout.buffer.flush()
        return
    rows: list[tuple] = []
    for ck in checkpoints:
        rows.extend(reference_rows(ck))
    if fmt in ("table", "json") and not output_file:
        from ckptctl.cli.render import refs as render
        from ckptctl.views import ReferenceMap

        refs = ReferenceMap(COLUMNS, rows, display_base(root, checkpoints))
        out.result(refs, partial(render.report, named=path))
        return
    if fmt == "parquet":
        from ckptctl.checkpoint.refs import rows_to_arrow

        export.write_parquet(rows_to_arrow(rows), output_file)
        return
    writer = {"json": export.write_json, "csv": export.write_csv}[fmt]
    if output_file:
        with open(output_file, "w", encoding="utf-8", newline="") as f:
            writer(COLUMNS, rows, f)
    else:
        writer(COLUMNS, rows, sys.stdout)


_EXTENSIONS = {".json": "json", ".ndjson": "ndjson", ".jsonl": "ndjson", ".csv": "csv", ".parquet": "parquet"}


def refs_format(fmt: str | None, as_json: bool, output: str | None) -> str:
    """The one format asked for by --format, --json and the -o file's extension; conflicts are errors."""
    from ckptctl import export
    from ckptctl.errors import CkptError

    if fmt is not None:
        fmt = fmt.lower()
        if fmt not in export.FORMATS:
            raise CkptError(f"unknown --format '{fmt}'; use one of {', '.join(export.FORMATS)}")
    if as_json and fmt not in (None, "json"):
        raise CkptError(f"--json and --format {fmt} conflict; give one of them")
    chosen = fmt or ("json" if as_json else None)
    if output:
        ext = os.path.splitext(output)[1].lower()
        implied = _EXTENSIONS.get(ext)
        if chosen == "table":
            raise CkptError(
                "--format table is for the terminal; with -o FILE use json, ndjson, csv or parquet"
            )
        if chosen is None and implied is None:
            raise CkptError(
                f"cannot tell the format of -o {output} from its extension; "
                "name it .json, .ndjson, .csv or .parquet, or pass --format"
            )
        if chosen is not None and implied is not None and implied != chosen:
            how = "--json" if as_json and fmt is None else f"--format {chosen}"
            raise CkptError(f"{how} conflicts with -o {output} (a {implied} file name); give one format")
        chosen = chosen or implied
    chosen = chosen or "table"
    if chosen == "parquet" and not output:
        raise CkptError("--format parquet needs --output FILE")
    return chosen


def display_base(root: str, checkpoints) -> str:
    """What shown paths are relative to: the scanned root, or for a single checkpoint its parent
    (so its own files read ``chk-7/…`` or ``savepoint-…/…`` and shared ones ``shared/…``)."""
    from ckptctl.storage import parent

    if len(checkpoints) == 1 and checkpoints[0].location.uri == root:
        return parent(root)
    return root


@app.command("diff", cls=Command)
@command
def diff_command(
    a: Annotated[str, typer.Argument(metavar="A", help="The older checkpoint (directory or _metadata).")],
    b: Annotated[str, typer.Argument(metavar="B", help="The newer checkpoint (directory or _metadata).")],
    s3_endpoint: EndpointOpt = None,
    rebase: RebaseOpt = None,
) -> None:
    """Files added, removed and reused between two checkpoints, and the bytes each uploaded."""
    from ckptctl.checkpoint.targets import one_checkpoint
    from ckptctl.cli.render import diff as render
    from ckptctl.views import diff_view

    out = get_output()
    storage, mappings = _context(s3_endpoint, rebase)
    ck_a = one_checkpoint(storage, a, mappings)
    ck_b = one_checkpoint(storage, b, mappings)
    warn_moved(out, ck_a, ck_b)
    for warning in diff_warnings(ck_a, ck_b):
        out.warn(warning)
    out.result(diff_view(ck_a, ck_b), render.report)


def diff_warnings(a, b) -> list[str]:
    """A diff reads as 'from A to B': say so when B is the older one or another job's."""
    out = []
    ja, jb = a.location.job_id, b.location.job_id
    if ja and jb and ja != jb:
        out.append(f"A and B belong to different jobs ({ja} and {jb}): the diff compares unrelated files")
    elif b.metadata.checkpoint_id < a.metadata.checkpoint_id:
        out.append(
            f"B (checkpoint {b.metadata.checkpoint_id}) is older than A (checkpoint {a.metadata.checkpoint_id}): "
            "'added' and 'removed' are reversed; name the older checkpoint first"
        )
    return out
