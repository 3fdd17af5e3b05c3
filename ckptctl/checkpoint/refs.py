"""The reference map: every physical file a checkpoint needs, one row per (handle, file).

This is the single input of GC (the live set), ``verify`` (what must exist and with which size)
and ``diff``. It walks every slot a subtask has (operator, keyed, channel state, the coordinator),
recursing through key-group, changelog and file-merging handles, so nothing a restore would open
is missed. Inline state (byte-stream handles) lives inside ``_metadata`` and has no row.

A row is a :class:`Ref` (a named tuple: cheap to build for 10^5–10^6 files, read by field name);
:data:`ARROW_TYPES` is its Arrow schema, checked field by field against it. Callers turn rows into
an Arrow table, JSON lines or CSV. The traversal itself is the model's (:class:`HandleWalk`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from ckptctl import storage as st
from ckptctl.checkpoint.loading import LoadedCheckpoint, canonical
from ckptctl.checkpoint.rebase import Rebase
from ckptctl.metadata.handles import FileHandle, RelativeFileHandle, SegmentFileHandle
from ckptctl.metadata.walk import file_groups
from ckptctl.pycollector import paused_collector


class Ref(NamedTuple):
    """One row of the reference map: one file of one handle of one checkpoint."""

    checkpoint: str  # URI of the checkpoint/savepoint directory
    job_id: str | None
    checkpoint_id: int
    kind: str  # checkpoint | savepoint | unknown
    operator_id: str
    operator_name: str | None
    subtask: int | None  # 0-based; None for coordinator state
    slot: str  # managed_keyed | raw_keyed | managed_operator | raw_operator | input_channel | output_channel | coordinator
    scope: str  # shared | private | metadata | exclusive | changelog | segment
    handle_type: str  # Flink class of the file handle
    local_name: str | None  # RocksDB file name for incremental shared/private files
    path: str  # physical file URI (relative handles resolved, --rebase applied)
    written_path: str  # the path as written in _metadata (relative name for relative handles)
    offset: int
    size: int
    key_group_start: int | None
    key_group_end: int | None


COLUMNS: tuple[str, ...] = Ref._fields

# The Arrow schema of the reference map, column by column (pyarrow type names; pyarrow is imported lazily)
ARROW_TYPES = {
    "checkpoint": "string", "job_id": "string", "checkpoint_id": "int64", "kind": "string",
    "operator_id": "string", "operator_name": "string", "subtask": "int32", "slot": "string",
    "scope": "string", "handle_type": "string", "local_name": "string", "path": "string",
    "written_path": "string", "offset": "int64", "size": "int64", "key_group_start": "int32",
    "key_group_end": "int32",
}  # fmt: skip
if tuple(ARROW_TYPES) != COLUMNS:
    raise AssertionError("refs.ARROW_TYPES and the Ref fields disagree")

# A group (one handle's files) shares every column but these, which come per file in this order
FILE_COLUMNS = ("handle_type", "local_name", "path", "written_path", "offset", "size")
GROUP_KEY = COLUMNS.index(FILE_COLUMNS[0])  # where the per-file columns sit in a row
GROUP_COLUMNS = COLUMNS[:GROUP_KEY] + COLUMNS[GROUP_KEY + len(FILE_COLUMNS) :]
if COLUMNS[GROUP_KEY : GROUP_KEY + len(FILE_COLUMNS)] != FILE_COLUMNS:
    raise AssertionError("refs.FILE_COLUMNS must be consecutive fields of Ref")


class RefGroup(NamedTuple):
    """The files of one handle: ``shared`` holds the :data:`GROUP_COLUMNS` values, each of
    ``files`` the :data:`FILE_COLUMNS` values of one file."""

    shared: tuple
    files: list[tuple]

    def rows(self) -> list[Ref]:
        head, tail = self.shared[:GROUP_KEY], self.shared[GROUP_KEY:]
        new = tuple.__new__
        return [new(Ref, (*head, *f, *tail)) for f in self.files]


class FileRef(NamedTuple):
    """A file reference reduced to what GC needs."""

    path: str
    scope: str
    offset: int
    size: int


def relative_uri(base: str, relative: str) -> str:
    """URI of a relative handle's file; the common plain name costs one check."""
    if (
        "/" in relative or "\\" in relative or ":" in relative or relative in (".", "..", "")
        or relative[0] <= " " or relative[-1] <= " "
    ):  # fmt: skip
        return st.resolve_relative(base, st.java_trim(relative))
    return base + "/" + relative


# ---------------------------------------------------------------------------------------------
# the reference map


def reference_groups(ck: LoadedCheckpoint) -> list[RefGroup]:
    """The reference map in groups (:class:`RefGroup`): the columns common to one handle's files
    (checkpoint … scope, key_group_start, key_group_end) once, then per file ``(handle_type,
    local_name, path, written_path, offset, size)``.

    One incremental handle's hundreds of SSTs form one group, so writers encode its common part
    once; :func:`reference_rows` flattens the groups into full rows.
    """
    with paused_collector():
        return _reference_groups(ck)


