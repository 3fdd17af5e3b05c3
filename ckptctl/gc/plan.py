"""Planning: discover → retain → fold → classify, over every job under the scanned roots.

The plan is the whole decision: every file is live, a candidate, or protected (each with a
:class:`~ckptctl.gc.reasons.Reason`), and every :class:`~ckptctl.gc.reasons.Refusal` blocks the
plan outright. It fails closed: what ckptctl cannot prove (an unreadable ``_metadata``, a moved
directory without ``--rebase``, a reference outside the roots or missing from the listing, a
file without an mtime, a clock in the future or unknown, checkpoints completing during the
scan, overlapping scopes) protects files or blocks deletion.

Paths are compared in one form only (:func:`ckptctl.storage.normalize_uri`, Flink ``Path``
semantics), and only files inside Flink's directory grammar (:func:`ckptctl.layout.place_of`)
can ever be candidates.

Lessons taken from other systems' orphan GC (see the project's anchors notes): Iceberg's age
floor and scheme normalisation, Paimon's fail-closed reads, Delta's retention check anchored on
the newest commit, Fluss's keep-when-mtime-unknown, plus blast-radius caps and a plan file.

This module holds the orchestration (the steps in order and what they hand each other); the
parts it drives live by what they hold: the checks that block a plan in
:mod:`ckptctl.gc.guards`, the S3 Inventory report in :mod:`ckptctl.gc.inventory_source`, the
per-directory context of the rule in :mod:`ckptctl.gc.contexts`, the rule itself in
:mod:`ckptctl.gc.rule` and the per-file outcome in :mod:`ckptctl.gc.listed`.
"""

from __future__ import annotations

import itertools
import math
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ckptctl import storage as st
from ckptctl.checkpoint.layout import (
    METADATA_FILE,
    CheckpointLocation,
    begins_like_metadata,
    classify,
    is_checkpoint_metadata,
    renamed_checkpoint_dir,
    scan_root,
)
from ckptctl.checkpoint.loading import LoadedCheckpoint, load_checkpoint
from ckptctl.checkpoint.rebase import Rebase
from ckptctl.checkpoint.refs import referenced_uris
from ckptctl.checkpoint.scan import ScanStorage
from ckptctl.errors import CkptError, StoreUnanswered
from ckptctl.gc.activity import JobActivity
from ckptctl.gc.contexts import JobEvidence, _Contexts, _forst_parents
from ckptctl.gc.decisions import FileDecision, GcPlan
from ckptctl.gc.guards import Guards, first_of
from ckptctl.gc.inventory_source import InventorySource
from ckptctl.gc.listed import (
    Listed,
    ListedFlags,
    PathsByDir,
    Tally,
    flag_listed,
    list_runs,
    name_flags,
    unlisted,
)
from ckptctl.gc.mounts import OtherMounts
from ckptctl.gc.options import GcOptions
from ckptctl.gc.reasons import Reason, Refusal
from ckptctl.gc.rule import FileRule, RunToDecide
from ckptctl.gc.siblings import (
    beside,
    job_directory_roots,
    listed_beside,
    sibling_checkpoints,
    starting_beside,
    unmapped_references,
)
from ckptctl.pycollector import paused_collector
from ckptctl.storage import FileInfo, Storage
from ckptctl.storage.listing import DirFiles, dir_runs
from ckptctl.words import plural

__all__ = ["FileDecision", "FileRule", "GcPlan", "GcRefused", "Tally", "build_plan"]  # also the Spark planner's

CLOCK_TOLERANCE = 300.0  # seconds a file's mtime may lead the storage clock before we refuse
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


class GcRefused(CkptError):
    """The plan has refusals: nothing may be deleted."""

    exit_code = 1


def refusal(code: Refusal, message: str) -> dict[str, str]:
    return {"code": code.value, "message": message}


# ---------------------------------------------------------------------------------------------
# scopes: which root a file belongs to and under which rules it is classified


