"""Discovery: the clock, the cut-off, and every completed checkpoint and savepoint under the scopes.

The first steps of both planners (:class:`ckptctl.gc.plan.LocalPlanner`, the Spark one): the scopes and
options checked, the storage clock read, and a fresh pruned walk of each listed scope for the
``_metadata`` files (never a full listing, but where one is made anyway: on object stores locally).
"""

from __future__ import annotations

import os
import time

from ckptctl import storage as st
from ckptctl.checkpoint.layout import CheckpointLocation, is_checkpoint_metadata, scan_root
from ckptctl.durations import OlderThan
from ckptctl.errors import CkptError
from ckptctl.gc.inventory_source import InventorySource
from ckptctl.gc.reasons import Refusal
from ckptctl.gc.state import CLOCK_TOLERANCE, PlanState
from ckptctl.storage import FileInfo


class Discovery:
    """What a plan starts from: (now, its source, the cut-off), and the checkpoints found."""

    def __init__(self, state: PlanState, report: InventorySource) -> None:
        self.state = state
        self.report = report  # --inventory: its manifest is read once the clock is known

    def start(self) -> tuple[float, str, float]:
        """Scopes, clock and cut-off checked, the inventory's manifest read: (now, its source, cutoff)."""
        options = self.state.options
        for problem in options.overlaps():
            self.state.refuse(Refusal.OVERLAPPING_SCOPES, f"overlapping scopes: {problem}")
        now, now_source = self.clock()
        cutoff = OlderThan(options.older_than, options.older_than_at).cutoff(now)
        # an instant: the cut-off as given, on no machine's clock (so it may lie in the future)
        if options.older_than_at is not None and options.older_than_at > now:
            raise CkptError(
                f"--older-than {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(options.older_than_at))} is "
                f"in the future of the storage clock ({now_source}): it would make every file old enough"
            )
        for root in options.roots:
            if st.scheme_of(root) == "file" and os.path.exists(root[5:]) and not os.path.isdir(root[5:]):
                raise CkptError("not a directory: a ROOT is a directory of checkpoints", path=root)
        if options.inventory is not None:
            self.report.open_inventory(now + CLOCK_TOLERANCE)  # no time the report gives is later
        return now, now_source, cutoff

    # -- clock ----------------------------------------------------------------------------
    def clock(self) -> tuple[float, str]:
        if self.state.options.clock == "local":
            return time.time(), "local clock (--clock local)"
        # every store in scope (a local root and an S3 one, two endpoints' buckets): the earliest
        # clock, so that no file is older on the clock that decides than on its own store's
        now, source = None, ""
        seen: set[str] = set()
        for scope in self.state.options.scopes():
            store = st.scheme_of(scope) + ":" + (scope.split("/")[2] if st.scheme_of(scope) == "s3" else "")
            if store in seen:
                continue
            seen.add(store)
            t, src = self.state.storage.now(scope)
            if t is None:
                now, source = None, src
                break
            if now is None or t < now:
                now, source = t, src
        if now is None:
            self.state.refuse(
                Refusal.CLOCK_UNKNOWN,
                f"the storage clock could not be read ({source}); age guards need it. "
                "Run again, or pass --clock local if this machine's clock is known to be right",
            )
            return time.time(), source
        return now, source

    # -- 1. discover ----------------------------------------------------------------------
    def prelist(self) -> dict[str, list[FileInfo]]:
        """On object stores finding the ``_metadata`` files costs a listing; list everything first."""
        if (
            all(st.scheme_of(r) == "file" for r in self.state.scopes.listed)
            or self.state.inventory is not None
        ):
            return {}  # locally a pruned walk finds _metadata; with --inventory a fresh one too
        return {root: list(self.state.storage.list_files(root)) for root in self.state.scopes.listed}

    def discover(self, prelisted: dict[str, list[FileInfo]]) -> dict[str, CheckpointLocation]:
        """Every completed checkpoint and savepoint (a directory with a ``_metadata``)."""
        discovered: dict[str, CheckpointLocation] = {}
        for root in self.state.scopes.listed:
            if prelisted:  # what the pruned walk finds, as locally and on Spark: the _metadata inside
                # jobs' shared/ and taskowned/ come through the listing (fold_late), said so
                found = [
                    f
                    for f in prelisted[root]
                    if not f.uri.endswith("/_metadata") or is_checkpoint_metadata(root, f.uri)
                ]
            else:
                found = self.state.storage.find_metadata(root)
            if self.state.inventory is not None:
                found = list(found)
                self.state.metadata_seen.update((f.uri, f.size, f.mtime) for f in found)
            for loc in scan_root(self.state.storage, root, found).locations():
                if loc.complete:
                    discovered.setdefault(loc.uri, loc)
        inside = sorted(u for u in discovered if self.state.scopes.scope_of(u)[1] == "changelog")
        if inside:
            # retained all the same (their files stay live); but the scope is wrong
            self.state.refuse(
                Refusal.OVERLAPPING_SCOPES,
                f"overlapping scopes: --changelog-dir holds checkpoints or savepoints (first: {inside[0]})",
            )
        return discovered
