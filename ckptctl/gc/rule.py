"""The per-file rule, one for both planners (:class:`FileRule`): what becomes of a file that is
not live, given its directory's context, its name, link flag and mtime.

It decides columns and builds no Python object per file: a batch of files (:class:`RuleColumns`:
names, mtimes, link flags, which files the checkpoints settle -- live, or a segment's file -- and
which only expired checkpoints reference), each with its directory's context, is answered as a
verdict code per file (see :mod:`ckptctl.gc.decisions`) and whether the file is taken; Arrow's
compute kernels do the per-file work. The local planner hands it one directory's listed run
(:meth:`FileRule.decide_run`), the Spark planner each Arrow batch of its joined rows with a
directory per row. Only the names the rule must read one by one (``_metadata``, ``..``, ForSt's
control files) reach Python, through :func:`_by_name`.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, NamedTuple

from ckptctl.gc.decisions import Verdicts
from ckptctl.gc.reasons import Reason
from ckptctl.layout import FORST_CONTROL_PREFIXES, FORST_CONTROL_RE, METADATA_FILE
from ckptctl.storage.listing import DirFiles

_CANDIDATE = frozenset(
    {
        Reason.UNREFERENCED_SHARED, Reason.UNREFERENCED_TASKOWNED, Reason.UNREFERENCED_CHANGELOG,
        Reason.UNREFERENCED_FORST, Reason.INCOMPLETE_CHECKPOINT, Reason.EXPIRED_CHECKPOINT,
    }
)  # fmt: skip

_SPECIAL_NAMES = ("", ".", "..", METADATA_FILE)  # names :func:`_by_name` may judge otherwise


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


def covered_bytes(spans: list[tuple[int, int]]) -> int:
    """The bytes of a file the spans (offset, size) cover, overlaps counted once."""
    total = end = 0
    for start, size in sorted(spans):
        stop = start + size
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


class RuleColumns(NamedTuple):
    """A batch of files for :meth:`FileRule.verdicts`, as Arrow arrays of one length."""

    contexts: Sequence[tuple]  # :meth:`_Contexts.get` of each directory of the batch
    at: Any  # per file, the index of its directory in ``contexts``; None: every file is in contexts[0]
    names: Any  # string: the file's name in its directory
    mtimes: Any  # float64 seconds; NaN or null: none
    links: Any  # bool: reached through a symlink
    settled: Any  # bool: live or a live segment's file (the caller counts those)
    expired: Any  # bool: referenced by expired checkpoints only, or None


class RunDecided:
    """What :meth:`FileRule.decide_run` made of one run: candidates and protected files as
    positions in the run with verdict codes (``array('I')``), the candidates' bytes, and the live
    files' count and bytes."""

    __slots__ = ("kept", "kept_as", "live_bytes", "live_files", "run", "took", "took_as", "took_bytes")

    def __init__(self, run: DirFiles) -> None:
        self.run = run
        self.took, self.took_as = array("I"), array("I")
        self.kept, self.kept_as = array("I"), array("I")
        self.live_files = self.live_bytes = self.took_bytes = 0