class Scopes:
    """The scanned roots, ``--savepoints`` and ``--changelog-dir`` directories.

    Listings are made of the outermost directories only (no file is listed twice); a file is
    classified by the most specific scope holding it: a changelog directory inside a root makes
    its files changelog files whether or not the root is scanned too.
    """

    def __init__(self, options: GcOptions) -> None:
        self.options = options
        everything = list(dict.fromkeys(options.scopes()))
        self.listed = [r for r in everything if not any(o != r and st.is_under(r, o) for o in everything)]
        self.prefixes = tuple(r.rstrip("/") + "/" for r in everything)
        # most specific first: longer paths first, changelog before savepoints before roots
        kinds = [(c, "changelog") for c in options.changelog_dirs]
        kinds += [(s, "savepoints") for s in options.savepoint_dirs] + [(r, "root") for r in options.roots]
        self._by_specificity = sorted(kinds, key=lambda kv: -len(kv[0]))

    def scope_of(self, uri: str) -> tuple[str, str] | tuple[None, None]:
        for scope, kind in self._by_specificity:
            if st.is_under(uri, scope):
                return scope, kind
        return None, None


# ---------------------------------------------------------------------------------------------
# the steps


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
        return _Planner(storage, options, progress).run()


@dataclass
class Retention:
    retained: list[CheckpointLocation]
    expired: list[CheckpointLocation]
    newest_retained: dict[str, CheckpointLocation]  # job dir -> its newest retained checkpoint
    notes: list[str]


