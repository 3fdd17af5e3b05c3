"""``ckptctl gc plan`` (dry run, the default) and ``ckptctl gc apply PLAN`` (re-validate, delete)."""

from __future__ import annotations

from dataclasses import replace
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
    _context,
    app,
    command,
    engine_choice,
    get_output,
    writable_outputs,
)
from ckptctl.cli.params import AGE

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
        float,
        typer.Option(
            "--older-than",
            metavar="DURATION",
            parser=AGE,
            help="Only files older than this are candidates (24h, 90m, 7d, or an ISO time).",
        ),
    ] = "24h",
    margin: Annotated[
        float,
        typer.Option(
            "--margin",
            metavar="DURATION",
            parser=AGE,
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
    from ckptctl.cli.params import Instant
    from ckptctl.cli.render import gc as render
    from ckptctl.errors import CkptError
    from ckptctl.gc import GcOptions, build_plan

    writable_outputs(plan_file)
    chosen = engine_choice(engine, master)
    if isinstance(margin, Instant):
        raise CkptError("--margin expects a duration like 1h or 10m, not a time")
    older_than_at = float(older_than) if isinstance(older_than, Instant) else None
    if older_than_at is not None:
        older_than = 0.0
    out = get_output()
    storage, mappings = _context(s3_endpoint, rebase)
    options = GcOptions(
        roots=tuple(roots), savepoint_dirs=tuple(savepoints or ()), changelog_dirs=tuple(changelog_dir or ()),
        keep_last=keep_last, older_than=older_than, margin=margin, max_delete_fraction=max_delete_fraction,
        force=force, allow_external=allow_external, rebase=mappings, accept_lost=tuple(accept_lost or ()),
        clock=clock, collect_dead_jobs=collect_dead_jobs, older_than_at=older_than_at, inventory=inventory,
        collect_fixed_id_changelog=collect_fixed_id_changelog,
    )  # fmt: skip
    options.normalized().validate()  # a bad option is refused before a JVM starts for it
    if inventory is not None and chosen.kind == "auto" and not chosen.master:
        chosen = _by_inventory(storage, inventory, chosen, out)
    spark_master = _spark_master(chosen)
    if spark_master is not None:
        from ckptctl.gc.spark import build_plan_spark

        plan = build_plan_spark(storage, options, spark_master)
    else:
        plan = build_plan(storage, options, progress=out.term.iterate("reading _metadata"))
    try:
        if spark_master is None:
            if plan_file:
                with open(plan_file, "wb") as f:
                    plan.write_json(f)
        else:
            if plan_file:
                plan.write(plan_file)  # PLAN.json and its lists in PLAN.parquet/
            plan.materialise(if_small=True)  # the lists on the driver: shown (largest orphans), inlined like a local plan's
        out.result(plan, partial(render.plan, written_to=plan_file, term=out.term))
    finally:
        if spark_master is not None:
            plan.release()  # written and shown (or failed): the plan's frames leave the executors' storage
    if plan.refusals:
        raise typer.Exit(1)


@gc_app.command("apply", cls=Command)
@command
def apply_command(
    plan_file: Annotated[
        str,
        typer.Argument(
            help="A plan written by `ckptctl gc plan -o FILE` or `ckptctl paimon orphans -o FILE`.", metavar="PLAN.json"
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
    from ckptctl.cli.render import gc as render
    from ckptctl.gc import apply_plan, read_plan, revalidate
    from ckptctl.gc.planfile import storage_from_plan
    from ckptctl.paimon import orphans
    from ckptctl.storage import Storage

    chosen = engine_choice(engine, master)
    out = get_output()
    from ckptctl.gc.planfile import load_json

    if orphans.is_orphan_plan(load_json(plan_file)):  # `ckptctl paimon orphans -o`
        plan_data = read_plan(plan_file, orphans.validate, "ckptctl paimon orphans")
    else:
        plan_data = read_plan(plan_file)
    storage = Storage(storage_from_plan(plan_data, s3_endpoint))
    storage.on_listed = out.term.listing_count()  # a running count while S3 is listed
    spark_master = _spark_master(chosen, plan_data.get("engine"))
    to_apply = None  # what executors delete (spark_apply.ToApply), the driver holding only counts
    if orphans.is_orphan_plan(plan_data):  # `ckptctl paimon orphans -o`: a Paimon table's orphans
        fresh, go, skipped = orphans.revalidate(storage, plan_data)
    elif spark_master is not None:
        from ckptctl.gc.spark import revalidate_spark

        fresh, to_apply = revalidate_spark(storage, plan_data, plan_file, spark_master)
    else:
        fresh, go, skipped = revalidate(storage, plan_data, progress=out.term.iterate("reading _metadata"))
    if spark_master is not None and to_apply is None:
        from ckptctl.gc.spark_apply import ToApply

        to_apply = ToApply.of(go, skipped)
    n, total = (to_apply.files, to_apply.bytes) if to_apply is not None else (len(go), sum(d.size for d in go))
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
    if to_apply is not None and n:  # deleted on the executors of the master that re-validated
        from ckptctl.gc.spark_apply import apply_plan_on_executors

        executors = apply_plan_on_executors(
            storage, fresh, to_apply, master=spark_master,
            manifest_dir=manifest or plan_file + ".manifest.d", trash=trash, batch=batch_size,
        )  # fmt: skip
        out.result(executors, partial(render.applied_on_executors, term=out.term))
        if not executors.complete:
            raise typer.Exit(1)
        return
    if to_apply is not None:  # nothing to delete: reported as in-process (the first skips)
        to_apply.release()
        go, skipped = [], to_apply.skips
    with out.term.counter(len(go), "moving" if trash else "deleting") as advance:
        result = apply_plan(
            storage, fresh, go, skipped,
            manifest=(manifest or plan_file + ".manifest.jsonl") if go else None, trash=trash,
            batch_size=batch_size, on_batch=advance,
        )  # fmt: skip
    out.result(result, partial(render.applied, term=out.term))
    if result.failed:
        raise typer.Exit(1)


def _by_inventory(storage, manifest: str, chosen, out):
    """``auto`` with an S3 Inventory: the manifest tells beforehand how many files the plan holds
    (at most, from its data files' sizes). Spark when planning them in this process could take
    more than half this machine's memory -- a bucket of 10^8 objects would need ~18 GB -- else
    in-process (faster on one machine: no JVM, no shuffles)."""
    from ckptctl.engine.machine import machine_memory
    from ckptctl.gc.plan import BYTES_PER_FILE
    from ckptctl.inventory import most_rows, read_manifest

    rows = most_rows(read_manifest(storage, manifest, latest=float("inf")))  # sizes only: the planner checks its times
    need, have = rows * BYTES_PER_FILE, machine_memory()
    if not have or need <= have // 2:
        return chosen
    from ckptctl.engine.extra import SPARK_EXTRA, spark_installed

    if not spark_installed():
        out.warn(
            f"the inventory holds up to ~{rows:,} rows: planning them in this process could take ~{need / 1e9:.1f} GB "
            f"of this machine's {have / 1e9:.1f} GB; Spark would plan them, but pyspark is not installed ({SPARK_EXTRA})"
        )
        return chosen
    out.warn(
        f"the inventory holds up to ~{rows:,} rows: planning them in this process could take ~{need / 1e9:.1f} GB "
        f"of this machine's {have / 1e9:.1f} GB, so the plan is made on Spark (--engine local: in-process)"
    )
    return replace(chosen, kind="spark")


def _spark_master(chosen, planned: dict | None = None) -> str | None:
    """The Spark master gc runs on, started (under its status line), or ``None`` for in-process.
    ``auto`` stays in-process unless ``--master`` is given or (apply) the plan was made on Spark:
    before the listing nothing tells how many files there are, and the listing is the cost (an
    S3 Inventory does tell: :func:`_by_inventory`). A plan
    made on Spark is re-validated on Spark (its lists may be in Parquet only), on its master unless
    another is named."""
    from ckptctl.engine import DEFAULT_MASTER

    if chosen.kind == "local":
        return None
    if chosen.kind == "spark" or chosen.master:
        master = chosen.master or DEFAULT_MASTER
    elif planned and planned.get("kind") == "spark":
        master = planned.get("master") or DEFAULT_MASTER
    else:
        return None
    replace(chosen, kind="spark", master=master).start()
    return master
