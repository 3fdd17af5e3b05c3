"""The one traversal of a checkpoint's handles down to its files, and the sizes Flink accounts.

Every handle class knows its own sizes (``state_size``, Flink's getStateSize; ``incremental_size``,
getCheckpointedSize, on keyed handles; ``inline_size``, the bytes kept inside ``_metadata``), its
Flink class name (``flink_class``) and, for stream handles, where its bytes are (``source``).
Which handle holds which is written once, here, in :class:`HandleWalk`. A new handle type: the
reader, the writer, the model and this walk.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from ckptctl.metadata.checkpoint import CheckpointMetadata
from ckptctl.metadata.handles import (
    ByteStreamHandle,
    ChangelogBackendHandle,
    ChangelogBytesHandle,
    ChangelogFileHandle,
    EmptySegmentHandle,
    FileHandle,
    IncrementalHandle,
    KeyedHandle,
    KeyGroupsHandle,
    LocalFile,
    RelativeFileHandle,
    SegmentFileHandle,
)
from ckptctl.metadata.operators import FileMergingOperatorHandle, OperatorState, SubtaskState

FileItems = Sequence[tuple[str | None, Any]]  # (local name, file handle) pairs: LocalFiles or pairs


def keyed_parts(h: KeyedHandle | None) -> Iterator[KeyedHandle]:
    """The keyed handles a backend restores its state from: ``h`` itself, or for a changelog
    handle its materialized parts (the non-materialized changes are replayed on top of them)."""
    if h is None:
        return
    if type(h) is ChangelogBackendHandle:
        for part in h.materialized:
            yield from keyed_parts(part)
    else:
        yield h


def incremental_parts(h: KeyedHandle | None) -> Iterator[IncrementalHandle]:
    """The incremental RocksDB/ForSt snapshots among :func:`keyed_parts`; each one's files are
    ``(*h.shared, *h.private)`` (``LocalFile``: RocksDB file name, stream handle), whose bytes are
    at ``lf.handle.source(resolve)``."""
    for part in keyed_parts(h):
        if type(part) is IncrementalHandle:
            yield part


def state_sizes(md: CheckpointMetadata) -> tuple[int, int, int]:
    """(full state bytes, incremental bytes, inline bytes) of a checkpoint, as Flink accounts them."""
    full = incremental = inline = 0
    for op in md.operators:
        f, i, n = coordinator_sizes(op)
        full, incremental, inline = full + f, incremental + i, inline + n
        for s in op.subtasks or ():
            f, i, n = subtask_sizes(s)
            full, incremental, inline = full + f, incremental + i, inline + n
    return full, incremental, inline


def coordinator_sizes(op: OperatorState) -> tuple[int, int, int]:
    """(full, incremental, inline) bytes of an operator's coordinator state: always inline
    (a ByteStreamStateHandle) when Flink writes it, and all of it new in every checkpoint."""
    n = op.coordinator_state.state_size if op.coordinator_state is not None else 0
    return n, n, n


def subtask_sizes(s: SubtaskState) -> tuple[int, int, int]:
    """(full, incremental, inline) bytes of one subtask, as Flink accounts them (``getStateSize``,
    ``getCheckpointedSize``): :func:`state_sizes` per subtask, for ``history``'s per-operator figures."""
    full = incremental = inline = 0
    for h in (s.managed_operator, s.raw_operator):
        if h is not None:
            n = h.state_size
            full += n
            incremental += n
            inline += h.inline_size
    for h in (s.managed_keyed, s.raw_keyed):
        if h is not None:
            full += h.state_size
            incremental += h.incremental_size
            inline += h.inline_size
    for ch in (*s.input_channels, *s.output_channels):
        full += ch.state_size
        incremental += ch.state_size
        inline += ch.inline_size
    return full, incremental, inline


