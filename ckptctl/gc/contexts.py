"""Per directory, what its files are unless a checkpoint references them: the context of the rule.

:class:`~ckptctl.gc.rule.FileRule` decides one file from its name, size and mtime and from the
context of its directory, computed once per directory (millions of files, thousands of
directories): its reason if unreferenced, whether it may be a candidate at all, the anchor of the
in-flight guard (the job's newest retained ``_metadata``) and the job's running totals. The Spark
planner computes the same contexts for the distinct directories and broadcasts them.

Whether a directory named like a JobID is a (dead) Flink job is decided on evidence
(:class:`JobEvidence`), from the listings or from the Spark planner's aggregates alike.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Iterable

from ckptctl import storage as st
from ckptctl.checkpoint.layout import JOB_ID_RE, CheckpointLocation, below_job_area, fixed_job_id, place_of
from ckptctl.checkpoint.rebase import written_job_dir
from ckptctl.gc.activity import JobActivity
from ckptctl.gc.folding import Folded
from ckptctl.gc.mounts import OtherMounts
from ckptctl.gc.reasons import UNREFERENCED, Reason
from ckptctl.gc.retention import Retention
from ckptctl.gc.scopes import Scopes


class DirContexts:
    """Per directory: what its files are unless referenced (see :meth:`_anchored`), and job stats."""

    def __init__(
        self, scopes: Scopes, retention: Retention, forst_parents: Callable[[], Iterable[str]], future_limit: float,
        evidence: JobEvidence, activity: JobActivity, mounts: OtherMounts | None = None,
    ) -> None:  # fmt: skip
        self.scopes = scopes
        self.mounts = mounts  # other mounts below the roots: their files are kept unless named
        self.evidence = evidence
        self.activity = (
            activity  # of a job without a retained checkpoint: when it last wrote, its chk-N began
        )
        self.collect_dead = scopes.options.collect_dead_jobs
        self.collect_fixed = scopes.options.collect_fixed_id_changelog
        self.fixed_ids_kept: set[str] = set()  # fixed job ids whose changelog files were kept, for a warning
        self.named = set(scopes.options.roots)
        self.dead_verdicts: dict[str, Reason | None] = {}  # job without a retained checkpoint -> verdict
        self.forst_parents = forst_parents  # directories of live files that may be ForSt's (asked lazily)
        self.future_limit = future_limit
        self.retained_dirs = {loc.uri for loc in retention.retained}
        self.expired_dirs = {loc.uri for loc in retention.expired}
        self.newest = retention.newest_retained
        self.inner_anchors = inner_anchors(scopes, retention.retained)
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

    def _kept(self, reason: Reason, job: str | None = None, evidence: dict | None = None) -> tuple:
        return reason, False, None, evidence, self._stats(job), False, False

    def _anchored(self, reason: Reason, job: str | None, anchored: tuple[float, dict] | None) -> tuple:
        """A candidate directory: (reason, True, anchor mtime, evidence, job stats, unreferenced, forst).
        ``anchored``: the in-flight anchor and its evidence (:func:`retained_anchor`), or ``None``."""
        stats = self._stats(job)
        unreferenced = reason in UNREFERENCED
        forst = reason is Reason.UNREFERENCED_FORST  # control-file names matter there
        if anchored is None:
            return reason, True, None, None, stats, unreferenced, forst
        anchor, evidence = anchored
        if anchor > self.future_limit:
            # no believable checkpoint time in this job: every file may be in flight. -inf, not inf:
            # the rule holds a file when its mtime >= anchor - margin, which inf would never be
            anchor = -math.inf
        return reason, True, anchor, evidence, stats, unreferenced, forst

    def _make(self, parent: str) -> tuple:
        scope, kind = self.scopes.scope_of(parent + "/x")
        if not st.is_normal(parent):
            return self._kept(Reason.ABNORMAL_PATH)
        if kind is None:
            return self._kept(Reason.NOT_FLINK_FILE)
        if self.mounts and self.mounts.unnamed_of(parent) is not None:
            return self._kept(Reason.OTHER_MOUNT)  # no job's: the same files may be counted under their name
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
            if fixed_job_id(job_name) and not self.collect_fixed:
                # the id names no deployment: another one of that id, whose checkpoints are not
                # scanned, may write this same directory (a red-team helper: its DSTL files went
                # as unreferenced against the scanned job's checkpoints)
                self.fixed_ids_kept.add(job_name)
                return self._kept(Reason.CHANGELOG_FIXED_JOB_ID)
            return self._anchored(Reason.UNREFERENCED_CHANGELOG, None, retained_anchor(newest))
        place = place_of(scope, parent)
        if place.area == "savepoint":
            return self._kept(Reason.IN_SAVEPOINT)
        if place.area == "other" or kind == "savepoints":
            return self._kept(Reason.NOT_FLINK_FILE, place.job)
        newest = self.newest.get(place.job)
        anchor = retained_anchor(newest)
        if newest is None and place.job is not None:
            verdict = self.dead_verdict(place.job)
            if verdict is not None:
                active = self.activity.active(place.job) if verdict is Reason.JOB_ACTIVE else None
                return self._kept(verdict, place.job, active)
            anchor = self.unretained_anchor(place.job)
        if place.area == "chk":
            if place.chk in self.retained_dirs:
                return self._kept(Reason.RETAINED_CHECKPOINT_DIR, place.job)
            if place.chk in self.expired_dirs:
                # completed long ago, not in flight: no anchor, so that the _metadata goes exactly
                # when retain() decided it would (the unit rule)
                return self._anchored(Reason.EXPIRED_CHECKPOINT, place.job, None)
            return self._anchored(Reason.INCOMPLETE_CHECKPOINT, place.job, anchor)
        if place.area == "shared":
            if place.forst is None:
                return self._anchored(Reason.UNREFERENCED_SHARED, place.job, anchor)
            # A ForSt database works inside shared/: a file it flushed after a snapshot but before
            # that checkpoint's _metadata landed is older than every anchor and referenced by
            # nothing yet, but live. While a retained checkpoint uses the working directory the
            # job may be running, so nothing in it is collected (ForSt deletes its own garbage);
            # a directory no retained checkpoint uses (a superseded attempt, a dead job) is.
            if place.forst in self.forst_in_use:
                return self._kept(Reason.FORST_IN_USE, place.job)
            return self._anchored(Reason.UNREFERENCED_FORST, place.job, anchor)
        return self._anchored(Reason.UNREFERENCED_TASKOWNED, place.job, anchor)

    def unretained_anchor(self, job: str) -> tuple[float, dict] | None:
        """The in-flight anchor of a job without a retained checkpoint that is collected (named
        as ROOT, --collect-dead-jobs) and quiet (:meth:`JobActivity.active`): the start of its
        newest ``chk-N`` (a checkpoint may still upload into it), and the anchor of the jobs
        running inside it (a root below a tenant directory named like a job); the earlier of
        the two. Neither: ``None``, the job was quiet for --older-than + --margin."""
        found = [a for a in (self.activity.anchor(job), retained_anchor(self.inner_anchors.get(job))) if a]
        return min(found, key=lambda a: a[0]) if found else None

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
        elif self.activity.active(job) is not None:
            # it wrote lately: its first checkpoint may be uploading (kept whole, collected or not)
            verdict = Reason.JOB_ACTIVE
        elif named or self.collect_dead:
            verdict = None
        else:
            verdict = Reason.DEAD_JOB
        self.dead_verdicts[job] = verdict
        return verdict


def retained_anchor(newest: CheckpointLocation | None) -> tuple[float, dict] | None:
    """The in-flight anchor a job's newest retained checkpoint gives (its ``_metadata`` time)."""
    if newest is None:
        return None
    anchor = newest.metadata.mtime or 0
    return anchor, {"newest_retained": newest.uri, "newest_retained_mtime": anchor}


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
    def of_listings(
        cls, scopes: Scopes, retention: Retention, folded: Folded, listings, notes
    ) -> JobEvidence:
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


