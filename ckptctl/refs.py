"""The reference map: every physical file a checkpoint needs, one row per (handle, file).

This is the single input of GC (the live set), ``verify`` (what must exist and with which size)
and ``diff``. It walks every slot a subtask has (operator, keyed, channel state, the coordinator),
recursing through key-group, changelog and file-merging handles, so nothing a restore would open
is missed. Inline state (byte-stream handles) lives inside ``_metadata`` and has no row.

Rows are plain tuples in :data:`COLUMNS` order (cheap to build for 10^5–10^6 files); callers turn
them into an Arrow table, JSON lines or CSV.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ckptctl import storage as st
from ckptctl.layout import CheckpointLocation, locate_checkpoint
from ckptctl.metadata import read_metadata
from ckptctl.metadata.model import (
    ByteStreamHandle,
    ChangelogBackendHandle,
    ChangelogBytesHandle,
    ChangelogFileHandle,
    ChannelHandle,
    CheckpointMetadata,
    EmptySegmentHandle,
    FileHandle,
    FileMergingOperatorHandle,
    IncrementalHandle,
    KeyGroupsHandle,
    MergedChannelHandle,
    OperatorStreamHandle,
    RelativeFileHandle,
    SegmentFileHandle,
)
from ckptctl.pycollector import paused_collector
from ckptctl.rebase import Rebase, infer_rebase
from ckptctl.storage import Storage

COLUMNS = (
    "checkpoint",  # URI of the checkpoint/savepoint directory
    "job_id",
    "checkpoint_id",
    "kind",  # checkpoint | savepoint | unknown
    "operator_id",
    "operator_name",
    "subtask",  # 0-based; None for coordinator state
    "slot",  # managed_keyed | raw_keyed | managed_operator | raw_operator | input_channel | output_channel | coordinator
    "scope",  # shared | private | metadata | exclusive | changelog | segment
    "handle_type",  # Flink class of the file handle
    "local_name",  # RocksDB file name for incremental shared/private files
    "path",  # physical file URI (relative handles resolved, --rebase applied)
    "written_path",  # the path as written in _metadata (relative name for relative handles)
    "offset",
    "size",
    "key_group_start",
    "key_group_end",
)

FILE_HANDLE_TYPES = {
    FileHandle: "FileStateHandle",
    RelativeFileHandle: "RelativeFileStateHandle",
    SegmentFileHandle: "SegmentFileStateHandle",
}


def canonical(path: str) -> str:
    """Canonical URI of a path Flink wrote (see :func:`storage.normalize_uri`); the common,
    already-canonical case costs one check."""
    if (path.startswith("s3://") or path.startswith("file:/")) and path[-1] > " " and st.is_normal(path):
        return path
    return st.normalize_uri(path)


def relative_uri(base: str, relative: str) -> str:
    """URI of a relative handle's file; the common plain name costs one check."""
    if (
        "/" in relative or "\\" in relative or ":" in relative or relative in (".", "..", "")
        or relative[0] <= " " or relative[-1] <= " "
    ):  # fmt: skip
        return st.resolve_relative(base, st.java_trim(relative))
    return base + "/" + relative


@dataclass(frozen=True)
class LoadedCheckpoint:
    """A decoded checkpoint with the facts needed to turn its handles into file URIs."""

    location: CheckpointLocation
    metadata: CheckpointMetadata
    rebase: Rebase  # explicit mappings, plus the inferred one when the caller accepted it
    inferred_rebase: Rebase | None  # what a moved directory suggests (None: not moved / unknown)

    @property
    def kind(self) -> str:
        props = self.metadata.properties
        if props is not None and props.is_savepoint:
            return "savepoint"
        if self.location.kind == "unknown" and props is not None:
            return "checkpoint"
        return self.location.kind


def read_location(storage: Storage, location: CheckpointLocation) -> CheckpointMetadata:
    uri = location.metadata_uri
    return read_metadata(storage.read_bytes(uri, limit=MAX_METADATA_BYTES), path=uri)


MAX_METADATA_BYTES = 1 << 30  # the largest real _metadata seen is tens of MB; never read a device


