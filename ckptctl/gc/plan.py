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
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from ckptctl import storage as st
from ckptctl.errors import CkptError
from ckptctl.gc.decisions import FileDecision, GcPlan
from ckptctl.gc.listed import Listed, PathsByDir, Tally, list_runs
from ckptctl.gc.options import GcOptions
from ckptctl.gc.reasons import UNREFERENCED, Reason, Refusal
from ckptctl.gc.rule import FileRule
from ckptctl.layout import (
    CHK_RE,
    JOB_ID_RE,
    METADATA_FILE,
    CheckpointLocation,
    classify,
    is_checkpoint_metadata,
    place_of,
    scan_root,
)
from ckptctl.pycollector import paused_collector
from ckptctl.rebase import Rebase, written_job_dir
from ckptctl.refs import LoadedCheckpoint, load_checkpoint, referenced_files
from ckptctl.scan import ScanStorage
from ckptctl.storage import FileInfo, Storage
from ckptctl.storage.listing import DirFiles, dir_runs

__all__ = ["FileDecision", "FileRule", "GcPlan", "GcRefused", "Tally", "build_plan"]  # also the Spark planner's

CLOCK_TOLERANCE = 300.0  # seconds a file's mtime may lead the storage clock before we refuse
# Above this many listed files the in-process plan says to use --engine spark. Measured with
# bench/gc_bench.py: the local planner peaks at 185 bytes of RSS per listed file at 1M files and 166
# at 3M (names, sizes, mtimes, live sets and decisions as columns; it was ~460), so 20M files take
# ~3.6 GB, about what a CI runner or a small VM has to spare, besides the fold worker's live set and
# a walk of minutes. Spark spreads both. A hint, not a refusal: a big machine plans more in-process.
BYTES_PER_FILE = 180
SPARK_HINT_FILES = 20_000_000
PARALLEL_METADATA_BYTES = 8 << 20  # below this, a worker process costs more than it saves


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


