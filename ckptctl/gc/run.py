"""``gc plan`` below the CLI, in one call, and where gc's work runs (in this process or on Spark:
gc's one engine policy) for ``gc plan`` and ``gc apply``.

``--engine auto`` (the default) plans in this process unless ``--master`` names a cluster: before
the listing nothing tells how many files there are, and the listing is the cost. An S3 Inventory
does tell (:func:`_by_inventory`). ``gc apply`` runs where the plan was made (:func:`apply_master`): a plan made on Spark
is re-validated on Spark (its lists may be in Parquet only), on its master unless another is named;
the apply itself, of a plan whichever planner wrote it, is :mod:`ckptctl.applying`'s.
The CLI (:mod:`ckptctl.cli.gc`) parses, asks for confirmation and renders; nothing here prints but
through the ``warn`` it is given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from ckptctl.engine import Engine
from ckptctl.gc.options import GcOptions
from ckptctl.storage import Storage


def plan_master(
    storage: Storage, options: GcOptions, engine: Engine, warn: Callable[[str], None]
) -> str | None:
    """The Spark master ``gc plan`` runs on, started (under the engine's status line), or ``None``
    for in-process."""
    if options.inventory is not None and engine.kind == "auto" and not engine.master:
        engine = _by_inventory(storage, options.inventory, engine, warn)
    return _started(engine)


def apply_master(engine: Engine, planned: dict[str, Any] | None) -> str | None:
    """The Spark master ``gc apply`` runs on, started, or ``None`` for in-process: ``planned`` is
    the plan's ``engine`` record (a plan made on Spark is applied on Spark)."""
    return _started(engine, planned)


def _by_inventory(storage: Storage, manifest: str, engine: Engine, warn: Callable[[str], None]) -> Engine:
    """``auto`` with an S3 Inventory: the manifest tells beforehand how many files the plan holds
    (at most, from its data files' sizes). Spark when planning them in this process could take
    more than half this machine's memory -- a bucket of 10^8 objects would need ~18 GB -- else
    in-process (faster on one machine: no JVM, no shuffles)."""
    from ckptctl.engine.machine import machine_memory
    from ckptctl.gc.plan import BYTES_PER_FILE
    from ckptctl.inventory.manifest import most_rows, read_manifest

    rows = most_rows(
        read_manifest(storage, manifest, latest=float("inf"))
    )  # sizes only: the planner checks its times
    need, have = rows * BYTES_PER_FILE, machine_memory()
    if not have or need <= have // 2:
        return engine
    from ckptctl.engine.extra import SPARK_EXTRA, spark_installed

    if not spark_installed():
        warn(
            f"the inventory holds up to ~{rows:,} rows: planning them in this process could take ~{need / 1e9:.1f} GB "
            f"of this machine's {have / 1e9:.1f} GB; Spark would plan them, but pyspark is not installed ({SPARK_EXTRA})"
        )
        return engine
    warn(
        f"the inventory holds up to ~{rows:,} rows: planning them in this process could take ~{need / 1e9:.1f} GB "
        f"of this machine's {have / 1e9:.1f} GB, so the plan is made on Spark (--engine local: in-process)"
    )
    return replace(engine, kind="spark")


def _started(engine: Engine, planned: dict[str, Any] | None = None) -> str | None:
    """The Spark master gc runs on, started (under its status line), or ``None`` for in-process.
    ``auto`` stays in-process unless ``--master`` is given or (apply) the plan was made on Spark."""
    from ckptctl.engine import DEFAULT_MASTER

    if engine.kind == "local":
        return None
    if engine.kind == "spark" or engine.master:
        master = engine.master or DEFAULT_MASTER
    elif planned and planned.get("kind") == "spark":
        master = planned.get("master") or DEFAULT_MASTER
    else:
        return None
    replace(engine, kind="spark", master=master).start()
    return master


@contextmanager
def planned(storage: Storage, options: GcOptions, engine: Engine, *, plan_file: str | None = None,
            progress=None, warn: Callable[[str], None]) -> Iterator[Any]:  # fmt: skip
    """``gc plan``: the plan made where :func:`plan_master` says, written to ``plan_file`` (a Spark
    plan's lists in ``PLAN.parquet/`` next to it) and, on Spark, its lists brought to the driver
    when small (shown and inlined like a local plan's). A Spark plan's frames leave the executors'
    storage when the block ends (written and shown, or failed)."""
    from ckptctl.gc.plan import build_plan

    options.normalized().validate()  # a bad option is refused before a JVM starts for it
    master = plan_master(storage, options, engine, warn)
    if master is not None:
        from ckptctl.gc.spark.planner import build_plan_spark

        plan = build_plan_spark(storage, options, master)
    else:
        plan = build_plan(storage, options, progress=progress)
    try:
        if master is None:
            if plan_file:
                with open(plan_file, "wb") as f:
                    plan.write_json(f)
        else:
            if plan_file:
                plan.write(plan_file)  # PLAN.json and its lists in PLAN.parquet/
            plan.materialise(
                if_small=True
            )  # the lists on the driver: shown (largest orphans), inlined like a local plan's
        yield plan
    finally:
        if master is not None:
            plan.release()
