"""Rebuild a :class:`CheckpointMetadata` with some file handles replaced, everything else kept.

Repairs and relocation change paths and nothing else: :func:`map_file_handles` runs the model's
one walk (:class:`~ckptctl.metadata.walk.HandleWalk`: the coordinator, operator, keyed and
channel state, through key-group, incremental, changelog and file-merging handles) and calls
``fn`` on each ``FileHandle``, ``RelativeFileHandle`` and ``SegmentFileHandle``. Objects that did
not change are returned as they are, so ``write_metadata(map_file_handles(md, lambda h, _: h)) == original``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from ckptctl.metadata.checkpoint import CheckpointMetadata
from ckptctl.metadata.walk import HandleWalk


class Where(NamedTuple):
    """Where a file handle sits: enough to show a rewritten handle to a person."""

    operator_id: str
    subtask: int | None  # None: coordinator state
    slot: str
    scope: str  # shared | private | metadata | exclusive | changelog | segment
    local_name: str | None


FileFn = Callable[[Any, Where], Any]
DirFn = Callable[[str, Where], str]


def map_file_handles(md: CheckpointMetadata, fn: FileFn, dir_fn: DirFn | None = None) -> CheckpointMetadata:
    """``md`` with every file handle ``h`` replaced by ``fn(h, where)`` (and, with ``dir_fn``, the
    directories of file-merging operator handles by ``dir_fn(dir, where)``)."""
    return _Map(fn, dir_fn).checkpoint(md)


class _Map(HandleWalk):
    def __init__(self, fn: FileFn, dir_fn: DirFn | None) -> None:
        self.fn = fn
        self.dir_fn = dir_fn

    def files(self, op, subtask, slot, scope, key_groups, items):
        new = None
        for k, (name, h) in enumerate(items):
            n = self.fn(h, Where(op.operator_id, subtask, slot, scope, name))
            if n is not h:
                if new is None:
                    new = [f[1] for f in items]
                new[k] = n
        return new

    def directory(self, op, subtask, slot, path):
        if self.dir_fn is None:
            return path
        return self.dir_fn(path, Where(op.operator_id, subtask, slot, "exclusive", None))