class _Planner:
    def __init__(self, storage: Storage, options: GcOptions, progress) -> None:
        options = options.normalized()
        options.validate()
        self.storage, self.options, self.progress = storage, options, progress
        self.scopes = Scopes(options)
        self.refusals: list[dict[str, str]] = []
        self.warnings: list[str] = []
        self.notes: dict[str, st.WalkNotes] = {}  # root -> what its walk saw besides files
        self.late: list[str] = []  # checkpoints found only by the full listing (fold_late)
        self.inventory = None  # --inventory: the parsed manifest (ckptctl.inventory.Inventory)
        self.inventory_record: dict[str, Any] | None = None
        self.metadata_seen: set[tuple] = set()  # --inventory: the _metadata files discovery listed

    def refuse(self, code: Refusal, message: str) -> None:
        self.refusals.append(refusal(code, message))

    def run(self) -> GcPlan:
        now, now_source, cutoff = self.start()
        prelisted = self.prelist()
        discovered = self.discover(prelisted)
        retention = self.retain(discovered, now, cutoff)
        self.warnings.extend(retention.notes)
        folded, listings = self.fold_while_listing(retention, prelisted)
        hidden = self.check_checkpoints_unchanged(discovered, _named(listings, METADATA_FILE))
        self.fold_late([f for f in hidden if st.parent(f.uri) not in discovered], retention, folded)
        self.check_no_aliases()
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
            self.open_inventory()
        return now, now_source, cutoff

    # -- --inventory: an S3 Inventory report instead of a listing of the roots' files ----------
    def open_inventory(self) -> None:
        """Read the manifest; it must be of the roots' bucket and, when re-validating a plan, the
        very report the plan was made from (same creation time, same number of rows)."""
        from ckptctl.inventory import InventoryError, read_manifest

        options = self.options
        inv = read_manifest(self.storage, options.inventory)
        bucket = options.roots[0][5:].split("/")[0]
        if inv.source_bucket != bucket:
            raise InventoryError(
                f"the inventory is of bucket {inv.source_bucket!r}, the roots are in {bucket!r}", path=inv.uri
            )
        if options.inventory_created is not None and options.inventory_created != inv.created:
            raise InventoryError(
                f"the inventory was created at {inv.created}, the plan was made from one created at "
                f"{options.inventory_created}: not the same report; run `ckptctl gc plan` again", path=inv.uri,
            )  # fmt: skip
        self.inventory = inv
        age = time.time() - inv.created
        if age > 8 * 86400:
            self.warnings.append(
                f"the inventory is {age / 86400:.0f} days old: files written since are kept, and live files not in "
                "it are looked up one by one; a fresher report finds more garbage, faster"
            )

    def inventory_listings(self) -> dict[str, list[FileInfo]]:
        """The inventory's current objects under each listed scope, sorted like a listing."""
        from ckptctl.inventory import ReadStats, iter_files

        inv = self.inventory
        stats = ReadStats()
        by_root: dict[str, list[FileInfo]] = {root: [] for root in self.scopes.listed}
        prefixes = [(r.rstrip("/") + "/", r) for r in self.scopes.listed]
        for f in iter_files(self.storage, inv, self.scopes.listed, stats):
            root = next(r for p, r in prefixes if f.uri.startswith(p))
            by_root[root].append(f)
        for root, files in by_root.items():
            files.sort()
            deduped = [f for i, f in enumerate(files) if i + 1 == len(files) or files[i + 1].uri != f.uri]
            by_root[root] = deduped  # two rows of one key: the newest (sorted last) speaks
        self.record_inventory(stats.rows_read, stats.rows_kept)
        return by_root

    def record_inventory(self, rows_read: int, rows_kept: int) -> None:
        """The report read: the same as the plan's (when re-validating), and recorded in the plan."""
        from ckptctl.inventory import InventoryError

        inv, options = self.inventory, self.options
        if options.inventory_rows is not None and options.inventory_rows != rows_read:
            raise InventoryError(
                f"the inventory has {rows_read} rows, the plan was made from one with "
                f"{options.inventory_rows}: not the same report; run `ckptctl gc plan` again", path=inv.uri,
            )  # fmt: skip
        self.options = replace(options, inventory_created=inv.created, inventory_rows=rows_read)
        self.inventory_record = {
            **inv.describe(), "rows_read": rows_read, "rows_in_scope": rows_kept,
            "created_iso": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(inv.created)),
        }  # fmt: skip

    def check_metadata_after_plan(self) -> None:
        """The ``_metadata`` files listed afresh once the plan is built must be exactly those
        discovery saw (same size and mtime): the inventory is old, discovery is what is true now."""
        after = set()
        for root in self.scopes.listed:
            after |= {(f.uri, f.size, f.mtime) for f in self.storage.find_metadata(root)}
        changed = after ^ self.metadata_seen
        if changed:
            first = sorted(changed)[0][0]
            self.refuse(
                Refusal.CHECKPOINTS_CHANGED,
                f"_metadata files changed while the plan was built ({len(changed)} changed, first: {first}): "
                "a job is running here; run the plan again",
            )

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
            found = prelisted[root] if prelisted else self.storage.find_metadata(root)
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
                folded = _unpack(future.result())
            finally:
                worker.shutdown()
        else:
            folded = fold_references(storage, ordered, retained_set, options.rebase, prefixes, self.progress)
            folded.live, folded.expired_refs = PathsByDir.of(folded.live), PathsByDir.of(folded.expired_refs)
        for code, message in folded.refusals:
            self.refuse(Refusal(code), message)
        return folded, listings

    def check_listed(self, root: str, has_files: bool) -> None:
        """A ROOT must hold something, as for ``ls`` and ``check``: directories or aliases (refused
        later) mean it is not empty."""
        walked = self.notes[root]
        if root in self.options.roots and not has_files and not walked.aliases and not walked.dirs:
            if self.inventory is not None:
                raise CkptError(f"the inventory {self.options.inventory} has no object under this ROOT: nothing to "
                                "collect (a report of another prefix?)", path=root)  # fmt: skip
            raise CkptError("no such directory (or it is empty): nothing to collect", path=root)

    def check_checkpoints_unchanged(self, discovered, listings) -> list[FileInfo]:
        """The set of ``_metadata`` files must be the same in discovery, in the full listing and in
        a second pruned listing made after it: otherwise a checkpoint completed (or was
        discarded) while we looked, and the live set may already be stale."""
        in_listing: set[str] = set()
        hidden: list[FileInfo] = []
        for root, files in listings:
            for f in files:
                uri = f.uri
                if uri.endswith("/_metadata"):
                    if is_checkpoint_metadata(root, uri):
                        in_listing.add(uri[: -len("/_metadata")])
                    else:
                        hidden.append(f)
        after: set[str] = set()
        for root in self.scopes.listed:
            for f in self.storage.find_metadata(root):
                if is_checkpoint_metadata(root, f.uri):
                    after.add(f.uri[: -len("/_metadata")])
        known = set(discovered) - {st.parent(f.uri) for f in hidden}  # the searched part only
        # with --inventory the report is older than discovery: checkpoints completed or subsumed
        # since differ from it by design, so discovery and the fresh listing must agree
        changed = (after ^ known) if self.inventory is not None else (in_listing ^ known) | (after ^ in_listing)
        if changed:
            first = sorted(changed)[0]
            self.refuse(
                Refusal.CHECKPOINTS_CHANGED,
                f"checkpoints completed or disappeared while the roots were scanned ({len(changed)} changed, "
                f"first: {first}): a job is running here; run the plan again",
            )
        return hidden

    def fold_late(self, hidden: list[FileInfo], retention: Retention, folded: Folded) -> None:
        """``_metadata`` files of ``chk-N`` or savepoint directories that the full listing found
        inside a job's ``shared/`` or ``taskowned/``, where discovery does not look (Flink writes none there, and those directories hold millions
        of files). One is a checkpoint root below a directory that merely looks like a job (a
        32-hex tenant id with a ``shared/ckpts`` root inside): read each as a retained checkpoint,
        so whatever it references stays live; a stray file that is no ``_metadata`` blocks the plan
        as unreadable."""
        # a checkpoint or savepoint directory (chk-N, savepoint-…): a stray copy of a _metadata
        # lying in shared/ itself is just a file there (kept as not-flink-file)
        locs = [loc for loc in (classify(st.parent(f.uri), f) for f in hidden) if loc.kind != "unknown"]
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

    def check_no_aliases(self) -> None:
        """The same directory reached under two names (a second mount of the volume inside a root,
        a symlink back into it) makes every live file also an "unreferenced" file under the other
        name: refuse. Directory symlinks to elsewhere (a ``chk-N`` moved to another volume) are
        followed, their files kept as links; say so."""
        aliases = [a for notes in self.notes.values() for a in notes.aliases]
        if aliases:
            uri, first = aliases[0]
            self.refuse(
                Refusal.ALIASED_PATH,
                f"{len(aliases)} directories are reachable under two names (first: {uri} is {first}): a bind "
                "mount or a symlink makes one file look both live and unreferenced. Remove the alias, or scan "
                "the real location only",
            )
        followed = [f for notes in self.notes.values() for f in notes.followed]
        if followed:
            link, target = followed[0]
            self.warnings.append(
                f"{len(followed)} directory symlinks were followed (first: {link} -> {target}); the files below "
                "them are read and kept, never deleted through a link"
            )
        mounts = [m for notes in self.notes.values() for m in notes.mounts]
        if mounts:
            self.warnings.append(
                f"{len(mounts)} directories below the roots are other mounts (first: {mounts[0]}); their files "
                "are classified like the rest"
            )

    # -- 4. classify every listed file ------------------------------------------------------
    def classify(self, now, now_source, cutoff, retention: Retention, folded: Folded, listings) -> GcPlan:
        """The fate of every listed file, in this process (the Spark planner runs the same
        :meth:`FileRule.decide` on executors and the same :meth:`finish`)."""
        live, spans, expired = PathsByDir.of(folded.live), PathsByDir.of(folded.spans), PathsByDir.of(folded.expired_refs)
        evidence = JobEvidence.of_listings(self.scopes, retention, folded, listings, self.notes)
        contexts = self.contexts(now, retention, evidence,
                                 lambda: _forst_parents(itertools.chain(folded.live, folded.spans)))  # fmt: skip
        rule = self.rule(now, cutoff, bool(folded.expired_refs))
        tally = Listed(listings, live, spans)
        if tally.total_files > SPARK_HINT_FILES:
            self.warnings.append(
                f"{tally.total_files:,} files listed: planning in this process holds ~{BYTES_PER_FILE} bytes per file "
                f"(~{tally.total_files * BYTES_PER_FILE / 1e9:.0f} GB); above {SPARK_HINT_FILES:,} files use --engine spark"
            )
        future_limit = rule.tolerance_limit
        for _root, runs in listings:
            for run in runs:
                parent = run.parent
                context = contexts.get(parent)
                decided = rule.decide_run(run, context, live.names_in(parent), spans.names_in(parent),
                                          expired.names_in(parent), tally.verdicts, tally.partially_live.append)  # fmt: skip
                tally.live_files += decided.live_files
                tally.live_bytes += decided.live_bytes
                tally.candidates.add(run, decided.took, decided.took_as)
                tally.protected.add(run, decided.kept, decided.kept_as)
                # per-job totals, summed in C rather than per file
                stats, sizes = context[4], run.sizes
                stats[0] += len(run)
                stats[1] += sum(sizes)
                stats[2] += len(decided.took)
                stats[3] += sum(map(sizes.__getitem__, decided.took))
                # any file in the future, live ones and _metadata included (found in C: max over mtimes)
                if run.newest() > future_limit:
                    tally.future.extend(run.prefix + n for n, m in zip(run.names, run.mtimes, strict=True)
                                        if m > future_limit)  # fmt: skip
        return self.finish(now, now_source, cutoff, retention, folded, contexts, tally)

    def contexts(self, now: float, retention: Retention, evidence: JobEvidence, forst_parents) -> _Contexts:
        return _Contexts(self.scopes, retention, forst_parents, now + CLOCK_TOLERANCE, evidence)

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
        if retention.expired:
            self.check_no_job_starting(contexts, tally.kept_paths_since, retention)
        return tally.plan(
            options, now, now_source, cutoff,
            sorted((folded.info[u] for u in {loc.uri for loc in retention.retained}), key=lambda d: d["path"]),
            sorted((folded.info[u] for u in {loc.uri for loc in retention.expired}), key=lambda d: d["path"]),
            sorted(external.values(), key=lambda d: d["path"]), missing, self.refusals,
            self.warnings, dead_jobs, {"s3_endpoint": self.storage.options.s3_endpoint}, self.discovery_record(),
            self.inventory_record,
        )  # fmt: skip

    def present_now(self, paths: set[str]) -> dict[str, int]:
        """Which of ``paths`` exist now (HEAD each, concurrently): path -> size."""
        from concurrent.futures import ThreadPoolExecutor

        ordered = sorted(paths)
        with ThreadPoolExecutor(32) as pool:
            found = list(pool.map(lambda p: self.storage.stat(p, fresh=True), ordered))
        return {p: f.size for p, f in zip(ordered, found, strict=True) if f is not None}

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
        }  # fmt: skip

    def missing_files(
        self, missing_paths: set[str], retention: Retention, savepoint_files
    ) -> tuple[list[dict[str, Any]], set[str]]:
        """Files retained checkpoints reference under the scanned roots that are not there.

        Such a checkpoint is already broken, or the references are mapped wrongly (a renamed job
        directory, a wrong ``--rebase``): in the second case the files they really mean look
        unreferenced. Either way nothing may be deleted until a human has looked, unless every
        such checkpoint is named with ``--accept-lost``.

        One known case is recognised: after a CLAIM restore from a native savepoint, Flink up to
        1.20.3/2.1.3/2.3.0 writes the savepoint's SSTs into the new checkpoints as relative names
        (FLINK-39964), which resolve inside ``chk-N/``. A missing ``chk-N/<name>`` whose name and
        recorded size are a file of a savepoint directory in scope is that file: it is live (also
        when the savepoint's ``_metadata`` is gone: these may be the only copy of the state), and
        the plan says to run ``ckptctl repair``. Returns (missing, savepoint files made live).
        ``savepoint_files(names)``: the listed files inside savepoint directories with those names
        (a :class:`~ckptctl.flink39964.SavepointFiles`, the index ``verify`` and ``repair`` look in).
        """
        if not missing_paths:
            return [], set()
        by_path: dict[str, list[str]] = {p: [] for p in missing_paths}
        sizes: dict[str, int] = {}
        rebase = self.options.rebase
        for loc in retention.retained:
            try:
                ck = load_checkpoint(self.storage, loc, rebase, apply_inferred=False)
            except CkptError:
                continue  # already a refusal
            for path, _scope, _offset, size in referenced_files(ck):
                if path in by_path and loc.uri not in by_path[path]:
                    by_path[path].append(loc.uri)
                    sizes[path] = size
        in_savepoints = savepoint_files({st.basename(p) for p in by_path})
        misanchored: dict[str, str] = {}
        also_live: set[str] = set()  # every savepoint file it may be (never guess which copy)
        for path in list(by_path):
            size = sizes.get(path)  # None: no retained checkpoint names it (a segment's file, an alias)
            found = in_savepoints.lookup(st.basename(path), size) if size is not None and place_of_chk(path) else []
            if found:
                misanchored[path] = found[0]
                also_live.update(found)
        if misanchored:
            cks = sorted({c for p in misanchored for c in by_path.pop(p)})
            first = min(misanchored)  # the same on every run (sets follow the hash seed)
            self.warnings.append(
                f"{len(cks)} retained checkpoints reference {len(misanchored)} savepoint files by relative names "
                f"that resolve inside their own directory (FLINK-39964: a CLAIM restore from a native savepoint), "
                f"e.g. {first} is {misanchored[first]}. Flink cannot restore them as they are: run `ckptctl repair` "
                f"on {', '.join(cks[:3])}{' ...' if len(cks) > 3 else ''}. The savepoint files are kept."
            )
        if not by_path:
            return [], also_live
        missing = [{"path": p, "checkpoints": cks} for p, cks in sorted(by_path.items())]
        broken = sorted({c for m in missing for c in m["checkpoints"]})
        not_accepted = [c for c in broken if c not in self.options.accept_lost]
        first = missing[0]["path"]
        if not_accepted:
            self.refuse(
                Refusal.MISSING_LIVE_FILES,
                f"{len(missing)} files referenced by retained checkpoints are missing (first: {first}), in "
                f"{len(broken)} checkpoints: {', '.join(not_accepted[:5])}{' ...' if len(not_accepted) > 5 else ''}. "
                "A wrong --rebase or a renamed directory makes the files they mean look unreferenced. "
                + (
                    "Files missing directly in chk-N/ may be a native savepoint's, after a CLAIM restore "
                    "(FLINK-39964): pass that savepoint's directory with --savepoints. "
                    if any(place_of_chk(m["path"]) for m in missing) else ""
                )
                + "Run `ckptctl verify` on them; if they are lost for good, name each with --accept-lost to go on",
            )
        else:
            self.warnings.append(
                f"{len(missing)} files referenced by checkpoints accepted as lost (--accept-lost) are missing "
                f"(first: {first})"
            )
        return missing, also_live

    def check_no_job_starting(self, contexts: _Contexts, kept_paths_since, retention: Retention) -> None:
        """A job directory with fresh files but no completed checkpoint is a job starting up: it may
        have been restored (CLAIM or NO_CLAIM) from a checkpoint ``--keep-last`` is about to expire,
        and its first checkpoint will reference that checkpoint's files. Nothing can be expired then.

        Files are not the only sign: right after the restore the job has created its empty
        ``shared/`` and ``taskowned/`` directories (or, on S3A, their directory markers) and
        uploaded nothing yet. A directory of a job without a retained checkpoint that changed after
        the oldest expiring ``_metadata`` was written is such a sign too.

        ``kept_paths_since(t)``: the protected files without an mtime or modified at ``t`` or later
        (one per directory and kind, file or directory marker, is enough)."""
        job_of = {id(stats): job for job, stats in contexts.job_stats.items()}
        since = min((loc.metadata.mtime or 0) for loc in retention.expired)
        starting = set()
        for path in kept_paths_since(since):
            # any kept file (young, of a dead job, not yet Flink's by evidence, a directory marker)
            # of a job without a retained checkpoint, written after the oldest expiring _metadata
            job = job_of.get(id(contexts.get(path.rpartition("/")[0])[4]))
            if job is None and path.endswith("/"):
                job = place_of(self.scopes.scope_of(path)[0] or "", path.rstrip("/")).job
            if job is not None and job not in retention.newest_retained:
                starting.add(job)
        for notes in self.notes.values():
            for directory, mtime in notes.dirs.items():
                if mtime < since:
                    continue
                scope, kind = self.scopes.scope_of(directory)
                if kind != "root":
                    continue
                place = place_of(scope, directory)
                if place.area in ("shared", "taskowned", "chk") and place.job not in retention.newest_retained:
                    starting.add(place.job)
        if starting:
            first = sorted(starting)[0]
            self.refuse(
                Refusal.JOB_STARTING,
                f"{len(starting)} job directories have fresh files or directories but no completed checkpoint "
                f"(first: {first}): a job starting up may restore from a checkpoint --keep-last would expire. "
                "Run the plan again once it has completed a checkpoint, or without --keep-last",
            )

    def caps(self, contexts: _Contexts, n_candidates: int, candidate_bytes: int, total_files: int, total_bytes: int,
             retention: Retention) -> list[dict]:  # fmt: skip
        """Blast-radius caps (global and per living job) and the list of dead jobs."""
        options = self.options
        limit = options.max_delete_fraction
        dead: list[dict[str, Any]] = []
        for job, (files, size, cand_files, cand_bytes) in sorted(contexts.job_stats.items()):
            if job not in retention.newest_retained:
                verdict = contexts.dead_verdicts.get(job, Reason.NOT_FLINK_FILE)
                if verdict is not Reason.NOT_FLINK_FILE and files:
                    dead.append({"job": job, "files": files, "bytes": size, "collected": verdict is None,
                                 "evidence": contexts.evidence.of(job) or "named as ROOT",
                                 "candidate_files": cand_files, "candidate_bytes": cand_bytes})  # fmt: skip
                continue
            share = max(cand_files / max(files, 1), cand_bytes / max(size, 1))
            if n_candidates and not options.force and share > limit:
                self.refuse(
                    Refusal.DELETE_FRACTION,
                    f"the plan deletes {cand_files / max(files, 1):.0%} of the files and {cand_bytes / max(size, 1):.0%} "
                    f"of the bytes of job {job}, more than --max-delete-fraction {limit:.0%}; review it, then run "
                    "`ckptctl gc plan` again with --force (or a higher --max-delete-fraction)",
                )
        collected = [d for d in dead if d["collected"] and d["candidate_files"]]
        if collected:
            self.warnings.append(
                f"{len(collected)} jobs have no retained checkpoint and all their old files are candidates "
                f"({_first_names(collected)}): if another job was restored from one of them in CLAIM mode "
                "and writes its checkpoints elsewhere, scan that root in the same plan, or it loses the files it borrows"
            )
        kept = [d for d in dead if not d["collected"]]
        if kept:
            self.warnings.append(
                f"{len(kept)} jobs have no retained checkpoint; their files are kept ({_first_names(kept)}): "
                "a job restored from one of them in CLAIM mode elsewhere may "
                "still borrow them. Scan that job's root in the same plan, then pass --collect-dead-jobs (or name "
                "the job directory as ROOT) to collect them"
            )
        if n_candidates and not options.force:
            files_share = n_candidates / max(total_files, 1)
            bytes_share = candidate_bytes / max(total_bytes, 1)
            if max(files_share, bytes_share) > limit:
                self.refuse(
                    Refusal.DELETE_FRACTION,
                    f"the plan deletes {files_share:.0%} of the files and {bytes_share:.0%} of the bytes, more than "
                    f"--max-delete-fraction {limit:.0%}; review it, then run `ckptctl gc plan` again with --force",
                )
        return dead


