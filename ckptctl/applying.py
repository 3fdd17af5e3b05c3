"""``gc apply`` of a reviewed plan file, whichever planner wrote it: ``gc plan`` (in this process or
on Spark) or ``paimon orphans``. It sits above both features because it dispatches on the plan's
kind: gc's planner must not know Paimon's, and Paimon's orphan plans reuse gc's re-validation
(:mod:`ckptctl.gc.revalidation`) and deletion (:mod:`ckptctl.gc.apply`). Where the work runs is
gc's engine policy (:func:`ckptctl.gc.run.apply_master`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ckptctl.engine import Engine
from ckptctl.gc.run import apply_master
from ckptctl.storage import Storage


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
