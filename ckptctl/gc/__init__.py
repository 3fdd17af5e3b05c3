"""Orphan garbage collection across every job, checkpoint and savepoint under the scanned roots.

``options`` (what was asked) → ``plan`` (discover → retain → fold → classify, the whole decision;
``spark/`` the same on executors) → ``planfile`` (the reviewed plan, validated on read) →
``revalidation`` (the one check before deletion) → ``apply`` (delete without leaving the roots).
``run`` holds the two commands below the CLI and where they run; ``reasons`` the codes every
decision is made of.
"""

from ckptctl.gc.apply import ApplyResult, apply_plan, revalidate
from ckptctl.gc.options import GcOptions
from ckptctl.gc.plan import FileDecision, GcPlan, GcRefused, build_plan
from ckptctl.gc.planfile import PLAN_FORMAT, InvalidPlan, read_plan
from ckptctl.gc.reasons import Reason, Refusal

__all__ = [
    "PLAN_FORMAT", "ApplyResult", "FileDecision", "GcOptions", "GcPlan", "GcRefused", "InvalidPlan", "Reason",
    "Refusal", "apply_plan", "build_plan", "read_plan", "revalidate",
]  # fmt: skip