def _first_names(jobs: list[dict[str, Any]], n: int = 5) -> str:
    """The first ``n`` job ids of a dead-jobs list, '...' when there are more."""
    return ", ".join(st.basename(d["job"]) for d in jobs[:n]) + (" ..." if len(jobs) > n else "")


def place_of_chk(path: str) -> bool:
    """True if ``path`` lies directly in a ``chk-N`` directory (where relative names resolve)."""
    return CHK_RE.match(st.basename(st.parent(path))) is not None


class _Contexts:
    """Per directory: what its files are unless referenced (see :meth:`_anchored`), and job stats."""

    def __init__(
        self, scopes: Scopes, retention: Retention, forst_parents: Callable[[], Iterable[str]], future_limit: float,
        evidence: JobEvidence,
    ) -> None:  # fmt: skip
        self.scopes = scopes
        self.evidence = evidence
        self.collect_dead = scopes.options.collect_dead_jobs
        self.named = set(scopes.options.roots)
        self.dead_verdicts: dict[str, Reason | None] = {}  # job without a retained checkpoint -> verdict
        self.forst_parents = forst_parents  # directories of live files that may be ForSt's (asked lazily)
        self.future_limit = future_limit
        self.retained_dirs = {loc.uri for loc in retention.retained}
        self.expired_dirs = {loc.uri for loc in retention.expired}
        self.newest = retention.newest_retained
        # a fixed job id may run in several roots sharing one changelog dir: the anchor of its DSTL
        # files is the oldest of their newest checkpoints (the slower job may still upload)
        self.newest_by_name: dict[str, CheckpointLocation] = {}
        for j, loc in retention.newest_retained.items():
            had = self.newest_by_name.get(st.basename(j))
            if had is None or (loc.metadata.mtime or 0) < (had.metadata.mtime or 0):
                self.newest_by_name[st.basename(j)] = loc
        self.job_stats: dict[str, list[int]] = {}
        self.overlaps: list[str] = []  # scope problems only seen while classifying
        self._cache: dict[str, tuple] = {}
        self._orphan_stats = [0, 0, 0, 0]

    @functools.cached_property
    def forst_in_use(self) -> set[str]:
        """ForSt working directories holding a file some retained checkpoint references."""
        used: set[str] = set()
        for parent in self.forst_parents():
            scope, kind = self.scopes.scope_of(parent + "/x")
            if kind == "root":
                forst = place_of(scope, parent).forst
                if forst is not None:
                    used.add(forst)
        return used

    def get(self, parent: str) -> tuple:
        c = self._cache.get(parent)
        if c is None:
            c = self._cache[parent] = self._make(parent)
        return c

    def _stats(self, job: str | None) -> list[int]:
        if job is None:
            return self._orphan_stats
        s = self.job_stats.get(job)
        if s is None:
            s = self.job_stats[job] = [0, 0, 0, 0]
        return s

    def _kept(self, reason: Reason, job: str | None = None) -> tuple:
        return reason, False, None, None, self._stats(job), False, False

    def _anchored(self, reason: Reason, job: str | None, newest: CheckpointLocation | None) -> tuple:
        """A candidate directory: (reason, True, anchor mtime, evidence, job stats, unreferenced, forst)."""
        stats = self._stats(job)
        unreferenced = reason in UNREFERENCED
        forst = reason is Reason.UNREFERENCED_FORST  # control-file names matter there
        if newest is None:
            return reason, True, None, None, stats, unreferenced, forst
        anchor = newest.metadata.mtime or 0
        evidence = {"newest_retained": newest.uri, "newest_retained_mtime": anchor}
        if anchor > self.future_limit:
            anchor = math.inf  # no believable checkpoint time in this job: every file may be in flight
        return reason, True, anchor, evidence, stats, unreferenced, forst

    def _make(self, parent: str) -> tuple:
        scope, kind = self.scopes.scope_of(parent + "/x")
        if not st.is_normal(parent):
            return self._kept(Reason.ABNORMAL_PATH)
        if kind is None:
            return self._kept(Reason.NOT_FLINK_FILE)
        if kind == "changelog":
            # DSTL files: <dir>/<job-id>/dstl/<uuid>. Checkpoint structure in here (chk-N, shared/,
            # taskowned/ of a job, seen from the changelog dir or from a root holding it) means
            # the scope is wrong: those files are kept and the plan is blocked.
            outer = [r for r in self.scopes.options.roots if st.is_under(parent, r)]
            for base in [scope, *outer]:
                area = place_of(base, parent).area
                if area != "other":
                    self.overlaps.append(f"--changelog-dir {scope} holds Flink checkpoint files ({parent})")
                    return self._kept(Reason.NOT_FLINK_FILE)
            job_name = next((p for p in parent[len(scope) :].split("/") if JOB_ID_RE.match(p)), None)
            newest = self.newest_by_name.get(job_name) if job_name else None
            if newest is None:
                # a changelog dir is usually cluster-wide: a job whose checkpoints are not scanned
                # (or a dead one) may reference these files, and nothing anchors their age
                return self._kept(Reason.CHANGELOG_UNSCANNED_JOB)
            return self._anchored(Reason.UNREFERENCED_CHANGELOG, None, newest)
        place = place_of(scope, parent)
        if place.area == "savepoint":
            return self._kept(Reason.IN_SAVEPOINT)
        if place.area == "other" or kind == "savepoints":
            return self._kept(Reason.NOT_FLINK_FILE, place.job)
        newest = self.newest.get(place.job)
        if newest is None and place.job is not None:
            verdict = self.dead_verdict(place.job)
            if verdict is not None:
                return self._kept(verdict, place.job)
        if place.area == "chk":
            if place.chk in self.retained_dirs:
                return self._kept(Reason.RETAINED_CHECKPOINT_DIR, place.job)
            if place.chk in self.expired_dirs:
                # completed long ago, not in flight: no anchor, so that the _metadata goes exactly
                # when retain() decided it would (the unit rule)
                return self._anchored(Reason.EXPIRED_CHECKPOINT, place.job, None)
            return self._anchored(Reason.INCOMPLETE_CHECKPOINT, place.job, newest)
        if place.area == "shared":
            if place.forst is None:
                return self._anchored(Reason.UNREFERENCED_SHARED, place.job, newest)
            # A ForSt database works inside shared/: a file it flushed after a snapshot but before
            # that checkpoint's _metadata landed is older than every anchor and referenced by
            # nothing yet, but live. While a retained checkpoint uses the working directory the
            # job may be running, so nothing in it is collected (ForSt deletes its own garbage);
            # a directory no retained checkpoint uses (a superseded attempt, a dead job) is.
            if place.forst in self.forst_in_use:
                return self._kept(Reason.FORST_IN_USE, place.job)
            return self._anchored(Reason.UNREFERENCED_FORST, place.job, newest)
        return self._anchored(Reason.UNREFERENCED_TASKOWNED, place.job, newest)


    def dead_verdict(self, job: str) -> Reason | None:
        """For a job directory without a retained checkpoint: ``None`` to collect its old files as
        usual, or the reason they are kept. A directory is a (dead) Flink job only on evidence
        (:class:`JobEvidence`); a dead job is collected only with ``--collect-dead-jobs`` or when
        it is named as a ROOT: a job restored from it in CLAIM mode may live in a root not scanned
        and still borrow its files."""
        if job in self.dead_verdicts:
            return self.dead_verdicts[job]
        named = job in self.named
        if not named and not self.evidence.of(job):
            verdict: Reason | None = Reason.NOT_FLINK_FILE
        elif named or self.collect_dead:
            verdict = None
        else:
            verdict = Reason.DEAD_JOB
        self.dead_verdicts[job] = verdict
        return verdict


