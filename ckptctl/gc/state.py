"""What one planning run has been asked and has found so far, shared by the parts that plan.

The planners (:mod:`ckptctl.gc.plan`, :mod:`ckptctl.gc.spark`) are made of parts, each an object
holding this record: the discovery (:mod:`ckptctl.gc.discovery`), the guards
(:mod:`ckptctl.gc.guards`), the S3 Inventory source (:mod:`ckptctl.gc.inventory_source`), the
checkpoints read late (:mod:`ckptctl.gc.late`) and the conclusion (:mod:`ckptctl.gc.conclusion`).
Each reads the options, the scopes and the walks' notes here, and adds its refusals and warnings
here: a plan is what they add up to.
"""

from __future__ import annotations

from typing import Any

from ckptctl import storage as st
from ckptctl.errors import CkptError
from ckptctl.gc.options import GcOptions
from ckptctl.gc.reasons import Refusal
from ckptctl.gc.scopes import Scopes
from ckptctl.storage import Storage

CLOCK_TOLERANCE = 300.0  # seconds a file's mtime may lead the storage clock before we refuse


class GcRefused(CkptError):
    """The plan has refusals: nothing may be deleted."""

    exit_code = 1


class PlanState:
    """The options (normalised and validated), the scopes, and what the run has said and seen."""

    def __init__(self, storage: Storage, options: GcOptions, progress=None) -> None:
        options = options.normalized()
        options.validate()
        self.storage, self.options, self.progress = storage, options, progress
        self.scopes = Scopes(options)
        self.refusals: list[dict[str, str]] = []
        self.warnings: list[str] = []
        self.notes: dict[str, st.WalkNotes] = {}  # root -> what its walk saw besides files
        self.late: list[str] = []  # checkpoints found only by the full listing (LateCheckpoints.fold_late)
        self.siblings: list[str] = []  # checkpoints beside a ROOT that is a job directory (fold_siblings)
        self.inventory = None  # --inventory: the parsed manifest (ckptctl.inventory.Inventory)
        self.inventory_record: dict[str, Any] | None = None
        self.metadata_seen: set[tuple] = set()  # --inventory: the _metadata files discovery listed

    def refuse(self, code: Refusal, message: str) -> None:
        self.refusals.append({"code": code.value, "message": message})
