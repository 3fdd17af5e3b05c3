"""Re-validation of a plan before deletion: the one check every ``gc apply`` makes, whatever made
the plan (``gc plan`` in-process or on Spark, ``paimon orphans``) and wherever it deletes.

An old plan is never trusted: it is checked whole and never applied when it was blocked, a fresh
plan is made with its own options (:func:`replanned`; refused when the fresh one is blocked), and
only the old candidates the fresh plan still proposes with the same size and mtime go
(:func:`still_candidates`; on Spark the same rule as a join on executors,
:func:`ckptctl.gc.spark.apply.unchanged_candidates`). Every other candidate is skipped with a code
(:data:`SKIP_WORDS`) saying why (:func:`why_dropped`): a re-run after a completed apply finds every
file gone, which is not the same news as a file Flink holds again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ckptctl import storage as st
from ckptctl.errors import CkptError
from ckptctl.gc.planfile import BlockedPlan
from ckptctl.storage import Storage


class GcApplyRefused(CkptError):
    exit_code = 1


# why a candidate of the plan is not deleted now (``skipped[].code``): a re-run after a completed
# apply finds every file GONE (done), which is not the same news as a file Flink holds again
GONE, LIVE, GUARDED, CHANGED, WAITING = "already-gone", "referenced-again", "guarded", "changed", "waiting"
SKIP_WORDS = {
    GONE: "already gone (done)",
    LIVE: "referenced again (kept)",
    GUARDED: "guarded now (kept)",
    CHANGED: "changed since the plan (kept)",
    WAITING: "kept until their expired _metadata goes",
}
CHANGED_WHY = "changed since the plan (size or mtime)"
WAITING_WHY = (
    "its expired checkpoint's _metadata is not deleted this time"  # expired checkpoints go as a unit
)


def replanned(plan_data: dict[str, Any], validate: Callable[[dict[str, Any]], None], replan: Callable[[], Any],
              planner: str = "ckptctl gc plan") -> Any:  # fmt: skip
    """The fresh plan a re-validation compares with: ``plan_data`` checked whole (``validate``) and
    never applied when it was blocked, then ``replan()`` with the plan's own options, refused when
    that one is blocked (a plan with resources of its own, a Spark plan's frames, releases them
    first). ``planner``: the command that writes such plans."""
    validate(plan_data)
    if plan_data["blocked"]:
        raise BlockedPlan(f"this plan was blocked and can never be applied; run `{planner}` again")
    fresh = replan()
    if fresh.refusals:
        release = getattr(fresh, "release", None)
        if release is not None:
            release()
        raise GcApplyRefused("the re-validated plan is blocked: " + fresh.refusals[0]["message"])
    return fresh


def still_candidates(
    old: Iterable[dict[str, Any]], fresh: Iterable[Any]
) -> tuple[list, list[dict], list[str]]:
    """(go, skipped, dropped): of the old plan's candidates, the fresh plan's decision of each it
    still proposes with the same size and mtime (``None`` equal to ``None``), those changed since
    (skipped, :data:`CHANGED`), and the paths it no longer proposes (for :func:`why_dropped`)."""
    now = {c.path: c for c in fresh}
    go: list = []
    skipped: list[dict[str, Any]] = []
    dropped: list[str] = []
    for c in old:
        current = now.get(c["path"])
        if current is None:
            dropped.append(c["path"])
        elif current.size != c["size"] or current.mtime != c["mtime"]:
            skipped.append({"path": c["path"], "code": CHANGED, "reason": CHANGED_WHY})
        else:
            go.append(current)
    return go, skipped, dropped


def why_dropped(
    storage: Storage, paths: list[str], guarded: dict[str, Any], held: str = "referenced again"
) -> list[dict[str, Any]]:
    """The plan's candidates the fresh plan no longer proposes, each with its code: guarded by the
    fresh plan (``guarded``: path -> its reason), else gone (deleted already: by an earlier apply,
    or by Flink), else still there and ``held``. Presence is asked of listings on S3 (no request
    per file); gc apply and paimon's apply share this."""
    if not paths:
        return []
    rest = [p for p in paths if p not in guarded]
    unanswered: set[str] = set()
    present = storage.present(rest, unanswered=unanswered)
    out = []
    for path in paths:
        if path in guarded:
            out.append({"path": path, "code": GUARDED, "reason": f"guarded now: {guarded[path]}"})
            continue
        listed = st.scheme_of(path) == "s3" and path not in unanswered
        there = path in present if listed else storage.stat(path) is not None
        if there:
            out.append({"path": path, "code": LIVE, "reason": f"no longer an orphan: {held}"})
        else:
            out.append({"path": path, "code": GONE, "reason": "already gone (done)"})
    return out