class JobEvidence:
    """Whether a directory named like a JobID is Flink's: it has a ``chk-N`` directory, held a
    ``_metadata``, is referenced by a scanned checkpoint, or has changelog (DSTL) files of its id.
    A tenant directory that happens to be 32 hex digits with ``shared/report.csv`` has none.
    Asked only for jobs without a retained checkpoint (rare): each source is computed once, lazily.

    ``sources``: kind -> a function computing the set of job directories (changelog: job ids) with
    that evidence. The local planner derives them from its listings (:meth:`of_listings`), the
    Spark planner from aggregates over its DataFrames: the same sets, so the same verdicts."""

    KINDS = ("metadata", "chk-dir", "referenced", "changelog")

    def __init__(self, sources: dict[str, Callable[[], set[str]]]) -> None:
        self.sources = sources
        self._sets: dict[str, set[str]] = {}

    @classmethod
    def of_listings(cls, scopes: Scopes, retention: Retention, folded: Folded, listings, notes) -> JobEvidence:
        def dirs():  # (root, directory) of every listed file, once per run of one directory
            for root, runs in listings:
                for run in runs:
                    yield root, run.parent

        def changelog_uris():
            prefixes = tuple(c.rstrip("/") + "/" for c in scopes.options.changelog_dirs)
            if prefixes:
                for _root, runs in listings:
                    for run in runs:
                        if run.prefix.startswith(prefixes):
                            yield from (run.prefix + name for name in run.names)

        return cls({
            "metadata": lambda: metadata_jobs(retention),
            "chk-dir": lambda: chk_dir_jobs(notes, dirs()),
            "referenced": lambda: referenced_jobs(itertools.chain(folded.live, folded.spans)),
            "changelog": lambda: changelog_ids(changelog_uris()),
        })  # fmt: skip

    def of(self, job: str) -> str | None:
        """The first kind of evidence found for ``job``, or ``None``."""
        for kind in self.KINDS:
            if kind not in self._sets:
                self._sets[kind] = self.sources[kind]()
            key = st.basename(job) if kind == "changelog" else job
            if key in self._sets[kind]:
                return kind
        return None


