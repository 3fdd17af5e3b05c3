"""``ckptctl paimon``: Flink checkpoints and the Paimon table their sink commits to, side by side.

``paimon status PATH --table URI`` (also ``paimon PATH --table URI``) forecasts what restoring each
checkpoint does to the table (hazards A, B, C of :mod:`ckptctl.paimon.restore`) and exits 1 when
the checkpoint a restore takes is unsafe; ``paimon orphans --table URI --checkpoints ROOT`` plans
Paimon's orphan clean-up without the files a retained checkpoint still holds, as a plan
``ckptctl gc apply`` executes.
"""

from __future__ import annotations

from typing import Annotated

import typer

from ckptctl.cli.base import (
    Command,
    EndpointOpt,
    Group,
    RebaseOpt,
    app,
    command,
    get_output,
    storage_and_rebase,
    writable_outputs,
)
from ckptctl.cli.params import AGE, DURATION, OLDER_THAN
from ckptctl.durations import OlderThan

paimon_app = typer.Typer(
    help=(
        "Flink checkpoints and the Paimon table their sink commits to: what a restore commits again, "
        "and Paimon orphan clean-up that never deletes what a checkpoint holds. "
        "`ckptctl paimon PATH --table URI` is `ckptctl paimon status PATH --table URI`."
    ),
    no_args_is_help=True,
    cls=Group,
)
app.add_typer(paimon_app, name="paimon")

TableOpt = Annotated[
    str,
    typer.Option(
        "--table",
        metavar="URI",
        help="The Paimon table directory (local path or s3://bucket/warehouse/db.db/t).",
    ),
]
OlderThanOpt = Annotated[
    OlderThan | None,
    typer.Option(
        "--older-than", parser=OLDER_THAN, metavar="AGE",
        help="The Paimon orphan clean-up cut-off (remove_orphan_files' older_than): 1d (Paimon's default), "
        "12h, or an ISO time; `paimon orphans` takes nothing younger than --min-age (1h).",
    ),
]  # fmt: skip


def _cut_off(older_than: OlderThan | None) -> OlderThan:
    """``--older-than`` as given, or Paimon's default (a day)."""
    from ckptctl.paimon.reachable import DAY_SECONDS

    return older_than if older_than is not None else OlderThan(DAY_SECONDS)


@paimon_app.command("status", cls=Command)
@command
def status_command(
    path: Annotated[
        str,
        typer.Argument(
            metavar="PATH",
            help="A checkpoint or savepoint (that restore is judged), or a root (each job's newest checkpoint "
            "is judged; older ones are shown).",
        ),
    ],
    table: TableOpt,
    operator: Annotated[
        str | None,
        typer.Option(
            "--operator",
            metavar="ID",
            help="The Global Committer's operator id or uid, when a job writes several Paimon tables.",
        ),
    ] = None,  # fmt: skip
    older_than: OlderThanOpt = None,
    s3_endpoint: EndpointOpt = None,
    rebase: RebaseOpt = None,
) -> None:
    """What restoring each checkpoint commits to the Paimon table, and hazards A/B/C (exit 1)."""
    from ckptctl.checkpoint.targets import checked_path
    from ckptctl.cli.render import paimon as render
    from ckptctl.paimon.restore import run_report

    out = get_output()
    storage, mappings = storage_and_rebase(s3_endpoint, rebase)
    cut = _cut_off(older_than)
    report = run_report(storage, checked_path(storage, path), table, mappings, operator, cut.age, cut.at)
    out.result(report, render.report)
    if not report.ok:
        raise typer.Exit(1)


@paimon_app.command("orphans", cls=Command)
@command
def orphans_command(
    table: TableOpt,
    checkpoints: Annotated[
        list[str],
        typer.Option(
            "--checkpoints",
            metavar="ROOT",
            help="Where the writing job's retained checkpoints and savepoints are (repeatable): every file a "
            "committable of theirs names is kept.",
        ),
    ],
    older_than: OlderThanOpt = None,
    # the default given as a duration, parsed by AGE like any other: --help shows [default: 1h]
    min_age: Annotated[
        float,
        typer.Option(
            "--min-age",
            parser=AGE,
            metavar="AGE",
            help="Never delete a file younger than this, whatever --older-than says: a running job's checkpoint "
            "in progress names its files nowhere yet. Lower it only when no job writes the table.",
        ),
    ] = "1h",  # fmt: skip
    margin: Annotated[
        float | None,
        typer.Option(
            "--margin",
            parser=DURATION,
            metavar="DURATION",
            help="gc's in-flight margin (default: gc plan's, 1h): files must also predate the newest retained "
            "checkpoint of every scanned writer by this, and data, changelog and index files the table's latest "
            "commit by this; younger ones may be named by the checkpoint or commit coming next.",
        ),
    ] = None,  # fmt: skip
    output: Annotated[
        str | None,
        typer.Option("-o", "--output", metavar="PLAN.json", help="Write the plan for `ckptctl gc apply`."),
    ] = None,
    s3_endpoint: EndpointOpt = None,
    rebase: RebaseOpt = None,
) -> None:
    """Paimon's orphan files minus what a Flink checkpoint still holds: a plan for `ckptctl gc apply`."""
    from ckptctl.cli.render import paimon as render
    from ckptctl.paimon.orphans import plan_orphans, write_plan

    writable_outputs(output)
    out = get_output()
    storage, mappings = storage_and_rebase(s3_endpoint, rebase)
    cut = _cut_off(older_than)
    plan = plan_orphans(
        storage, table, list(checkpoints), mappings, older_than=cut.age, older_than_at=cut.at, s3_endpoint=s3_endpoint,
        min_age=float(min_age), margin=margin,
    )  # fmt: skip
    if output:
        write_plan(plan, output)
    out.result(plan, render.orphans)
    if plan.refusals:
        raise typer.Exit(1)
