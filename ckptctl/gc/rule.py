"""The per-file rule, one for both planners (:class:`FileRule`): what becomes of a file that is
not live, given its directory's context, its name, link flag and mtime.

It runs over a directory's files as columns (:class:`~ckptctl.storage.listing.DirFiles`) and
answers in columns (positions and verdict codes, see :mod:`ckptctl.gc.decisions`): the local
planner decides a million-file directory without building a Python object per file. The Spark
planner, whose batches are rows, goes through :meth:`FileRule.decide`, which groups them into
such runs and hands back :class:`~ckptctl.gc.decisions.FileDecision` tuples.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from ckptctl.gc.decisions import FileDecision, Verdicts
from ckptctl.gc.listed import PathsByDir
from ckptctl.gc.reasons import Reason
from ckptctl.layout import FORST_CONTROL_RE, METADATA_FILE
from ckptctl.storage.listing import DirFiles, dir_runs

_CANDIDATE = frozenset(
    {
        Reason.UNREFERENCED_SHARED, Reason.UNREFERENCED_TASKOWNED, Reason.UNREFERENCED_CHANGELOG,
        Reason.UNREFERENCED_FORST, Reason.INCOMPLETE_CHECKPOINT, Reason.EXPIRED_CHECKPOINT,
    }
)  # fmt: skip

_SPECIAL_NAMES = frozenset({"", ".", "..", METADATA_FILE})
_NONE: frozenset = frozenset()


def _by_name(name: str, reason: Reason) -> Reason:
    """Rules that depend on the file's own name (called only for the names that need them)."""
    if name in ("", ".", "..") or "\\" in name:
        return Reason.ABNORMAL_PATH
    if name == METADATA_FILE and reason in (Reason.UNREFERENCED_SHARED, Reason.UNREFERENCED_TASKOWNED,
                                            Reason.UNREFERENCED_FORST):  # fmt: skip
        return Reason.NOT_FLINK_FILE  # Flink never writes one there
    if reason is Reason.UNREFERENCED_FORST and FORST_CONTROL_RE.match(name):
        return Reason.FORST_CONTROL_FILE
    return reason


def _covered(spans: list[tuple[int, int]]) -> int:
    total = end = 0
    for start, size in sorted(spans):
        stop = start + size
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


class RunDecided:
    """What :meth:`FileRule.decide_run` made of one run: candidates and protected files as
    positions in the run with verdict codes, and the live files' count and bytes."""

    __slots__ = ("kept", "kept_as", "live_bytes", "live_files", "run", "took", "took_as")

    def __init__(self, run: DirFiles) -> None:
        self.run = run
        self.took, self.took_as = array("I"), array("I")
        self.kept, self.kept_as = array("I"), array("I")
        self.live_files = self.live_bytes = 0