def metadata_jobs(retention: Retention) -> set[str]:
    locs = itertools.chain(retention.retained, retention.expired)
    return {st.parent(loc.uri) for loc in locs if loc.kind == "checkpoint"}


def chk_dir_jobs(notes: dict[str, st.WalkNotes], dirs: Iterable[tuple[str, str]]) -> set[str]:
    """Jobs with a ``chk-N`` directory among the walks' directories and ``dirs`` ((root, directory)
    of listed files)."""
    jobs: set[str] = set()
    walked = ((root, d) for root, n in notes.items() for d in n.dirs)
    for root, d in itertools.chain(walked, dirs):
        if "/chk-" in d:
            place = place_of(root, d)
            if place.chk is not None:
                jobs.add(place.job)
    return jobs


def referenced_jobs(paths: Iterable[str]) -> set[str]:
    """The job directories live paths were written in."""
    jobs = {written_job_dir(p) for p in paths}
    jobs.discard(None)
    return jobs  # type: ignore[return-value]


def changelog_ids(uris: Iterable[str]) -> set[str]:
    """Job ids in the paths of changelog-dir files."""
    ids: set[str] = set()
    for uri in uris:
        ids.update(p for p in uri.split("/") if JOB_ID_RE.match(p))
    return ids


def _forst_parents(paths: Iterable[str]) -> set[str]:
    """Directories of live paths that may be a ForSt working directory's (a cheap filter; the
    grammar decides in :attr:`_Contexts.forst_in_use`)."""
    return {p.rpartition("/")[0] for p in paths if "/shared/op_" in p or "/shared/_dummy_dir_" in p}


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
                for path, scope, offset, size in referenced_files(ck):
                    if not path.startswith(prefixes) or escapes(path):
                        external.setdefault(path, {"path": path, "referenced_by": loc.uri, "scope": scope})
                    elif scope == "segment":
                        spans.setdefault(path, []).append((offset, size))
                    else:
                        add(path)
            else:
                out.expired_refs.update(ref[0] for ref in referenced_files(ck))
            del ck
        out.moved = moved
        out.refusals.extend(moved_refusals(moved))
        return out