def load_checkpoint(
    storage: Storage,
    location: CheckpointLocation | str,
    rebase: Rebase | None = None,
    *,
    apply_inferred: bool = True,
) -> LoadedCheckpoint:
    """Read a checkpoint's ``_metadata`` and work out how its written paths map to today's."""
    loc = location if isinstance(location, CheckpointLocation) else locate_checkpoint(storage, location)
    md = read_location(storage, loc)
    effective = rebase or Rebase()
    inferred = infer_rebase(loc, (effective.apply(canonical(p)) for p in written_absolute_paths(md)))
    if apply_inferred:
        effective = effective.merged(inferred)
    return LoadedCheckpoint(loc, md, effective, inferred)


def written_absolute_paths(md: CheckpointMetadata) -> Iterator[str]:
    """Absolute paths as written (files and segments), for moved-directory detection."""
    for row in _walk(md):
        handle = row[-1]
        if type(handle) is not RelativeFileHandle:
            yield handle.path


# ---------------------------------------------------------------------------------------------
# traversal


def _walk(md: CheckpointMetadata) -> Iterator[tuple]:
    """Yield (operator, subtask, slot, scope, local_name, key_group_range, file_handle) per file."""
    for op, subtask, slot, scope, kgr, items in _walk_groups(md):
        for local_name, h in items:
            yield op, subtask, slot, scope, local_name, kgr, h


def _walk_groups(md: CheckpointMetadata) -> Iterator[tuple]:
    """Yield (operator, subtask, slot, scope, key_group_range, [(local_name, file_handle), ...]).

    Every slot of every subtask is visited (operator, keyed, channel state, the coordinator),
    recursing through key-group, changelog and file-merging handles. The shared files of an
    incremental handle come as one group, the LocalFile tuples themselves (no copy).
    """
    for op in md.operators:
        coord = op.coordinator_state
        if coord is not None and type(coord) is not ByteStreamHandle:
            yield from _stream(op, None, "coordinator", "exclusive", None, None, coord)
        for s in op.subtasks or ():
            i = s.index
            if s.managed_operator is not None:
                yield from _operator(op, i, "managed_operator", s.managed_operator)
            if s.raw_operator is not None:
                yield from _operator(op, i, "raw_operator", s.raw_operator)
            if s.managed_keyed is not None:
                yield from _keyed(op, i, "managed_keyed", s.managed_keyed)
            if s.raw_keyed is not None:
                yield from _keyed(op, i, "raw_keyed", s.raw_keyed)
            for ch in s.input_channels:
                yield from _stream(op, i, "input_channel", "exclusive", None, None, ch.delegate)
            for ch in s.output_channels:
                yield from _stream(op, i, "output_channel", "exclusive", None, None, ch.delegate)


def _stream(op, subtask, slot, scope, local_name, kgr, h) -> Iterator[tuple]:
    t = type(h)
    if t is FileHandle or t is RelativeFileHandle:
        yield (op, subtask, slot, scope, kgr, ((local_name, h),))
    elif t is SegmentFileHandle:
        yield (op, subtask, slot, "segment", kgr, ((local_name, h),))
    elif t is KeyGroupsHandle:
        yield from _stream(op, subtask, slot, scope, local_name, h.key_groups, h.delegate)
    # None, ByteStreamHandle (inline), EmptySegmentHandle: no file


def _operator(op, subtask, slot, h) -> Iterator[tuple]:
    if type(h) in (OperatorStreamHandle, FileMergingOperatorHandle):
        yield from _stream(op, subtask, slot, "exclusive", None, None, h.delegate)


