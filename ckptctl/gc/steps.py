"""The parts both planners are made of, built once per plan around one :class:`PlanState`.

The local planner (:class:`ckptctl.gc.plan.LocalPlanner`) and the Spark one
(:class:`ckptctl.gc.spark.planner.SparkPlanner`) differ in how they fold, list and classify; the
rest they hold as these parts rather than inherit it: the same discovery, guards, inventory
source, late reads and conclusion, so the same refusals and warnings in the same order.
"""

from __future__ import annotations

from dataclasses import dataclass

from ckptctl.gc.conclusion import Conclusion
from ckptctl.gc.discovery import Discovery
from ckptctl.gc.guards import Guards
from ckptctl.gc.inventory_source import InventorySource
from ckptctl.gc.late import LateCheckpoints
from ckptctl.gc.options import GcOptions
from ckptctl.gc.outcome_guards import OutcomeGuards
from ckptctl.gc.state import PlanState
from ckptctl.storage import Storage


@dataclass
class PlanSteps:
    state: PlanState
    guards: Guards
    report: InventorySource  # --inventory's report (read only when one is given)
    discovery: Discovery
    late: LateCheckpoints
    conclusion: Conclusion

    @classmethod
    def of(cls, storage: Storage, options: GcOptions, progress=None) -> PlanSteps:
        state = PlanState(storage, options, progress)
        guards, report = Guards(state), InventorySource(state)
        return cls(state, guards, report, Discovery(state, report), LateCheckpoints(state),
                   Conclusion(state, OutcomeGuards(state), report))  # fmt: skip
