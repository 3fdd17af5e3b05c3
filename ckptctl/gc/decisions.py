"""What a plan holds: per-file decisions (:class:`FileDecision`), kept by the local planner as
columns over its listing (:class:`Decisions`), and the plan itself (:class:`GcPlan`) with its
JSON writer.

A plan of millions of files holds no per-file Python object: a decision is a position in a
directory's :class:`~ckptctl.storage.listing.DirFiles` and a code naming its (reason, evidence)
pair (:class:`Verdicts`), eight bytes. :class:`FileDecision` tuples are built only while a consumer
iterates (the plan writer streams them; renderers look at a few).
"""

from __future__ import annotations

import json
import time
from array import array
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, NamedTuple

from ckptctl import __version__
from ckptctl.gc.options import GcOptions
from ckptctl.gc.planfile import PLAN_FORMAT
from ckptctl.gc.reasons import Reason
from ckptctl.storage.listing import DirFiles


class FileDecision(NamedTuple):
    """The fate of one file. ``evidence`` is shared by all files of a job (it names the anchor)."""

    path: str
    size: int
    mtime: float | None
    reason: Reason
    evidence: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size, "mtime": self.mtime, "reason": str(self.reason),
                "evidence": self.evidence or {}}  # fmt: skip


class Verdicts:
    """The (reason, evidence) pairs of one plan, each under a small code. Evidence dicts are shared
    by every file of a job, so a plan has a handful of pairs; they are told apart by identity (the
    plan writer re-encodes a line's tail only when the objects change)."""

    def __init__(self) -> None:
        self.pairs: list[tuple[Reason, dict[str, Any] | None]] = []
        self._codes: dict[tuple[Reason, int], int] = {}

    def code(self, reason: Reason, evidence: dict[str, Any] | None) -> int:
        key = (reason, id(evidence))
        c = self._codes.get(key)
        if c is None:
            c = self._codes[key] = len(self.pairs)
            self.pairs.append((reason, evidence))
        return c


class Decisions(Sequence):
    """Candidates or protected files as columns: per run of a directory's files, the positions
    decided and their verdict codes (two ``array('I')``), in listing order. A
    sequence of :class:`FileDecision`, built one at a time when read."""

    def __init__(self, verdicts: Verdicts) -> None:
        self.verdicts = verdicts
        self.segments: list[tuple[DirFiles, array, array]] = []
        self._starts: list[int] = []  # index of each segment's first decision
        self._len = 0

    def add(self, run: DirFiles, at: array, codes: array) -> None:
        if at:
            self.segments.append((run, at, codes))
            self._starts.append(self._len)
            self._len += len(at)

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[FileDecision]:
        return self._from(0, 0)

    def _from(self, segment: int, offset: int) -> Iterator[FileDecision]:
        new = tuple.__new__
        pairs = self.verdicts.pairs
        for run, at, codes in islice(self.segments, segment, None):
            prefix, names, sizes, mtimes = run.prefix, run.names, run.sizes, run.mtimes
            for i, c in islice(zip(at, codes, strict=True), offset, None):
                reason, evidence = pairs[c]
                m = mtimes[i]
                yield new(
                    FileDecision, (prefix + names[i], sizes[i], None if m != m else m, reason, evidence)
                )
            offset = 0

    def __getitem__(self, index):
        if isinstance(index, slice):
            start, stop, step = index.indices(self._len)
            if step != 1 or start >= stop:
                return [self[i] for i in range(start, stop, step)]
            return list(islice(self._at(start), stop - start))
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError(index)
        return next(self._at(index))

    def _at(self, index: int) -> Iterator[FileDecision]:
        segment = bisect_right(self._starts, index) - 1
        return self._from(segment, index - self._starts[segment])

    def total_size(self) -> int:
        return sum(sum(map(run.sizes.__getitem__, at)) for run, at, _codes in self.segments)

    def mtime_range(self) -> tuple[float | None, float | None]:
        """Oldest and newest mtime (none is 0 or missing: the rule takes no such file)."""
        lows, highs = [], []
        for run, at, _codes in self.segments:
            mtimes = [m for m in map(run.mtimes.__getitem__, at) if m and m == m]  # not 0, not NaN (none)
            if mtimes:
                lows.append(min(mtimes))
                highs.append(max(mtimes))
        return (min(lows), max(highs)) if lows else (None, None)

    def reason_counts(self) -> Counter:
        """Files per reason, in the order the reasons first occur (as ``Counter(d.reason for d in self)``)."""
        by_code: Counter = Counter()
        for _run, _at, codes in self.segments:
            by_code.update(codes)
        out: Counter = Counter()
        pairs = self.verdicts.pairs
        for c, n in by_code.items():
            out[pairs[c][0]] += n
        return out

    def without(self, paths: set[str]) -> tuple[int, int]:
        """Drop the decisions of ``paths``: (how many, their bytes)."""
        dropped = dropped_bytes = 0
        segments, self.segments, self._starts, self._len = self.segments, [], [], 0
        for run, at, codes in segments:
            prefix, names = run.prefix, run.names
            gone = [k for k, i in enumerate(at) if prefix + names[i] in paths]
            if gone:
                dropped += len(gone)
                dropped_bytes += sum(run.sizes[at[k]] for k in gone)
                keep = sorted(set(range(len(at))) - set(gone))
                at, codes = array("I", (at[k] for k in keep)), array("I", (codes[k] for k in keep))
            self.add(run, at, codes)
        return dropped, dropped_bytes


