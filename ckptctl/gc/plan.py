"""Planning: discover → retain → fold → classify, over every job under the scanned roots.

The plan is the whole decision: every file is live, a candidate, or protected (each with a
:class:`~ckptctl.gc.reasons.Reason`), and every :class:`~ckptctl.gc.reasons.Refusal` blocks the
plan outright. It fails closed: what ckptctl cannot prove (an unreadable ``_metadata``, a moved
directory without ``--rebase``, a reference outside the roots or missing from the listing, a
file without an mtime, a clock in the future or unknown, checkpoints completing during the
scan, overlapping scopes) protects files or blocks deletion.

Paths are compared in one form only (:func:`ckptctl.storage.normalize_uri`, Flink ``Path``
semantics), and only files inside Flink's directory grammar (:func:`ckptctl.checkpoint.layout.place_of`)
can ever be candidates.

Lessons taken from other systems' orphan GC (see the project's anchors notes): Iceberg's age
floor and scheme normalisation, Paimon's fail-closed reads, Delta's retention check anchored on
the newest commit, Fluss's keep-when-mtime-unknown, plus blast-radius caps and a plan file.

This module holds the local planner's orchestration (the steps in order and what they hand each
other); the parts it holds (:class:`~ckptctl.gc.steps.PlanSteps`) live by what they do: discovery
in :mod:`ckptctl.gc.discovery`, retention in :mod:`ckptctl.gc.retention`, the checks that block a
plan in :mod:`ckptctl.gc.guards`, the S3 Inventory report in :mod:`ckptctl.gc.inventory_source`,
the checkpoints read late in :mod:`ckptctl.gc.late`, the fold in :mod:`ckptctl.gc.folding`, the
per-directory context of the rule in :mod:`ckptctl.gc.contexts`, the rule itself in
:mod:`ckptctl.gc.rule`, the per-file outcome in :mod:`ckptctl.gc.listed`, and what is concluded
from it in :mod:`ckptctl.gc.conclusion`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from typing import Any

from ckptctl import storage as st
from ckptctl.checkpoint.layout import METADATA_FILE, CheckpointLocation
from ckptctl.checkpoint.scan import ScanStorage
from ckptctl.gc.activity import JobActivity
from ckptctl.gc.contexts import JobEvidence, forst_parents
from ckptctl.gc.decisions import FileDecision, GcPlan
from ckptctl.gc.folding import Folded, flag_held, fold_references, fold_references_packed
from ckptctl.gc.listed import Listed, ListedFlags, PathsByDir, Tally, flag_listed, list_runs, unlisted
from ckptctl.gc.options import GcOptions
from ckptctl.gc.reasons import Refusal
from ckptctl.gc.retention import Retention, retain
from ckptctl.gc.rule import FileRule, RunToDecide
from ckptctl.gc.state import GcRefused
from ckptctl.gc.steps import PlanSteps
from ckptctl.pycollector import paused_collector
from ckptctl.storage import FileInfo, Storage
from ckptctl.storage.listing import DirFiles, dir_runs

__all__ = [
    "FileDecision",
    "FileRule",
    "GcPlan",
    "GcRefused",
    "Tally",
    "build_plan",
]  # also the Spark planner's

# Above this many listed files the in-process plan says to use --engine spark. Measured with
# bench/gc_bench.py: the local planner peaks at 162 bytes of RSS per listed file at 1M files and 107
# at 3M (names, sizes, mtimes and decisions as columns, the live names packed and looked up by the
# fold worker; it was ~460, then 219 and 166), so 20M files take under the ~3.6 GB this bound says,
# about what a CI runner or a small VM has to spare, besides the fold worker's live set (300 B a
# listed file at 3M) and a walk of minutes. Spark spreads both. A hint, not a refusal: a big machine
# plans more in-process.
BYTES_PER_FILE = 180
SPARK_HINT_FILES = 20_000_000
PARALLEL_METADATA_BYTES = 8 << 20  # below this, a worker process costs more than it saves
WORKER_PIECES_BYTES = 4 << 20  # listed names sent to the fold worker at a time (pickled, a transient copy)


def build_plan(
    storage: Storage,
    options: GcOptions,
    *,
    progress: Callable[[Iterable[CheckpointLocation], int], Iterable[CheckpointLocation]] | None = None,
) -> GcPlan:
    """Scan the roots, read every ``_metadata``, and decide the fate of every file.

    Memory stays bounded by the listing and the live set: each checkpoint is decoded, reduced
    to the paths it references, and dropped before the next is read.
    """
    with paused_collector():
        return LocalPlanner(storage, options, progress).run()


class LocalPlanner:
    """The local planner: every step in this process. The Spark planner
    (:class:`ckptctl.gc.spark.planner.SparkPlanner`) holds the same parts (:class:`PlanSteps`) and
    runs the same steps, except folding, listing and classifying, on executors."""

    def __init__(self, storage: Storage, options: GcOptions, progress) -> None:
        self.steps = PlanSteps.of(storage, options, progress)
        self.state = self.steps.state
        self.fold_worker = None  # the process that folded the references, until it has flagged the listing

    def run(self) -> GcPlan:
        try:
            return self._run()
        finally:
            if self.fold_worker is not None:  # a step before classification failed
                self.fold_worker.shutdown()

    def _run(self) -> GcPlan:
        steps, state = self.steps, self.state
        now, now_source, cutoff = steps.discovery.start()
        prelisted = steps.discovery.prelist()
        discovered = steps.discovery.discover(prelisted)
        retention = retain(state, discovered, now, cutoff)
        state.warnings.extend(retention.notes)
        folded, listings = self.fold_while_listing(retention, prelisted)
        hidden = steps.guards.check_checkpoints_unchanged(
            discovered,
            named(listings, METADATA_FILE),
            ((root, run.parent) for root, runs in listings for run in runs),
        )
        steps.late.fold_late([f for f in hidden if st.parent(f.uri) not in discovered], retention, folded)
        steps.late.fold_siblings(retention, folded)
        steps.guards.check_no_aliases()
        steps.guards.check_mounts(retention)
        plan = self.classify(now, now_source, cutoff, retention, folded, listings)
        if state.inventory is not None:
            steps.report.check_metadata_after_plan()
        return plan

    # -- fold (decode every checkpoint while the roots are listed) ----------------------
    def fold_while_listing(self, retention: Retention, prelisted) -> tuple[Folded, list]:
        state = self.state
        storage, options = state.storage, state.options
        ordered = retention.retained + retention.expired
        retained_set = {loc.uri for loc in retention.retained}
        prefixes = state.scopes.prefixes
        worker = None
        # a scan (check's orphan count) holds the listing and the _metadata bytes already: a worker
        # would overlap nothing and read every _metadata again from the storage
        if sum(loc.metadata.size for loc in ordered) >= PARALLEL_METADATA_BYTES and not isinstance(
            storage, ScanStorage
        ):
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            worker = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
            future = worker.submit(
                fold_references_packed, storage.options, ordered, retained_set, options.rebase, prefixes
            )
        listings: list[tuple[str, list[DirFiles]]] = []
        seen: dict = {}  # one (device, inode) map for every scope: an alias across scopes is one too
        from_inventory = self.steps.report.inventory_listings() if state.inventory is not None else None
        for root in state.scopes.listed:
            notes = state.notes[root] = st.WalkNotes(seen=seen)
            if from_inventory is not None:
                runs = list(dir_runs(from_inventory.pop(root)))
            else:
                runs = list(dir_runs(prelisted.pop(root))) if prelisted else list_runs(storage, root, notes)
            listings.append((root, runs))
            self.steps.guards.check_listed(root, bool(runs))
        if worker is not None:
            try:
                folded = future.result()
            except BaseException:
                worker.shutdown()
                raise
            self.fold_worker = worker  # it holds the live set: it looks the listed files up (flag_listed)
        else:
            folded = fold_references(storage, ordered, retained_set, options.rebase, prefixes, state.progress)
            folded.live, folded.expired_refs = (
                PathsByDir.packed(folded.live),
                PathsByDir.packed(folded.expired_refs),
            )
        for code, message in folded.refusals:
            state.refuse(Refusal(code), message)
        return folded, listings

    # -- classify every listed file ------------------------------------------------------
    def classify(self, now, now_source, cutoff, retention: Retention, folded: Folded, listings) -> GcPlan:
        """The fate of every listed file, in this process (the Spark planner runs the same
        :meth:`FileRule.verdicts` on executors and the same :meth:`~ckptctl.gc.conclusion.Conclusion.finish`)."""
        live, spans, expired = (
            PathsByDir.of(folded.live),
            PathsByDir.of(folded.spans),
            PathsByDir.of(folded.expired_refs),
        )
        state, conclusion = self.state, self.steps.conclusion
        evidence = JobEvidence.of_listings(state.scopes, retention, folded, listings, state.notes)
        rule = conclusion.rule(now, cutoff, bool(folded.expired_refs))
        activity = JobActivity.of_listings(state.scopes, retention.newest_retained, listings, state.notes,
                                           conclusion.quiet_before(rule))  # fmt: skip
        contexts = conclusion.contexts(now, retention, evidence, activity,
                                       lambda: forst_parents(itertools.chain(folded.live, folded.spans)))  # fmt: skip
        runs = [run for _root, runs in listings for run in runs]
        flags = self.flag_listed(runs, live, expired if rule.check_expired else None)
        tally = Listed(
            listings, live, spans, flags.live_unlisted, sum(f.count(1) for f in flags.live if f is not None)
        )
        if tally.total_files > SPARK_HINT_FILES:
            state.warnings.append(
                f"{tally.total_files:,} files listed: planning in this process holds ~{BYTES_PER_FILE} bytes per file "
                f"(~{tally.total_files * BYTES_PER_FILE / 1e9:.0f} GB); above {SPARK_HINT_FILES:,} files use --engine spark"
            )
        future_limit = rule.tolerance_limit
        todo = [RunToDecide(run, contexts.get(run.parent), is_live, spans.dirs.get(run.parent, {}), is_expired)
                for run, is_live, is_expired in zip(runs, flags.live, flags.expired, strict=True)]  # fmt: skip
        for item, decided in zip(
            todo, rule.decide_runs(todo, tally.verdicts, tally.partially_live.append), strict=True
        ):
            run = item.run
            tally.live_files += decided.live_files
            tally.live_bytes += decided.live_bytes
            tally.candidates.add(run, decided.took, decided.took_as)
            tally.protected.add(run, decided.kept, decided.kept_as)
            # per-job totals, summed in C rather than per file
            stats = item.context[4]
            stats[0] += len(run)
            stats[1] += sum(run.sizes)
            stats[2] += len(decided.took)
            stats[3] += decided.took_bytes
            # any file in the future, live ones and _metadata included (found in C: max over mtimes)
            if run.newest() > future_limit:
                tally.future.extend(run.prefix + n for n, m in zip(run.names, run.mtimes, strict=True)
                                    if m > future_limit)  # fmt: skip
        return conclusion.finish(now, now_source, cutoff, retention, folded, contexts, tally)

    def flag_listed(self, runs: list[DirFiles], live: PathsByDir, expired: PathsByDir | None) -> ListedFlags:
        """Every listed file looked up in the live set (and the expired one) once, before Arrow and
        the decisions take their memory: classification reads a byte per file. By the fold worker
        when there is one, in the sets it holds (:func:`flag_held`): this process never makes a set
        of half a million names (57 MB at its peak at 1M files), it sends the listing's packed
        names a few MB at a time. Here unless :meth:`~ckptctl.gc.late.LateCheckpoints.fold_late` added live paths the worker lacks."""
        worker, self.fold_worker = self.fold_worker, None
        if worker is None:
            return flag_listed(runs, live, expired)
        try:
            if self.state.late or self.state.siblings:
                return flag_listed(runs, live, expired)
            # all pieces submitted at once: the executor pickles the next one or two while the worker
            # looks the last up (no round trip per piece), and holds the rest as references
            asked: list[tuple[list[int], Any]] = []
            pieces: list[tuple[str, str]] = []
            owners: list[int] = []
            size = 0
            for k, run in enumerate(runs):
                parent = run.parent
                if parent not in live.dirs and (expired is None or parent not in expired.dirs):
                    continue
                for _start, _count, packed in run.names.packed():
                    pieces.append((parent, packed))
                    owners.append(k)
                    size += len(packed)
                    if size >= WORKER_PIECES_BYTES:
                        asked.append((owners, worker.submit(flag_held, pieces, expired is not None)))
                        pieces, owners, size = [], [], 0
            if pieces:
                asked.append((owners, worker.submit(flag_held, pieces, expired is not None)))
            flags: tuple[list, list] = ([None] * len(runs), [None] * len(runs))
            for owners, future in asked:
                for k, answer in zip(owners, future.result(), strict=True):
                    for column, here in zip(flags, answer, strict=True):
                        if here is None:
                            continue
                        if column[k] is None:
                            column[k] = here
                        else:
                            column[k] += here
            return ListedFlags(*flags, unlisted(runs, live, flags[0]))
        finally:
            worker.shutdown()


def named(listings: list[tuple[str, list[DirFiles]]], name: str) -> list[tuple[str, list[FileInfo]]]:
    """The listed files called ``name``, per scope."""
    return [(root, [run.file(run.names.index(name)) for run in runs if name in run.names])
            for root, runs in listings]  # fmt: skip
