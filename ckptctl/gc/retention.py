"""Retention: which checkpoints stay (the newest ``--keep-last`` per job, every savepoint) and which
expire, decided once by both planners before anything is folded."""

from __future__ import annotations

from dataclasses import dataclass

from ckptctl import storage as st
from ckptctl.checkpoint.layout import CheckpointLocation
from ckptctl.gc.reasons import Refusal
from ckptctl.gc.state import CLOCK_TOLERANCE, PlanState


@dataclass
class Retention:
    retained: list[CheckpointLocation]
    expired: list[CheckpointLocation]
    newest_retained: dict[str, CheckpointLocation]  # job dir -> its newest retained checkpoint
    notes: list[str]


def retain(
    state: PlanState, discovered: dict[str, CheckpointLocation], now: float, cutoff: float
) -> Retention:
    """Newest K ``chk-N`` per job (all without ``--keep-last``), every savepoint and every other
    directory holding a ``_metadata``. An expired checkpoint goes as a unit: if its
    ``_metadata`` could not be deleted now (young, in flight, no mtime...), it stays retained
    and so do all its files."""
    options = state.options
    by_job: dict[str, list[CheckpointLocation]] = {}
    retained: list[CheckpointLocation] = []
    for loc in sorted(discovered.values(), key=lambda c: c.uri):
        if loc.kind == "checkpoint":
            by_job.setdefault(st.parent(loc.uri), []).append(loc)
        else:
            retained.append(loc)
    expired: list[CheckpointLocation] = []
    newest: dict[str, CheckpointLocation] = {}
    notes: list[str] = []
    for job_uri, locs in by_job.items():
        locs.sort(key=lambda c: c.dir_checkpoint_id or 0)
        keep = locs if options.keep_last is None else locs[-options.keep_last :]
        expired_here = len(expired)
        # the anchor of the in-flight guard: a _metadata from the future proves nothing (it is
        # a refusal of its own); the newest believable one anchors, or none (keep everything)
        believable = [c for c in keep if (c.metadata.mtime or 0) <= now + CLOCK_TOLERANCE]
        newest[job_uri] = max(believable or keep, key=lambda c: c.metadata.mtime or 0)
        for loc in locs:
            if loc in keep:
                retained.append(loc)
                continue
            meta = loc.metadata
            m = meta.mtime
            # exactly the guards classify() applies to files of an expired checkpoint directory
            if meta.is_link or m is None or m <= 0 or m >= cutoff or m > now + CLOCK_TOLERANCE:
                retained.append(loc)
                notes.append(
                    f"{loc.uri} is past --keep-last but its _metadata is too young or has no usable "
                    "mtime to be deleted now: the checkpoint is kept whole"
                )
            else:
                expired.append(loc)
        gone = expired[expired_here:]
        if gone and max(c.metadata.mtime or 0 for c in gone) > min(c.metadata.mtime or 0 for c in keep):
            state.refuse(
                Refusal.KEEP_LAST_ORDER,
                f"in {job_uri} a checkpoint --keep-last would expire completed after one it keeps (chk-N "
                "numbers and _metadata times disagree: a job restored from an older checkpoint under the "
                "same job id?). Look at the checkpoints with `ckptctl ls`; run without --keep-last",
            )
    return Retention(retained, expired, newest, notes)