def _keyed(op, subtask, slot, h, scope_override: str | None = None) -> Iterator[tuple]:
    t = type(h)
    if t is IncrementalHandle:
        kgr = h.key_groups
        yield from _stream(op, subtask, slot, scope_override or "metadata", None, kgr, h.meta)
        if h.shared and scope_override is None and all(type(f.handle) is FileHandle for f in h.shared):
            yield (op, subtask, slot, "shared", kgr, h.shared)  # hot path: one group for all SSTs
        else:
            for f in h.shared:
                yield from _stream(op, subtask, slot, scope_override or "shared", f.local_path, kgr, f.handle)
        for f in h.private:
            yield from _stream(op, subtask, slot, scope_override or "private", f.local_path, kgr, f.handle)
        for f in h.shadowed:  # a repeated local name in a V3 file: still fetched by 1.17+ (see the model)
            yield from _stream(op, subtask, slot, scope_override or "shared", f.local_path, kgr, f.handle)
    elif t is KeyGroupsHandle:
        yield from _stream(op, subtask, slot, scope_override or "exclusive", None, h.key_groups, h.delegate)
    elif t is ChangelogBackendHandle:
        for part in h.materialized:
            if part is not None:
                yield from _keyed(op, subtask, slot, part)
        for part in h.non_materialized:
            if part is not None:
                yield from _keyed(op, subtask, slot, part, "changelog")
    elif t is ChangelogFileHandle:
        for _offset, stream in h.pieces:
            yield from _stream(op, subtask, slot, "changelog", None, h.key_groups, stream)
    elif t is ChangelogBytesHandle:
        return


GROUP_KEY = 9  # COLUMNS[:9] and COLUMNS[15:] are shared by a group; COLUMNS[9:15] vary per file


def reference_groups(ck: LoadedCheckpoint) -> list[tuple[tuple, list[tuple]]]:
    """The reference map in groups: ``(shared, files)`` where ``shared`` holds the columns common to
    one handle's files (checkpoint … scope, key_group_start, key_group_end) and each file is
    ``(handle_type, local_name, path, written_path, offset, size)``.

    One incremental handle's hundreds of SSTs form one group, so writers encode its common part
    once; :func:`reference_rows` flattens the groups into full rows.
    """
    with paused_collector():
        return _reference_groups(ck)


def _reference_groups(ck: LoadedCheckpoint) -> list[tuple[tuple, list[tuple]]]:
    loc, md = ck.location, ck.metadata
    base = loc.uri
    head = (base, loc.job_id, md.checkpoint_id, ck.kind)
    to_uri = _resolver(ck.rebase)  # absolute paths; relative ones are joined to ``base`` inline below
    groups: list[tuple[tuple, list[tuple]]] = []
    for op, subtask, slot, scope, kgr, items in _walk_groups(md):
        kg = kgr.as_list() if kgr is not None else (None, None)
        files: list[tuple] = []
        append = files.append
        if scope == "shared" and all(type(f[1]) is FileHandle for f in items):
            for local_name, (written, size) in items:  # the bulk: whole SST files
                append(("FileStateHandle", local_name, to_uri(written), written, 0, size))
        else:
            for local_name, h in items:
                t = type(h)
                if t is RelativeFileHandle:
                    written = h.relative_path
                    append((FILE_HANDLE_TYPES[t], local_name, relative_uri(base, written), written, 0, h.size))
                else:
                    written = h.path
                    offset = h.offset if t is SegmentFileHandle else 0
                    append((FILE_HANDLE_TYPES[t], local_name, to_uri(written), written, offset, h.size))
        if files:
            groups.append(
                ((*head, op.operator_id, op.display_name, subtask, slot, scope, kg[0], kg[1]), files)
            )
    return groups


def _resolver(rebase: Rebase):
    """Written absolute path → canonical, rebased URI, normalising each directory only once."""
    apply = rebase.apply if rebase else None
    dirs: dict[str, str] = {}

    def to_uri(path: str) -> str:
        if path and (path[0] <= " " or path[-1] <= " "):
            path = st.java_trim(path)  # as Flink's Path(String) does
        d, _, name = path.rpartition("/")
        if name in ("", ".", "..") or not d or "\\" in name:
            uri = canonical(path)
            return apply(uri) if apply is not None else uri
        c = dirs.get(d)
        if c is None:
            probe = canonical(d + "/_")
            c = dirs[d] = (apply(probe) if apply is not None else probe)[:-2]
        return path if c == d else c + "/" + name  # unchanged directory: the written string itself

    return to_uri


def reference_rows(ck: LoadedCheckpoint) -> list[tuple]:
    """The reference map of one checkpoint, as tuples in :data:`COLUMNS` order."""
    with paused_collector():
        return [
            (*shared[:GROUP_KEY], *f, *shared[GROUP_KEY:])
            for shared, files in reference_groups(ck)
            for f in files
        ]


