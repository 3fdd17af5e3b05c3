"""``ckptctl gc plan`` (dry run, the default) and ``ckptctl gc apply PLAN`` (re-validate, delete)."""

from __future__ import annotations

from functools import partial
from typing import Annotated

import typer

from ckptctl.cli.base import (
    Command,
    EndpointOpt,
    EngineOpt,
    Group,
    MasterOpt,
    RebaseOpt,
    app,
    command,
    engine_choice,
    get_output,
    storage_and_rebase,
    writable_outputs,
)
from ckptctl.cli.params import DURATION, OLDER_THAN
from ckptctl.durations import OlderThan

gc_app = typer.Typer(
    help=(
        "Find and safely delete orphaned checkpoint files (dry run by default: plan → review → apply). "
        "`ckptctl gc ROOT ...` is `ckptctl gc plan ROOT ...`."
    ),
    no_args_is_help=True,
    cls=Group,
)
app.add_typer(gc_app, name="gc")


@gc_app.command("plan", cls=Command)
@command
def plan_command(
    roots: Annotated[
        list[str],
        typer.Argument(help="Checkpoint roots (every job directory below is scanned).", metavar="ROOT"),
    ],
    savepoints: Annotated[
        list[str] | None,
        typer.Option("--savepoints", metavar="DIR", help="Extra savepoint directory to scan. Repeatable."),
    ] = None,
    changelog_dir: Annotated[
        list[str] | None,
        typer.Option(
            "--changelog-dir", metavar="DIR", help="Changelog (DSTL) storage directory. Repeatable."
        ),
    ] = None,
    keep_last: Annotated[
        int | None,
        typer.Option(
            "--keep-last", metavar="K", help="Retain only the newest K completed checkpoints per job."
        ),
    ] = None,
    older_than: Annotated[
        OlderThan,
        typer.Option(
            "--older-than",
            metavar="DURATION",
            parser=OLDER_THAN,
            help="Only files older than this are candidates (24h, 90m, 7d, or an ISO time).",
        ),
    ] = "24h",
    margin: Annotated[
        float,
        typer.Option(
            "--margin",
            metavar="DURATION",
            parser=DURATION,
            help="Files must also predate the newest retained checkpoint of their job by this.",
        ),
    ] = "1h",
    max_delete_fraction: Annotated[
        float,
        typer.Option(
            "--max-delete-fraction",
            metavar="FRACTION",
            help="Refuse plans deleting a larger share of files or bytes, overall or of any job.",
        ),
    ] = 0.5,
    force: Annotated[bool, typer.Option("--force", help="Allow plans above --max-delete-fraction.")] = False,
    allow_external: Annotated[
        bool,
        typer.Option("--allow-external", help="Proceed although references point outside the scanned roots."),
    ] = False,
    accept_lost: Annotated[
        list[str] | None,
        typer.Option(
            "--accept-lost",
            metavar="CHECKPOINT",
            help="A retained checkpoint whose missing files you accept as lost (otherwise missing files block). Repeatable.",
        ),
    ] = None,
    collect_dead_jobs: Annotated[
        bool,
        typer.Option(
            "--collect-dead-jobs",
            help="Also collect the files of jobs with no retained checkpoint (kept by default: a job restored "
            "from one of them in CLAIM mode elsewhere may still use them). Naming such a job directory as ROOT "
            "does the same for that job.",
        ),
    ] = False,
    collect_fixed_id_changelog: Annotated[
        bool,
        typer.Option(
            "--collect-fixed-id-changelog",
            help="Also collect the changelog files of fixed job ids (application mode with HA: every deployment "
            "of a cluster id, and every one before Flink 1.16, has the same id). Kept by default: a deployment "
            "whose checkpoints are not scanned may share the id and the changelog dir. Pass it only when every "
            "deployment writing under those ids is scanned in this plan.",
        ),
    ] = False,
    clock: Annotated[
        str,
        typer.Option(
            "--clock",
            metavar="storage|local",
            help="Whose clock ages are measured on: the object store's (default; refuses if unreadable) or this machine's.",
        ),
    ] = "storage",
    plan_file: Annotated[
        str | None,
        typer.Option("--output", "-o", metavar="PLAN.json", help="Write the plan (JSON) to this file."),
    ] = None,
    inventory: Annotated[
        str | None,
        typer.Option(
            "--inventory",
            metavar="MANIFEST",
            help="An S3 Inventory manifest.json of the roots' bucket: its files stand in for the listing of "
            "the roots (_metadata are still listed afresh; files newer than the report are kept). S3 roots only.",
        ),
    ] = None,
    s3_endpoint: EndpointOpt = None,
    rebase: RebaseOpt = None,
    engine: EngineOpt = "auto",
    master: MasterOpt = None,
) -> None:
    """Dry run: the live set, the orphans the guards allow, and why anything else is kept.

    `ckptctl gc ROOT ...` is the same as `ckptctl gc plan ROOT ...`.
    """
    from ckptctl.cli.render import gc as render
    from ckptctl.gc import GcOptions
    from ckptctl.gc.run import planned

    writable_outputs(plan_file)
    chosen = engine_choice(engine, master)
    out = get_output()
    storage, mappings = storage_and_rebase(s3_endpoint, rebase)
    options = GcOptions(
        roots=tuple(roots), savepoint_dirs=tuple(savepoints or ()), changelog_dirs=tuple(changelog_dir or ()),
        keep_last=keep_last, older_than=older_than.age, margin=margin, max_delete_fraction=max_delete_fraction,
        force=force, allow_external=allow_external, rebase=mappings, accept_lost=tuple(accept_lost or ()),
        clock=clock, collect_dead_jobs=collect_dead_jobs, older_than_at=older_than.at, inventory=inventory,
        collect_fixed_id_changelog=collect_fixed_id_changelog,
    )  # fmt: skip
    progress = out.term.iterate("reading _metadata")
    with planned(storage, options, chosen, plan_file=plan_file, progress=progress, warn=out.warn) as plan:
        out.result(plan, partial(render.plan, written_to=plan_file, term=out.term))
    if plan.refusals:
        raise typer.Exit(1)


