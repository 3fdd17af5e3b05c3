"""The siblings of a ROOT that is a job directory: what their checkpoints borrow from it.

The README invites one job directory as a ROOT (``gc plan <root>/<job-id>``). The other job
directories beside it are not scanned, yet a job restored from this one in CLAIM mode usually
writes there (the same ``state.checkpoints.dir``), and its retained checkpoints reference this job's
shared files: a red-team attack lost the 12 files a sibling borrowed, and 3 of its 4 checkpoints
with them. So the checkpoints below the parent of such a ROOT and outside every scope are read too
(one more pruned walk of the parent, discovery's: on S3 one listing that jumps over the jobs'
``shared/`` and ``taskowned/``, locally a walk that skips them), and every file of a scope they
reference is live. They are judged no further (nothing outside the scopes is). A reference of
theirs that names the job directory of a ROOT by its JobID but that no mapping brought under the
ROOT (a sibling written elsewhere) means files of the ROOT under a name gc cannot map: the plan is
refused (as it is when a sibling's ``_metadata`` cannot be read), naming the parent to scan.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckptctl import storage as st
from ckptctl.layout import JOB_ID_RE, CheckpointLocation, begins_like_metadata, scan_root
from ckptctl.rebase import written_job_dir

if TYPE_CHECKING:
    from ckptctl.gc.plan import Scopes
    from ckptctl.storage import Storage


def job_directory_roots(roots: tuple[str, ...]) -> list[str]:
    """The ROOTs that are job directories (named by a JobID, as Flink names them), in order."""
    return [r for r in roots if JOB_ID_RE.match(st.basename(r.rstrip("/")))]


def beside(root: str) -> str | None:
    """The directory holding the job directory ``root``, or ``None`` when that is a file system's
    root (its walk would be the machine's)."""
    parent = st.parent(root.rstrip("/"))
    return None if parent.rstrip("/") in ("file:", "") else parent


def sibling_checkpoints(storage: Storage, parent: str, scopes: Scopes) -> list[CheckpointLocation]:
    """Every completed checkpoint and savepoint below ``parent`` outside the scopes (found by
    discovery's walk): named as Flink names them, or a ``_metadata`` that begins with Flink's magic
    number (a directory an operator renamed)."""
    outside = [f for f in storage.find_metadata(parent) if not f.uri.startswith(scopes.prefixes)]
    return [
        loc
        for loc in scan_root(storage, parent, outside).locations()
        if loc.complete
        and (loc.kind != "unknown" or begins_like_metadata(storage, loc.metadata.uri, loc.metadata.size))
    ]


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
