"""``ckptctl relocate`` (copy checkpoints anywhere, with every path in ``_metadata`` rewritten:
:func:`ckptctl.relocate.plan.plan_relocation`, then :func:`ckptctl.relocate.apply.apply_relocation`) and its
hidden ``relocate-apply`` (``ckptctl relocate apply PLAN.json``), rendered by :mod:`ckptctl.cli.render.relocate`."""

from __future__ import annotations

from typing import Annotated

import typer

from ckptctl.cli.base import (
    Command,
    EndpointOpt,
    RebaseOpt,
    app,
    command,
    engine_choice,
    get_output,
    storage_and_rebase,
    warn_moved,
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

    from ckptctl.cli.render import relocate as render
    from ckptctl.relocate.apply import RelocateReport
    from ckptctl.relocate.plan import load_sources, plan_relocation
    from ckptctl.storage import normalize_uri
    from ckptctl.storage.copying import check_writable

    chosen = engine_choice(engine if master is None or engine != "local" else "auto", master)
    out = get_output()
    storage, mappings = storage_and_rebase(s3_endpoint, rebase)
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


def _apply_and_report(out, storage, plan, workers, limit, no_verify, engine) -> None:
    """Copy as ``plan`` says on ``engine`` (parsed at the edge: ``relocate``'s options, or
    ``local`` for ``relocate-apply``), then the shallow verify of the copies."""
    from ckptctl.cli.render import relocate as render
    from ckptctl.relocate.apply import RelocateReport, apply_relocation, shallow_verify

    chosen = engine.resolve(len(plan.copies))
    chosen.start()  # before the counter: the JVM's start-up gets its own status line
    with out.term.counter(len(plan.copies), "copying") as advance:
        result = apply_relocation(
            storage, plan, workers=workers, bwlimit=limit, progress=advance, engine=chosen
        )
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

    from ckptctl.engine import Engine
    from ckptctl.errors import CkptError
    from ckptctl.relocate.apply import replan

    out = get_output()
    storage, _ = storage_and_rebase(s3_endpoint, None)
    try:
        with open(plan_file, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise CkptError(f"cannot read the plan: {e}", path=plan_file) from None
    plan = replan(storage, data, workers)
    _apply_and_report(out, storage, plan, workers, bwlimit, no_verify, Engine("local"))