def inner_anchors(scopes: Scopes, retained: Iterable[CheckpointLocation]) -> dict[str, CheckpointLocation]:
    """Job directory -> the in-flight anchor of the jobs running inside its ``shared/`` or
    ``taskowned/`` (checkpoint roots below a tenant directory named like a job, found by discovery
    or only by the listing): each inner job's newest retained ``chk-N``, and of those the oldest
    (the slower job may still upload, as for a job id in two roots)."""
    newest: dict[str, tuple[str, CheckpointLocation]] = {}  # inner job dir -> (outer job, its newest)
    for loc in retained:
        mtime = loc.metadata.mtime if loc.metadata is not None else None
        scope = scopes.scope_of(loc.uri + "/x")[0]
        if loc.kind != "checkpoint" or mtime is None or scope is None or not below_job_area(scope, loc.uri):
            continue
        inner = st.parent(loc.uri)
        had = newest.get(inner)
        if had is None or mtime > (had[1].metadata.mtime or 0):
            newest[inner] = (place_of(scope, loc.uri).job, loc)
    out: dict[str, CheckpointLocation] = {}
    for job, loc in newest.values():
        if job not in out or (loc.metadata.mtime or 0) < (out[job].metadata.mtime or 0):
            out[job] = loc
    return out


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


def forst_parents(paths: Iterable[str]) -> set[str]:
    """Directories of live paths that may be a ForSt working directory's (a cheap filter; the
    grammar decides in :attr:`DirContexts.forst_in_use`)."""
    return {p.rpartition("/")[0] for p in paths if "/shared/op_" in p or "/shared/_dummy_dir_" in p}
