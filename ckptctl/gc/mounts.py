"""Other mounts below the roots: the same storage under a second name fails closed.

A directory on another device than its parent (:attr:`ckptctl.storage.WalkNotes.mounts`) may be a
second mount of the storage the root is on: an overlay whose lower layer is a job directory, a second
FUSE mount of a bucket (goofys, s3fs and mountpoint-s3 give each mount its own device and inodes),
an NFS export mounted again with other options. Its files are then the root's files under another
name: live under one, "unreferenced" under the other, and a plan that collected them deleted every
retained checkpoint's files (a red-team attack: 206 files, the delete-fraction cap did not trip
because the mirror doubles the files). Device numbers cannot tell such a mount from a volume of its
own, so the files of a mount below the scope that decides them are never collected: kept as
``other-mount``, unless the mount (or a directory inside it) is itself named as a scope, where they
are classified as usual. A bind mount keeps the device and the inodes: the walk finds it as an
alias (:meth:`ckptctl.gc.guards.Guards.check_no_aliases`), as before.

One place for the rule, read by the per-directory contexts (:class:`ckptctl.gc.contexts.DirContexts`)
and by the guard (:meth:`ckptctl.gc.guards.Guards.check_mounts`) of both planners.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckptctl import storage as st
from ckptctl.checkpoint.layout import AREAS_WITHOUT_METADATA, place_of

if TYPE_CHECKING:
    from ckptctl.gc.scopes import Scopes


class OtherMounts:
    """The mounts the walks of the scopes found, and which of them decide a directory's files."""

    def __init__(self, scopes: Scopes, notes: dict[str, st.WalkNotes]) -> None:
        self.scopes = scopes
        # (listed scope, mount): the outermost scope is the one whose grammar says whether the
        # mount lies in a job's shared/ or taskowned/
        self.mounts = sorted({(root, m) for root, n in notes.items() for m in n.mounts}, key=lambda rm: rm[1])

    def __bool__(self) -> bool:
        return bool(self.mounts)

    def unnamed_of(self, uri: str) -> str | None:
        """The innermost mount holding ``uri`` when it lies strictly below the scope that decides
        ``uri`` (no scope names it or a directory in it): ``uri``'s files are kept. Else ``None``."""
        if not self.mounts:
            return None
        scope = self.scopes.scope_of(uri + "/x")[0]
        inner = None
        for _root, m in self.mounts:
            if st.is_under(uri, m) and (inner is None or len(m) > len(inner)):
                inner = m
        if inner is None or scope is None or inner == scope.rstrip("/") or not st.is_under(inner, scope):
            return None
        return inner

    def unnamed(self) -> list[str]:
        """Every mount no scope names (in order): its files are kept."""
        return [m for _root, m in self.mounts if self.unnamed_of(m) == m]

    def in_job_area_of(self, uri: str) -> str | None:
        """The mount holding ``uri`` that lies in (or is) a job's ``shared/`` or ``taskowned/`` of
        the scope it was found in, named as a scope or not, else ``None``: Flink writes no
        ``_metadata`` there, so a checkpoint found below one is a mounted copy of a job's
        directory (or worse), whatever else it is."""
        for root, m in self.mounts:
            if st.is_under(uri, m) and place_of(root, m).area in AREAS_WITHOUT_METADATA:
                return m
        return None
