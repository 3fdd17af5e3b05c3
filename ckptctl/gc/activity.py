"""When a job without a retained checkpoint was last seen at work: the in-flight anchor of its files.

A job's newest retained ``_metadata`` anchors the in-flight guard of its files (what it wrote
since, less ``--margin``, may belong to a checkpoint still uploading). A job with none -- its
first checkpoint still uploading after a NO_CLAIM restore of a large savepoint, checkpoints
timing out under backpressure, a changelog job whose materialization uploaded before its first
checkpoint -- had no anchor at all: once ``--collect-dead-jobs`` or a ROOT naming it collected
it, ``--older-than`` alone stood between a checkpoint being written and its deletion.

Flink creates ``chk-N`` when it triggers checkpoint N, before any task writes for it (on S3 the
directory is its first object, or S3A's marker; a ``_metadata`` in a multipart upload is
invisible until complete). So for such a job:

* its **newest evidence** -- any file's mtime, a ``chk-N`` directory's own mtime, which moves
  while files keep arriving in it, and the changelog (DSTL) files of its id in a scanned
  ``--changelog-dir``, which a changelog job writes while it runs -- younger than
  ``--older-than`` + ``--margin`` means it may be running: the whole job is kept
  (:attr:`Reason.JOB_ACTIVE`), collected as a dead job or not. A time that is no time (no
  mtime, a stand-in) proves no quiet: kept too;
* otherwise its **newest checkpoint's start** -- the oldest evidence in its newest ``chk-N``
  (:meth:`Seen.newest_start`) -- anchors the in-flight guard as a retained ``_metadata`` would:
  every file newer than it less ``--margin`` is kept. Without any ``chk-N`` nothing anchors, and
  the job has been quiet for ``--older-than`` + ``--margin``: its old files go, as before.

Both planners feed :class:`JobActivity` the same per-directory figures (the local one from its
listings, the Spark one from its summary's aggregates) and the same walk notes, so they decide
alike.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field

from ckptctl import storage as st
from ckptctl.checkpoint.layout import CHK_RE, JOB_ID_RE, place_of
from ckptctl.storage.listing import PLAUSIBLE_MTIME, DirFiles

# per directory of listed files: its URI and a function giving (newest, oldest, undated) over its
# files' mtimes: the newest and oldest plausible ones (None: none is), whether any is not plausible
DirTimes = tuple[str, Callable[[], tuple[float | None, float | None, bool]]]


@dataclass
class Seen:
    """What the listing shows of one job's work: its newest evidence, whether some evidence has
    no believable time, and per ``chk-N`` directory its oldest evidence (when it began, at most)."""

    newest: float = -math.inf
    undated: bool = False
    started: dict[str, float] = field(default_factory=dict)

    def add(self, newest: float | None, oldest: float | None, undated: bool, chk: str | None) -> None:
        if newest is not None:
            self.newest = max(self.newest, newest)
        self.undated = self.undated or undated
        if chk is not None:
            at = math.inf if oldest is None else oldest
            self.started[chk] = min(self.started.get(chk, math.inf), at)

    def newest_start(self) -> tuple[str, float] | None:
        """The newest ``chk-N`` and when it began (its oldest evidence), or ``None``: no ``chk-N``.
        Of the one that began last and the highest-numbered one, the earlier: a leftover directory
        whose time moved when Flink discarded an aborted checkpoint in it must not hide the start
        of the one in flight beside it (concurrent checkpoints), nor a run restored under a fixed
        job id, numbering below an older run's leftovers, hide the older run's."""
        if not self.started:
            return None
        last = max(self.started, key=lambda c: (self.started[c], c))
        highest = max(self.started, key=lambda c: (_number(c), c))
        chk = min((last, highest), key=lambda c: self.started[c])
        return chk, self.started[chk]

    def merge(self, other: Seen | None) -> Seen:
        """This job's evidence with ``other``'s newest and undated (its changelog files)."""
        if other is None:
            return self
        return Seen(max(self.newest, other.newest), self.undated or other.undated, self.started)


class JobActivity:
    """Per job directory without a retained checkpoint, what the listing shows of its work
    (:class:`Seen`), computed once, lazily (asked only for such jobs: rare). ``dirs`` gives
    :data:`DirTimes` for every directory of listed files; ``notes`` the walks' directories with
    their mtimes (local roots only: an object store has no directory times)."""

    def __init__(self, scopes, retained_jobs: Collection[str], dirs: Callable[[], Iterable[DirTimes]],
                 notes: Mapping[str, st.WalkNotes], quiet_before: float) -> None:  # fmt: skip
        self.scopes, self.retained_jobs, self.dirs, self.notes = scopes, retained_jobs, dirs, notes
        self.quiet_before = quiet_before  # a job seen at work since may be running
        self._seen: dict[str, Seen] | None = None
        self._by_id: dict[str, Seen] = {}  # job id -> its changelog (DSTL) files' evidence

    @classmethod
    def of_listings(cls, scopes, retained_jobs, listings: list[tuple[str, list[DirFiles]]], notes,
                    quiet_before: float) -> JobActivity:  # fmt: skip
        def dirs() -> Iterable[DirTimes]:
            for _root, runs in listings:
                for run in runs:
                    yield run.parent, lambda run=run: dated(run.mtimes)

        return cls(scopes, retained_jobs, dirs, notes, quiet_before)

    def of(self, job: str) -> Seen | None:
        if self._seen is None:
            self._seen, self._by_id = self._collect()
        seen, logged = self._seen.get(job), self._by_id.get(st.basename(job))
        return logged if seen is None else seen.merge(logged)

    def active(self, job: str) -> dict | None:
        """The evidence that ``job`` may be running (its files kept whole), or ``None``."""
        seen = self.of(job)
        if seen is None or not (seen.undated or seen.newest >= self.quiet_before):
            return None
        evidence: dict = {"quiet_before": self.quiet_before}
        if seen.undated:
            evidence["undated_evidence"] = True
        if seen.newest > -math.inf:
            evidence["newest_evidence_mtime"] = seen.newest
        return evidence

    def anchor(self, job: str) -> tuple[float, dict] | None:
        """The in-flight anchor of a quiet ``job``'s files: when its newest ``chk-N`` began."""
        seen = self.of(job)
        found = seen.newest_start() if seen is not None else None
        if found is None:
            return None
        chk, started = found
        return started, {"newest_checkpoint_started": chk, "newest_checkpoint_started_mtime": started}

    def _job_of(self, directory: str) -> tuple[str | None, str | None]:
        """(the job directory ``directory`` belongs to, its ``chk-N`` if inside one)."""
        scope, kind = self.scopes.scope_of(directory + "/x")
        if kind != "root":
            return None, None
        place = place_of(scope, directory)
        job = place.job
        if job is None and JOB_ID_RE.match(st.basename(directory)):
            job = directory  # the job directory itself (files lying directly in it)
        return job, place.chk

    def _collect(self) -> tuple[dict[str, Seen], dict[str, Seen]]:
        seen: dict[str, Seen] = {}
        by_id: dict[str, Seen] = {}
        for directory, times in self.dirs():
            logged = self._logged_id(directory)
            if logged is not None:  # a changelog job writes DSTL files while it runs, checkpoints or not
                by_id.setdefault(logged, Seen()).add(*times(), None)
                continue
            job, chk = self._job_of(directory)
            if job is None or job in self.retained_jobs:
                continue
            seen.setdefault(job, Seen()).add(*times(), chk)
        for notes in self.notes.values():
            for directory, mtime in notes.dirs.items():
                job, chk = self._job_of(directory)
                if chk is None or job in self.retained_jobs:
                    continue  # a chk-N directory's time moves as its files arrive; others' as gc deletes
                m = mtime if mtime is not None and mtime >= PLAUSIBLE_MTIME else None
                seen.setdefault(job, Seen()).add(m, m, m is None, chk)  # type: ignore[arg-type]
        return seen, by_id

    def _logged_id(self, directory: str) -> str | None:
        """The job id a ``--changelog-dir`` directory holds DSTL files of (``<dir>/<job-id>/dstl``)."""
        scope, kind = self.scopes.scope_of(directory + "/x")
        if kind != "changelog":
            return None
        return next((p for p in directory[len(scope) :].split("/") if JOB_ID_RE.match(p)), None)


def _number(chk: str) -> int:
    m = CHK_RE.match(st.basename(chk))
    return int(m.group(1)) if m else 0


def dated(mtimes: Iterable[float]) -> tuple[float | None, float | None, bool]:
    """(newest, oldest, undated) of ``mtimes``: the largest and smallest plausible ones, and
    whether any is none (NaN) or a stand-in (:data:`PLAUSIBLE_MTIME`)."""
    good = [m for m in mtimes if m >= PLAUSIBLE_MTIME]  # NaN compares false
    undated = len(good) != len(mtimes)  # type: ignore[arg-type]
    return (max(good), min(good), undated) if good else (None, None, undated)