class FileRule:
    """The per-file rule, one for both planners: given a directory's context (:meth:`_Contexts.get`)
    and whether the file is live, a segment of a file-merging file, or referenced only by expired
    checkpoints, what becomes of it. The local planner runs :meth:`decide_run` over each
    directory's listed files with its live sets; the Spark planner :meth:`decide` over each Arrow
    batch with sets of the batch's own rows (the join told each row what it is)."""

    __slots__ = ("after_evidence", "check_expired", "cutoff", "margin", "tolerance_limit", "young_evidence",
                 "young_limit")  # fmt: skip

    def __init__(self, cutoff: float, tolerance_limit: float, margin: float, young_limit: float,
                 young_evidence: dict, after_evidence: dict, check_expired: bool) -> None:  # fmt: skip
        self.cutoff, self.tolerance_limit, self.margin, self.young_limit = cutoff, tolerance_limit, margin, young_limit
        self.young_evidence, self.after_evidence, self.check_expired = young_evidence, after_evidence, check_expired

    def decide_run(
        self, run: DirFiles, context: tuple, live: Collection[str], spans: Mapping[str, list[tuple[int, int]]],
        expired: Collection[str], verdicts: Verdicts, partial: Callable[[dict], Any],
    ) -> RunDecided:  # fmt: skip
        """Decide each file of one directory's run. ``live``, ``spans`` and ``expired`` hold the
        names (not URIs) in this directory that are live, segments' files (-> their spans), and
        referenced by expired checkpoints only; ``context`` is :meth:`_Contexts.get` of the
        directory. A partially live file also goes to ``partial``.

        This loop runs once per file (millions): it appends two numbers per decision and builds
        no object; the verdict codes of the directory's outcomes are looked up once per run."""
        out = RunDecided(run)
        names, sizes, mtimes, links = run.names, run.sizes, run.mtimes, run.links
        reason, is_candidate, anchor, evidence, _stats, unreferenced, forst = context
        took, took_as, kept, kept_as = out.took.append, out.took_as.append, out.kept.append, out.kept_as.append
        live_files = live_bytes = 0
        code = verdicts.code
        if not is_candidate:
            as_kept = code(reason, evidence)
            for start, chunk in names.chunks():
                for i, name in enumerate(chunk, start):
                    if name in live:
                        live_files += 1
                        live_bytes += sizes[i]
                    elif spans and name in spans:
                        live_files += 1
                        live_bytes += self._segment(run, i, spans[name], partial)
                    else:
                        kept(i)
                        kept_as(as_kept)
            out.live_files, out.live_bytes = live_files, live_bytes
            return out
        cutoff, tolerance_limit, young_limit = self.cutoff, self.tolerance_limit, self.young_limit
        in_flight = math.inf if anchor is None else anchor - self.margin
        check_expired = self.check_expired and bool(expired) and unreferenced
        as_taken, as_expired_only = code(reason, evidence), code(Reason.EXPIRED_ONLY, evidence)
        as_link, as_no_mtime = code(Reason.SYMLINK, None), code(Reason.NO_MTIME, None)
        as_future, as_young = code(Reason.FUTURE_MTIME, None), code(Reason.YOUNG, self.young_evidence)
        as_after, as_in_flight = code(Reason.AFTER_INVENTORY, self.after_evidence), code(Reason.IN_FLIGHT, evidence)
        special = _SPECIAL_NAMES
        for start, chunk in names.chunks():
            for i, name in enumerate(chunk, start):
                if name in live:
                    live_files += 1
                    live_bytes += sizes[i]
                    continue
                if spans and name in spans:
                    live_files += 1
                    live_bytes += self._segment(run, i, spans[name], partial)
                    continue
                c = as_taken
                if name in special or "\\" in name or (forst and FORST_CONTROL_RE.match(name)):
                    r = _by_name(name, reason)
                    if r not in _CANDIDATE:
                        kept(i)
                        kept_as(code(r, None))
                        continue
                elif check_expired and name in expired:
                    c = as_expired_only
                m = mtimes[i]
                if links[i]:
                    c = as_link
                elif not m > 0:  # none (NaN), zero or negative
                    c = as_no_mtime
                elif m > tolerance_limit:
                    c = as_future
                elif m >= young_limit:
                    c = as_young if m >= cutoff else as_after
                elif m >= in_flight:
                    c = as_in_flight
                else:
                    took(i)
                    took_as(c)
                    continue
                kept(i)
                kept_as(c)
        out.live_files, out.live_bytes = live_files, live_bytes
        return out

    @staticmethod
    def _segment(run: DirFiles, i: int, spans: list[tuple[int, int]], partial) -> int:
        """A file-merging file some retained checkpoint uses a segment of: live; its bytes."""
        size = run.sizes[i]
        covered = _covered(spans)
        if covered < size:
            partial({"path": run.prefix + run.names[i], "size": size, "live_bytes": covered, "dead_bytes": size - covered})
        return size

    def decide(self, files: Iterable[tuple], ctx, live, spans, expired_refs, keep, take, partial) -> tuple[int, int]:
        """:meth:`decide_run` over rows ((uri, size, mtime, is_link), grouped by directory for
        speed), with ``live``, ``spans`` and ``expired_refs`` keyed by URI: each decision goes to
        ``keep`` or ``take`` as a :class:`FileDecision`. Returns (live files, live bytes)."""
        live, spans, expired = PathsByDir.of(live), PathsByDir.of(spans), PathsByDir.of(expired_refs)
        verdicts = Verdicts()
        pairs = verdicts.pairs
        new = tuple.__new__
        live_files = live_bytes = 0
        for run in dir_runs(files):
            parent = run.parent
            decided = self.decide_run(run, ctx(parent), live.names_in(parent), spans.names_in(parent),
                                      expired.names_in(parent), verdicts, partial)  # fmt: skip
            live_files += decided.live_files
            live_bytes += decided.live_bytes
            for to, at, codes in ((take, decided.took, decided.took_as), (keep, decided.kept, decided.kept_as)):
                for i, c in zip(at, codes, strict=True):
                    reason, evidence = pairs[c]
                    to(new(FileDecision, (run.prefix + run.names[i], run.sizes[i], run.mtime(i), reason, evidence)))
        return live_files, live_bytes