class FileRule:
    """The per-file rule, one for both planners: given a directory's context (:meth:`_Contexts.get`)
    and whether the file is live, a segment of a file-merging file, or referenced only by expired
    checkpoints, what becomes of it (:meth:`verdicts`, over columns). The local planner runs
    :meth:`decide_run` over each directory's listed files with its live sets; the Spark planner
    :meth:`verdicts` over each Arrow batch of joined rows (the join told each row what it is)."""

    __slots__ = ("after_evidence", "check_expired", "cutoff", "margin", "tolerance_limit", "young_evidence",
                 "young_limit")  # fmt: skip

    def __init__(self, cutoff: float, tolerance_limit: float, margin: float, young_limit: float,
                 young_evidence: dict, after_evidence: dict, check_expired: bool) -> None:  # fmt: skip
        self.cutoff, self.tolerance_limit, self.margin, self.young_limit = cutoff, tolerance_limit, margin, young_limit
        self.young_evidence, self.after_evidence, self.check_expired = young_evidence, after_evidence, check_expired

    def verdicts(self, cols: RuleColumns, verdicts: Verdicts) -> tuple[Any, Any, Any]:
        """Each file's verdict code, and two masks: taken (a candidate) and kept (protected). A
        settled file is neither; its code means nothing.

        In a candidate directory the first that holds of: reached through a symlink, no mtime, an
        mtime in the future, younger than the cutoff (or than the inventory), not older than the
        newest retained checkpoint less the margin (in flight), keeps the file under that reason;
        otherwise it is taken under the directory's reason (or as referenced by expired
        checkpoints only). A name :func:`_by_name` judges otherwise is kept under its reason. In
        any other directory every file is kept under the directory's reason."""
        import pyarrow as pa
        import pyarrow.compute as pc

        code, ctxs, at = verdicts.code, cols.contexts, cols.at

        def per_file(values: list, kind) -> Any:
            if at is None:
                return pa.scalar(values[0], kind)
            return pc.take(pa.array(values, kind), at)

        u32 = pa.uint32()
        n = len(cols.names)
        open_ = pc.invert(cols.settled)
        as_dir = per_file([code(c[0], c[3]) for c in ctxs], u32)
        if at is None:
            as_dir = _filled(n, as_dir)
        if not any(c[1] for c in ctxs):  # no candidate directory: every file kept as its directory says
            return as_dir, _filled(n, pa.scalar(False)), open_
        names = cols.names
        cand = pc.and_(per_file([bool(c[1]) for c in ctxs], pa.bool_()), open_)
        m = pc.fill_null(cols.mtimes, math.nan)
        links = pc.fill_null(cols.links, False)
        special = pc.or_(pc.is_in(names, value_set=pa.array(_SPECIAL_NAMES)), pc.match_substring(names, "\\"))
        if any(c[6] for c in ctxs):  # ForSt's control files: the names that begin like one
            control = pc.starts_with(names, FORST_CONTROL_PREFIXES[0])
            for prefix in FORST_CONTROL_PREFIXES[1:]:
                control = pc.or_(control, pc.starts_with(names, prefix))
            special = pc.or_(special, pc.and_(per_file([bool(c[6]) for c in ctxs], pa.bool_()), control))
        special = pc.and_(special, cand)
        c = as_dir
        if cols.expired is not None and self.check_expired and any(x[1] and x[5] for x in ctxs):
            expired_only = pc.and_(pc.and_(per_file([bool(x[1] and x[5]) for x in ctxs], pa.bool_()),
                                           pc.fill_null(cols.expired, False)), pc.invert(special))  # fmt: skip
            c = pc.if_else(expired_only, per_file([code(Reason.EXPIRED_ONLY, x[3]) for x in ctxs], u32), c)
        in_flight_at = [math.inf if x[2] is None else x[2] - self.margin for x in ctxs]
        held = {
            "link": links,
            "no_mtime": pc.invert(pc.greater(m, 0)),  # none (NaN), zero or negative
            "future": pc.greater(m, self.tolerance_limit),
            "young": pc.greater_equal(m, self.young_limit),
            "in_flight": pc.greater_equal(m, per_file(in_flight_at, pa.float64())),
        }
        as_young = pc.if_else(pc.greater_equal(m, self.cutoff), pa.scalar(code(Reason.YOUNG, self.young_evidence), u32),
                              pa.scalar(code(Reason.AFTER_INVENTORY, self.after_evidence), u32))  # fmt: skip
        # the first reason that holds wins: applied from the last to the first
        c = pc.if_else(held["in_flight"], per_file([code(Reason.IN_FLIGHT, x[3]) for x in ctxs], u32), c)
        c = pc.if_else(held["young"], as_young, c)
        c = pc.if_else(held["future"], pa.scalar(code(Reason.FUTURE_MTIME, None), u32), c)
        c = pc.if_else(held["no_mtime"], pa.scalar(code(Reason.NO_MTIME, None), u32), c)
        c = pc.if_else(held["link"], pa.scalar(code(Reason.SYMLINK, None), u32), c)
        any_held = held["link"]
        for k in ("no_mtime", "future", "young", "in_flight"):
            any_held = pc.or_(any_held, held[k])
        taken = pc.and_(cand, pc.invert(any_held))
        codes = pc.if_else(cand, c, as_dir)
        where = pc.indices_nonzero(special)
        if len(where):  # names the rule reads one by one
            dirs = [0] * len(where) if at is None else pc.take(at, where).to_pylist()
            old = pc.take(codes, where).to_pylist()
            read = pc.take(names, where).to_pylist()
            if pa.types.is_binary(names.type):
                read = [name.decode("utf-8", "surrogatepass") for name in read]
            by_name = [_by_name(name, ctxs[d][0]) for name, d in zip(read, dirs, strict=True)]
            kept_by_name = [r not in _CANDIDATE for r in by_name]
            codes = pc.replace_with_mask(codes, special, pa.array(
                [code(r, None) if k else o for r, k, o in zip(by_name, kept_by_name, old, strict=True)], u32))  # fmt: skip
            taken = pc.and_(taken, pc.invert(pc.replace_with_mask(special, special, pa.array(kept_by_name))))
        return codes, taken, pc.and_(open_, pc.invert(taken))

    def decide_run(
        self, run: DirFiles, context: tuple, live: Collection[str], spans: Mapping[str, list[tuple[int, int]]],
        expired: Collection[str], verdicts: Verdicts, partial: Callable[[dict], Any],
    ) -> RunDecided:  # fmt: skip
        """Decide each file of one directory's run. ``live``, ``spans`` and ``expired`` hold the
        names (not URIs) in this directory that are live, segments' files (-> their spans), and
        referenced by expired checkpoints only; ``context`` is :meth:`_Contexts.get` of the
        directory. A partially live file also goes to ``partial``. The run's columns go to
        :meth:`verdicts` as Arrow arrays (its sizes and mtimes without a copy)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        out = RunDecided(run)
        n = len(run)
        if not n:
            return out
        names = _split([packed.encode("utf-8", "surrogatepass") for packed in run.names.joined()])
        sizes = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(run.sizes)])
        mtimes = run.mtimes
        mtimes = (pa.Array.from_buffers(pa.float64(), n, [None, pa.py_buffer(mtimes)]) if isinstance(mtimes, array)
                  else pa.array(mtimes, pa.float64()))  # fmt: skip
        links = pc.cast(pa.Array.from_buffers(pa.uint8(), n, [None, pa.py_buffer(run.links)]), pa.bool_())
        is_live = _member(names, live)
        settled = is_live
        out.live_files = pc.sum(pc.cast(is_live, pa.int64())).as_py() or 0
        out.live_bytes = pc.sum(pc.filter(sizes, is_live)).as_py() or 0
        if spans:
            segment = pc.and_(_member(names, spans), pc.invert(is_live))
            for i in pc.indices_nonzero(segment).to_pylist():
                out.live_files += 1
                out.live_bytes += self._segment(run, i, spans[run.names[i]], partial)
            settled = pc.or_(is_live, segment)
        expired_mask = _member(names, expired) if expired and self.check_expired else None
        codes, taken, kept = self.verdicts(
            RuleColumns((context,), None, names, mtimes, links, settled, expired_mask), verdicts
        )
        out.took, out.took_as = _positions(pc, taken), _u32(pc, pc.filter(codes, taken))
        out.kept, out.kept_as = _positions(pc, kept), _u32(pc, pc.filter(codes, kept))
        out.took_bytes = pc.sum(pc.filter(sizes, taken)).as_py() or 0
        return out

    @staticmethod
    def _segment(run: DirFiles, i: int, spans: list[tuple[int, int]], partial) -> int:
        """A file-merging file some retained checkpoint uses a segment of: live; its bytes."""
        size = run.sizes[i]
        covered = covered_bytes(spans)
        if covered < size:
            partial({"path": run.prefix + run.names[i], "size": size, "live_bytes": covered, "dead_bytes": size - covered})
        return size


def _member(names: Any, these: Collection[str]) -> Any:
    """Which of ``names`` (an Arrow string array) are among ``these``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not these:
        return _filled(len(names), pa.scalar(False))
    return pc.is_in(names, value_set=_split(["/".join(these).encode("utf-8", "surrogatepass")]))


def _split(packed: list[bytes]) -> Any:
    """Names joined by ``/`` (which no name holds) as one Arrow binary array, split in C. Binary,
    not string: a name read from a disk may hold a lone surrogate (bytes that are no UTF-8),
    which ``surrogatepass`` keeps, one to one."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.split_pattern(pa.array(packed, pa.binary()), "/").flatten()


def _filled(n: int, value: Any) -> Any:
    """An Arrow array of ``n`` times ``value`` (an Arrow scalar), made in C."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.fill_null(pa.nulls(n, value.type), value)


def _u32(pc: Any, values: Any) -> array:
    """Arrow integers as an ``array('I')`` (one copy of the buffer, no Python int each)."""
    import pyarrow as pa

    values = pc.cast(values, pa.uint32())
    out = array("I")
    if len(values):
        out.frombytes(memoryview(values.buffers()[1])[values.offset * 4 : (values.offset + len(values)) * 4])
    return out


def _positions(pc: Any, mask: Any) -> array:
    return _u32(pc, pc.indices_nonzero(mask))
