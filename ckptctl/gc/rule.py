"""The per-file rule, one for both planners (:class:`FileRule`): what becomes of a file that is
not live, given its directory's context, its name, link flag and mtime.

It decides columns, with no Python object made per file: a batch of files (:class:`RuleColumns`:
names, mtimes, link flags, which files the checkpoints settle -- live, or a segment's file -- and
which only expired checkpoints reference), each with its directory's context, is answered as a
verdict code per file (see :mod:`ckptctl.gc.decisions`) and whether the file is taken; Arrow's
compute kernels do the per-file work. The local planner hands it the directories' listed runs
(:meth:`FileRule.decide_runs`, batched; whether each file is live comes as a byte per file,
looked up once per plan by :func:`ckptctl.gc.listed.flag_listed`), the Spark planner each Arrow
batch of its joined rows with a directory per row. Only the names the rule must read one by one
(``_metadata``, ``..``, ForSt's control files) reach Python, through :func:`_by_name`.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from itertools import compress
from typing import Any, NamedTuple

from ckptctl.checkpoint.layout import FORST_CONTROL_PREFIXES, FORST_CONTROL_RE, METADATA_FILE
from ckptctl.columns import starts_with_any
from ckptctl.gc.decisions import Verdicts
from ckptctl.gc.reasons import Reason
from ckptctl.storage.listing import PLAUSIBLE_MTIME, DirFiles

_CANDIDATE = frozenset(
    {
        Reason.UNREFERENCED_SHARED, Reason.UNREFERENCED_TASKOWNED, Reason.UNREFERENCED_CHANGELOG,
        Reason.UNREFERENCED_FORST, Reason.INCOMPLETE_CHECKPOINT, Reason.EXPIRED_CHECKPOINT,
    }
)  # fmt: skip

SPECIAL_NAMES = ("", ".", "..", METADATA_FILE)  # names :func:`_by_name` may judge otherwise


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


def _reads_name(name: str, forst: bool) -> bool:
    """Whether the rule looks at this name on its own (:func:`_by_name`): the special names,
    backslashes, and in a ForSt directory its control files."""
    return name in SPECIAL_NAMES or "\\" in name or bool(forst and FORST_CONTROL_RE.match(name))


def partially_live(size: int, spans: list[tuple[int, int]]) -> dict[str, int] | None:
    """A file-merging file some retained checkpoint uses segments (offset, size) of is live; when
    they cover less than all of it, its live and dead bytes (the plan's ``partially_live``)."""
    covered = _covered(spans)
    return {"live_bytes": covered, "dead_bytes": size - covered} if covered < size else None


def _covered(spans: list[tuple[int, int]]) -> int:
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

    contexts: Sequence[tuple]  # :meth:`~ckptctl.gc.contexts.DirContexts.get` of each directory of the batch
    at: Any  # int32: per file, the index of its directory in ``contexts``
    names: Any  # string: the file's name in its directory
    mtimes: Any  # float64 seconds; NaN or null: none
    links: Any  # bool: reached through a symlink
    settled: Any  # bool: live or a live segment's file (the caller counts those)
    expired: Any  # bool: referenced by expired checkpoints only, or None


# files per verdicts call of the local planner: a batch's buffers are a transient of ~0.2 KB a file
# (1 << 16 held 9 MB more at the plan's peak at 1M files, in the same time: bench/gc_bench.py)
BATCH_FILES = 1 << 14


class RunToDecide(NamedTuple):
    """One directory's listed run for :meth:`FileRule.decide_runs`: a byte per file, 1 if it is
    live, and 1 if only expired checkpoints reference it (``None``: no file is; see
    :func:`ckptctl.gc.listed.flag_listed`), and the names (not URIs) of the directory that are
    segments' files (-> their spans); ``context`` is :meth:`~ckptctl.gc.contexts.DirContexts.get` of the directory."""

    run: DirFiles
    context: tuple
    live: bytes | None
    spans: Mapping[str, list[tuple[int, int]]]
    expired: bytes | None


class _Piece(NamedTuple):
    """One name chunk of a run in a batch: the position of its first file in the run, how many
    files, their names ``/``-joined (:meth:`Names.packed`: never a string per name)."""

    item: RunToDecide
    decided: RunDecided
    start: int
    count: int
    packed: str


class RunDecided:
    """What :meth:`FileRule.decide_runs` made of one run: candidates and protected files as
    positions in the run with verdict codes (``array('I')``), the candidates' bytes, and the live
    files' count and bytes."""

    __slots__ = ("kept", "kept_as", "live_bytes", "live_files", "run", "took", "took_as", "took_bytes")

    def __init__(self, run: DirFiles) -> None:
        self.run = run
        self.took, self.took_as = array("I"), array("I")
        self.kept, self.kept_as = array("I"), array("I")
        self.live_files = self.live_bytes = self.took_bytes = 0


class FileRule:
    """The per-file rule, one for both planners: given a directory's context (:meth:`~ckptctl.gc.contexts.DirContexts.get`)
    and whether the file is live, a segment of a file-merging file, or referenced only by expired
    checkpoints, what becomes of it (:meth:`verdicts`, over columns). The local planner runs
    :meth:`decide_runs` over the directories' listed files with their live sets; the Spark planner
    :meth:`verdicts` over each Arrow batch of joined rows (the join told each row what it is)."""

    __slots__ = ("after_evidence", "check_expired", "cutoff", "margin", "tolerance_limit", "young_evidence",
                 "young_limit")  # fmt: skip

    def __init__(self, cutoff: float, tolerance_limit: float, margin: float, young_limit: float,
                 young_evidence: dict, after_evidence: dict, check_expired: bool) -> None:  # fmt: skip
        self.cutoff, self.tolerance_limit, self.margin, self.young_limit = (
            cutoff,
            tolerance_limit,
            margin,
            young_limit,
        )
        self.young_evidence, self.after_evidence, self.check_expired = (
            young_evidence,
            after_evidence,
            check_expired,
        )

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
            return pc.take(pa.array(values, kind), at)

        u32 = pa.uint32()
        n = len(cols.names)
        open_ = pc.invert(cols.settled)
        as_dir = per_file([code(c[0], c[3]) for c in ctxs], u32)
        if not any(c[1] for c in ctxs):  # no candidate directory: every file kept as its directory says
            return as_dir, pa.repeat(False, n), open_
        names = cols.names
        cand = pc.and_(per_file([bool(c[1]) for c in ctxs], pa.bool_()), open_)
        m = pc.fill_null(cols.mtimes, math.nan)
        links = pc.fill_null(cols.links, False)
        # the names _by_name may judge, and those that begin like a ForSt control file (a superset:
        # Python tells which of them _reads_name)
        special = pc.or_(pc.is_in(names, value_set=pa.array(SPECIAL_NAMES)), pc.match_substring(names, "\\"))
        if any(c[6] for c in ctxs):
            control = starts_with_any(names, FORST_CONTROL_PREFIXES)
            special = pc.or_(special, pc.and_(per_file([bool(c[6]) for c in ctxs], pa.bool_()), control))
        special = pc.and_(special, cand)
        c = as_dir
        if cols.expired is not None and self.check_expired and any(x[1] and x[5] for x in ctxs):
            expired_only = pc.and_(per_file([bool(x[1] and x[5]) for x in ctxs], pa.bool_()),
                                   pc.fill_null(cols.expired, False))  # fmt: skip
            c = pc.if_else(expired_only, per_file([code(Reason.EXPIRED_ONLY, x[3]) for x in ctxs], u32), c)
        in_flight_at = [math.inf if x[2] is None else x[2] - self.margin for x in ctxs]
        held = {
            "link": links,
            "no_mtime": pc.invert(pc.greater_equal(m, PLAUSIBLE_MTIME)),  # none (NaN), or a stand-in
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
            dirs = pc.take(at, where).to_pylist()
            was = zip(*(pc.take(x, where).to_pylist() for x in (codes, taken, as_dir)), strict=True)
            read = pc.take(names, where).to_pylist()
            if pa.types.is_binary(names.type) or pa.types.is_large_binary(names.type):
                read = [name.decode("utf-8", "surrogatepass") for name in read]
            new_codes, kept_by_name = [], []
            for name, d, (old, was_taken, dir_code) in zip(read, dirs, was, strict=True):
                reason, forst = ctxs[d][0], ctxs[d][6]
                judged = _reads_name(name, forst)
                r = _by_name(name, reason) if judged else reason
                kept_by_name.append(r not in _CANDIDATE)
                # a name the rule reads is never "expired only": taken, it is taken as its directory says
                new_codes.append(
                    code(r, None) if r not in _CANDIDATE else dir_code if judged and was_taken else old
                )
            codes = pc.replace_with_mask(codes, special, pa.array(new_codes, u32))
            taken = pc.and_(taken, pc.invert(pc.replace_with_mask(special, special, pa.array(kept_by_name))))
        return codes, taken, pc.and_(open_, pc.invert(taken))

    def decide_runs(self, runs: Iterable[RunToDecide], verdicts: Verdicts, partial: Callable[[dict], Any],
                    ) -> Iterator[RunDecided]:  # fmt: skip
        """Decide each file of each directory's run, in order: one :class:`RunDecided` per run. A
        partially live file also goes to ``partial``.

        Runs are cut at their name chunks (:meth:`Names.packed`) and the pieces gathered into
        batches of about :data:`BATCH_FILES` files, one :meth:`verdicts` each: a call costs a
        fraction of a millisecond, which a directory of three files would otherwise pay alone,
        and a batch's arrays stay a few MB however large a directory is."""
        waiting: list[RunDecided] = []  # in order; all but the last are complete after a batch
        batch: list[_Piece] = []
        files = 0
        for item in runs:
            decided = RunDecided(item.run)
            waiting.append(decided)
            for start, count, packed in item.run.names.packed():
                batch.append(_Piece(item, decided, start, count, packed))
                files += count
                if files >= BATCH_FILES:
                    self._decide_batch(batch, verdicts, partial)
                    batch, files = [], 0
                    yield from waiting[:-1]
                    del waiting[:-1]
        if batch:
            self._decide_batch(batch, verdicts, partial)
        yield from waiting

    def _decide_batch(self, batch: list[_Piece], verdicts: Verdicts, partial) -> None:
        """The pieces' columns as Arrow arrays, each file with the index of its piece; the
        verdicts added to each piece's run. Whether a file is live or expired is read from the
        run's flags, whether it is a segment's file looked up in the run's spans (a mapping that
        exists already: no Arrow copy of it)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        at, offsets = array("i"), array("q")  # per file its piece; per piece its first file's batch index
        sizes, links = array("q"), bytearray()
        mtimes: Any = array("d")
        live, expired = bytearray(), bytearray()
        spans: list[bool] = []
        has_expired = self.check_expired and any(p.item.expired is not None for p in batch)
        has_spans = any(p.item.spans for p in batch)
        for k, piece in enumerate(batch):
            run, item, start, n = piece.item.run, piece.item, piece.start, piece.count
            end = start + n
            offsets.append(len(at) - start)  # a file's position in its run: batch index - this
            at.extend(array("i", [k]) * n)
            sizes.extend(run.sizes[start:end])
            if isinstance(run.mtimes, array):
                mtimes.extend(run.mtimes[start:end])
            else:  # a test storage's int mtimes
                mtimes.extend(float(m) for m in run.mtimes[start:end])
            links += run.links[start:end]
            live += bytes(n) if item.live is None else item.live[start:end]
            if has_spans:
                spans.extend(_flags(piece.packed.split("/"), item.spans))
            if has_expired:
                expired += bytes(n) if item.expired is None else item.expired[start:end]
        names = _split([p.packed.encode("utf-8", "surrogatepass") for p in batch])
        at_arrow = _from_buffer(pa.int32(), at)
        is_live = _bools(live)
        settled = is_live
        if has_spans:
            segment = pc.and_(pa.array(spans, pa.bool_()), pc.invert(is_live))
            for i in pc.indices_nonzero(segment).to_pylist():
                piece = batch[at[i]]
                j = i - offsets[at[i]]
                piece.decided.live_files += 1
                piece.decided.live_bytes += self._segment(piece.item.run, j, piece.item.spans[piece.item.run.names[j]],
                                                          partial)  # fmt: skip
            settled = pc.or_(is_live, segment)
        codes, taken, kept = self.verdicts(
            RuleColumns([p.item.context for p in batch], at_arrow, names, _from_buffer(pa.float64(), mtimes),
                        _bools(links), settled,
                        _bools(expired) if has_expired else None), verdicts,
        )  # fmt: skip
        # per piece: live files and bytes (summed in C over the piece's slice of the batch)
        for k, piece in enumerate(batch):
            first = offsets[k] + piece.start
            flags = live[first : first + piece.count]
            piece.decided.live_files += sum(flags)
            piece.decided.live_bytes += sum(compress(sizes[first : first + len(flags)], flags))
        offsets_arrow = _from_buffer(pa.int64(), offsets)
        for mask, positions, codes_of in ((taken, "took", "took_as"), (kept, "kept", "kept_as")):
            where = pc.indices_nonzero(mask)
            found = _u32(where)  # batch indices: each piece's are a slice
            local = _u32(
                pc.subtract(pc.cast(where, pa.int64()), pc.take(offsets_arrow, pc.take(at_arrow, where)))
            )
            chosen = _u32(pc.filter(codes, mask))
            lo = 0
            for k, piece in enumerate(batch):
                hi = bisect_left(found, offsets[k] + piece.start + piece.count, lo)
                getattr(piece.decided, positions).extend(local[lo:hi])
                getattr(piece.decided, codes_of).extend(chosen[lo:hi])
                if positions == "took":
                    piece.decided.took_bytes += sum(map(sizes.__getitem__, found[lo:hi]))
                lo = hi

    @staticmethod
    def _segment(run: DirFiles, i: int, spans: list[tuple[int, int]], partial) -> int:
        """A file-merging file some retained checkpoint uses a segment of: live; its bytes."""
        size = run.sizes[i]
        part = partially_live(size, spans)
        if part:
            partial({"path": run.prefix + run.names[i], "size": size, **part})
        return size


def _flags(names: list[str], these: Collection[str]) -> list[bool]:
    """Per name, whether it is among ``these`` (a Python set or mapping: a lookup each, no copy)."""
    if not these:
        return [False] * len(names)
    return list(map(these.__contains__, names))


def _bools(flags: bytearray) -> Any:
    """A byte per file (0 or 1) as an Arrow boolean array."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.cast(_from_buffer(pa.uint8(), flags), pa.bool_())


def _from_buffer(kind: Any, buffer: Any) -> Any:
    import pyarrow as pa

    return pa.Array.from_buffers(
        kind, memoryview(buffer).nbytes * 8 // kind.bit_width, [None, pa.py_buffer(buffer)]
    )


def _split(packed: list[bytes]) -> Any:
    """Names joined by ``/`` (which no name holds) as one Arrow binary array, split in C. Binary,
    not string: a name read from a disk may hold a lone surrogate (bytes that are no UTF-8),
    which ``surrogatepass`` keeps, one to one. Large (64-bit offsets): a directory of tens of
    millions of names passes 2 GiB."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.split_pattern(pa.array(packed, pa.large_binary()), "/").flatten()


def _u32(values: Any) -> array:
    """Arrow integers as an ``array('I')`` (one copy of the buffer, no Python int each)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    values = pc.cast(values, pa.uint32())
    out = array("I")
    if len(values):
        out.frombytes(memoryview(values.buffers()[1])[values.offset * 4 : (values.offset + len(values)) * 4])
    return out
