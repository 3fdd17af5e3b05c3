"""Checkpoints Flink itself wrote unrestorable (FLINK-39964), found and repaired.

After a CLAIM-mode restore from a NATIVE savepoint, the new job's incremental checkpoints reuse the
savepoint's SST files. The savepoint wrote them as ``RelativeFileStateHandle``\\ s (relative to the
savepoint directory) and the new checkpoint's ``_metadata`` keeps only the relative name, so on
restore Flink looks for them in the new ``chk-N/``, where they never were, and the restore fails
in a loop (``FileNotFoundException: …/chk-N/<uuid>``).

The signature is exact: a checkpoint (not a savepoint) whose incremental handle lists a *shared*
file as a relative handle (Flink's checkpoints write shared files as absolute ``FileStateHandle``\\ s
in ``<job>/shared``). :func:`diagnose` finds, for each such handle whose file is missing, the file
with the same name and recorded size in a savepoint directory (under the scanned roots or a
``--savepoints`` directory); :func:`plan_repair` rewrites exactly those handles into absolute
``FileHandle``\\ s to the savepoint's file, nothing else, and :func:`apply_repair` writes the repaired
copy (its own files, then the new ``_metadata`` last) or repairs in place keeping a backup.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ckptctl import storage as st
from ckptctl.copying import TMP_MARK, copy_file, write_atomic
from ckptctl.errors import CkptError
from ckptctl.layout import METADATA_FILE, SAVEPOINT_RE
from ckptctl.metadata import read_metadata, write_metadata
from ckptctl.metadata.model import (
    CheckpointMetadata,
    FileHandle,
    RelativeFileHandle,
    SegmentFileHandle,
    file_groups,
)
from ckptctl.metadata.transform import Where, map_file_handles
from ckptctl.rebase import Rebase
from ckptctl.refs import LoadedCheckpoint, canonical, relative_uri
from ckptctl.storage import FileInfo, Storage

BACKUP_NAME = "_metadata.pre-repair"
ISSUE = "FLINK-39964"


class RepairError(CkptError):
    """The repair cannot be done as asked (nothing to fix, a file not found, a wrong destination)."""


def inherited_relative(ck: LoadedCheckpoint, where: Where, handle: Any) -> bool:
    """True for the FLINK-39964 signature: a shared file of a checkpoint recorded as a relative handle."""
    return type(handle) is RelativeFileHandle and where.scope == "shared" and ck.kind == "checkpoint"


def savepoint_dir_of(uri: str) -> str | None:
    """The innermost ``savepoint-<6 hex>-<12 alnum>`` directory holding ``uri``, if any."""
    parts = uri.split("/")
    for i in range(len(parts) - 2, 0, -1):
        if SAVEPOINT_RE.match(parts[i]):
            return "/".join(parts[: i + 1])
    return None


@dataclass
class SavepointFiles:
    """Files of savepoint directories, by (name, size): where a relative name may really be."""

    by_key: dict[tuple[str, int], list[str]] = field(default_factory=dict)
    searched: list[str] = field(default_factory=list)

    def add(self, f: FileInfo) -> None:
        name = st.basename(f.uri)
        if name in (METADATA_FILE, BACKUP_NAME) or TMP_MARK in name:
            return
        self.by_key.setdefault((name, f.size), []).append(f.uri)

    def add_listing(self, files: Iterable[FileInfo], only_savepoint_dirs: bool = True) -> None:
        for f in files:
            if not only_savepoint_dirs or savepoint_dir_of(f.uri) is not None:
                self.add(f)

    def add_dir(self, storage: Storage, uri: str) -> None:
        """Every file below ``uri`` (a ``--savepoints`` directory: any savepoint layout)."""
        uri = st.normalize_uri(uri)
        self.searched.append(uri)
        self.add_listing(storage.list_files(uri), only_savepoint_dirs=False)

    def add_root(self, storage: Storage, uri: str, files: Iterable[FileInfo] | None = None) -> None:
        """The savepoint directories below a scanned root (with or without their ``_metadata``)."""
        uri = st.normalize_uri(uri)
        self.searched.append(uri)
        self.add_listing(files if files is not None else storage.list_files(uri))

    def lookup(self, relative_path: str, size: int) -> list[str]:
        name = relative_path.replace("\\", "/").rstrip("/").rpartition("/")[2]
        found = self.by_key.get((name, size), [])
        if "/" in relative_path.strip("/"):
            found = [u for u in found if u.endswith("/" + relative_path.strip("/"))]
        return sorted(found)


@dataclass(frozen=True)
class Misanchored:
    """One relative handle whose file is not where Flink will look for it."""

    checkpoint: str
    operator_id: str
    subtask: int | None
    slot: str
    scope: str
    local_name: str | None
    relative_path: str
    size: int
    looked_for: str  # where Flink resolves it (the checkpoint's own directory)
    found: str | None  # the savepoint file with that name and size
    alternatives: tuple[str, ...] = ()
    signature: bool = True  # the FLINK-39964 signature (a shared file of a checkpoint)

    @property
    def savepoint_dir(self) -> str | None:
        return savepoint_dir_of(self.found) if self.found else None

    def message(self, checkpoint_display: str | None = None) -> str:
        """One problem line: what happened (briefly), where the file really is, the fix."""
        story = f"{ISSUE}: reused from a CLAIM-restored NATIVE savepoint, recorded by relative name only"
        if self.found is None and self.alternatives:
            return (
                f"file not found ({story}); {len(self.alternatives)} savepoint files named '{self.relative_path}' "
                f"with {self.size} bytes differ in content ({', '.join(self.alternatives[:3])}): pass the claimed "
                "savepoint's directory with --savepoints"
            )
        if self.found is None:
            return (
                f"file not found ({story}); no savepoint directory searched holds '{self.relative_path}' "
                f"with {self.size} bytes: pass the claimed savepoint's directory with --savepoints"
            )
        return (
            f"file not found ({story}); the file is {self.found}; "
            f"fix: ckptctl repair {checkpoint_display or self.checkpoint} -o DEST"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "checkpoint": self.checkpoint, "operator_id": self.operator_id, "subtask": self.subtask,
            "slot": self.slot, "scope": self.scope, "local_name": self.local_name,
            "relative_path": self.relative_path, "size": self.size, "looked_for": self.looked_for,
            "found": self.found, "savepoint_dir": self.savepoint_dir, "alternatives": list(self.alternatives),
        }  # fmt: skip


def relative_handles(ck: LoadedCheckpoint) -> list[tuple[Where, RelativeFileHandle]]:
    """Every relative handle of a checkpoint, with where it sits."""
    return [
        (Where(op.operator_id, subtask, slot, scope, name), h)
        for op, subtask, slot, scope, _kgr, items in file_groups(ck.metadata)
        for name, h in items
        if type(h) is RelativeFileHandle
    ]


def diagnose(
    storage: Storage,
    ck: LoadedCheckpoint,
    savepoints: SavepointFiles,
    exists: set[str] | None = None,
) -> list[Misanchored]:
    """Relative handles of ``ck`` whose file is missing, each with the savepoint file it really is.

    Only handles with the FLINK-39964 signature are matched against savepoint files (a missing
    private file of a checkpoint is plain damage, not this bug). ``exists``: URIs known to
    exist (a listing), else each file is looked up.
    """
    base = ck.location.uri
    out = []
    for where, h in relative_handles(ck):
        if not inherited_relative(ck, where, h):
            continue
        uri = relative_uri(base, h.relative_path)
        present = (uri in exists) if exists is not None else storage.stat(uri) is not None
        if present:
            continue
        found = [u for u in savepoints.lookup(h.relative_path, h.size) if not st.is_under(u, base)]
        if len(found) > 1 and not _same_bytes(storage, found):
            # several savepoint files with that name and size, not all the same: never guess
            out.append(Misanchored(
                base, where.operator_id, where.subtask, where.slot, where.scope, where.local_name,
                h.relative_path, h.size, uri, None, tuple(found),
            ))  # fmt: skip
            continue
        out.append(
            Misanchored(
                base, where.operator_id, where.subtask, where.slot, where.scope, where.local_name,
                h.relative_path, h.size, uri, found[0] if found else None, tuple(found[1:]),
            )
        )  # fmt: skip
    return out


def _same_bytes(storage: Storage, uris: list[str]) -> bool:
    """Whether every file has the same content (copies of one savepoint file are fine to pick from)."""
    import hashlib

    digests = set()
    for u in uris:
        try:
            digests.add(hashlib.sha256(storage.read_bytes(u)).hexdigest())
        except CkptError:
            return False
    return len(digests) == 1


def savepoint_files_for(
    storage: Storage,
    roots: Iterable[str],
    savepoint_dirs: Iterable[str],
    listings: dict[str, list] | None = None,
) -> SavepointFiles:
    index = SavepointFiles()
    for root in dict.fromkeys(roots):
        try:
            index.add_root(storage, root, (listings or {}).get(root))
        except CkptError:
            continue  # a directory above the root we may not list: the diagnosis says what to pass
    for d in dict.fromkeys(savepoint_dirs):
        index.add_dir(storage, d)
    return index


def search_roots_for(ck: LoadedCheckpoint) -> list[str]:
    """Where a single checkpoint's claimed savepoint is looked for without ``--savepoints``: the
    checkpoint root (``<root>/<job>/chk-N``) and the directory above it (``state.savepoints.dir``
    is often a sibling of ``state.checkpoints.dir``)."""
    loc = ck.location
    if loc.kind != "checkpoint":
        return [st.parent(loc.uri)]
    root = st.parent(st.parent(loc.uri))
    above = st.parent(root)
    return [root] if above in ("file:/", "s3:/", "s3://") else [above]


# ---------------------------------------------------------------------------------------------
# the repair


@dataclass
class RepairPlan:
    checkpoint: str
    fixes: list[Misanchored]
    unresolved: list[Misanchored]
    original: CheckpointMetadata
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
        ck.location.uri, fixes, unresolved, ck.metadata, repaired, data, ck.rebase, moved["handles"],
        missing_files(storage, named),
    )


def missing_files(storage: Storage, uris: Iterable[str], workers: int = 16) -> list[str]:
    """The URIs that do not exist (stat in a small thread pool: a checkpoint names hundreds)."""
    from concurrent.futures import ThreadPoolExecutor

    ordered = sorted(uris)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        present = list(pool.map(storage.stat, ordered))
    return [u for u, info in zip(ordered, present, strict=True) if info is None]


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
    if st.is_under(dest, src) or st.is_under(src, dest):
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


# ---------------------------------------------------------------------------------------------
# diagnosis inside verify / check


def explain_missing(
    storage: Storage,
    checkpoints: Iterable[LoadedCheckpoint],
    problems: list[dict[str, Any]],
    roots: Iterable[str] = (),
    savepoint_dirs: Iterable[str] = (),
    listings: dict[str, list[FileInfo]] | None = None,
) -> list[Misanchored]:
    """Turn "file not found" problems of FLINK-39964 handles into what really happened.

    Each ``exists`` problem whose path is a misanchored relative handle gets the savepoint file it
    really is (``found``), the story and the fix in ``detail``, and ``repair``: the command that
    fixes it. Savepoint directories are listed only when there is such a problem. Returns every
    misanchored handle (found or not).
    """
    missing = {p["path"] for p in problems if p.get("check") == "exists" and "detail" in p}
    if not missing:
        return []
    suspects: list[LoadedCheckpoint] = []
    for ck in checkpoints:
        base = ck.location.uri
        for where, h in relative_handles(ck):
            if inherited_relative(ck, where, h) and relative_uri(base, h.relative_path) in missing:
                suspects.append(ck)
                break
    if not suspects:
        return []
    search = list(dict.fromkeys([*roots, *(r for ck in suspects for r in search_roots_for(ck))]))
    index = savepoint_files_for(storage, search, savepoint_dirs, listings)
    found: dict[str, Misanchored] = {}
    out: list[Misanchored] = []
    for ck in suspects:
        for m in diagnose(storage, ck, index, exists=None):
            out.append(m)
            found.setdefault(m.looked_for, m)
    for p in problems:
        m = found.get(p["path"]) if p.get("check") == "exists" else None
        if m is None:
            continue
        p["detail"] = m.message()
        p["issue"] = ISSUE
        p["found"] = m.found
        p["savepoint_dir"] = m.savepoint_dir
        if m.found is not None:
            p["repair"] = f"ckptctl repair {m.checkpoint} -o DEST"
    return out