class _Planner(InventorySource, Guards):
    """The local planner: every step in this process. The Spark planner subclasses it and runs
    the same steps, except folding, listing and classifying, on executors."""

    def __init__(self, storage: Storage, options: GcOptions, progress) -> None:
        options = options.normalized()
        options.validate()
        self.storage, self.options, self.progress = storage, options, progress
        self.scopes = Scopes(options)
        self.refusals: list[dict[str, str]] = []
        self.warnings: list[str] = []
        self.notes: dict[str, st.WalkNotes] = {}  # root -> what its walk saw besides files
        self.late: list[str] = []  # checkpoints found only by the full listing (fold_late)
        self.siblings: list[str] = []  # checkpoints beside a ROOT that is a job directory (fold_siblings)
        self.inventory = None  # --inventory: the parsed manifest (ckptctl.inventory.Inventory)
        self.inventory_record: dict[str, Any] | None = None
        self.metadata_seen: set[tuple] = set()  # --inventory: the _metadata files discovery listed
        self.fold_worker = None  # the process that folded the references, until it has flagged the listing

    def refuse(self, code: Refusal, message: str) -> None:
        self.refusals.append(refusal(code, message))

    def run(self) -> GcPlan:
        try:
            return self._run()
        finally:
            if self.fold_worker is not None:  # a step before classification failed
                self.fold_worker.shutdown()

    def _run(self) -> GcPlan:
        now, now_source, cutoff = self.start()
        prelisted = self.prelist()
        discovered = self.discover(prelisted)
        retention = self.retain(discovered, now, cutoff)
        self.warnings.extend(retention.notes)
        folded, listings = self.fold_while_listing(retention, prelisted)
        hidden = self.check_checkpoints_unchanged(discovered, _named(listings, METADATA_FILE),
                                                  ((root, run.parent) for root, runs in listings for run in runs))
        self.fold_late([f for f in hidden if st.parent(f.uri) not in discovered], retention, folded)
        self.fold_siblings(retention, folded)
        self.check_no_aliases()
        self.check_mounts(retention)
        plan = self.classify(now, now_source, cutoff, retention, folded, listings)
        if self.inventory is not None:
            self.check_metadata_after_plan()
        return plan

    def start(self) -> tuple[float, str, float]:
        """Scopes, clock and cut-off checked, the inventory's manifest read: (now, its source, cutoff)."""
        options = self.options
        for problem in options.overlaps():
            self.refuse(Refusal.OVERLAPPING_SCOPES, f"overlapping scopes: {problem}")
        now, now_source = self.clock()
        cutoff = now - options.older_than
        if options.older_than_at is not None:  # an instant: the cut-off as given, on no machine's clock
            if options.older_than_at > now:
                raise CkptError(
                    f"--older-than {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(options.older_than_at))} is "
                    f"in the future of the storage clock ({now_source}): it would make every file old enough"
                )
            cutoff = options.older_than_at

        for root in options.roots:
            if st.scheme_of(root) == "file" and os.path.exists(root[5:]) and not os.path.isdir(root[5:]):
                raise CkptError("not a directory: a ROOT is a directory of checkpoints", path=root)
        if options.inventory is not None:
            self.open_inventory(now + CLOCK_TOLERANCE)  # no time the report gives is later
        return now, now_source, cutoff

    # -- clock ----------------------------------------------------------------------------
    def clock(self) -> tuple[float, str]:
        if self.options.clock == "local":
            return time.time(), "local clock (--clock local)"
        # every store in scope (a local root and an S3 one, two endpoints' buckets): the earliest
        # clock, so that no file is older on the clock that decides than on its own store's
        now, source = None, ""
        seen: set[str] = set()
        for scope in self.options.scopes():
            store = st.scheme_of(scope) + ":" + (scope.split("/")[2] if st.scheme_of(scope) == "s3" else "")
            if store in seen:
                continue
            seen.add(store)
            t, src = self.storage.now(scope)
            if t is None:
                now, source = None, src
                break
            if now is None or t < now:
                now, source = t, src
        if now is None:
            self.refuse(
                Refusal.CLOCK_UNKNOWN,
                f"the storage clock could not be read ({source}); age guards need it. "
                "Run again, or pass --clock local if this machine's clock is known to be right",
            )
            return time.time(), source
        return now, source

    # -- 1. discover ----------------------------------------------------------------------
    def prelist(self) -> dict[str, list[FileInfo]]:
        """On object stores finding the ``_metadata`` files costs a listing; list everything first."""
        if all(st.scheme_of(r) == "file" for r in self.scopes.listed) or self.inventory is not None:
            return {}  # locally a pruned walk finds _metadata; with --inventory a fresh one too
        return {root: list(self.storage.list_files(root)) for root in self.scopes.listed}

    def discover(self, prelisted: dict[str, list[FileInfo]]) -> dict[str, CheckpointLocation]:
        """Every completed checkpoint and savepoint (a directory with a ``_metadata``)."""
        discovered: dict[str, CheckpointLocation] = {}
        for root in self.scopes.listed:
            if prelisted:  # what the pruned walk finds, as locally and on Spark: the _metadata inside
                # jobs' shared/ and taskowned/ come through the listing (fold_late), said so
                found = [f for f in prelisted[root] if not f.uri.endswith("/_metadata") or is_checkpoint_metadata(root, f.uri)]
            else:
                found = self.storage.find_metadata(root)
            if self.inventory is not None:
                found = list(found)
                self.metadata_seen.update((f.uri, f.size, f.mtime) for f in found)
            for loc in scan_root(self.storage, root, found).locations():
                if loc.complete:
                    discovered.setdefault(loc.uri, loc)
        inside = sorted(u for u in discovered if self.scopes.scope_of(u)[1] == "changelog")
        if inside:
            # retained all the same (their files stay live); but the scope is wrong
            self.refuse(
                Refusal.OVERLAPPING_SCOPES,
                f"overlapping scopes: --changelog-dir holds checkpoints or savepoints (first: {inside[0]})",
            )
        return discovered

    # -- 2. retain ------------------------------------------------------------------------
    def retain(self, discovered: dict[str, CheckpointLocation], now: float, cutoff: float) -> Retention:
        """Newest K ``chk-N`` per job (all without ``--keep-last``), every savepoint and every other
        directory holding a ``_metadata``. An expired checkpoint goes as a unit: if its
        ``_metadata`` could not be deleted now (young, in flight, no mtime...), it stays retained
        and so do all its files."""
        options = self.options
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
                self.refuse(
                    Refusal.KEEP_LAST_ORDER,
                    f"in {job_uri} a checkpoint --keep-last would expire completed after one it keeps (chk-N "
                    "numbers and _metadata times disagree: a job restored from an older checkpoint under the "
                    "same job id?). Look at the checkpoints with `ckptctl ls`; run without --keep-last",
                )
        return Retention(retained, expired, newest, notes)

    # -- 3. fold (decode every checkpoint while the roots are listed) ----------------------
    def fold_while_listing(self, retention: Retention, prelisted) -> tuple[Folded, list]:
        storage, options = self.storage, self.options
        ordered = retention.retained + retention.expired
        retained_set = {loc.uri for loc in retention.retained}
        prefixes = self.scopes.prefixes
        worker = None
        # a scan (check's orphan count) holds the listing and the _metadata bytes already: a worker
        # would overlap nothing and read every _metadata again from the storage
        if sum(loc.metadata.size for loc in ordered) >= PARALLEL_METADATA_BYTES and not isinstance(
            storage, ScanStorage
        ):
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            worker = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
            future = worker.submit(fold_references_packed, storage.options, ordered, retained_set, options.rebase, prefixes)
        listings: list[tuple[str, list[DirFiles]]] = []
        seen: dict = {}  # one (device, inode) map for every scope: an alias across scopes is one too
        from_inventory = self.inventory_listings() if self.inventory is not None else None
        for root in self.scopes.listed:
            notes = self.notes[root] = st.WalkNotes(seen=seen)
            if from_inventory is not None:
                runs = list(dir_runs(from_inventory.pop(root)))
            else:
                runs = list(dir_runs(prelisted.pop(root))) if prelisted else list_runs(storage, root, notes)
            listings.append((root, runs))
            self.check_listed(root, bool(runs))
        if worker is not None:
            try:
                folded = future.result()
            except BaseException:
                worker.shutdown()
                raise
            self.fold_worker = worker  # it holds the live set: it looks the listed files up (flag_listed)
        else:
            folded = fold_references(storage, ordered, retained_set, options.rebase, prefixes, self.progress)
            folded.live, folded.expired_refs = PathsByDir.packed(folded.live), PathsByDir.packed(folded.expired_refs)
        for code, message in folded.refusals:
            self.refuse(Refusal(code), message)
        return folded, listings

    def fold_late(self, hidden: list[FileInfo], retention: Retention, folded: Folded) -> None:
        """``_metadata`` files of ``chk-N`` or savepoint directories that the full listing found
        inside a job's ``shared/`` or ``taskowned/``, where discovery does not look (Flink writes none there, and those directories hold millions
        of files). One is a checkpoint root below a directory that merely looks like a job (a
        32-hex tenant id with a ``shared/ckpts`` root inside): read each as a retained checkpoint,
        so whatever it references stays live; a stray file that is no ``_metadata`` blocks the plan
        as unreadable."""
        # a checkpoint or savepoint directory, by its name (chk-N, savepoint-…) or, under any other
        # name (a savepoint an operator moved there as release-42/), by its content: Flink's magic
        # number. A stray copy of a _metadata lying in shared/ or taskowned/ itself is just a file
        # there (kept as not-flink-file), and so is a file of that name that is no Flink's.
        locs = [loc for loc in (classify(st.parent(f.uri), f) for f in hidden)
                if loc.kind != "unknown" or self._renamed_checkpoint(loc)]  # fmt: skip
        if not locs:
            return
        extra = fold_references(self.storage, locs, {loc.uri for loc in locs}, self.options.rebase,
                                self.scopes.prefixes)  # fmt: skip
        folded.live |= extra.live
        for path, spans in extra.spans.items():
            folded.spans.setdefault(path, []).extend(spans)
        for path, ref in extra.external.items():
            folded.external.setdefault(path, ref)
        folded.info.update(extra.info)
        for code, message in extra.refusals:
            self.refuse(Refusal(code), message)
        retention.retained.extend(locs)
        self.late = [loc.uri for loc in locs]
        self.warnings.append(
            f"{len(locs)} _metadata files lie inside a job's shared/ or taskowned/ (first: {locs[0].uri}), where "
            "Flink writes none: read as checkpoints and kept with everything they reference. A checkpoint root "
            "below a directory named like a JobID? Scan it as its own root"
        )

    def fold_siblings(self, retention: Retention, folded: Folded) -> None:
        """A ROOT that is a job directory: the checkpoints of the job directories beside it (not
        scanned) may borrow its files, a job restored from it in CLAIM mode above all
        (:mod:`ckptctl.gc.siblings`). Read each as a retained checkpoint, so that what it
        references under the scopes stays live; its own files are not judged (nor its references
        to them: they are no external references of the plan). Refused when a sibling's
        ``_metadata`` cannot be read, or it names the ROOT's job directory somewhere no mapping
        brings under the ROOT."""
        roots = job_directory_roots(self.options.roots)
        parents = list(dict.fromkeys(beside(r) for r in roots))
        if None in parents:
            self.refuse(Refusal.SIBLING_REFERENCES, "a ROOT is a job directory at the top of its file system: the "
                        "job directories beside it, which may borrow its files, are not read. Scan the directory "
                        "holding them instead")  # fmt: skip
        locs: list[CheckpointLocation] = []
        starting: list[str] = []
        since = min((loc.metadata.mtime or 0) for loc in retention.expired) if retention.expired else None
        for parent in parents:
            if parent is None:
                continue
            files = listed_beside(self.storage, parent, self.scopes)
            here = sibling_checkpoints(self.storage, parent, files)
            locs += here
            if since is not None:
                starting += starting_beside(parent, files, here, since)
        if starting:
            self.refuse(
                Refusal.JOB_STARTING,
                f"{len(starting)} job directories beside a ROOT have fresh checkpoint files but no completed "
                f"checkpoint (first: {starting[0]}): a job restored from a checkpoint --keep-last would expire may "
                "be taking its first one. Run the plan again once it has completed a checkpoint, or without --keep-last",
            )
        if not locs:
            return
        extra = fold_references(self.storage, locs, {loc.uri for loc in locs}, self.options.rebase,
                                self.scopes.prefixes)  # fmt: skip
        # what they reference under the scopes (not their own _metadata, which is outside)
        borrowed = {p for p in extra.live if p.startswith(self.scopes.prefixes)}
        folded.live |= borrowed
        for path, spans in extra.spans.items():
            folded.spans.setdefault(path, []).extend(spans)
        folded.info.update(extra.info)
        for code, message in extra.refusals:
            # written elsewhere is no refusal here: only a sibling's references into the ROOTs
            # matter, and a name of their job directories that maps nowhere is refused below
            if code != Refusal.MOVED_DIRECTORY.value:
                self.refuse(Refusal(code), message)
        unmapped = unmapped_references(extra.external, roots)
        if unmapped:
            self.refuse(
                Refusal.SIBLING_REFERENCES,
                f"{len(unmapped)} references of checkpoints beside a ROOT that is a job directory name that job "
                f"directory at another location (first: {unmapped[0]['path']}, by {unmapped[0]['referenced_by']}): "
                "files they borrow under a name that maps to none here. Map it with --rebase, or scan "
                f"{first_of([p for p in parents if p is not None], 3)} as the ROOT",
            )
        retention.retained.extend(locs)
        self.siblings = [loc.uri for loc in locs]
        borrowed.update(extra.spans)
        if borrowed:
            self.warnings.append(
                f"{len(borrowed)} files of the ROOTs are referenced by checkpoints of the job directories beside them "
                f"(first: {min(borrowed)}; {len(locs)} checkpoints read there, e.g. {locs[0].uri}): a job restored "
                "in CLAIM mode borrows them. They are kept"
            )

    def _renamed_checkpoint(self, loc: CheckpointLocation) -> bool:
        """A ``_metadata`` below a job's ``shared/`` or ``taskowned/`` in a directory of no
        checkpoint's name that begins with Flink's magic number: a checkpoint or savepoint
        directory renamed, whose references may be all that keeps its files."""
        scope, _kind = self.scopes.scope_of(loc.uri + "/x")
        return (scope is not None and renamed_checkpoint_dir(scope, loc.uri)
                and begins_like_metadata(self.storage, loc.metadata.uri, loc.metadata.size))  # fmt: skip

    # -- 4. classify every listed file ------------------------------------------------------
    def classify(self, now, now_source, cutoff, retention: Retention, folded: Folded, listings) -> GcPlan:
        """The fate of every listed file, in this process (the Spark planner runs the same
        :meth:`FileRule.verdicts` on executors and the same :meth:`finish`)."""
        live, spans, expired = PathsByDir.of(folded.live), PathsByDir.of(folded.spans), PathsByDir.of(folded.expired_refs)
        evidence = JobEvidence.of_listings(self.scopes, retention, folded, listings, self.notes)
        rule = self.rule(now, cutoff, bool(folded.expired_refs))
        activity = JobActivity.of_listings(self.scopes, retention.newest_retained, listings, self.notes,
                                           self.quiet_before(rule))  # fmt: skip
        contexts = self.contexts(now, retention, evidence, activity,
                                 lambda: _forst_parents(itertools.chain(folded.live, folded.spans)))  # fmt: skip
        runs = [run for _root, runs in listings for run in runs]
        flags = self.flag_listed(runs, live, expired if rule.check_expired else None)
        tally = Listed(listings, live, spans, flags.live_unlisted, sum(f.count(1) for f in flags.live if f is not None))
        if tally.total_files > SPARK_HINT_FILES:
            self.warnings.append(
                f"{tally.total_files:,} files listed: planning in this process holds ~{BYTES_PER_FILE} bytes per file "
                f"(~{tally.total_files * BYTES_PER_FILE / 1e9:.0f} GB); above {SPARK_HINT_FILES:,} files use --engine spark"
            )
        future_limit = rule.tolerance_limit
        todo = [RunToDecide(run, contexts.get(run.parent), is_live, spans.dirs.get(run.parent, {}), is_expired)
                for run, is_live, is_expired in zip(runs, flags.live, flags.expired, strict=True)]  # fmt: skip
        for item, decided in zip(todo, rule.decide_runs(todo, tally.verdicts, tally.partially_live.append), strict=True):
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
        return self.finish(now, now_source, cutoff, retention, folded, contexts, tally)

    def flag_listed(self, runs: list[DirFiles], live: PathsByDir, expired: PathsByDir | None) -> ListedFlags:
        """Every listed file looked up in the live set (and the expired one) once, before Arrow and
        the decisions take their memory: classification reads a byte per file. By the fold worker
        when there is one, in the sets it holds (:func:`flag_held`): this process never makes a set
        of half a million names (57 MB at its peak at 1M files), it sends the listing's packed
        names a few MB at a time. Here unless :meth:`fold_late` added live paths the worker lacks."""
        worker, self.fold_worker = self.fold_worker, None
        if worker is None:
            return flag_listed(runs, live, expired)
        try:
            if self.late or self.siblings:
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

    def contexts(self, now: float, retention: Retention, evidence: JobEvidence, activity: JobActivity,
                 forst_parents) -> _Contexts:  # fmt: skip
        return _Contexts(self.scopes, retention, forst_parents, now + CLOCK_TOLERANCE, evidence, activity,
                         OtherMounts(self.scopes, self.notes))  # fmt: skip

    def quiet_before(self, rule: FileRule) -> float:
        """A job without a retained checkpoint seen at work since this time may be running
        (:class:`JobActivity`): --older-than + --margin ago (or before the inventory began, less
        the margin: the report cannot show what came after)."""
        return rule.young_limit - self.options.margin

    def rule(self, now: float, cutoff: float, check_expired: bool) -> FileRule:
        # --inventory: a file modified once the report began may be in it as it was, or not at all
        inventory_created = self.inventory.created if self.inventory is not None else math.inf
        return FileRule(cutoff, now + CLOCK_TOLERANCE, self.options.margin, min(cutoff, inventory_created),
                        {"cutoff": cutoff}, {"inventory_created": inventory_created}, check_expired)  # fmt: skip

    def finish(self, now, now_source, cutoff, retention: Retention, folded: Folded, contexts: _Contexts,
               tally: Tally) -> GcPlan:  # fmt: skip
        """Everything decided from the per-file outcome as a whole: refusals, caps, the plan."""
        options = self.options
        external = folded.external
        if external and not options.allow_external:
            first = min(external)  # the same on every run (sets follow the hash seed)
            self.refuse(
                Refusal.EXTERNAL_REFERENCES,
                f"{len(external)} references point outside the scanned roots (first: {first}). They may mean a "
                "moved directory or a missing --savepoints/--changelog-dir. Scan their location too, map it with "
                "--rebase, or pass --allow-external (files outside the roots are never deleted)",
            )
        external_names = {st.basename(p): p for p in external}
        if contexts.overlaps:
            self.refuse(Refusal.OVERLAPPING_SCOPES, f"overlapping scopes: {contexts.overlaps[0]}")
        missing_paths = tally.missing_paths()
        if missing_paths and self.inventory is not None:
            # written after the report (a running job's new files): there now, so live, not missing
            present = self.present_now(missing_paths)
            missing_paths -= present.keys()
            tally.live_files += len(present)
            tally.live_bytes += sum(present.values())
            self.inventory_record["live_files_not_in_inventory"] = len(present)
        missing, relive = self.missing_files(missing_paths, retention, tally.savepoint_files)
        tally.drop_listing()
        if relive:  # savepoint files a FLINK-39964 checkpoint uses: live, not merely protected
            tally.relive(relive)
        future_count, future_first = tally.future_files()
        if future_count:
            self.refuse(
                Refusal.FUTURE_MTIME,
                f"{future_count} files have a modification time in the future of the storage clock ({now_source}), "
                f"first: {future_first}; a skewed clock makes age guards meaningless",
            )
        collision = tally.first_collision(external_names) if external_names else None
        if collision:
            self.refuse(
                Refusal.NAME_COLLISION,
                f"candidate {collision} has the same name as the external reference "
                f"{external_names[st.basename(collision)]}: a moved directory? pass --rebase",
            )
        n_candidates, candidate_bytes = tally.candidate_totals()
        if n_candidates and tally.live_set_empty():
            self.refuse(Refusal.EMPTY_LIVE_SET, "the live set is empty but there are candidates: refusing to delete everything")
        dead_jobs = self.caps(contexts, n_candidates, candidate_bytes, tally.total_files, tally.total_bytes, retention)
        active = sorted(j for j, v in contexts.dead_verdicts.items() if v is Reason.JOB_ACTIVE)
        if active:
            self.warnings.append(
                f"{len(active)} jobs have no retained checkpoint but wrote a file or a chk-N directory less than "
                f"--older-than + --margin ago ({first_of([st.basename(j) for j in active], 5)}): they may be running, "
                "their first checkpoint still uploading, so their files are kept (job-active). Run the plan again "
                "once they have completed a checkpoint, or once they have been quiet that long"
            )
        if contexts.fixed_ids_kept:
            ids = sorted(contexts.fixed_ids_kept)
            self.warnings.append(
                f"the changelog files of {len(ids)} fixed job ids are kept ({first_of(ids, 3)}): "
                "application mode with HA gives every deployment of a cluster id (before Flink 1.16: every "
                "deployment) the same id, so one whose checkpoints are not scanned may use them. Scan every root "
                "that writes under those ids, then pass --collect-fixed-id-changelog to collect them"
            )
        if retention.expired:
            self.check_no_job_starting(contexts, tally.kept_paths_since, retention, cutoff)
        self.check_no_metadata_being_written(tally.metadata_being_written, cutoff)
        return tally.plan(
            options, now, now_source, cutoff,
            sorted((folded.info[u] for u in {loc.uri for loc in retention.retained}), key=lambda d: d["path"]),
            sorted((folded.info[u] for u in {loc.uri for loc in retention.expired}), key=lambda d: d["path"]),
            sorted(external.values(), key=lambda d: d["path"]), missing, self.refusals,
            self.warnings, dead_jobs, {"s3_endpoint": self.storage.options.s3_endpoint}, self.discovery_record(),
            self.inventory_record,
        )  # fmt: skip

    def discovery_record(self) -> dict[str, Any]:
        """What discovery did besides listing files, for the plan: directory symlinks followed,
        directories not descended into because they were reached a second time (aliases), other
        mounts, and checkpoints found only by the full listing (inside a job-named shared/)."""
        notes = list(self.notes.values())
        return {
            "followed_symlinks": [{"path": p, "target": t} for n in notes for p, t in n.followed],
            "not_descended": [{"path": p, "why": f"the same directory as {first}"} for n in notes
                              for p, first in n.aliases],
            "mounts": [m for n in notes for m in n.mounts],
            "found_by_listing_only": self.late,
            "read_beside_roots": self.siblings,
        }  # fmt: skip


