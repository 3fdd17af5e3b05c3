"""What a Paimon table's snapshots reach, and what Paimon's orphan clean-up would delete.

Every snapshot, tag and changelog of every branch (``OrphanFilesClean.safelyGetAllSnapshots``
over ``validBranches``), the files they reach (:func:`live_files`), the file names they use
(:func:`used_file_names`) and the files ``LocalOrphanFilesClean`` would delete
(:func:`orphan_candidates`). Functions over a :class:`~ckptctl.paimon.table.PaimonTable`, above it:
the table reads one branch, these walk them all.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from ckptctl.errors import CkptError
from ckptctl.paimon.records import LiveFiles, OrphanCandidate, Snapshot
from ckptctl.paimon.table import (
    BRANCH_PREFIX,
    CHANGELOG_PREFIX,
    EARLIEST,
    LATEST,
    MAIN_BRANCH,
    SNAPSHOT_PREFIX,
    TAG_PREFIX,
    PaimonTable,
)
from ckptctl.paimon.tablelayout import BUCKET_PREFIX
from ckptctl.storage import FileInfo, normalize_uri

MANAGED_BLOB_SUFFIX = ".managed.blob"  # ManagedBlobReferenceFile: OrphanFilesClean never deletes these
DAY_SECONDS = 86400.0


def all_snapshots(table: PaimonTable) -> Iterator[tuple[str, PaimonTable, Snapshot]]:
    """(source label, branch table, snapshot) of every snapshot, tag and changelog of every
    branch (``OrphanFilesClean.safelyGetAllSnapshots`` over ``validBranches``)."""
    for branch in _valid_branches(table):
        branch_table = table if branch == table.branch else table.with_branch(branch)
        prefix = "" if branch == MAIN_BRANCH else f"{BRANCH_PREFIX}{branch}/"
        for s in branch_table.snapshots():
            yield f"{prefix}{SNAPSHOT_PREFIX}{s.id}", branch_table, s
        for name, tag in branch_table.tags().items():
            yield f"{prefix}{TAG_PREFIX}{name}", branch_table, tag.snapshot
        for c in branch_table.changelogs():
            yield f"{prefix}{CHANGELOG_PREFIX}{c.id}", branch_table, c


def _valid_branches(table: PaimonTable) -> list[str]:
    base = table if table.branch == MAIN_BRANCH else table.with_branch(MAIN_BRANCH)
    branches = base.branches()
    broken = [b for b in branches if not table.with_branch(b).schemas()]
    if broken:
        raise CkptError(
            f"branches {', '.join(broken)} have no schema: Paimon aborts orphan cleaning; check them by hand",
            path=table.uri,
        )
    return [*branches, MAIN_BRANCH]


def live_files(table: PaimonTable) -> LiveFiles:
    """Every file any snapshot, tag or changelog of any branch reaches (see :class:`LiveFiles`)."""
    live = LiveFiles()

    def add(where: dict[str, set[str]], path: str, source: str) -> None:
        where.setdefault(path, set()).add(source)

    for source, branch_table, s in all_snapshots(table):
        for lst in (s.base_manifest_list, s.delta_manifest_list, s.changelog_manifest_list):
            if lst:
                add(live.meta, f"manifest/{lst}", source)
                for m in branch_table.manifests.manifests_of(lst):
                    add(live.meta, f"manifest/{m.file_name}", source)
        for f in branch_table.manifests.data_files(s):
            add(live.data, f.path, source)
            for extra in f.extra_files:
                add(live.data, extra, source)
        for f in branch_table.manifests.changelog_files(s):
            add(live.changelog, f.path, source)
            for extra in f.extra_files:
                add(live.changelog, extra, source)
        if s.index_manifest:
            files = branch_table.manifests.index_files(s)
            if files or table.storage.stat(table.table_file(f"manifest/{s.index_manifest}")) is not None:
                add(live.meta, f"manifest/{s.index_manifest}", source)
            for f in files:
                add(live.index, f.path, source)
        if s.statistics:
            add(live.meta, f"statistics/{s.statistics}", source)
    return live


def used_file_names(table: PaimonTable) -> set[str]:
    """File names ``OrphanFilesClean.getUsedFiles`` collects: manifest lists, manifests, the
    file name and extra files of every manifest entry (ADD or DELETE), the index manifest and
    its files, the statistics file, over every snapshot, tag and changelog of every branch."""
    used: set[str] = set()
    for _source, branch_table, s in all_snapshots(table):
        for lst in (s.changelog_manifest_list, s.delta_manifest_list, s.base_manifest_list):
            if not lst:
                continue
            used.add(lst)
            for m in branch_table.manifests.manifests_of(lst):
                used.add(m.file_name)
                for e in branch_table.manifests.manifest(m.file_name):
                    used.add(e.file.file_name)
                    used.update(x.rpartition("/")[2] for x in e.file.extra_files)
        if (
            s.index_manifest
            and table.storage.stat(table.table_file(f"manifest/{s.index_manifest}")) is not None
        ):
            used.add(s.index_manifest)
            used.update(f.file_name for f in branch_table.manifests.index_manifest(s.index_manifest))
        if s.statistics:
            used.add(s.statistics)
    return used


def orphan_candidates(table: PaimonTable, older_than: float | None = None) -> list[OrphanCandidate]:
    """The files ``LocalOrphanFilesClean`` would delete, by its rules:

    - in ``snapshot/`` and ``changelog/`` of every branch: files that are not ``snapshot-*``
      (``changelog-*``), ``EARLIEST`` or ``LATEST``;
    - files directly in ``manifest/``, ``index/``, ``statistics/`` and in the bucket
      directories (``<k1=v1>/…/bucket-*`` to the depth of the partition keys, below
      ``data-file.path-directory`` and each of ``data-file.external-paths``) whose *name* no
      snapshot, tag or changelog of any branch uses (:func:`used_file_names`);
    - never ``schema/``, ``tag/``, ``branch/``, ``consumer/`` or any other directory, nor a
      ``*.managed.blob`` file; only files whose mtime is before ``older_than``.

    ``older_than``: seconds since the epoch; ``None`` is Paimon's default, the storage's now
    less one day. It must be in the past (Paimon refuses otherwise: files being written are
    referenced by no snapshot yet). A file without an mtime is never a candidate.
    """
    if older_than is None:
        now, _source = table.storage.now(table.uri)
        older_than = (now if now is not None else time.time()) - DAY_SECONDS

    def old(f: FileInfo) -> bool:
        return f.mtime is not None and f.mtime < older_than

    out: list[OrphanCandidate] = []
    for branch in _valid_branches(table):
        branch_table = table if branch == table.branch else table.with_branch(branch)
        for subdir, prefix in (("snapshot", SNAPSHOT_PREFIX), ("changelog", CHANGELOG_PREFIX)):
            for f in branch_table.files_in(subdir):
                name = f.uri.rpartition("/")[2]
                if not name.startswith(prefix) and name not in (EARLIEST, LATEST) and old(f):
                    out.append(
                        OrphanCandidate(
                            table.relative(f.uri), f.uri, f.size, f.mtime, f"not-a-{subdir}", subdir
                        )
                    )
    candidates = [
        (area, f) for area, f in _candidate_files(table) if old(f) and not f.uri.endswith(MANAGED_BLOB_SUFFIX)
    ]
    if candidates:
        used = used_file_names(table)
        for area, f in candidates:
            if f.uri.rpartition("/")[2] not in used:
                out.append(
                    OrphanCandidate(table.relative(f.uri), f.uri, f.size, f.mtime, "unreferenced", area)
                )
    return sorted(out, key=lambda c: c.path)


def latest_commits(table: PaimonTable) -> list[tuple[str, FileInfo, Snapshot | None]]:
    """(branch, its newest ``snapshot-N`` file as the listing shows it, that snapshot) for each
    branch that has one: the table's latest commits. The file's time is the storage's, the
    snapshot's ``timeMillis`` the committer's; a copy of the table (or a branch created from a
    snapshot) gives the file a time of its own. The snapshot is ``None`` when it vanished since."""
    out = []
    for branch in _valid_branches(table):
        branch_table = table if branch == table.branch else table.with_branch(branch)
        numbered = []
        for f in branch_table.files_in("snapshot"):
            name = f.uri.rpartition("/")[2]
            if name.startswith(SNAPSHOT_PREFIX) and name[len(SNAPSHOT_PREFIX) :].isdigit():
                numbered.append((int(name[len(SNAPSHOT_PREFIX) :]), f))
        if numbered:
            n, f = max(numbered)
            out.append((branch, f, branch_table.snapshot(n)))
    return out


def listed_files(table: PaimonTable) -> list[FileInfo]:
    """The files in the directories Paimon's orphan clean-up lists (manifest/, index/,
    statistics/ and the bucket directories), whatever names them."""
    return [f for _area, f in _candidate_files(table)]


def _candidate_files(table: PaimonTable) -> Iterator[tuple[str, FileInfo]]:
    """(area, file) of ``OrphanFilesClean.listPaimonFileDirs``: manifest/, index/, statistics/
    (area: the directory's name) and the bucket directories (``data``; partition directories
    are those whose name contains ``=``)."""
    layout = table.layout()
    roots = [layout.data_root] + [normalize_uri(p.strip()) for p in layout.external_paths if p.strip()]
    in_table = {"manifest", "index", "statistics"}
    listed: list[tuple[str, list[FileInfo]]] = [(table.uri, list(table.storage.list_files(table.uri)))]
    for root in roots:
        if root != table.uri and not root.startswith(table.uri + "/"):
            listed.append((root, list(table.storage.list_files(root))))
    for top, files in listed:
        for f in files:
            rest = f.uri[len(top) + 1 :].split("/")
            if top == table.uri and len(rest) == 2 and rest[0] in in_table:
                yield rest[0], f
                continue
            for root in roots:
                if f.uri.startswith(root + "/"):
                    parts = f.uri[len(root) + 1 :].split("/")
                    depth = layout.partition_depth
                    if (
                        len(parts) == depth + 2
                        and all("=" in p for p in parts[:depth])
                        and parts[depth].startswith(BUCKET_PREFIX)
                    ):
                        yield "data", f
                    break
