"""What verify checks, as tasks: named tuples built from the reference map on the driver.

Tasks pickle cheaply and carry everything an executor needs (no metadata objects travel):

* a **file task** per physical file (rows deduplicated by path, :class:`FileRefs`);
* a **handle task** per keyed ``IncrementalRemoteKeyedStateHandle`` (``--deep``, :class:`HandleRef`):
  where each of its RocksDB files' bytes come from, and its key-group range.

:mod:`ckptctl.verify.checks` runs them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from ckptctl.checkpoint.loading import LoadedCheckpoint
from ckptctl.checkpoint.refs import FILE_COLUMNS, GROUP_COLUMNS, Ref, RefGroup, file_resolver
from ckptctl.metadata.walk import incremental_parts


class FileTask(NamedTuple):
    """Check one physical file: it exists, has the recorded sizes, its SSTs end with a table magic
    number, its metadata and private spans can be read."""

    path: str
    whole_sizes: tuple[int, ...]
    changelog_sizes: tuple[int, ...]  # DSTL files: 1 header byte not counted
    segment_end: int | None  # the end of its last segment, if segments of it are referenced
    sst_whole: bool
    sst_segment_ends: tuple[int, ...]
    read_spans: tuple[tuple[int, int], ...]  # (offset, size)
    listed: int | None = None  # the size a listing of its directory gave, if any
    # DSTL files: where referenced change sets begin, each with the state sizes of the handles of
    # that one piece (ckptctl.checkpoint.dstl.problem); read and checked
    changelog_starts: tuple[tuple[int, tuple[int, ...]], ...] = ()
    # keyed handles' meta data (the backend's serialization proxy, read first by every restore):
    # (offset, size) of each, parsed
    meta_spans: tuple[tuple[int, int], ...] = ()
    # RocksDB MANIFEST files (private, read in full): their log records' checksums are checked
    log_spans: tuple[tuple[int, int], ...] = ()


class HandleTask(NamedTuple):
    """Rebuild one keyed RocksDB handle's directory, open it and count its keys per key group."""

    index: int  # of its HandleRef
    files: tuple  # HandleRef.files
    key_group_start: int
    key_group_end: int
    prefix_bytes: int


@dataclass(slots=True)
class FileRefs:
    """What the reference map says about one physical file."""

    path: str
    whole_sizes: set[int] = field(default_factory=set)
    changelog_sizes: set[int] = field(default_factory=set)  # DSTL files: 1 header byte not counted
    segment_end: int = 0
    has_segments: bool = False
    sst_whole: bool = False
    sst_segment_ends: set[int] = field(default_factory=set)
    read_spans: set[tuple[int, int]] = field(default_factory=set)
    checkpoints: set[str] = field(default_factory=set)
    changelog_starts: dict[int, set[int]] = field(
        default_factory=dict
    )  # see ckptctl.checkpoint.dstl.changelog_starts
    meta_spans: set[tuple[int, int]] = field(default_factory=set)  # keyed handles' meta data: parsed
    log_spans: set[tuple[int, int]] = field(default_factory=set)  # RocksDB MANIFESTs: record CRCs checked

    def task(self, listed: int | None = None, *, reads: bool = True) -> FileTask:
        """The file's task; without ``reads`` only its existence and sizes are checked (no byte of
        it is read: on S3, what listings answer)."""
        return FileTask(
            self.path, _sorted(self.whole_sizes), _sorted(self.changelog_sizes),
            self.segment_end if self.has_segments else None,
            self.sst_whole and reads, _sorted(self.sst_segment_ends) if reads else (),
            _sorted(self.read_spans) if reads else (), listed, _changelog(self.changelog_starts) if reads else (),
            _sorted(self.meta_spans) if reads else (), _sorted(self.log_spans) if reads else (),
        )  # fmt: skip


def _changelog(starts: dict[int, set[int]]) -> tuple:
    return tuple((offset, _sorted(sizes)) for offset, sizes in sorted(starts.items()))


def _sorted(values: set) -> tuple:
    return tuple(values) if len(values) < 2 else tuple(sorted(values))


def file_refs(rows: Iterable[Ref]) -> dict[str, FileRefs]:
    """Reference rows deduplicated by physical path."""
    out: dict[str, FileRefs] = {}
    for r in rows:
        _add_files(out, r.checkpoint, r.scope, (r,), _ROW)
    return out


