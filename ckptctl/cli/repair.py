"""``ckptctl repair``: make a checkpoint Flink wrote unrestorable (FLINK-39964) restorable
(:func:`ckptctl.repair.plan_repair`, then :func:`ckptctl.repair.apply_repair`), rendered by
:mod:`ckptctl.cli.render.repair`."""

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
    warn_moved,
)


@app.command("repair", cls=Command)
@command
def repair_command(
    path: Annotated[
        str,
        typer.Argument(
            metavar="CHECKPOINT", help="A checkpoint directory (or its _metadata) Flink cannot restore."
        ),
    ],
    dest: Annotated[
        str | None,
        typer.Option(
            "--output",
            "-o",
            metavar="DEST",
            help="Write the repaired copy here (the checkpoint's own files, then a new _metadata).",
        ),
    ] = None,  # fmt: skip
    in_place: Annotated[
        bool,
        typer.Option(
            "--in-place",
            help="Rewrite the checkpoint's _metadata itself, keeping the old one as _metadata.pre-repair.",
        ),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show every handle that would be rewritten; write nothing.")
    ] = False,
    savepoints: SavepointsOpt = None,
    s3_endpoint: EndpointOpt = None,
    rebase: RebaseOpt = None,
) -> None:
    """Make a checkpoint written after a CLAIM restore from a NATIVE savepoint restorable (FLINK-39964)."""
    from ckptctl.checkpoint.flink39964 import savepoint_files_for, search_roots_for
    from ckptctl.checkpoint.targets import one_checkpoint
    from ckptctl.cli.render import repair as render
    from ckptctl.errors import CkptError
    from ckptctl.repair import RepairError, RepairReport, apply_repair, plan_repair

    if in_place and dest:
        raise CkptError("give either -o DEST or --in-place, not both")
    if not in_place and not dest and not dry_run:
        raise CkptError("name the repaired copy with -o DEST (or use --in-place, or --dry-run to look first)")
    out = get_output()
    storage, mappings = storage_and_rebase(s3_endpoint, rebase)
    ck = one_checkpoint(storage, path, mappings)
    warn_moved(out, ck)
    index = savepoint_files_for(storage, search_roots_for(ck), savepoints or ())
    plan = plan_repair(storage, ck, index)
    report = RepairReport(plan, index.searched, dry_run)
    if plan.fixes and not plan.unresolved and plan.missing:
        out.result(report, render.report)  # what it would rewrite, then why it will not
        raise RepairError(plan.missing_message(), path=ck.location.uri)
    if dry_run or not plan.fixes or plan.unresolved:
        out.result(report, render.report)
        if not plan.fixes and not plan.unresolved:
            out.warn("nothing to repair: every relative file of this checkpoint is where Flink will look")
            return
        if plan.unresolved:
            raise typer.Exit(1)
        return
    report.result = apply_repair(storage, ck, plan, dest, in_place)
    out.result(report, render.report)