# ---------------------------------------------------------------------------------------------
# folding the references of every checkpoint into the live set


@dataclass
class Folded:
    """What the checkpoints say: the live set and everything the plan needs from the metadata."""

    live: set[str]
    spans: dict[str, list[tuple[int, int]]]  # segments only: a physical file is live if any is
    expired_refs: set[str]
    external: dict[str, dict[str, Any]]
    info: dict[str, dict[str, Any]]  # checkpoint dir -> what the plan shows of it
    refusals: list[tuple[str, str]]
    moved: dict[str, list[str]] = field(default_factory=dict)  # inferred --rebase mapping -> checkpoints


def _location_info(loc: CheckpointLocation) -> dict[str, Any]:
    """What the plan shows of a checkpoint directory (id and kind as its name says)."""
    meta = loc.metadata
    return {"path": loc.uri, "job_id": loc.job_id, "checkpoint_id": loc.dir_checkpoint_id, "kind": loc.kind,
            "metadata_mtime": meta.mtime if meta else None, "metadata_size": meta.size if meta else None}  # fmt: skip


def _checkpoint_info(ck: LoadedCheckpoint) -> dict[str, Any]:
    """The same, with id and kind as the decoded ``_metadata`` says."""
    return {**_location_info(ck.location), "checkpoint_id": ck.metadata.checkpoint_id, "kind": ck.kind}