_CHECKPOINT = GROUP_COLUMNS.index("checkpoint")
_SCOPE = GROUP_COLUMNS.index("scope")
_PER_FILE = ("handle_type", "local_name", "path", "offset", "size")
_ROW = tuple(Ref._fields.index(c) for c in _PER_FILE)  # where they are in a Ref
_FILE = tuple(FILE_COLUMNS.index(c) for c in _PER_FILE)  # and in a RefGroup's file tuple


def group_file_refs(groups: Iterable[RefGroup]) -> tuple[dict[str, FileRefs], int]:
    """:func:`file_refs` of the rows of ``groups`` (:func:`ckptctl.checkpoint.refs.reference_groups`), read
    from the groups without making the rows; and how many rows they hold."""
    out: dict[str, FileRefs] = {}
    n = 0
    for g in groups:
        n += len(g.files)
        _add_files(out, g.shared[_CHECKPOINT], g.shared[_SCOPE], g.files, _FILE)
    return out, n


def _add_files(
    out: dict[str, FileRefs], checkpoint: str, scope: str, files: Iterable[tuple], at: tuple
) -> None:
    """Add references of one checkpoint and scope; ``at``: where each tuple of ``files`` holds its
    handle type, local name, path, offset and size."""
    t, nm, p, off, sz = at
    changelog = scope == "changelog"
    spans = scope in ("metadata", "private")
    get = out.get
    for f in files:
        path = f[p]
        ref = get(path)
        if ref is None:
            ref = out[path] = FileRefs(path)
        ref.checkpoints.add(checkpoint)
        name = f[nm]
        is_sst = bool(name) and name.endswith(".sst")
        if f[t] == "SegmentFileStateHandle":
            ref.has_segments = True
            end = f[off] + f[sz]
            ref.segment_end = max(ref.segment_end, end)
            if is_sst:
                ref.sst_segment_ends.add(end)
        elif changelog:
            ref.changelog_sizes.add(f[sz])
        else:
            ref.whole_sizes.add(f[sz])
            if is_sst:
                ref.sst_whole = True
        if spans and not is_sst:
            ref.read_spans.add((f[off], f[sz]))
            if scope == "metadata":
                ref.meta_spans.add((f[off], f[sz]))
            elif name and name.startswith("MANIFEST-"):
                ref.log_spans.add((f[off], f[sz]))


@dataclass
class HandleRef:
    """One keyed incremental handle to rebuild and open (deep mode)."""

    index: int
    # (local_name, source), see IncrementalHandle.sources:
    # source: ("inline", bytes) | ("file", uri, recorded size) | ("range", uri, offset, length)
    files: tuple
    key_group_start: int
    key_group_end: int
    prefix_bytes: int
    owners: list[tuple[str, str, int | None]] = field(default_factory=list)  # (checkpoint, operator, subtask)

    def task(self) -> HandleTask:
        return HandleTask(self.index, self.files, self.key_group_start, self.key_group_end, self.prefix_bytes)


def key_group_prefix_bytes(max_parallelism: int) -> int:
    """Flink's ``computeRequiredBytesInKeyGroupPrefix``: 1 byte up to 128 key groups, else 2."""
    return 2 if max_parallelism > 128 else 1


def handle_refs(checkpoints: Iterable[LoadedCheckpoint]) -> list[HandleRef]:
    """Every keyed incremental handle (also the materialized part of changelog handles), deduplicated."""
    seen: dict[tuple, HandleRef] = {}
    for ck in checkpoints:
        base = ck.location.uri
        resolve = file_resolver(ck)

        for op in ck.metadata.operators:
            for s in op.subtasks or ():
                for keyed in (s.managed_keyed, s.raw_keyed):
                    for h in incremental_parts(keyed):
                        kgr = h.key_groups
                        if kgr.empty:
                            continue
                        files_t = tuple(sorted(h.sources(resolve), key=lambda f: f[0]))
                        key = (kgr.start, kgr.end, op.max_parallelism, files_t)
                        ref = seen.get(key)
                        if ref is None:
                            ref = seen[key] = HandleRef(
                                len(seen),
                                files_t,
                                kgr.start,
                                kgr.end,
                                key_group_prefix_bytes(op.max_parallelism),
                            )
                        ref.owners.append((base, op.operator_id, s.index))
    return list(seen.values())
