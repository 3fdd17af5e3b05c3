"""The conclusion both planners draw from the per-file outcome: the rule they classify by, the
per-directory contexts, and everything decided from the outcome as a whole (refusals, caps,
warnings, the plan itself)."""

from __future__ import annotations

import math
from typing import Any

from ckptctl import storage as st
from ckptctl.gc.activity import JobActivity
from ckptctl.gc.contexts import DirContexts, JobEvidence
from ckptctl.gc.decisions import GcPlan
from ckptctl.gc.folding import Folded
from ckptctl.gc.guards import first_of
from ckptctl.gc.inventory_source import InventorySource
from ckptctl.gc.listed import Tally
from ckptctl.gc.mounts import OtherMounts
from ckptctl.gc.outcome_guards import OutcomeGuards
from ckptctl.gc.reasons import Reason, Refusal
from ckptctl.gc.retention import Retention
from ckptctl.gc.rule import FileRule
from ckptctl.gc.state import CLOCK_TOLERANCE, PlanState


class Conclusion:
    """The rule and the contexts a planner classifies with, and the plan it concludes."""

    def __init__(self, state: PlanState, outcome: OutcomeGuards, report: InventorySource) -> None:
        self.state, self.outcome, self.report = state, outcome, report

    def contexts(self, now: float, retention: Retention, evidence: JobEvidence, activity: JobActivity,
                 forst_parents) -> DirContexts:  # fmt: skip
        return DirContexts(self.state.scopes, retention, forst_parents, now + CLOCK_TOLERANCE, evidence, activity,
                         OtherMounts(self.state.scopes, self.state.notes))  # fmt: skip

    def quiet_before(self, rule: FileRule) -> float:
        """A job without a retained checkpoint seen at work since this time may be running
        (:class:`JobActivity`): --older-than + --margin ago (or before the inventory began, less
        the margin: the report cannot show what came after)."""
        return rule.young_limit - self.state.options.margin

    def rule(self, now: float, cutoff: float, check_expired: bool) -> FileRule:
        # --inventory: a file modified once the report began may be in it as it was, or not at all
        inventory_created = self.state.inventory.created if self.state.inventory is not None else math.inf
        return FileRule(cutoff, now + CLOCK_TOLERANCE, self.state.options.margin, min(cutoff, inventory_created),
                        {"cutoff": cutoff}, {"inventory_created": inventory_created}, check_expired)  # fmt: skip

    def finish(self, now, now_source, cutoff, retention: Retention, folded: Folded, contexts: DirContexts,
               tally: Tally) -> GcPlan:  # fmt: skip
        """Everything decided from the per-file outcome as a whole: refusals, caps, the plan."""
        options = self.state.options
        external = folded.external
        if external and not options.allow_external:
            first = min(external)  # the same on every run (sets follow the hash seed)
            self.state.refuse(
                Refusal.EXTERNAL_REFERENCES,
                f"{len(external)} references point outside the scanned roots (first: {first}). They may mean a "
                "moved directory or a missing --savepoints/--changelog-dir. Scan their location too, map it with "
                "--rebase, or pass --allow-external (files outside the roots are never deleted)",
            )
        external_names = {st.basename(p): p for p in external}
        if contexts.overlaps:
            self.state.refuse(Refusal.OVERLAPPING_SCOPES, f"overlapping scopes: {contexts.overlaps[0]}")
        missing_paths = tally.missing_paths()
        if missing_paths and self.state.inventory is not None:
            # written after the report (a running job's new files): there now, so live, not missing
            present = self.report.present_now(missing_paths)
            missing_paths -= present.keys()
            tally.live_files += len(present)
            tally.live_bytes += sum(present.values())
            self.state.inventory_record["live_files_not_in_inventory"] = len(present)
        missing, relive = self.outcome.missing_files(missing_paths, retention, tally.savepoint_files)
        tally.drop_listing()
        if relive:  # savepoint files a FLINK-39964 checkpoint uses: live, not merely protected
            tally.relive(relive)
        future_count, future_first = tally.future_files()
        if future_count:
            self.state.refuse(
                Refusal.FUTURE_MTIME,
                f"{future_count} files have a modification time in the future of the storage clock ({now_source}), "
                f"first: {future_first}; a skewed clock makes age guards meaningless",
            )
        collision = tally.first_collision(external_names) if external_names else None
        if collision:
            self.state.refuse(
                Refusal.NAME_COLLISION,
                f"candidate {collision} has the same name as the external reference "
                f"{external_names[st.basename(collision)]}: a moved directory? pass --rebase",
            )
        n_candidates, candidate_bytes = tally.candidate_totals()
        if n_candidates and tally.live_set_empty():
            self.state.refuse(
                Refusal.EMPTY_LIVE_SET,
                "the live set is empty but there are candidates: refusing to delete everything",
            )
        dead_jobs = self.outcome.caps(
            contexts, n_candidates, candidate_bytes, tally.total_files, tally.total_bytes, retention
        )
        active = sorted(j for j, v in contexts.dead_verdicts.items() if v is Reason.JOB_ACTIVE)
        if active:
            self.state.warnings.append(
                f"{len(active)} jobs have no retained checkpoint but wrote a file or a chk-N directory less than "
                f"--older-than + --margin ago ({first_of([st.basename(j) for j in active], 5)}): they may be running, "
                "their first checkpoint still uploading, so their files are kept (job-active). Run the plan again "
                "once they have completed a checkpoint, or once they have been quiet that long"
            )
        if contexts.fixed_ids_kept:
            ids = sorted(contexts.fixed_ids_kept)
            self.state.warnings.append(
                f"the changelog files of {len(ids)} fixed job ids are kept ({first_of(ids, 3)}): "
                "application mode with HA gives every deployment of a cluster id (before Flink 1.16: every "
                "deployment) the same id, so one whose checkpoints are not scanned may use them. Scan every root "
                "that writes under those ids, then pass --collect-fixed-id-changelog to collect them"
            )
        if retention.expired:
            self.outcome.check_no_job_starting(contexts, tally.kept_paths_since, retention, cutoff)
        self.outcome.check_no_metadata_being_written(tally.metadata_being_written, cutoff)
        return tally.plan(
            options, now, now_source, cutoff,
            sorted((folded.info[u] for u in {loc.uri for loc in retention.retained}), key=lambda d: d["path"]),
            sorted((folded.info[u] for u in {loc.uri for loc in retention.expired}), key=lambda d: d["path"]),
            sorted(external.values(), key=lambda d: d["path"]), missing, self.state.refusals,
            self.state.warnings, dead_jobs, {"s3_endpoint": self.state.storage.options.s3_endpoint}, self.discovery_record(),
            self.state.inventory_record,
        )  # fmt: skip

    def discovery_record(self) -> dict[str, Any]:
        """What discovery did besides listing files, for the plan: directory symlinks followed,
        directories not descended into because they were reached a second time (aliases), other
        mounts, and checkpoints found only by the full listing (inside a job-named shared/)."""
        notes = list(self.state.notes.values())
        return {
            "followed_symlinks": [{"path": p, "target": t} for n in notes for p, t in n.followed],
            "not_descended": [{"path": p, "why": f"the same directory as {first}"} for n in notes
                              for p, first in n.aliases],
            "mounts": [m for n in notes for m in n.mounts],
            "found_by_listing_only": self.state.late,
            "read_beside_roots": self.state.siblings,
        }  # fmt: skip