def fold_references(storage, ordered, retained_set, rebase: Rebase, prefixes, progress=None) -> Folded:
    """Decode each checkpoint in turn and keep only the paths it references (bounded memory).

    Runs in this process or in a worker; ``storage`` may be a :class:`Storage` or its options.
    A reference is live when it lies under a scanned scope (after normalisation: a ``..`` that
    climbs out of the roots makes it external, whatever its spelling).
    """
    with paused_collector():
        if not isinstance(storage, Storage):
            storage = Storage(storage)
        out = Folded(set(), {}, set(), {}, {}, [])
        live, spans, external = out.live, out.spans, out.external
        add = live.add
        escapes = st.escapes
        iterator = progress(ordered, len(ordered)) if progress else ordered
        moved: dict[str, list[str]] = {}  # inferred mapping -> checkpoints written elsewhere
        for loc in iterator:
            try:
                ck = load_checkpoint(storage, loc, rebase, apply_inferred=False)
            except StoreUnanswered:
                raise  # each next checkpoint would wait out the same deadline
            except CkptError as e:
                out.refusals.append(
                    (Refusal.UNREADABLE_METADATA.value, f"unreadable _metadata, nothing can be proven unreferenced: {e}")
                )
                out.info[loc.uri] = _location_info(loc)
                if loc.uri in retained_set:
                    add(loc.metadata_uri)
                continue
            if ck.inferred_rebase is not None:
                moved.setdefault(ck.inferred_rebase.describe(), []).append(loc.uri)
            out.info[loc.uri] = _checkpoint_info(ck)
            if loc.uri in retained_set:
                add(loc.metadata_uri)
                for scope, uris, items in referenced_uris(ck):
                    segment = scope == "segment"
                    for path, (_name, h) in zip(uris, items, strict=True):
                        # "/.." first: escapes() is a call, the substring test is not
                        if not path.startswith(prefixes) or ("/.." in path and escapes(path)):
                            external.setdefault(path, {"path": path, "referenced_by": loc.uri, "scope": scope})
                        elif segment:
                            spans.setdefault(path, []).append((h.offset, h.size))
                        else:
                            add(path)
            else:
                expired = out.expired_refs
                for _scope, uris, _items in referenced_uris(ck):
                    expired.update(uris)
            del ck
        out.moved = moved
        out.refusals.extend(moved_refusals(moved))
        return out