@gc_app.command("apply", cls=Command)
@command
def apply_command(
    plan_file: Annotated[
        str,
        typer.Argument(
            help="A plan written by `ckptctl gc plan -o FILE` or `ckptctl paimon orphans -o FILE`.",
            metavar="PLAN.json",
        ),
    ],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    trash: Annotated[
        str | None,
        typer.Option("--trash", metavar="DIR", help="Move files under this prefix instead of deleting them."),
    ] = None,
    manifest: Annotated[
        str | None,
        typer.Option(
            "--manifest",
            metavar="FILE",
            help="Manifest of removed files (default: the plan's name + .manifest.jsonl, e.g. "
            "plan.json.manifest.jsonl; on Spark a directory of one manifest per batch, default "
            "plan.json.manifest.d).",
        ),
    ] = None,
    batch_size: Annotated[
        int,
        typer.Option(
            "--batch-size", min=1, max=1000, metavar="N", help="Files per delete request (S3 allows 1000)."
        ),
    ] = 1000,
    s3_endpoint: EndpointOpt = None,
    engine: EngineOpt = "auto",
    master: MasterOpt = None,
) -> None:
    """Re-validate the plan against the storage as it is now, then delete what is still an orphan.

    The plan's own storage endpoint is used unless --s3-endpoint names another. The deletions run on
    Spark executors with --engine spark or --master, or when the plan was made with --engine spark.
    """
    from ckptctl.applying import revalidated
    from ckptctl.cli.render import gc as render

    chosen = engine_choice(engine, master)
    out = get_output()
    pending = revalidated(plan_file, chosen, s3_endpoint=s3_endpoint, on_listed=out.term.listing_count(),
                          progress=out.term.iterate("reading _metadata"))  # fmt: skip
    n, total = pending.files, pending.bytes
    if not n:
        out.warn("nothing to delete: no candidate of the plan is still an orphan")
    elif not yes:
        what = "move" if trash else "delete"
        if not out.term.confirm(
            f"{what} {n} files ({total:,} bytes)?",
            no_terminal="refusing to delete without confirmation: pass --yes (no terminal to ask)",
        ):
            out.warn("aborted; nothing deleted")
            raise typer.Exit(1)
    if pending.on_executors:  # deleted on the executors of the master that re-validated
        executors = pending.apply_on_executors(manifest_dir=manifest or plan_file + ".manifest.d", trash=trash,
                                               batch=batch_size)  # fmt: skip
        out.result(executors, partial(render.applied_on_executors, term=out.term))
        if not executors.complete:
            raise typer.Exit(1)
        return
    with out.term.counter(len(pending.go), "moving" if trash else "deleting") as advance:
        result = pending.apply_here(manifest=manifest or plan_file + ".manifest.jsonl", trash=trash,
                                    batch_size=batch_size, on_batch=advance)  # fmt: skip
    out.result(result, partial(render.applied, term=out.term))
    if result.failed:
        raise typer.Exit(1)