def _reference_groups(ck: LoadedCheckpoint) -> list[RefGroup]:
    loc, md = ck.location, ck.metadata
    base = loc.uri
    head = (base, loc.job_id, md.checkpoint_id, ck.kind)
    to_uri = _resolver(ck.rebase)  # absolute paths; relative ones are joined to ``base`` inline below
    groups: list[RefGroup] = []
    for op, subtask, slot, scope, kgr, items in file_groups(md):
        kg = kgr.as_list() if kgr is not None else (None, None)
        files: list[tuple] = []
        append = files.append
        if len(items) > 1:  # the walk groups only whole files (FileHandle): the bulk, an incremental's SSTs
            for local_name, (written, size) in items:
                append(("FileStateHandle", local_name, to_uri(written), written, 0, size))
        else:
            for local_name, h in items:
                t = type(h)
                if t is RelativeFileHandle:
                    written = h.relative_path
                    append((h.flink_class, local_name, relative_uri(base, written), written, 0, h.size))
                else:
                    written = h.path
                    offset = h.offset if t is SegmentFileHandle else 0
                    append((h.flink_class, local_name, to_uri(written), written, offset, h.size))
        groups.append(
            RefGroup((*head, op.operator_id, op.display_name, subtask, slot, scope, kg[0], kg[1]), files)
        )
    return groups


def _resolver(rebase: Rebase):
    """Written absolute path → canonical, rebased URI, normalising each directory only once."""
    apply = rebase.apply if rebase else None
    olds = tuple(old.rstrip("/") + "/" for old, _new in rebase.mappings) if rebase else ()
    dirs: dict[str, str | None] = {}  # written directory -> its URI now; None: resolve each file

    def one(path: str) -> str:
        uri = canonical(path)
        return apply(uri) if apply is not None else uri

    def to_uri(path: str) -> str:
        if path and (path[0] <= " " or path[-1] <= " "):
            path = st.java_trim(path)  # as Flink's Path(String) does
        d, _, name = path.rpartition("/")
        if name in ("", ".", "..") or not d or "\\" in name:
            return one(path)
        c = dirs.get(d, False)
        if c is False:
            probe = canonical(d + "/_")
            inside = probe[:-1]  # the directory, canonical, with a slash
            # a mapping of something inside this directory (OLD=NEW of one file): the probe cannot
            # stand for its files, each is rebased on its own
            narrower = any(old != inside and old.startswith(inside) for old in olds)
            c = dirs[d] = None if narrower else (apply(probe) if apply is not None else probe)[:-2]
        if c is None:
            return one(path)
        return path if c == d else c + "/" + name  # unchanged directory: the written string itself

    return to_uri


def reference_rows(ck: LoadedCheckpoint) -> list[Ref]:
    """The reference map of one checkpoint, one :class:`Ref` per file reference."""
    with paused_collector():
        return [row for group in reference_groups(ck) for row in group.rows()]


def file_resolver(ck: LoadedCheckpoint):
    """The one mapping from a file handle to the URI of its file now: relative handles against
    the checkpoint's directory, absolute ones canonicalised and rebased (see :func:`_resolver`)."""
    return _handle_resolver(ck.location.uri, _resolver(ck.rebase))


def _handle_resolver(base: str, to_uri):
    def resolve(h: Any) -> str:
        return relative_uri(base, h.relative_path) if type(h) is RelativeFileHandle else to_uri(h.path)

    return resolve


def referenced_files(ck: LoadedCheckpoint) -> Iterator[FileRef]:
    """Every file reference reduced to what GC needs (:class:`FileRef`): :func:`referenced_uris`
    a file at a time."""
    new = tuple.__new__
    for scope, uris, items in referenced_uris(ck):
        for uri, (_name, h) in zip(uris, items, strict=True):
            yield new(FileRef, (uri, scope, h.offset if type(h) is SegmentFileHandle else 0, h.size))


def referenced_uris(ck: LoadedCheckpoint) -> Iterator[tuple[str, list[str], tuple]]:
    """Every file reference a group of handles at a time (:func:`file_groups`: one incremental
    handle's shared files are one group): ``(scope, each file's URI, the (local_name, handle)
    items)``. The fold's form: a list per group, not an object and two generator steps per file
    (4M references of a 10^7-file bucket)."""
    to_uri = _resolver(ck.rebase)
    resolve = _handle_resolver(ck.location.uri, to_uri)
    for _op, _subtask, _slot, scope, _kgr, items in file_groups(ck.metadata):
        yield scope, [to_uri(h.path) if type(h) is FileHandle else resolve(h) for _name, h in items], items


def rows_to_arrow(rows: Iterable[Ref]) -> Any:
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

    return pa.schema([(name, pa.type_for_alias(t)) for name, t in ARROW_TYPES.items()])