# the plan's totals over decisions in columns (the local planner) or in lists (the Spark planner)
def _total_size(entries: Sequence[FileDecision]) -> int:
    return entries.total_size() if isinstance(entries, Decisions) else sum(e.size for e in entries)


def _mtime_range(entries: Sequence[FileDecision]) -> tuple[float | None, float | None]:
    if isinstance(entries, Decisions):
        return entries.mtime_range()
    mtimes = [e.mtime for e in entries if e.mtime]
    return (min(mtimes), max(mtimes)) if mtimes else (None, None)


def _by_reason(entries: Sequence[FileDecision]) -> dict[str, int]:
    counts = entries.reason_counts() if isinstance(entries, Decisions) else Counter(e.reason for e in entries)
    return {str(k): v for k, v in counts.most_common()}


@dataclass
class GcPlan:
    options: GcOptions
    now: float
    now_source: str
    cutoff: float
    retained: list[dict[str, Any]]
    expired: list[dict[str, Any]]
    candidates: Sequence[FileDecision]  # a list, or Decisions (columns)
    protected: Sequence[FileDecision]
    live_files: int
    live_bytes: int
    total_files: int
    total_bytes: int
    external: list[dict[str, Any]]
    missing: list[dict[str, Any]]
    partially_live: list[dict[str, Any]]
    refusals: list[dict[str, str]]
    warnings: list[str]
    dead_jobs: list[dict[str, Any]] = field(default_factory=list)
    storage: dict[str, Any] = field(default_factory=dict)
    discovery: dict[str, Any] = field(default_factory=dict)  # what the walks followed, skipped, found twice
    inventory: dict[str, Any] | None = None  # --inventory: the report read instead of a listing
    _header: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    @property
    def blocked(self) -> bool:
        return bool(self.refusals)

    @property
    def candidate_bytes(self) -> int:
        return _total_size(self.candidates)

    def summary(self) -> dict[str, Any]:
        oldest, newest = _mtime_range(self.candidates)
        return {
            "live_files": self.live_files, "live_bytes": self.live_bytes,
            "candidate_files": len(self.candidates), "candidate_bytes": self.candidate_bytes,
            "protected_files": len(self.protected), "protected_bytes": _total_size(self.protected),
            "total_files": self.total_files, "total_bytes": self.total_bytes,
            "retained_checkpoints": len(self.retained), "expired_checkpoints": len(self.expired),
            "external_references": len(self.external), "missing_files": len(self.missing),
            "partially_live_files": len(self.partially_live),
            "dead_bytes_in_partially_live_files": sum(p["dead_bytes"] for p in self.partially_live),
            "oldest_candidate_mtime": oldest, "newest_candidate_mtime": newest,
        }  # fmt: skip

    def header(self) -> dict[str, Any]:
        """Everything in the plan but the (possibly millions of) per-file entries (computed once)."""
        if self._header is None:
            self._header = self._make_header()
        return dict(self._header, created_at=time.time())

    def _make_header(self) -> dict[str, Any]:
        return {
            "format": PLAN_FORMAT, "tool": f"ckptctl {__version__}", "created_at": time.time(),
            "options": self.options.to_json(), "storage": self.storage,
            "now": self.now, "now_source": self.now_source, "cutoff": self.cutoff,
            "blocked": self.blocked, "refusals": self.refusals, "warnings": self.warnings,
            **self.summary(),
            "candidates_by_reason": _by_reason(self.candidates),
            "protected_by_reason": _by_reason(self.protected),
            "retained": self.retained, "expired": self.expired, "dead_jobs": self.dead_jobs,
            "discovery": self.discovery,
            **({"inventory": self.inventory} if self.inventory is not None else {}),
            "external": self.external, "missing": self.missing, "partially_live": self.partially_live,
        }  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return {
            **self.header(),
            "candidates": [c.as_dict() for c in self.candidates],
            "protected": [p.as_dict() for p in self.protected],
        }

    def write_json(self, out) -> None:
        """The plan as JSON on a binary stream, one file entry per line (fast for huge plans)."""
        head = json.dumps(self.header(), indent=1)
        out.write(head[:-2].encode("utf-8"))
        for key, entries in (("candidates", self.candidates), ("protected", self.protected)):
            out.write(f',\n "{key}": [\n'.encode())
            _write_entries(entries, out)
            out.write(b"\n ]")
        out.write(b"\n}\n")


def _write_entries(entries: Iterable[FileDecision], out) -> None:
    """One JSON object per line. Entries of one job share their reason and evidence objects, so
    the line's tail is re-encoded only when those change (compared by identity)."""
    from ckptctl.export import json_value as _encode
    from ckptctl.export import needs_escape as _needs_escape

    last_reason = last_evidence = object()
    tail = ""
    entries = iter(entries)
    start = 0
    while chunk := list(islice(entries, 4096)):
        plain = not _needs_escape(" ".join(e.path for e in chunk))
        lines = []
        append = lines.append
        for path, size, mtime, reason, evidence in chunk:
            if reason is not last_reason or evidence is not last_evidence:
                last_reason, last_evidence = reason, evidence
                tail = f', "reason": "{reason.value}", "evidence": {json.dumps(evidence or {})}}}'
            p = '"' + path + '"' if plain else _encode(path)
            m = "null" if mtime is None else repr(mtime)
            append(f'  {{"path": {p}, "size": {size}, "mtime": {m}{tail}')
        out.write(((",\n" if start else "") + ",\n".join(lines)).encode("utf-8"))
        start += len(chunk)
