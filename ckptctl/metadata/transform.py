"""Rebuild a :class:`CheckpointMetadata` with some file handles replaced, everything else kept.

Repairs and relocation change paths and nothing else: :func:`map_file_handles` walks every slot
a ``_metadata`` can hold a file in (the coordinator, operator, keyed and channel state, through
key-group, incremental, changelog and file-merging handles) and calls ``fn`` on each
``FileHandle``, ``RelativeFileHandle`` and ``SegmentFileHandle``. Objects that did not change are
returned as they are, so ``write_metadata(map_file_handles(md, lambda h, _: h)) == original``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from ckptctl.metadata.model import (
    ChangelogBackendHandle,
    ChangelogFileHandle,
    ChannelHandle,
    CheckpointMetadata,
    FileHandle,
    FileMergingOperatorHandle,
    IncrementalHandle,
    KeyGroupsHandle,
    LocalFile,
    MergedChannelHandle,
    OperatorStreamHandle,
    RelativeFileHandle,
    SegmentFileHandle,
)

FILE_TYPES = (FileHandle, RelativeFileHandle, SegmentFileHandle)


class Where(NamedTuple):
    """Where a file handle sits: enough to show a rewritten handle to a person."""

    operator_id: str
    subtask: int | None  # None: coordinator state
    slot: str
    scope: str  # shared | private | metadata | exclusive | changelog
    local_name: str | None


FileFn = Callable[[Any, Where], Any]
DirFn = Callable[[str, Where], str]


def map_file_handles(md: CheckpointMetadata, fn: FileFn, dir_fn: DirFn | None = None) -> CheckpointMetadata:
    """``md`` with every file handle ``h`` replaced by ``fn(h, where)`` (and, with ``dir_fn``, the
    directories of file-merging operator handles by ``dir_fn(dir, where)``)."""
    ops = []
    changed = False
    for op in md.operators:
        new_op = _operator_state(op, fn, dir_fn)
        changed |= new_op is not op
        ops.append(new_op)
    return md._replace(operators=tuple(ops)) if changed else md


def _operator_state(op, fn, dir_fn):
    coord = _stream(op.coordinator_state, fn, Where(op.operator_id, None, "coordinator", "exclusive", None))
    subtasks = op.subtasks
    if subtasks is not None:
        new = tuple(_subtask(op.operator_id, s, fn, dir_fn) for s in subtasks)
        if any(a is not b for a, b in zip(new, subtasks, strict=True)):
            subtasks = new
    if coord is op.coordinator_state and subtasks is op.subtasks:
        return op
    return op._replace(coordinator_state=coord, subtasks=subtasks)


def _subtask(op_id, s, fn, dir_fn):
    if s.finished:
        return s
    i = s.index
    changes = {}
    for slot in ("managed_operator", "raw_operator"):
        h = getattr(s, slot)
        if h is not None:
            new = _operator(h, fn, dir_fn, Where(op_id, i, slot, "exclusive", None))
            if new is not h:
                changes[slot] = new
    for slot in ("managed_keyed", "raw_keyed"):
        h = getattr(s, slot)
        if h is not None:
            new = _keyed(h, fn, op_id, i, slot, None)
            if new is not h:
                changes[slot] = new
    for slot, name in (("input_channels", "input_channel"), ("output_channels", "output_channel")):
        chans = getattr(s, slot)
        new_chans = tuple(_channel(c, fn, Where(op_id, i, name, "exclusive", None)) for c in chans)
        if any(a is not b for a, b in zip(new_chans, chans, strict=True)):
            changes[slot] = new_chans
    return s._replace(**changes) if changes else s


def _stream(h, fn, where):
    t = type(h)
    if t in FILE_TYPES:
        return fn(h, where)
    if t is KeyGroupsHandle:
        d = _stream(h.delegate, fn, where)
        return h if d is h.delegate else h._replace(delegate=d)
    return h  # None, inline bytes, empty segment: no file


def _operator(h, fn, dir_fn, where):
    d = _stream(h.delegate, fn, where)
    if type(h) is FileMergingOperatorHandle and dir_fn is not None:
        taskowned, shared = dir_fn(h.taskowned_dir, where), dir_fn(h.shared_dir, where)
        if d is not h.delegate or taskowned != h.taskowned_dir or shared != h.shared_dir:
            return h._replace(delegate=d, taskowned_dir=taskowned, shared_dir=shared)
        return h
    if type(h) in (OperatorStreamHandle, FileMergingOperatorHandle) and d is not h.delegate:
        return h._replace(delegate=d)
    return h


def _files(files, fn, op_id, i, slot, scope):
    new = []
    changed = False
    for f in files:
        h = _stream(f.handle, fn, Where(op_id, i, slot, scope, f.local_path))
        if h is not f.handle:
            changed = True
            f = LocalFile(f.local_path, h)
        new.append(f)
    return tuple(new) if changed else files


def _keyed(h, fn, op_id, i, slot, scope_override):
    t = type(h)
    if t is IncrementalHandle:
        meta = _stream(h.meta, fn, Where(op_id, i, slot, scope_override or "metadata", None))
        shared = _files(h.shared, fn, op_id, i, slot, scope_override or "shared")
        private = _files(h.private, fn, op_id, i, slot, scope_override or "private")
        if meta is h.meta and shared is h.shared and private is h.private:
            return h
        return h._replace(meta=meta, shared=shared, private=private)
    if t is KeyGroupsHandle:
        return _stream(h, fn, Where(op_id, i, slot, scope_override or "exclusive", None))
    if t is ChangelogBackendHandle:
        mat = tuple(p if p is None else _keyed(p, fn, op_id, i, slot, None) for p in h.materialized)
        non = tuple(
            p if p is None else _keyed(p, fn, op_id, i, slot, "changelog") for p in h.non_materialized
        )
        same = all(a is b for a, b in zip(mat, h.materialized, strict=True)) and all(
            a is b for a, b in zip(non, h.non_materialized, strict=True)
        )
        return h if same else h._replace(materialized=mat, non_materialized=non)
    if t is ChangelogFileHandle:
        where = Where(op_id, i, slot, "changelog", None)
        pieces = tuple((o, _stream(s, fn, where)) for o, s in h.pieces)
        if all(a[1] is b[1] for a, b in zip(pieces, h.pieces, strict=True)):
            return h
        return h._replace(pieces=pieces)
    return h  # inline changelog bytes


def _channel(c, fn, where):
    if type(c) in (ChannelHandle, MergedChannelHandle):
        d = _stream(c.delegate, fn, where)
        return c if d is c.delegate else c._replace(delegate=d)
    return c