class HandleWalk:
    """The one traversal of a checkpoint's handles, down to the files: a visitor.

    :meth:`checkpoint` visits every slot of every subtask (operator, keyed, channel state) and
    the coordinator, recursing through key-group, incremental, changelog and file-merging
    handles, and hands each group of file handles to :meth:`files` with where it sits:

    * ``op`` (the :class:`OperatorState`), ``subtask`` (index; ``None`` for the coordinator),
      ``slot`` (managed_keyed | raw_keyed | managed_operator | raw_operator | input_channel |
      output_channel | coordinator), ``scope`` (shared | private | metadata | exclusive |
      changelog | segment) and ``key_groups`` (:class:`KeyGroupRange` or ``None``);
    * ``items``: ``(local_name, file_handle)`` pairs. An incremental handle's shared files that are
      all whole files come as one group, its ``LocalFile`` tuple itself (no copy); every other
      file handle comes alone.

    :meth:`files` returns ``None`` (nothing changes) or the new handles, one per item; the walk
    then rebuilds only what changed and :meth:`checkpoint` returns the new metadata (the same
    object when nothing changed). :meth:`directory` does the same for the managed directories
    of file-merging operator handles. Inline bytes and empty segments hold no file; a handle
    type the walk does not know is a ``TypeError``, never skipped.
    """

    def files(self, op, subtask, slot, scope, key_groups, items: FileItems) -> Sequence[Any] | None:
        return None

    def directory(self, op, subtask, slot, path: str) -> str:
        return path

    # -- the structure ---------------------------------------------------------------------

    def checkpoint(self, md: CheckpointMetadata) -> CheckpointMetadata:
        ops = tuple(self.operator(op) for op in md.operators)
        if all(a is b for a, b in zip(ops, md.operators, strict=True)):
            return md
        return md._replace(operators=ops)

    def operator(self, op: OperatorState) -> OperatorState:
        coord = self.stream(op, None, "coordinator", "exclusive", None, None, op.coordinator_state)
        subtasks = op.subtasks
        if subtasks is not None:
            new = tuple(self.subtask(op, s) for s in subtasks)
            if any(a is not b for a, b in zip(new, subtasks, strict=True)):
                subtasks = new
        shadowed = op.shadowed  # replaced by a later state of the same index: still referenced
        if shadowed:
            new = tuple(self.subtask(op, s) for s in shadowed)
            if any(a is not b for a, b in zip(new, shadowed, strict=True)):
                shadowed = new
        if coord is op.coordinator_state and subtasks is op.subtasks and shadowed is op.shadowed:
            return op
        return op._replace(coordinator_state=coord, subtasks=subtasks, shadowed=shadowed)

    def subtask(self, op: OperatorState, s: SubtaskState) -> SubtaskState:
        # a finished subtask holds no state when read; it is walked all the same (nothing to skip)
        i = s.index
        changes = {}
        for slot, h in (("managed_operator", s.managed_operator), ("raw_operator", s.raw_operator)):
            if h is not None:
                new = self.operator_handle(op, i, slot, h)
                if new is not h:
                    changes[slot] = new
        for slot, h in (("managed_keyed", s.managed_keyed), ("raw_keyed", s.raw_keyed)):
            if h is not None:
                new = self.keyed(op, i, slot, h, None)
                if new is not h:
                    changes[slot] = new
        for field, slot, chans in (
            ("input_channels", "input_channel", s.input_channels),
            ("output_channels", "output_channel", s.output_channels),
        ):
            if chans:
                new_chans = tuple(self.channel(op, i, slot, c) for c in chans)
                if any(a is not b for a, b in zip(new_chans, chans, strict=True)):
                    changes[field] = new_chans
        return s._replace(**changes) if changes else s

    def stream(self, op, subtask, slot, scope, local_name, key_groups, h):
        """A stream slot: a file, a segment, key groups over a stream, inline bytes or nothing."""
        t = type(h)
        if t is FileHandle or t is RelativeFileHandle or t is SegmentFileHandle:
            if t is SegmentFileHandle:
                scope = "segment"
            new = self.files(op, subtask, slot, scope, key_groups, ((local_name, h),))
            return h if new is None else new[0]
        if t is KeyGroupsHandle:
            d = self.stream(op, subtask, slot, scope, local_name, h.key_groups, h.delegate)
            return h if d is h.delegate else h._replace(delegate=d)
        if h is None or t is ByteStreamHandle or t is EmptySegmentHandle:
            return h  # inline bytes, an empty segment: no file
        raise TypeError(f"the handle walk does not know {t.__name__}")

    def local_files(self, op, subtask, slot, scope, key_groups, files, grouped):
        """An incremental handle's shared or private files (a tuple of ``LocalFile``)."""
        if grouped and files and all(type(f.handle) is FileHandle for f in files):
            new = self.files(op, subtask, slot, scope, key_groups, files)  # hot path: one group
            if new is None:
                return files
        else:
            new = [self.stream(op, subtask, slot, scope, f.local_path, key_groups, f.handle) for f in files]
        if all(n is f.handle for f, n in zip(files, new, strict=True)):
            return files
        return tuple(
            f if n is f.handle else LocalFile(f.local_path, n) for f, n in zip(files, new, strict=True)
        )

    def keyed(self, op, subtask, slot, h, scope_override: str | None):
        t = type(h)
        if t is IncrementalHandle:
            kgr = h.key_groups
            meta = self.stream(op, subtask, slot, scope_override or "metadata", None, kgr, h.meta)
            grouped = scope_override is None
            shared = self.local_files(op, subtask, slot, scope_override or "shared", kgr, h.shared, grouped)
            private = self.local_files(op, subtask, slot, scope_override or "private", kgr, h.private, False)
            # a local name a V3 file repeats: not read by 1.14/1.15, but fetched by 1.17+ restoring
            # the same file, so still a referenced file (a shared one, as ckptctl has counted it)
            shadowed = self.local_files(op, subtask, slot, scope_override or "shared", kgr, h.shadowed, False)
            if meta is h.meta and shared is h.shared and private is h.private and shadowed is h.shadowed:
                return h
            return h._replace(meta=meta, shared=shared, private=private, shadowed=shadowed)
        if t is KeyGroupsHandle:
            return self.stream(op, subtask, slot, scope_override or "exclusive", None, None, h)
        if t is ChangelogBackendHandle:
            mat = tuple(p if p is None else self.keyed(op, subtask, slot, p, None) for p in h.materialized)
            non = tuple(
                p if p is None else self.keyed(op, subtask, slot, p, "changelog") for p in h.non_materialized
            )
            same = all(a is b for a, b in zip(mat, h.materialized, strict=True)) and all(
                a is b for a, b in zip(non, h.non_materialized, strict=True)
            )
            return h if same else h._replace(materialized=mat, non_materialized=non)
        if t is ChangelogFileHandle:
            kgr = h.key_groups
            pieces = tuple(
                (o, self.stream(op, subtask, slot, "changelog", None, kgr, s)) for o, s in h.pieces
            )
            if all(a[1] is b[1] for a, b in zip(pieces, h.pieces, strict=True)):
                return h
            return h._replace(pieces=pieces)
        if t is ChangelogBytesHandle:
            return h  # inline changes, no file
        raise TypeError(f"the handle walk does not know {t.__name__}")

    def operator_handle(self, op, subtask, slot, h):
        d = self.stream(op, subtask, slot, "exclusive", None, None, h.delegate)
        if type(h) is FileMergingOperatorHandle:
            taskowned = self.directory(op, subtask, slot, h.taskowned_dir)
            shared = self.directory(op, subtask, slot, h.shared_dir)
            if d is not h.delegate or taskowned != h.taskowned_dir or shared != h.shared_dir:
                return h._replace(delegate=d, taskowned_dir=taskowned, shared_dir=shared)
            return h
        return h if d is h.delegate else h._replace(delegate=d)

    def channel(self, op, subtask, slot, c):
        d = self.stream(op, subtask, slot, "exclusive", None, None, c.delegate)
        return c if d is c.delegate else c._replace(delegate=d)


class _Collect(HandleWalk):
    def __init__(self) -> None:
        self.groups: list[tuple] = []

    def files(self, op, subtask, slot, scope, key_groups, items):
        self.groups.append((op, subtask, slot, scope, key_groups, items))
        return None


def file_groups(md: CheckpointMetadata) -> list[tuple]:
    """Every file of a checkpoint in groups, in file order: ``(op, subtask, slot, scope,
    key_groups, items)`` with ``items`` the ``(local_name, file_handle)`` pairs (see :class:`HandleWalk`)."""
    walk = _Collect()
    walk.checkpoint(md)
    return walk.groups


def file_handles(md: CheckpointMetadata) -> Iterator[tuple[str, Any]]:
    """``(scope, file_handle)`` of every file reference (a handle naming the same file twice counts twice)."""
    for _op, _subtask, _slot, scope, _kgr, items in file_groups(md):
        for _name, h in items:
            yield scope, h
