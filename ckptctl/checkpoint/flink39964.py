"""FLINK-39964: checkpoints Flink itself writes unrestorable, diagnosed (one module for repair,
verify, check, relocate and the views).

After a CLAIM-mode restore from a NATIVE savepoint, the new job's incremental checkpoints reuse the
savepoint's SST files. The savepoint wrote them as ``RelativeFileStateHandle``\\ s (relative to the
savepoint directory) and the new checkpoint's ``_metadata`` keeps only the relative name, so on
restore Flink looks for them in the new ``chk-N/``, where they never were, and the restore fails
in a loop (``FileNotFoundException: …/chk-N/<uuid>``).

The signature is exact: a checkpoint (not a savepoint) whose incremental handle lists a *shared*
file as a relative handle (Flink's checkpoints write shared files as absolute ``FileStateHandle``\\ s
in ``<job>/shared``). :func:`diagnose` finds, for each such handle whose file is missing, the file
with the same name and recorded size in a savepoint directory (under the scanned roots or a
``--savepoints`` directory); :func:`explain_missing` turns verify's "file not found" problems into
that story, and :func:`repairable` sums it up per checkpoint. The repair itself (rewriting those
handles) is :mod:`ckptctl.repair`. Pure core: data in, data out, no CLI.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ckptctl import storage as st
from ckptctl.checkpoint.layout import METADATA_FILE, SAVEPOINT_RE
from ckptctl.checkpoint.loading import LoadedCheckpoint
from ckptctl.checkpoint.refs import Ref, relative_uri
from ckptctl.errors import CkptError
from ckptctl.metadata.handles import RelativeFileHandle
from ckptctl.metadata.transform import Where
from ckptctl.metadata.walk import file_groups
from ckptctl.storage import FileInfo, Storage
from ckptctl.storage.copying import TMP_MARK

ISSUE = "FLINK-39964"
BACKUP_NAME = "_metadata.pre-repair"  # what ``ckptctl repair --in-place`` keeps: never a savepoint file


def repair_command(checkpoint: str) -> str:
    """The command that repairs a checkpoint (:mod:`ckptctl.repair`)."""
    return f"ckptctl repair {checkpoint} -o DEST"


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
        self.add_file(f.uri, f.size)

    def add_file(self, uri: str, size: int) -> None:
        name = st.basename(uri)
        if name in (METADATA_FILE, BACKUP_NAME) or TMP_MARK in name:
            return
        self.by_key.setdefault((name, size), []).append(uri)

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
            f"fix: {repair_command(checkpoint_display or self.checkpoint)}"
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
    inherited = [(where, h, relative_uri(base, h.relative_path)) for where, h in relative_handles(ck)
                 if inherited_relative(ck, where, h)]  # fmt: skip
    if exists is None:  # one listing per directory on S3, not a HEAD per file
        exists = {u for u, info in storage.stat_many(u for *_, u in inherited).items() if info is not None}
    for where, h, uri in inherited:
        if uri in exists:
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


def misanchored_uris(ck: LoadedCheckpoint) -> set[str]:
    """Where Flink will look for the files of ``ck``'s FLINK-39964 handles (inside its own directory)."""
    base = ck.location.uri
    return {
        relative_uri(base, h.relative_path)
        for where, h in relative_handles(ck)
        if inherited_relative(ck, where, h)
    }


def split_inherited(ck: LoadedCheckpoint, rows: list[Ref]) -> tuple[list[Ref], list[Ref]]:
    """(the checkpoint's own rows, rows of files reused from a CLAIM-restored NATIVE savepoint).

    The signature on reference rows: a checkpoint (not a savepoint) naming a *shared* file by a
    relative handle reuses the savepoint's file; the path Flink resolves (``chk-N/<name>``) is not
    a file of this checkpoint, and the checkpoint uploaded nothing for it.
    """
    if ck.kind != "checkpoint":
        return rows, []
    own, inherited = [], []
    relative = RelativeFileHandle.flink_class
    for r in rows:
        (inherited if is_inherited(ck.kind, r.scope, r.handle_type == relative) else own).append(r)
    return own, inherited


def is_inherited(kind: str, scope: str, relative: bool) -> bool:
    """A reference of a checkpoint of ``kind`` to a file it reused from a CLAIM-restored NATIVE
    savepoint: a checkpoint's *shared* file named by a relative handle (:func:`split_inherited`)."""
    return relative and scope == "shared" and kind == "checkpoint"


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
    suspects = [ck for ck in checkpoints if not misanchored_uris(ck).isdisjoint(missing)]
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
            p["repair"] = repair_command(m.checkpoint)
    return out


def repairable(misanchored: list[Any]) -> list[dict[str, Any]]:
    """Per checkpoint: how many FLINK-39964 handles, whether all were found, the command that fixes it."""
    by_ck: dict[str, dict[str, Any]] = {}
    for m in misanchored:
        e = by_ck.setdefault(
            m.checkpoint,
            {
                "checkpoint": m.checkpoint,
                "handles": 0,
                "found": 0,
                "savepoint_dirs": set(),
                "repair": repair_command(m.checkpoint),
            },
        )
        e["handles"] += 1
        if m.found is not None:
            e["found"] += 1
            e["savepoint_dirs"].add(m.savepoint_dir)
    return [{**e, "savepoint_dirs": sorted(e["savepoint_dirs"])} for e in by_ck.values()]