def moved_refusals(moved: dict[str, list[str]]) -> list[tuple[str, str]]:
    """One refusal per inferred mapping (not one per checkpoint): mapping -> checkpoints, in order."""
    return [(
        Refusal.MOVED_DIRECTORY.value,
        f"{plural(len(cks), 'checkpoint')} {'was' if len(cks) == 1 else 'were'} written at another location (first: {cks[0]}); their absolute "
        f"paths point elsewhere. Pass --rebase {mapping} (or the right mapping) to collect garbage here",
    ) for mapping, cks in moved.items()]  # fmt: skip


# in a fold worker: the live and expired sets it folded, held for flag_held (the executor has one
# worker process, so its next tasks run here)
_HELD: tuple[PathsByDir, PathsByDir] | None = None


def fold_references_packed(*args) -> Folded:
    """:func:`fold_references` for a worker process: the path sets travel by directory with the
    names packed (:meth:`PathsByDir.packed`), which pickle in a few pieces instead of half a
    million small ones and are held that way; the sets stay in the worker for :func:`flag_held`."""
    global _HELD
    out = fold_references(*args)
    live, expired = PathsByDir.of(out.live), PathsByDir.of(out.expired_refs)
    out.live, out.expired_refs = PathsByDir.packed(live), PathsByDir.packed(expired)
    _HELD = live, expired
    return out


def flag_held(pieces: list[tuple[str, str]], check_expired: bool) -> list[tuple[bytearray | None, bytearray | None]]:
    """In the fold worker (its next tasks): per piece of a run (its directory, a chunk of its
    names ``/``-joined), a byte per name, 1 if the path is live, and 1 if only expired
    checkpoints reference it (``None``: the directory holds no such path), from the sets
    :func:`fold_references_packed` left this process."""
    live, expired = _HELD  # type: ignore[misc]  # None: not the fold worker, an error (never "nothing is live")
    live, expired = live.dirs, expired.dirs if check_expired else {}
    out: list[tuple[bytearray | None, bytearray | None]] = []
    for parent, packed in pieces:
        names = packed.split("/")
        out.append(tuple(None if (members := held.get(parent)) is None else name_flags([names], members)
                         for held in (live, expired)))  # type: ignore[misc]  # fmt: skip
    return out


def _named(listings: list[tuple[str, list[DirFiles]]], name: str) -> list[tuple[str, list[FileInfo]]]:
    """The listed files called ``name``, per scope."""
    return [(root, [run.file(run.names.index(name)) for run in runs if name in run.names])
            for root, runs in listings]  # fmt: skip
