"""Checkpoints Flink itself wrote unrestorable (FLINK-39964), repaired.

What the bug does, and which handles of a checkpoint it hit (each with the savepoint file it
really is), is :mod:`ckptctl.checkpoint.flink39964`; verify and check use that diagnosis too.
:func:`plan_repair` rewrites exactly those handles into absolute ``FileHandle``\\ s to the
savepoint's file, nothing else, and :func:`apply_repair` writes the repaired copy (its own files,
then the new ``_metadata`` last) or repairs in place keeping a backup.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ckptctl import storage as st
from ckptctl.checkpoint.flink39964 import BACKUP_NAME, ISSUE, Misanchored, SavepointFiles, diagnose
from ckptctl.checkpoint.layout import METADATA_FILE
from ckptctl.checkpoint.loading import LoadedCheckpoint, canonical
from ckptctl.checkpoint.rebase import Rebase
from ckptctl.errors import CkptError
from ckptctl.metadata import read_metadata, write_metadata
from ckptctl.metadata.checkpoint import CheckpointMetadata
from ckptctl.metadata.handles import FileHandle, RelativeFileHandle, SegmentFileHandle
from ckptctl.metadata.transform import map_file_handles
from ckptctl.storage import Storage
from ckptctl.storage.copying import TMP_MARK, copy_file, write_atomic


class RepairError(CkptError):
    """The repair cannot be done as asked (nothing to fix, a file not found, a wrong destination)."""


@dataclass
class RepairPlan:
    checkpoint: str
    fixes: list[Misanchored]
    unresolved: list[Misanchored]
    repaired: CheckpointMetadata
    data: bytes  # the new _metadata
    rebase: Rebase = field(default_factory=Rebase)  # the one mapping every absolute path went through
    rebased_handles: int = 0  # absolute paths (files, file-merging directories) it changed
    missing: list[str] = field(default_factory=list)  # absolute files it names that do not exist

    def missing_message(self) -> str:
        """Why a repair that would name missing files is refused, and what to pass."""
        mapping = f" (mapped with --rebase {self.rebase.describe()})" if self.rebase else ""
        return (
            f"the repaired _metadata would name {len(self.missing)} files that do not exist{mapping}; "
            f"first: {self.missing[0]}. If the checkpoint was moved, map where it was written to where "
            "it is now with --rebase OLD=NEW"
        )

    @property
    def ok(self) -> bool:
        return bool(self.fixes) and not self.unresolved and not self.missing

    def to_json(self) -> dict[str, Any]:
        return {
            "checkpoint": self.checkpoint,
            "issue": ISSUE,
            "rewritten_handles": len(self.fixes),
            "rewrites": [
                {
                    **m.as_dict(),
                    "from": {"type": "RelativeFileStateHandle", "relative_path": m.relative_path},
                    "to": {"type": "FileStateHandle", "path": m.found},
                }
                for m in self.fixes
            ],  # fmt: skip
            "unresolved": [m.as_dict() for m in self.unresolved],
            "savepoint_dirs": sorted({m.savepoint_dir for m in self.fixes if m.savepoint_dir}),
            "rebase": self.rebase.specs(),
            "rebased_handles": self.rebased_handles,
            "missing_files": self.missing,
            "metadata_bytes": len(self.data),
        }


def written_now(rebase: Rebase, written: str) -> str:
    """Where an absolute path Flink wrote points now, in the form Flink writes: the same string when
    no mapping applies, else the mapped URI (an ``s3a://``-style scheme kept, so Flink picks the same
    filesystem plugin)."""
    if not rebase:
        return written
    was = canonical(written)
    now = rebase.apply(was)
    if now == was:
        return written
    scheme = written.partition("://")[0].lower() if "://" in written else ""
    if scheme in ("s3a", "s3n", "s3p") and now.startswith("s3://"):
        return scheme + "://" + now[len("s3://") :]
    return now


def plan_repair(storage: Storage, ck: LoadedCheckpoint, savepoints: SavepointFiles) -> RepairPlan:
    """The new model and bytes: each misanchored relative handle becomes a ``FileHandle`` to the
    savepoint file (the path as Flink writes it), and every other absolute path goes through the
    checkpoint's one mapping (``--rebase`` and the inferred one), so a repaired copy of a moved
    checkpoint names the files where they are now, not half here and half where they were written.
    Every other byte stays as it was."""
    found = diagnose(storage, ck, savepoints)
    fixes = [m for m in found if m.found is not None]
    unresolved = [m for m in found if m.found is None]
    by_where = {
        (m.operator_id, m.subtask, m.slot, m.scope, m.local_name, m.relative_path, m.size): m for m in fixes
    }
    moved = {"handles": 0}
    named: set[str] = set()  # every absolute file the repaired _metadata names

    def rewrite(h, where):
        if type(h) is RelativeFileHandle:
            m = by_where.get((*where, h.relative_path, h.size))
            if m is not None:
                named.add(canonical(m.found))
                return FileHandle(m.found, h.size)
            return h
        if type(h) in (FileHandle, SegmentFileHandle):
            now = written_now(ck.rebase, h.path)
            named.add(canonical(now))
            if now != h.path:
                moved["handles"] += 1
                return h._replace(path=now)
        return h

    def rewrite_dir(d, where):
        now = written_now(ck.rebase, d) if d else d
        if now != d:
            moved["handles"] += 1
        return now

    repaired = map_file_handles(ck.metadata, rewrite, rewrite_dir)
    data = write_metadata(repaired)
    again = read_metadata(data, path="<repaired _metadata>")
    if again != repaired:  # the writer is the reader's inverse; never write what cannot be read back
        raise RepairError(
            "internal error: the repaired _metadata does not read back as written", path=ck.location.uri
        )
    return RepairPlan(
        ck.location.uri,
        fixes,
        unresolved,
        repaired,
        data,
        ck.rebase,
        moved["handles"],
        missing_files(storage, named),
    )


def missing_files(storage: Storage, uris: Iterable[str]) -> list[str]:
    """The URIs that do not exist, sorted (:meth:`Storage.stat_many`: listings on S3, not a HEAD each)."""
    return [u for u, info in storage.stat_many(sorted(uris)).items() if info is None]


@dataclass
class RepairResult:
    destination: str
    copied_files: int
    copied_bytes: int
    skipped_files: int
    backup: str | None
    metadata: str

    def to_json(self) -> dict[str, Any]:
        return {
            "destination": self.destination, "copied_files": self.copied_files, "copied_bytes": self.copied_bytes,
            "already_there": self.skipped_files, "backup": self.backup, "metadata": self.metadata,
        }  # fmt: skip


@dataclass
class RepairReport:
    """``repair``: the plan, the savepoint directories searched, and (unless a dry run) the result."""

    plan: RepairPlan
    searched: list[str]
    dry_run: bool
    result: RepairResult | None = None

    def to_json(self) -> dict[str, Any]:
        out = {**self.plan.to_json(), "searched": self.searched, "dry_run": self.dry_run}
        if self.result is not None:
            out["result"] = self.result.to_json()
        return out


def apply_repair(
    storage: Storage, ck: LoadedCheckpoint, plan: RepairPlan, dest: str | None, in_place: bool = False
) -> RepairResult:
    """Write the repair: a copy at ``dest`` (the checkpoint's own files, then ``_metadata`` last), or
    in place (the old ``_metadata`` kept as ``_metadata.pre-repair`` first)."""
    if not plan.fixes:
        raise RepairError("nothing to repair: no relative handle of this checkpoint needs a savepoint file",
                          path=ck.location.uri)  # fmt: skip
    if plan.unresolved:
        first = plan.unresolved[0]
        raise RepairError(
            f"{len(plan.unresolved)} missing relative files were found in no savepoint directory "
            f"(first: '{first.relative_path}', {first.size} bytes); pass the claimed savepoint's directory "
            "with --savepoints",
            path=ck.location.uri,
        )
    if plan.missing:
        raise RepairError(plan.missing_message(), path=ck.location.uri)
    src = ck.location.uri
    if in_place:
        backup = st.join(src, BACKUP_NAME)
        current = storage.read_bytes(ck.location.metadata_uri)
        if storage.stat(backup) is None:
            write_atomic(storage, backup, current)
        elif storage.read_bytes(backup) != current and current != plan.data:
            raise RepairError(f"{BACKUP_NAME} already exists and differs from the current _metadata; "
                              "move it away first", path=src)  # fmt: skip
        write_atomic(storage, ck.location.metadata_uri, plan.data)
        return RepairResult(src, 0, 0, 0, backup, ck.location.metadata_uri)
    if dest is None:
        raise RepairError("name the repaired copy's directory with -o DEST, or repair with --in-place")
    dest = st.normalize_uri(dest)
    if st.nest(dest, src):  # as written or through a symlink
        raise RepairError(
            f"the destination {dest} must be outside the checkpoint directory (and not hold it)"
        )
    dest_md = st.join(dest, METADATA_FILE)
    existing = storage.stat(dest_md)
    if existing is not None:
        if storage.read_bytes(dest_md) == plan.data:
            return RepairResult(dest, 0, 0, 0, None, dest_md)  # already repaired: nothing to do
        raise RepairError("holds a different _metadata; choose an empty destination", path=dest)
    copied = nbytes = skipped = 0
    for f in sorted(storage.list_files(src), key=lambda f: f.uri):
        rel = f.uri[len(src) + 1 :]
        if rel in (METADATA_FILE, BACKUP_NAME) or TMP_MARK in rel:
            continue
        target = st.join(dest, rel)
        there = storage.stat(target)
        if there is not None and there.size == f.size:
            skipped += 1  # a re-run after an interruption
            continue
        nbytes += copy_file(storage, f.uri, target, f.size)
        copied += 1
    write_atomic(storage, dest_md, plan.data)  # last: a _metadata never points at files not yet there
    return RepairResult(dest, copied, nbytes, skipped, None, dest_md)
