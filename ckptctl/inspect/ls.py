"""``ls``: every job, checkpoint and savepoint under a root, one summary row each."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ckptctl.checkpoint.flink39964 import is_inherited
from ckptctl.checkpoint.layout import CheckpointLocation
from ckptctl.checkpoint.loading import LoadedCheckpoint
from ckptctl.checkpoint.refs import file_resolver
from ckptctl.metadata.handles import RelativeFileHandle
from ckptctl.metadata.walk import file_handles, state_sizes
from ckptctl.pycollector import paused_collector

if TYPE_CHECKING:
    from ckptctl.checkpoint.loading import Progress
    from ckptctl.checkpoint.rebase import Rebase
    from ckptctl.storage import Storage


@dataclass
class Listing:
    """``ls``: one :func:`summary_view` (or :func:`incomplete_view`) per checkpoint, savepoint or
    incomplete directory found under ``root``. ``inferred``: each loaded checkpoint's inferred
    mapping (for the moved-directory warnings; the decoded checkpoints themselves are not kept)."""

    root: str
    rows: list[dict[str, Any]]
    inferred: list[Rebase | None] = field(default_factory=list)

    @property
    def errors(self) -> list[str]:
        """Why each unreadable checkpoint or directory could not be listed, in row order."""
        return [r["error"] for r in self.rows if r["error"]]

    def to_json(self) -> list[dict[str, Any]]:
        return self.rows


def list_root(storage: Storage, root: str, mappings: Rebase, progress: Progress | None = None) -> Listing:
    """The :class:`Listing` of ``root``. What ``ls`` shows lives outside the jobs' ``shared/`` and
    ``taskowned/``: those are never listed (millions of files). Directories below ``root`` it may
    not read are rows too, in their place among their siblings (``chk-8`` between ``chk-7`` and
    ``chk-9``), as are checkpoints whose ``_metadata`` cannot be read."""
    from ckptctl import storage as st
    from ckptctl.checkpoint.layout import classify, scan_root
    from ckptctl.checkpoint.loading import each_checkpoint
    from ckptctl.errors import CkptError

    # a plain file lists as nothing, and scan_root refuses it then (no request before the listing)
    unreadable: list[str] = []  # directories below ROOT it may not read: listed as such, the others too
    layout = scan_root(storage, root, storage.list_checkpoint_areas(st.normalize_uri(root), unreadable))
    locations = layout.locations()
    if not locations and not layout.jobs and not unreadable:  # one rule with check and gc: not "nothing"
        raise CkptError(f"no checkpoints under {layout.root}: no job, checkpoint or savepoint")
    listing = Listing(layout.root, [])
    rows = listing.rows
    for loc, ck, error in each_checkpoint(storage, locations, mappings, progress):
        if error is not None:
            rows.append(incomplete_view(loc, error=str(error)))
        elif ck is None:
            rows.append(incomplete_view(loc))
        else:
            listing.inferred.append(ck.inferred_rebase)
            rows.append(summary_view(ck))
    for d in unreadable:  # in its place among its siblings (chk-8 between chk-7 and chk-9)
        row = incomplete_view(classify(d, None), error=f"{d}: permission denied")
        at = next((i for i, r in enumerate(rows) if r["path"] > d and st.parent(r["path"]) == st.parent(d)
                   and (r["checkpoint_id"] or 0) > (row["checkpoint_id"] or 0)), len(rows))  # fmt: skip
        rows.insert(at, row)
    return listing


def summary_view(ck: LoadedCheckpoint) -> dict[str, Any]:
    """One line of ``ls``: a checkpoint's identity, format and sizes."""
    md = ck.metadata
    full, incremental, _inline = state_sizes(md)
    files, inherited = _own_and_inherited(ck)
    props = md.properties
    return {
        "path": ck.location.uri,
        "job_id": ck.location.job_id,
        "checkpoint_id": md.checkpoint_id,
        "kind": ck.kind,
        "format_version": md.version,
        "savepoint_format": props.savepoint_format if props else None,
        "operators": len(md.operators),
        "state_size": full,
        "incremental_size": incremental,
        "files": len(files),
        # FLINK-39964: files reused from a CLAIM-restored NATIVE savepoint, recorded by relative name
        # (not this checkpoint's files, not uploaded by it; ckptctl repair fixes the references)
        "inherited_files": len(inherited),
        "inherited_bytes": sum(inherited.values()),
        "metadata_mtime": ck.location.metadata.mtime if ck.location.metadata else None,
        "complete": True,
        "error": None,
    }


def _own_and_inherited(ck: LoadedCheckpoint) -> tuple[set[str], dict[str, int]]:
    """(the files a checkpoint references as its own, its inherited files' sizes by written
    name): what ``reference_rows`` and ``split_inherited`` give, from the handles themselves. A row
    per reference made ``ls`` of 3 checkpoints of 1.2M references take 10 s and 1.8 GB."""
    resolve = file_resolver(ck)
    own: set[str] = set()
    inherited: dict[str, int] = {}
    kind = ck.kind
    with paused_collector():
        for scope, h in file_handles(ck.metadata):
            if is_inherited(kind, scope, type(h) is RelativeFileHandle):
                inherited[h.relative_path] = h.size
            else:
                own.add(resolve(h))
    return own, inherited


def incomplete_view(loc: CheckpointLocation, error: str | None = None) -> dict[str, Any]:
    """An ``ls`` row without a decoded ``_metadata``: a ``chk-N`` Flink never completed
    (``complete`` false), or one whose ``_metadata`` exists but cannot be read (``complete`` true:
    Flink finished it; ``error`` says why it cannot be restored)."""
    return {
        "path": loc.uri, "job_id": loc.job_id, "checkpoint_id": loc.dir_checkpoint_id, "kind": loc.kind,
        "format_version": None, "savepoint_format": None, "operators": None, "state_size": None,
        "incremental_size": None, "files": None, "inherited_files": None, "inherited_bytes": None,
        "metadata_mtime": loc.metadata.mtime if loc.metadata else None,
        "complete": loc.metadata is not None, "error": error,
    }  # fmt: skip
