"""What a PATH argument names: one checkpoint or savepoint, or every checkpoint under a root.

Commands that accept either (``refs``, ``verify``) resolve their argument here; the CLI only
passes a ``progress`` wrapper for the bar shown while the ``_metadata`` files are read.

Every command that reads every checkpoint under a root (``ls``, ``refs``, ``verify``, ``check``,
``relocate --all``) reads them through :func:`~ckptctl.checkpoint.loading.each_checkpoint`, which holds the one error policy:
a checkpoint whose ``_metadata`` cannot be read is that checkpoint's error and the next one is
read; a store that stops answering (:class:`~ckptctl.errors.StoreUnanswered`) ends the command,
since each next checkpoint would wait out the same deadline. What a command does with the
errors (rows of ``ls``, a count, the first one) is its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ckptctl.checkpoint.loading import LoadedCheckpoint, Progress
    from ckptctl.checkpoint.rebase import Rebase
    from ckptctl.storage import Storage


def checked_path(storage: Storage, path: str) -> str:
    """PATH unchanged if it can name a checkpoint, savepoint, job or root: a directory (or prefix)
    or a ``_metadata`` file. A plain file is refused in one line instead of an OS error later."""
    from ckptctl.checkpoint.layout import refuse_a_file
    from ckptctl.storage import normalize_uri

    refuse_a_file(storage, normalize_uri(path), path)
    return path


def checkpoints_at(
    storage: Storage,
    path: str,
    mappings: Rebase,
    progress: Progress | None = None,
    apply_inferred: bool = True,
    unreadable: dict[str, str] | None = None,
):
    """A single checkpoint if PATH is one, else every readable checkpoint under the root PATH;
    with the URI paths are shown relative to (the checkpoint's, or the scanned root).

    ``unreadable``: when given, a root's checkpoints whose ``_metadata`` cannot be read are put
    there (directory -> one-line error) and the rest are returned; otherwise the first aborts.
    ``apply_inferred=False``: paths as Flink will open them (only the explicit ``--rebase``).
    """
    from ckptctl.checkpoint.layout import METADATA_FILE, scan_root
    from ckptctl.checkpoint.loading import each_checkpoint
    from ckptctl.errors import CkptError
    from ckptctl.storage import basename, normalize_uri

    single = checkpoint_if_named(storage, path, mappings, apply_inferred)
    if single is None and basename(normalize_uri(path)) == METADATA_FILE:
        single = _located(storage, path, mappings, apply_inferred)  # no such _metadata: says so
    if single is not None:
        return [single], single.location.uri
    uri = normalize_uri(checked_path(storage, path))
    layout = scan_root(storage, uri)
    loaded = []
    errors: dict[str, str] = {}
    complete = [loc for loc in layout.locations() if loc.complete]
    for loc, ck, error in each_checkpoint(storage, complete, mappings, progress, apply_inferred):
        if error is not None:
            errors[loc.uri] = str(error)
        else:
            loaded.append(ck)
    if errors and unreadable is None:
        first = next(iter(errors.values()))
        raise CkptError(f"{len(errors)} unreadable _metadata under {layout.root}; first: {first}")
    if unreadable is not None:
        unreadable.update(errors)
    if not loaded and not errors:
        raise CkptError(f"not a checkpoint directory: no completed checkpoints or savepoints under {path}")
    return loaded, layout.root


def one_checkpoint(
    storage: Storage, path: str, mappings: Rebase, apply_inferred: bool = True
) -> LoadedCheckpoint:
    """The checkpoint or savepoint PATH names (its directory or its ``_metadata``), for the
    commands that take exactly one (``show``, ``states``, ``diff``, ``plan-rescale``,
    ``relocate``): on S3 one GET when it is there, as for :func:`checkpoints_at`. Anything else
    is refused in one line: a plain file, a directory without ``_metadata``, nothing at all."""
    return checkpoint_if_named(storage, path, mappings, apply_inferred) or _located(
        storage, path, mappings, apply_inferred
    )


def _located(storage: Storage, path: str, mappings: Rebase, apply_inferred: bool) -> LoadedCheckpoint:
    """PATH's checkpoint found the long way (a stat, a directory test): what is wrong with PATH
    is said in one line."""
    from ckptctl.checkpoint.layout import locate_checkpoint
    from ckptctl.checkpoint.loading import load_checkpoint

    return load_checkpoint(storage, locate_checkpoint(storage, checked_path(storage, path)), mappings,
                           apply_inferred=apply_inferred)  # fmt: skip


def checkpoint_if_named(storage: Storage, path: str, mappings: Rebase | None, apply_inferred: bool = True,
                        ) -> LoadedCheckpoint | None:  # fmt: skip
    """PATH's checkpoint when PATH is one (its ``_metadata`` found), else ``None``. The
    ``_metadata`` is asked for first: on S3 one GET gives its stat and bytes -- no HEAD, and no
    directory test (a HEAD and a LIST) -- and its stat is the location's."""
    from ckptctl.checkpoint.layout import METADATA_FILE, locate_checkpoint
    from ckptctl.checkpoint.loading import MAX_METADATA_BYTES, load_checkpoint
    from ckptctl.checkpoint.scan import ScanStorage
    from ckptctl.errors import StorageError
    from ckptctl.storage import basename, join, normalize_uri

    uri = normalize_uri(path)
    try:
        got = storage.read_small(uri if basename(uri) == METADATA_FILE else join(uri, METADATA_FILE),
                                 MAX_METADATA_BYTES)  # fmt: skip
    except StorageError:  # PATH is a plain file (not a directory), unreadable...: checked_path says
        return None
    if got is None:
        return None
    found, data = got
    loc = locate_checkpoint(storage, uri, found)
    reader = storage if data is None else ScanStorage.primed(storage, loc.metadata, data)
    return load_checkpoint(reader, loc, mappings, apply_inferred=apply_inferred)


def display_base(root: str, checkpoints: Sequence[LoadedCheckpoint]) -> str:
    """What shown paths are relative to: the scanned root, or for a single checkpoint its parent
    (so its own files read ``chk-7/…`` or ``savepoint-…/…`` and shared ones ``shared/…``)."""
    from ckptctl.storage import parent

    if len(checkpoints) == 1 and checkpoints[0].location.uri == root:
        return parent(root)
    return root