def file_resolver(ck: LoadedCheckpoint):
    """The one mapping from a file handle to the URI of its file now: relative handles against
    the checkpoint's directory, absolute ones canonicalised and rebased (see :func:`_resolver`)."""
    base = ck.location.uri
    to_uri = _resolver(ck.rebase)

    def resolve(h: Any) -> str:
        return relative_uri(base, h.relative_path) if type(h) is RelativeFileHandle else to_uri(h.path)

    return resolve


def referenced_files(ck: LoadedCheckpoint) -> Iterator[tuple[str, str, int, int]]:
    """(path, scope, offset, size) of every file reference: the reference map reduced to what GC needs."""
    resolve = file_resolver(ck)
    for _op, _subtask, _slot, scope, _local, _kgr, h in _walk(ck.metadata):
        yield resolve(h), scope, h.offset if type(h) is SegmentFileHandle else 0, h.size


def rows_to_arrow(rows: Iterable[tuple]) -> Any:
    """An Arrow table with a fixed schema (so empty maps still have typed columns)."""
    import pyarrow as pa

    from ckptctl.export import transpose

    schema = arrow_schema()
    columns = transpose(list(rows), len(COLUMNS))
    return pa.table(
        [pa.array(col, type=f.type) for col, f in zip(columns, schema, strict=True)], schema=schema
    )


def arrow_schema() -> Any:
    import pyarrow as pa

    s, i64, i32 = pa.string(), pa.int64(), pa.int32()
    types = {
        "checkpoint_id": i64, "subtask": i32, "offset": i64, "size": i64,
        "key_group_start": i32, "key_group_end": i32,
    }  # fmt: skip
    return pa.schema([(name, types.get(name, s)) for name in COLUMNS])


# ---------------------------------------------------------------------------------------------
# sizes


def state_sizes(md: CheckpointMetadata) -> tuple[int, int, int]:
    """(full state bytes, incremental bytes, inline bytes) as Flink accounts them."""
    full = incremental = inline = 0
    for op in md.operators:
        if op.coordinator_state is not None:
            n = _stream_size(op.coordinator_state)
            full += n
            incremental += n
            inline += n
        for s in op.subtasks or ():
            for h in (s.managed_operator, s.raw_operator):
                if h is not None:
                    n = _stream_size(h.delegate)
                    full += n
                    incremental += n
                    inline += n if type(h.delegate) is ByteStreamHandle else 0
            for h in (s.managed_keyed, s.raw_keyed):
                if h is not None:
                    f, i, b = _keyed_sizes(h)
                    full += f
                    incremental += i
                    inline += b
            for ch in (*s.input_channels, *s.output_channels):
                n = ch.state_size if type(ch) in (ChannelHandle, MergedChannelHandle) else 0
                full += n
                incremental += n
                inline += n if type(ch.delegate) is ByteStreamHandle else 0
    return full, incremental, inline


def _stream_size(h) -> int:
    if h is None or type(h) is EmptySegmentHandle:
        return 0
    if type(h) is KeyGroupsHandle:
        return _stream_size(h.delegate)
    return h.size


def _keyed_sizes(h) -> tuple[int, int, int]:
    t = type(h)
    if t is IncrementalHandle:
        parts = [h.meta, *(f.handle for f in h.shared), *(f.handle for f in h.private)]
        full = sum(_stream_size(p) for p in parts)
        inline = sum(p.size for p in parts if type(p) is ByteStreamHandle)
        inc = h.checkpointed_size if h.checkpointed_size is not None and h.checkpointed_size >= 0 else full
        return full, inc, inline
    if t is KeyGroupsHandle:
        n = _stream_size(h.delegate)
        return n, n, n if type(h.delegate) is ByteStreamHandle else 0
    if t is ChangelogBackendHandle:
        full = inline = 0
        for part in (*h.materialized, *h.non_materialized):
            if part is not None:
                f, _i, b = _keyed_sizes(part)
                full += f
                inline += b
        return full, full if h.checkpointed_size is None else h.checkpointed_size, inline  # None: 1.14
    if t is ChangelogFileHandle:
        return h.state_size, h.state_size if h.checkpointed_size is None else h.checkpointed_size, 0
    if t is ChangelogBytesHandle:
        n = sum(len(d) for _kg, d in h.changes)
        return n, n, n
    return 0, 0, 0
