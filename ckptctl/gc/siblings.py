"""The siblings of a ROOT that is a job directory: what their checkpoints borrow from it.

docs/gc.md invites one job directory as a ROOT (``gc plan <root>/<job-id>``). The other job
directories beside it are not scanned, yet a job restored from this one in CLAIM mode usually
writes there (the same ``state.checkpoints.dir``), and its retained checkpoints reference this job's
shared files: a red-team attack lost the 12 files a sibling borrowed, and 3 of its 4 checkpoints
with them. So the checkpoints below the parent of such a ROOT and outside every scope are read too
(one more pruned walk of the parent, discovery's: on S3 one listing that jumps over the jobs'
``shared/`` and ``taskowned/``, locally a walk that skips them), and every file of a scope they
reference is live. A job beside it without a completed checkpoint but with fresh ``chk-N`` files
may have been restored from a checkpoint ``--keep-last`` expires: as for the jobs in the scopes,
nothing is expired then. They are judged no further (nothing outside the scopes is). A reference of
theirs that names the job directory of a ROOT by its JobID but that no mapping brought under the
ROOT (a sibling written elsewhere) means files of the ROOT under a name gc cannot map: the plan is
refused (as it is when a sibling's ``_metadata`` cannot be read), naming the parent to scan.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckptctl import storage as st
from ckptctl.checkpoint.layout import (
    JOB_ID_RE,
    METADATA_FILE,
    CheckpointLocation,
    begins_like_metadata,
    place_of,
    scan_root,
)
from ckptctl.checkpoint.rebase import written_job_dir

if TYPE_CHECKING:
    from ckptctl.gc.scopes import Scopes
    from ckptctl.storage import FileInfo, Storage


def job_directory_roots(roots: tuple[str, ...]) -> list[str]:
    """The ROOTs that are job directories (named by a JobID, as Flink names them), in order."""
    return [r for r in roots if JOB_ID_RE.match(st.basename(r.rstrip("/")))]


def beside(root: str) -> str | None:
    """The directory holding the job directory ``root``, or ``None`` when that is a file system's
    root (its walk would be the machine's)."""
    parent = st.parent(root.rstrip("/"))
    return None if parent.rstrip("/") in ("file:", "") else parent


def listed_beside(storage: Storage, parent: str, scopes: Scopes) -> list[FileInfo]:
    """The files below ``parent`` outside the scopes and outside every job's ``shared/`` and
    ``taskowned/`` (the ``_metadata`` and exclusive files of ``chk-N`` and savepoint directories):
    discovery's walk, which costs what finding the ``_metadata`` alone costs (on S3 the same pages)."""
    return [f for f in storage.list_checkpoint_areas(parent) if not f.uri.startswith(scopes.prefixes)]


def sibling_checkpoints(storage: Storage, parent: str, files: list[FileInfo]) -> list[CheckpointLocation]:
    """Every completed checkpoint and savepoint among ``files`` (:func:`listed_beside`): named as
    Flink names them, or a ``_metadata`` that begins with Flink's magic number (a directory an
    operator renamed)."""
    metadata = [f for f in files if f.uri.endswith("/" + METADATA_FILE)]
    return [
        loc
        for loc in scan_root(storage, parent, metadata).locations()
        if loc.complete
        and (loc.kind != "unknown" or begins_like_metadata(storage, loc.metadata.uri, loc.metadata.size))
    ]


def starting_beside(
    parent: str, files: list[FileInfo], complete: list[CheckpointLocation], since: float
) -> list[str]:
    """The job directories below ``parent`` without a completed checkpoint that have a file of a
    ``chk-N`` written at ``since`` or later (or without a time): a job restored (perhaps from a
    checkpoint ``--keep-last`` expires) taking its first checkpoint, whose ``_metadata`` will
    reference what it restored."""
    done = {st.parent(loc.uri) for loc in complete if loc.kind == "checkpoint"}
    starting = set()
    for f in files:
        place = place_of(parent, st.parent(f.uri))
        if place.area == "chk" and place.job not in done and (f.mtime is None or f.mtime >= since):
            starting.add(place.job)
    return sorted(starting)


def unmapped_references(external: dict[str, dict], roots: list[str]) -> list[dict]:
    """The sibling references outside the scopes written into the job directory of one of
    ``roots`` (by its JobID): files of that ROOT under a name no mapping brought under it."""
    names = {st.basename(r.rstrip("/")) for r in roots}
    out = []
    for path, ref in sorted(external.items()):
        job = written_job_dir(path)
        if job is not None and st.basename(job) in names:
            out.append(ref)
    return out
