"""Loading a checkpoint: its ``_metadata`` read and decoded, and how the paths it wrote map to
where the files are now (``--rebase``, and the mapping a moved directory suggests).

:func:`each_checkpoint` loads every checkpoint of a root with the one error policy of every
command that reads them all (``ls``, ``refs``, ``verify``, ``check``, ``relocate --all``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ckptctl import storage as st
from ckptctl.checkpoint.layout import CheckpointLocation, locate_checkpoint
from ckptctl.checkpoint.rebase import Rebase, infer_rebase
from ckptctl.errors import CkptError, StoreUnanswered
from ckptctl.metadata import read_metadata
from ckptctl.metadata.checkpoint import CheckpointMetadata
from ckptctl.metadata.handles import RelativeFileHandle
from ckptctl.metadata.walk import file_handles
from ckptctl.storage import Storage

# a progress wrapper: progress(items, total) iterates ``items`` (the CLI shows a bar meanwhile)
Progress = Callable[[Sequence[Any], int], Iterable[Any]]


def canonical(path: str) -> str:
    """Canonical URI of a path Flink wrote (see :func:`storage.normalize_uri`); the common,
    already-canonical case costs one check."""
    if (path.startswith("s3://") or path.startswith("file:/")) and path[-1] > " " and st.is_normal(path):
        return path
    return st.normalize_uri(path)


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
    known = location.metadata.size if location.metadata is not None else None
    return read_metadata(storage.read_bytes(uri, limit=MAX_METADATA_BYTES, size=known), path=uri)


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
    for _scope, h in file_handles(md):
        if type(h) is not RelativeFileHandle:
            yield h.path


def _each(items: Sequence[Any], total: int) -> Iterator[Any]:
    yield from items


def each_checkpoint(
    storage: Storage,
    locations: Sequence[CheckpointLocation],
    mappings: Rebase | None,
    progress: Progress | None = None,
    apply_inferred: bool = True,
) -> Iterator[tuple[CheckpointLocation, LoadedCheckpoint | None, CkptError | None]]:
    """Every checkpoint under a root, loaded with the one error policy: ``(location, checkpoint,
    None)`` for each of ``locations`` whose ``_metadata`` loads, ``(location, None, error)`` for
    each that cannot be read (the next one is read), ``(location, None, None)`` for a directory
    Flink never completed. One at a time, so a caller that keeps only a summary holds one decoded
    checkpoint at a time (a root's can take GBs). A store that stops answering ends the loop
    (:class:`~ckptctl.errors.StoreUnanswered` is raised): each next checkpoint would wait out the
    same deadline. What a command makes of the errors (``ls`` rows, ``refs``'s warnings, a count,
    ``relocate``'s all-or-nothing) is its own."""
    for loc in (progress or _each)(locations, len(locations)):
        if not loc.complete:
            yield loc, None, None
            continue
        try:
            ck = load_checkpoint(storage, loc, mappings, apply_inferred=apply_inferred)
        except StoreUnanswered:
            raise
        except CkptError as e:
            yield loc, None, e
            continue
        yield loc, ck, None
        del ck
