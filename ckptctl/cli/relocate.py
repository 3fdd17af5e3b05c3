"""``ckptctl repair`` (checkpoints Flink wrote unrestorable, FLINK-39964) and ``ckptctl relocate``
(copy checkpoints anywhere, with every path in ``_metadata`` rewritten)."""

from __future__ import annotations

from typing import Annotated

import typer

from ckptctl.cli.base import (
    Command,
    EndpointOpt,
    RebaseOpt,
    SavepointsOpt,
    _context,
    app,
    command,
    engine_choice,
    get_output,
)
from ckptctl.cli.params import BYTES

WorkersOpt = Annotated[
    int, typer.Option("--workers", metavar="N", help="Parallel copies (a thread pool).", min=1)
]
BwlimitOpt = Annotated[
    int | None,
    typer.Option(
        "--bwlimit",
        metavar="BYTES",
        parser=BYTES,
        help="Copy at most this many bytes per second (e.g. 50MiB).",
    ),
]


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
    from ckptctl.cli.inspect import warn_moved
    from ckptctl.cli.render import repair as render
    from ckptctl.errors import CkptError
    from ckptctl.repair import RepairError, RepairReport, apply_repair, plan_repair

    if in_place and dest:
        raise CkptError("give either -o DEST or --in-place, not both")
    if not in_place and not dest and not dry_run:
        raise CkptError("name the repaired copy with -o DEST (or use --in-place, or --dry-run to look first)")
    out = get_output()
    storage, mappings = _context(s3_endpoint, rebase)
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


# ---------------------------------------------------------------------------------------------
# relocate


@app.command("relocate", cls=Command)
@command
def relocate_command(
    src: Annotated[
        str,
        typer.Argument(
            metavar="SRC",
            help="A checkpoint or savepoint directory (or its _metadata); with --all a job directory or root.",
        ),
    ],
    dst: Annotated[
        str,
        typer.Argument(metavar="DST", help="The new checkpoint root (file: path or s3://bucket/prefix)."),
    ],
    apply: Annotated[
        bool, typer.Option("--apply", help="Copy and write (default: show the plan only).")
    ] = False,
    all_checkpoints: Annotated[
        bool, typer.Option("--all", help="Relocate every completed checkpoint and savepoint below SRC.")
    ] = False,
    workers: WorkersOpt = 8,
    bwlimit: BwlimitOpt = None,
    plan_out: Annotated[
        str | None,
        typer.Option(
            "--plan-output", "-o", metavar="FILE", help="Write the plan (every copy) as JSON to FILE."
        ),
    ] = None,
    no_verify: Annotated[
        bool,
        typer.Option("--no-verify", help="Skip the shallow verify of the relocated copies after --apply."),
    ] = False,
    engine: Annotated[
        str,
        typer.Option(
            "--engine",
            metavar="local|spark|auto",
            help="local (a thread pool, default), spark (executors copy) or auto (Spark for many files).",
        ),
    ] = "local",
    master: Annotated[
        str | None,
        typer.Option(
            "--master", metavar="URL", help="Spark master URL (implies Spark; default for Spark: local[*])."
        ),
    ] = None,
    s3_endpoint: EndpointOpt = None,
    rebase: RebaseOpt = None,
) -> None:
    """Copy checkpoints anywhere: every file they need, and a new _metadata whose paths point at the copy."""
    import json

    from ckptctl.cli.inspect import warn_moved
    from ckptctl.cli.render import relocate as render
    from ckptctl.relocate import RelocateReport, load_sources, plan_relocation
    from ckptctl.storage import normalize_uri
    from ckptctl.storage.copying import check_writable

    chosen = engine_choice(engine if master is None or engine != "local" else "auto", master)
    out = get_output()
    storage, mappings = _context(s3_endpoint, rebase)
    checkpoints, source = load_sources(storage, src, mappings, all_checkpoints)
    warn_moved(out, *checkpoints)
    with out.term.status("planning …"):
        plan = plan_relocation(storage, checkpoints, source, dst, workers)
        check_writable(storage, plan.destination.root)  # the dry run too: a wrong DST is named now
    plan.options = {
        "src": normalize_uri(src), "dst": plan.destination.written_root, "all": all_checkpoints,
        "rebase": mappings.to_json(),
    }  # fmt: skip
    if plan_out:
        with open(plan_out, "w", encoding="utf-8") as f:
            json.dump(plan.to_json(), f, indent=1)
    if not apply:
        out.result(RelocateReport(plan, applied=False), render.report)
        if plan.conflicts:
            raise typer.Exit(1)
        return
    _apply_and_report(out, storage, plan, workers, bwlimit, no_verify, chosen)


def _apply_and_report(out, storage, plan, workers, limit, no_verify, engine=None) -> None:
    from ckptctl.cli.render import relocate as render
    from ckptctl.engine import Engine
    from ckptctl.relocate import RelocateReport, apply_relocation, shallow_verify

    chosen = Engine.parse(engine or "local").resolve(len(plan.copies))
    chosen.start()  # before the counter: the JVM's start-up gets its own status line
    with out.term.counter(len(plan.copies), "copying") as advance:
        result = apply_relocation(storage, plan, workers=workers, bwlimit=limit, progress=advance, engine=chosen)
    report = None if no_verify else shallow_verify(storage, plan)
    out.result(RelocateReport(plan, applied=True, result=result, verify=report), render.report)
    if report is not None and not report["ok"]:
        raise typer.Exit(1)


@app.command("relocate-apply", cls=Command, hidden=True)
@command
def relocate_apply_command(
    plan_file: Annotated[
        str, typer.Argument(metavar="PLAN.json", help="A plan written by `relocate -o PLAN.json`.")
    ],
    workers: WorkersOpt = 8,
    bwlimit: BwlimitOpt = None,
    no_verify: Annotated[
        bool, typer.Option("--no-verify", help="Skip the shallow verify of the relocated copies.")
    ] = False,
    s3_endpoint: EndpointOpt = None,
) -> None:
    """`ckptctl relocate apply PLAN.json`: plan again, refuse if anything changed, then copy."""
    import json

    from ckptctl.errors import CkptError
    from ckptctl.relocate import replan

    out = get_output()
    storage, _ = _context(s3_endpoint, None)
    try:
        with open(plan_file, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise CkptError(f"cannot read the plan: {e}", path=plan_file) from None
    plan = replan(storage, data, workers)
    _apply_and_report(out, storage, plan, workers, bwlimit, no_verify)