def moved_refusals(moved: dict[str, list[str]]) -> list[tuple[str, str]]:
    """One refusal per inferred mapping (not one per checkpoint): mapping -> checkpoints, in order."""
    return [(
        Refusal.MOVED_DIRECTORY.value,
        f"{len(cks)} checkpoints were written at another location (first: {cks[0]}); their absolute "
        f"paths point elsewhere. Pass --rebase {mapping} (or the right mapping) to collect garbage here",
    ) for mapping, cks in moved.items()]  # fmt: skip


def fold_references_packed(*args) -> tuple:
    """:func:`fold_references` for a worker process: the path sets travel by directory, names
    NUL-joined (:meth:`PathsByDir.pack`), which pickle in a few pieces instead of half a million
    small ones and unpack into names only."""
    out = fold_references(*args)
    live, expired = PathsByDir.pack(out.live), PathsByDir.pack(out.expired_refs)
    out.live, out.expired_refs = set(), set()
    return live, expired, out


def _unpack(packed: tuple) -> Folded:
    live, expired, out = packed
    out.live, out.expired_refs = PathsByDir.unpack(live), PathsByDir.unpack(expired)
    return out


def _named(listings: list[tuple[str, list[DirFiles]]], name: str) -> list[tuple[str, list[FileInfo]]]:
    """The listed files called ``name``, per scope."""
    return [(root, [run.file(run.names.index(name)) for run in runs if name in run.names])
            for root, runs in listings]  # fmt: skip
