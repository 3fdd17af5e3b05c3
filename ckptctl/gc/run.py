"""``gc plan`` and ``gc apply`` below the CLI, one call each: where the work runs (in this process or
on Spark: gc's one engine policy), the plan made and written, a plan re-validated and applied.

``--engine auto`` (the default) plans in this process unless ``--master`` names a cluster: before
the listing nothing tells how many files there are, and the listing is the cost. An S3 Inventory
does tell (:func:`_by_inventory`). ``gc apply`` runs where the plan was made: a plan made on Spark
is re-validated on Spark (its lists may be in Parquet only), on its master unless another is named.
The CLI (:mod:`ckptctl.cli.gc`) parses, asks for confirmation and renders; nothing here prints but
through the ``warn`` it is given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
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
    from ckptctl.inventory import most_rows, read_manifest

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


@dataclass
class Revalidated:
    """A plan re-validated for ``gc apply``: what goes, in this process (``go``) or on the executors
    of ``master`` (``to_apply``: :class:`ckptctl.gc.spark.delete.ToApply`, the driver holding only
    counts), and what re-validation skipped."""

    storage: Storage
    fresh: Any  # the fresh plan (GcPlan, SparkPlan or paimon's OrphanPlan)
    go: list
    skipped: list[dict[str, Any]]
    to_apply: Any
    master: str | None

    @property
    def files(self) -> int:
        return self.to_apply.files if self.to_apply is not None else len(self.go)

    @property
    def bytes(self) -> int:
        return self.to_apply.bytes if self.to_apply is not None else sum(d.size for d in self.go)

    @property
    def on_executors(self) -> bool:
        return self.to_apply is not None

    def apply_on_executors(self, *, manifest_dir: str, trash: str | None, batch: int):
        from ckptctl.gc.spark.delete import apply_plan_on_executors

        return apply_plan_on_executors(self.storage, self.fresh, self.to_apply, master=self.master,
                                       manifest_dir=manifest_dir, trash=trash, batch=batch)  # fmt: skip

    def apply_here(self, *, manifest: str, trash: str | None, batch_size: int, on_batch=None):
        from ckptctl.gc.apply import apply_plan

        return apply_plan(self.storage, self.fresh, self.go, self.skipped, manifest=manifest if self.go else None,
                          trash=trash, batch_size=batch_size, on_batch=on_batch)  # fmt: skip


def revalidated(plan_file: str, engine: Engine, *, s3_endpoint: str | None = None, on_listed=None,
                progress=None) -> Revalidated:  # fmt: skip
    """``gc apply``'s first half: the plan read (gc's or ``paimon orphans``'), re-validated against
    the storage it was made against (unless ``s3_endpoint`` names another) where
    :func:`apply_master` says. Nothing to delete on executors: reported as in-process (the first
    skips), their frames released."""
    from ckptctl.gc.apply import revalidate
    from ckptctl.gc.planfile import load_json, read_plan, storage_from_plan
    from ckptctl.paimon import orphans

    if orphans.is_orphan_plan(load_json(plan_file)):  # `ckptctl paimon orphans -o`
        plan_data = read_plan(plan_file, orphans.validate, "ckptctl paimon orphans")
    else:
        plan_data = read_plan(plan_file)
    storage = Storage(storage_from_plan(plan_data, s3_endpoint))
    storage.on_listed = on_listed  # a running count while S3 is listed
    master = apply_master(engine, plan_data.get("engine"))
    go: list = []  # what this process deletes
    skipped: list[dict[str, Any]] = []
    to_apply = None  # or what the executors delete
    if orphans.is_orphan_plan(plan_data):  # a Paimon table's orphans
        fresh, go, skipped = orphans.revalidate(storage, plan_data)
    elif master is not None:
        from ckptctl.gc.spark.apply import revalidate_spark

        fresh, to_apply = revalidate_spark(storage, plan_data, plan_file, master)
    else:
        fresh, go, skipped = revalidate(storage, plan_data, progress=progress)
    if master is not None and to_apply is None:
        from ckptctl.gc.spark.delete import ToApply

        to_apply = ToApply.of(go, skipped)
    if to_apply is not None and not to_apply.files:
        to_apply.release()
        go, skipped, to_apply = [], to_apply.skips, None
    return Revalidated(storage, fresh, go, skipped, to_apply, master)
