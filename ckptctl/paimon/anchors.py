"""When a Paimon orphan may still be a writer's, by time: the anchors of ``paimon orphans``.

Paimon names a data file nowhere until its commit; a Flink writer's files for the checkpoint it is
taking are named by no completed checkpoint either. Two anchors, each less gc's ``--margin``, date
what may still be in flight: a scanned writer's newest checkpoint (gc's in-flight rule; by
checkpoint id, ``_metadata`` time), and the table's latest commit (no commit can have named a file
written after it: only a writer whose checkpoints are not scanned, or a running one, holds it). A
time that dates nothing (missing, before 2016, ahead of the storage's clock) keeps every file it
would date.
"""

from __future__ import annotations

import math
from typing import Any

from ckptctl.paimon.reachable import latest_commits
from ckptctl.paimon.restore import committers
from ckptctl.paimon.sinkelements import END_INPUT_IDENTIFIER as END_INPUT
from ckptctl.paimon.table import PaimonTable
from ckptctl.storage.listing import PLAUSIBLE_MTIME

# the areas of a table whose files a commit message names (OrphanCandidate.area): a bucket
# directory's data and changelog files, and index files
WRITTEN_BY_WRITERS = frozenset({"data", "index"})


def _usable(t: float | None, now: float) -> bool:
    """A time that dates something: not missing, not a store's stand-in (before 2016), not ahead of
    the storage's clock by more than gc's tolerance (a copy that kept another clock's times)."""
    from ckptctl.gc.state import CLOCK_TOLERANCE

    return t is not None and PLAUSIBLE_MTIME <= t <= now + CLOCK_TOLERANCE


def iso_time(t: float | None) -> str:
    """``t`` as the ISO time ``--older-than`` takes (a refusal suggests one); a time that is none, as itself."""
    import datetime as dt

    try:
        return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (TypeError, OverflowError, OSError, ValueError):
        return repr(t)


def writer_anchors(loaded, now: float) -> list[dict[str, Any]]:
    """Per commit user with Paimon committer state in a scanned checkpoint or savepoint, gc's
    in-flight anchor: the ``_metadata`` time of its newest checkpoint by id (checkpoint and
    savepoint ids count up along a job's lineage; a copy of an older savepoint made today does not
    move the anchor; of two with one id, after a restore from an older one, the later). ``mtime``
    is ``None`` when that time dates nothing (:func:`_usable`): then nothing tells when the
    user's writer last checkpointed."""
    newest: dict[str | None, tuple[int, float, str, float | None]] = {}
    for ck, s in loaded:
        meta = ck.location.metadata
        t = None if meta is None else meta.mtime
        key = (s.checkpoint_id, -math.inf if t is None else t, ck.location.uri, t)
        for op in committers(s):
            if op.commit_user not in newest or key > newest[op.commit_user]:
                newest[op.commit_user] = key
    return [
        {"commit_user": user, "checkpoint": uri, "checkpoint_id": ck_id, "mtime": t if _usable(t, now) else None,
         "metadata_mtime": t}
        for user, (ck_id, _t, uri, t) in sorted(newest.items(), key=lambda kv: str(kv[0]))
    ]  # fmt: skip


def in_flight_from(anchors: list[dict[str, Any]], margin: float, warnings: list[str]) -> float:
    """The time from which a file may be in flight for some scanned writer: its newest checkpoint
    less the margin, the earliest over the writers; an anchor that dates nothing: every file (-inf)."""
    for a in anchors:
        if a["mtime"] is None:
            warnings.append(
                f"commit user {a['commit_user']}: the _metadata of its newest checkpoint {a['checkpoint']} has no "
                f"usable time ({iso_time(a['metadata_mtime'])}: missing, before 2016 or ahead of the storage's clock), "
                "so nothing tells when its writer last checkpointed: every Paimon orphan is kept as possibly in flight"
            )
            return -math.inf
    return min((a["mtime"] - margin for a in anchors), default=math.inf)


def table_latest_commit(table: PaimonTable, now: float) -> dict[str, Any] | None:
    """The table's latest commit: of each branch's newest snapshot, the earlier of its file's time
    and its ``timeMillis`` (a copied table or a new branch gives the file a later time; a committer
    whose clock is ahead, the snapshot: either is later than the commit), the newest over the
    branches, or the first whose file time dates nothing (then no file is known to be older than it)."""
    found = []
    for branch, f, snap in latest_commits(table):
        said = None if snap is None else snap.time_millis / 1000
        times = [t for t in (f.mtime, said) if _usable(t, now)]
        found.append((branch, f, min(times) if _usable(f.mtime, now) else None))
    if not found:
        return None
    unusable = [x for x in found if x[2] is None]
    branch, f, t = unusable[0] if unusable else max(found, key=lambda x: x[2])
    return {"branch": branch, "snapshot": table.relative(f.uri), "mtime": t, "file_mtime": f.mtime}


def after_commit_from(latest: dict[str, Any] | None, margin: float, warnings: list[str]) -> float:
    """From when a writer's file was named by no commit yet: the latest commit less the margin. No
    commit at all, or one whose time dates nothing: every file (-inf)."""
    if latest is not None and latest["mtime"] is not None:
        return latest["mtime"] - margin
    warnings.append(
        (
            "the table has no snapshot: no commit named any of its files"
            if latest is None
            else f"{latest['snapshot']}, the table's latest commit, has no usable time ({iso_time(latest['file_mtime'])}: "
            "missing, before 2016 or ahead of the storage's clock)"
        )
        + ": every data, changelog and index file no scanned checkpoint names is kept (a writer whose checkpoints "
        "are not scanned may hold it)"
    )
    return -math.inf


def failing_checkpoints(anchors: list[dict[str, Any]], latest_of: dict[str, tuple[str, Any]], cutoff: float,
                        margin: float) -> list[dict[str, str]]:  # fmt: skip
    """A refusal per streaming commit user of the table (``latest_of``: user -> (label, its highest
    commit)) whose newest scanned checkpoint is older than the cut-off: its checkpoints are failing,
    or the job stopped (nothing tells the two apart), and what its writer flushed since is named by
    no checkpoint yet. The line names the user and the checkpoint, and the cut-off a stopped job
    takes."""
    out = []
    for a in anchors:
        was = latest_of.get(a["commit_user"])
        if was is None or was[1].commit_identifier == END_INPUT or a["mtime"] is None or a["mtime"] >= cutoff:
            continue
        out.append({"code": "failing-checkpoints", "message": (
            f"commit user {a['commit_user']}: its newest checkpoint {a['checkpoint']} completed at "
            f"{iso_time(a['mtime'])}, before the cut-off {iso_time(cutoff)}: its checkpoints are failing (or the job "
            "stopped), and the files its writer flushed since are named by no checkpoint yet; if the job is "
            f"stopped, pass --older-than {iso_time(a['mtime'] - margin)} or earlier"
        )})  # fmt: skip
    return out
