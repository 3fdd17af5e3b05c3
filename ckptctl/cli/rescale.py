"""``ckptctl plan-rescale``: what a restore at another parallelism will do and cost."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ckptctl.cli.base import Command, EndpointOpt, RebaseOpt, app, command, get_output, storage_and_rebase
from ckptctl.cli.params import PARALLELISM


@app.command("plan-rescale", cls=Command)
@command
def plan_rescale_command(
    checkpoint: Annotated[
        str,
        typer.Argument(metavar="CHECKPOINT", help="A checkpoint or savepoint directory, or its _metadata."),
    ],
    parallelism: Annotated[
        Any,  # list[int]: one option value, N or LOW..HIGH (PARALLELISM), not a repeated option
        typer.Option(
            "--parallelism",
            "-p",
            metavar="N|LOW..HIGH",
            parser=PARALLELISM,
            help="New parallelism N, or a sweep LOW..HIGH.",
        ),
    ],
    operator: Annotated[
        str | None,
        typer.Option("--operator", metavar="OPERATOR", help="Only this operator (32-hex id, name or uid)."),
    ] = None,
    flink_version: Annotated[
        str | None,
        typer.Option(
            "--flink-version",
            metavar="MAJOR.MINOR",
            help="Flink version of the restore, e.g. 1.20 (default: inferred).",
        ),
    ] = None,
    overlap_threshold: Annotated[
        float | None,
        typer.Option(
            "--overlap-threshold",
            metavar="FRACTION",
            help="state.backend.rocksdb.restore-overlap-fraction-threshold, 0..1 (1.16+).",
        ),
    ] = None,
    ingest_db: Annotated[
        bool, typer.Option("--ingest-db", help="Flink 2.x state.backend.rocksdb.use-ingest-db-restore-mode.")
    ] = False,
    max_parallelism: Annotated[
        int | None,
        typer.Option("--max-parallelism", metavar="N", help="Refuse if it differs from the checkpoint's."),
    ] = None,
    data_aware: Annotated[
        str | None,
        typer.Option(
            "--data-aware",
            metavar="HISTOGRAM",
            help="Histogram Parquet of `verify --deep --histogram`: real bytes per key group.",
        ),
    ] = None,
    s3_endpoint: EndpointOpt = None,
    rebase: RebaseOpt = None,
) -> None:
    """Each new subtask's key groups, the old handles it receives, the base RocksDB handle, and bytes."""
    from ckptctl.checkpoint.targets import one_checkpoint
    from ckptctl.cli.render import rescale as render
    from ckptctl.histogram import read_histogram
    from ckptctl.rescale import RescalePlan, family_of, plan_or_sweep

    if flink_version is not None:
        family_of(flink_version)  # refuse an unknown version before reading anything
    histogram = read_histogram(data_aware) if data_aware else None
    out = get_output()
    storage, mappings = storage_and_rebase(s3_endpoint, rebase)
    ck = one_checkpoint(storage, checkpoint, mappings)
    result = plan_or_sweep(
        ck.metadata, parallelism, ck.location.uri, histogram, operator=operator, flink_version=flink_version,
        overlap_threshold=overlap_threshold, ingest_db=ingest_db, max_parallelism=max_parallelism,
    )  # fmt: skip
    out.result(result, render.plan if isinstance(result, RescalePlan) else render.sweep)
