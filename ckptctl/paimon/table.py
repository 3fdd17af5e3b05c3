"""Read an Apache Paimon table directory (local or S3) through ckptctl's :class:`Storage`.

What Paimon keeps in a table directory, and what this module reads of it:

- ``snapshot/snapshot-N`` (JSON, ``Snapshot.java``) and the ``EARLIEST`` / ``LATEST`` hints, which
  are reported but never trusted over the listing of ``snapshot/``;
- ``tag/tag-<name>`` (a snapshot JSON plus tag fields; ``savepoint-<id>`` tags come from Flink
  savepoints), ``changelog/changelog-N`` (long-lived changelogs, snapshot-shaped), ``schema/schema-N``;
- branches: ``branch/branch-<name>/{snapshot,tag,changelog,schema}``; they share the table's
  ``manifest/``, ``index/``, ``statistics/`` and data directories;
- ``manifest/manifest-list-*`` (``ManifestFileMeta`` records) → ``manifest/manifest-*``
  (``ManifestEntry``: kind ADD/DELETE, partition BinaryRow, bucket, ``DataFileMeta``) →
  data files ``<partition dirs>/bucket-<b>/<file>`` (plus extra files beside them, or an external
  path); ``manifest/index-manifest-*`` → ``index/<file>``; ``statistics/<file>``.

Manifests are Avro (fastavro, Paimon's default ``manifest.format``), or Parquet / ORC (PyArrow),
told apart by their magic bytes. fastavro and PyArrow are imported when a manifest is first read.

:meth:`PaimonTable.latest_snapshot_of_user` follows ``SnapshotManager.latestSnapshotOfUser`` (what
``FileStoreCommitImpl.filterCommitted`` uses on a Flink restore) and
:meth:`PaimonTable.orphan_candidates` follows ``LocalOrphanFilesClean`` (which directories it
lists, that used files are matched by file name, what it never deletes). Every problem with the
input is a one-line :class:`~ckptctl.errors.CkptError` naming the file.
"""

from __future__ import annotations

import io
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from ckptctl.errors import CkptError, StorageError
from ckptctl.storage import FileInfo, Storage, normalize_uri

# Bounded reads: a snapshot, tag, hint or schema file larger than this is not a Paimon file.
JSON_LIMIT = 16 * 1024 * 1024
# Manifests and manifest lists roll at manifest.target-file-size (8 MiB by default).
MANIFEST_LIMIT = 512 * 1024 * 1024

SNAPSHOT_PREFIX = "snapshot-"
CHANGELOG_PREFIX = "changelog-"
TAG_PREFIX = "tag-"
SCHEMA_PREFIX = "schema-"
BRANCH_PREFIX = "branch-"
EARLIEST = "EARLIEST"
LATEST = "LATEST"
MAIN_BRANCH = "main"
BUCKET_PREFIX = "bucket-"
POSTPONE_BUCKET = -2  # BucketMode.POSTPONE_BUCKET: files under bucket-postpone
MANAGED_BLOB_SUFFIX = ".managed.blob"  # ManagedBlobReferenceFile: OrphanFilesClean never deletes these
ADD, DELETE = 0, 1  # FileKind
DAY_SECONDS = 86400.0


class PaimonFormatError(CkptError):
    """A Paimon file (snapshot, tag, schema, manifest) that cannot be decoded: names the file and,
    where it applies, the byte offset."""

    def __init__(self, message: str, *, path: str | None, offset: int | None = None) -> None:
        super().__init__(message, path=path)
        self.offset = offset

    def __str__(self) -> str:
        where = self.path or "<paimon>"
        if self.offset is None:
            return f"{where}: {self.message}"
        return f"{where}: byte {self.offset}: {self.message}"


class UnsupportedPartitionType(PaimonFormatError):
    """A partition key of a type whose directory name ckptctl does not compute (timestamps,
    floats, long decimals, ...). Data files then get a placeholder partition directory; orphan
    candidates, which Paimon matches by file name, are not affected."""


# -- records ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    """One ``snapshot-N``, ``changelog-N`` or tag file (``Snapshot.java`` fields; ``raw`` has them all)."""

    id: int
    schema_id: int
    base_manifest_list: str
    delta_manifest_list: str | None
    changelog_manifest_list: str | None
    index_manifest: str | None
    commit_user: str
    commit_identifier: int
    commit_kind: str
    time_millis: int
    watermark: int | None
    total_record_count: int | None
    delta_record_count: int | None
    changelog_record_count: int | None
    statistics: str | None
    uri: str = field(compare=False)
    raw: dict[str, Any] = field(compare=False, repr=False, hash=False)


@dataclass(frozen=True)
class Tag:
    name: str
    snapshot: Snapshot
    savepoint_id: int | None  # the Flink checkpoint id of a ``savepoint-<id>`` tag
    create_time: Any = None
    time_retained: Any = None


@dataclass(frozen=True)
class ManifestFileMeta:
    """One record of a manifest list: a manifest file."""

    file_name: str
    file_size: int
    num_added_files: int
    num_deleted_files: int
    schema_id: int


@dataclass(frozen=True)
class DataFile:
    """A data file as a manifest entry names it.

    ``path``: relative to the table directory (``dt=1/bucket-0/data-….parquet``), or a full URI
    for a file at an external path. ``extra_files``: the same for its extra files (file indexes).
    ``partition``: the BinaryRow bytes as the manifest holds them.
    """

    path: str
    file_name: str
    partition: bytes
    partition_path: str
    bucket: int
    level: int
    file_size: int
    row_count: int
    schema_id: int
    extra_files: tuple[str, ...] = ()
    external_path: str | None = None


@dataclass(frozen=True)
class ManifestEntry:
    kind: int  # ADD = 0, DELETE = 1
    file: DataFile

    def identifier(self) -> tuple:
        """``FileEntry.Identifier``: what a DELETE entry must match to cancel an ADD."""
        f = self.file
        return (f.partition, f.bucket, f.level, f.file_name, f.extra_files, f.external_path)


@dataclass(frozen=True)
class IndexFile:
    path: str  # relative to the table directory, or a full URI (external path)
    file_name: str
    index_type: str
    partition: bytes
    bucket: int
    file_size: int
    row_count: int
    kind: int = ADD


@dataclass
class LiveFiles:
    """Every file reachable from the snapshots, tags and changelogs of every branch.

    Each map goes from a path (relative to the table, or a full URI for an external path) to the
    sources that reach it (``snapshot-5``, ``tag-t1``, ``changelog-3``, ``branch-b/snapshot-2``).
    ``data``: data files of the folded ADD/DELETE entries (and their extra files); ``changelog``:
    changelog data files; ``meta``: manifest lists, manifests, index manifests, statistics;
    ``index``: index files.
    """

    data: dict[str, set[str]] = field(default_factory=dict)
    changelog: dict[str, set[str]] = field(default_factory=dict)
    meta: dict[str, set[str]] = field(default_factory=dict)
    index: dict[str, set[str]] = field(default_factory=dict)

    def all_paths(self) -> set[str]:
        return set(self.data) | set(self.changelog) | set(self.meta) | set(self.index)


@dataclass(frozen=True)
class OrphanCandidate:
    """A file ``OrphanFilesClean`` would delete: ``path`` relative to the table (or a full URI),
    ``reason`` one of ``unreferenced`` (in manifest/, index/, statistics/ or a bucket directory,
    named by no snapshot, tag or changelog of any branch), ``not-a-snapshot`` / ``not-a-changelog``
    (a stray file in ``snapshot/`` or ``changelog/``)."""

    path: str
    uri: str
    size: int
    mtime: float | None
    reason: str
    # where it lies: ``data`` (a bucket directory: data and changelog files), ``index``, ``manifest``,
    # ``statistics``, ``snapshot`` or ``changelog`` (a stray there); only data and index files are
    # what a writer's commit message names
    area: str = ""


# -- the table ---------------------------------------------------------------------------------


class PaimonTable:
    """A Paimon table directory. ``location``: a local path, ``file:`` or ``s3://`` URI."""

    def __init__(self, location: str, storage: Storage | None = None, branch: str = MAIN_BRANCH) -> None:
        self.uri = normalize_uri(location)
        self.storage = storage or Storage()
        self.branch = branch
        self._schemas: dict[int, dict[str, Any]] | None = None
        self._manifest_cache: dict[str, list[ManifestEntry]] = {}
        self._list_cache: dict[str, list[ManifestFileMeta]] = {}
        self._snapshot_cache: dict[int, Snapshot | None] = {}
        self._layout_cache: _Layout | None = None

    # -- paths
    @property
    def branch_uri(self) -> str:
        """Where this branch keeps its snapshots, tags, changelogs and schemas."""
        if self.branch == MAIN_BRANCH:
            return self.uri
        return f"{self.uri}/branch/{BRANCH_PREFIX}{self.branch}"

    def relative(self, uri: str) -> str:
        prefix = self.uri + "/"
        return uri[len(prefix) :] if uri.startswith(prefix) else uri

    def _file(self, rel: str) -> str:
        return f"{self.uri}/{rel}"

    def file_path(self, partition: bytes, bucket: int, name: str, index: bool = False,
                  external: str | None = None) -> str:  # fmt: skip
        """Where a commit message's file lives, relative to the table (a full URI at an external
        path): ``index/<name>`` for an index file, else ``<partition>/bucket-N/<name>``, the
        directory a manifest entry of the same partition and bucket names."""
        if external:
            return normalize_uri(external)
        if index:
            return f"index/{name}"
        try:
            return f"{self._layout().bucket_dir(partition, bucket, self.uri)[1]}/{name}"
        except PaimonFormatError:  # a partition row that does not fit the schema: the bucket alone
            return f"<partition 0x{partition.hex()}>/{BUCKET_PREFIX}{bucket}/{name}"

    def with_branch(self, branch: str) -> PaimonTable:
        other = PaimonTable(self.uri, self.storage, branch)
        return other

    # -- reading
    def _read(self, uri: str, limit: int, what: str) -> bytes:
        found = self.storage.stat(uri)
        if found is None:
            raise StorageError("file not found", path=uri)
        if found.size > limit:
            raise PaimonFormatError(
                f"{found.size:,} bytes, more than the {limit:,} a Paimon {what} may have: not read", path=uri
            )
        return self.storage.read_bytes(uri, limit=limit)

    def _json(self, uri: str, what: str) -> dict[str, Any]:
        data = self._read(uri, JSON_LIMIT, what)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise PaimonFormatError(
                f"not a Paimon {what}: not UTF-8 text", path=uri, offset=e.start
            ) from None
        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            raise PaimonFormatError(
                f"not a Paimon {what}: invalid JSON: {e.msg}", path=uri, offset=e.pos
            ) from None
        if not isinstance(value, dict):
            raise PaimonFormatError(
                f"not a Paimon {what}: a JSON {type(value).__name__}, not an object", path=uri
            )
        return value

    def _names(self, subdir: str) -> list[FileInfo]:
        """Files directly in ``<branch>/<subdir>`` (its subdirectories are not Paimon's)."""
        base = f"{self.branch_uri}/{subdir}"
        return [f for f in self.storage.list_files(base) if "/" not in f.uri[len(base) + 1 :]]

    def _numbered(self, subdir: str, prefix: str) -> list[int]:
        ids = []
        for f in self._names(subdir):
            name = f.uri.rpartition("/")[2]
            if name.startswith(prefix) and name[len(prefix) :].isdigit():
                ids.append(int(name[len(prefix) :]))
        return sorted(ids)

    # -- schemas
    def schemas(self) -> dict[int, dict[str, Any]]:
        """Every ``schema/schema-N`` of this branch, by id."""
        if self._schemas is None:
            self._schemas = {
                i: self._json(f"{self.branch_uri}/schema/{SCHEMA_PREFIX}{i}", "schema")
                for i in self._numbered("schema", SCHEMA_PREFIX)
            }
        return self._schemas

    def latest_schema(self) -> dict[str, Any]:
        schemas = self.schemas()
        if not schemas:
            if not self.storage.is_dir(self.uri):  # a mistyped --table is no table at all
                raise CkptError("no such directory", path=self.uri)
            raise CkptError("no schema/schema-N: not a Paimon table directory", path=self.branch_uri)
        return schemas[max(schemas)]

    def options(self) -> dict[str, str]:
        return dict(self.latest_schema().get("options") or {})

    # -- snapshots
    def snapshot_ids(self) -> list[int]:
        """Ids of the ``snapshot-N`` files the listing of ``snapshot/`` shows, ascending."""
        return self._numbered("snapshot", SNAPSHOT_PREFIX)

    def hints(self) -> dict[str, int | None]:
        """The ``EARLIEST`` and ``LATEST`` hint files (``None``: missing or not a number). Hints
        only: Paimon writes them after the snapshot, and expiration moves them late."""
        out: dict[str, int | None] = {}
        for name in (EARLIEST, LATEST):
            uri = f"{self.branch_uri}/snapshot/{name}"
            try:
                text = self._read(uri, 1024, "hint file").decode("utf-8", "replace").strip()
            except (StorageError, PaimonFormatError):
                out[name] = None
                continue
            out[name] = int(text) if text.isdigit() else None
        return out

    def earliest_snapshot_id(self) -> int | None:
        ids = self.snapshot_ids()
        return ids[0] if ids else None

    def latest_snapshot_id(self) -> int | None:
        ids = self.snapshot_ids()
        return ids[-1] if ids else None

    def snapshot(self, snapshot_id: int) -> Snapshot | None:
        """``snapshot-N``, or ``None`` if there is no such file (expired)."""
        if snapshot_id not in self._snapshot_cache:
            uri = f"{self.branch_uri}/snapshot/{SNAPSHOT_PREFIX}{snapshot_id}"
            if self.storage.stat(uri) is None:
                self._snapshot_cache[snapshot_id] = None
            else:
                self._snapshot_cache[snapshot_id] = parse_snapshot(self._json(uri, "snapshot"), uri)
        return self._snapshot_cache[snapshot_id]

    def snapshots(self) -> list[Snapshot]:
        """Every snapshot the listing shows, ascending (one that vanished meanwhile is left out)."""
        return [s for s in (self.snapshot(i) for i in self.snapshot_ids()) if s is not None]

    def latest_snapshot_of_user(self, commit_user: str) -> Snapshot | None:
        """``SnapshotManager.latestSnapshotOfUser``: walk from the latest snapshot down to 1 and
        return the first one ``commit_user`` wrote; stop (``None``) at the first snapshot that is
        missing (expired). ``FileStoreCommitImpl.filterCommitted`` re-commits every restored
        committable whose identifier is greater than this snapshot's ``commitIdentifier``, all of
        them when this is ``None``."""
        latest = self.latest_snapshot_id()
        if latest is None:
            return None
        for snapshot_id in range(latest, 0, -1):
            snapshot = self.snapshot(snapshot_id)
            if snapshot is None:
                return None
            if snapshot.commit_user == commit_user:
                return snapshot
        return None

    def is_committed(self, commit_user: str, commit_identifier: int) -> bool:
        """Whether a Flink restore of ``commit_user``'s committable ``commit_identifier`` would skip
        it (``filterCommitted``): only if a surviving snapshot of that user has an identifier >= it."""
        latest = self.latest_snapshot_of_user(commit_user)
        return latest is not None and commit_identifier <= latest.commit_identifier

    def commit_users(self) -> list[str]:
        """The commit users of the surviving snapshots, newest first."""
        seen: dict[str, None] = {}
        for s in reversed(self.snapshots()):
            seen.setdefault(s.commit_user)
        return list(seen)

    # -- tags, changelogs, branches
    def tags(self) -> dict[str, Tag]:
        out: dict[str, Tag] = {}
        for f in self._names("tag"):
            name = f.uri.rpartition("/")[2]
            if not name.startswith(TAG_PREFIX):
                continue
            tag_name = name[len(TAG_PREFIX) :]
            raw = self._json(f.uri, "tag")
            m = re.fullmatch(r"savepoint-(\d+)", tag_name)
            out[tag_name] = Tag(
                tag_name, parse_snapshot(raw, f.uri), int(m.group(1)) if m else None,
                raw.get("tagCreateTime"), raw.get("tagTimeRetained"),
            )  # fmt: skip
        return dict(sorted(out.items()))

    def changelog_ids(self) -> list[int]:
        return self._numbered("changelog", CHANGELOG_PREFIX)

    def changelogs(self) -> list[Snapshot]:
        """Long-lived changelogs (``changelog/changelog-N``), kept after their snapshot expired."""
        out = []
        for i in self.changelog_ids():
            uri = f"{self.branch_uri}/changelog/{CHANGELOG_PREFIX}{i}"
            if self.storage.stat(uri) is not None:
                out.append(parse_snapshot(self._json(uri, "changelog"), uri))
        return out

    def branches(self) -> list[str]:
        """Names of the branches under ``branch/`` (``main`` not included)."""
        base = f"{self.uri}/branch"
        names = set()
        for f in self.storage.list_files(base):
            first = f.uri[len(base) + 1 :].split("/", 1)[0]
            if first.startswith(BRANCH_PREFIX) and "/" in f.uri[len(base) + 1 :]:
                names.add(first[len(BRANCH_PREFIX) :])
        return sorted(names)

    # -- manifests
    def manifest_list(self, name: str) -> list[ManifestFileMeta]:
        if name not in self._list_cache:
            uri = self._file(f"manifest/{name}")
            out = []
            for rec in read_records(self._read(uri, MANIFEST_LIMIT, "manifest list"), uri):
                out.append(
                    ManifestFileMeta(
                        _field(rec, "_FILE_NAME", str, uri), _field(rec, "_FILE_SIZE", int, uri),
                        _field(rec, "_NUM_ADDED_FILES", int, uri), _field(rec, "_NUM_DELETED_FILES", int, uri),
                        _field(rec, "_SCHEMA_ID", int, uri),
                    )
                )  # fmt: skip
            self._list_cache[name] = out
        return self._list_cache[name]

    def manifest(self, name: str) -> list[ManifestEntry]:
        if name not in self._manifest_cache:
            uri = self._file(f"manifest/{name}")
            layout = self._layout()
            out = []
            for rec in read_records(self._read(uri, MANIFEST_LIMIT, "manifest"), uri):
                kind = _field(rec, "_KIND", int, uri)
                meta = _field(rec, "_FILE", dict, uri)
                partition = _field(rec, "_PARTITION", bytes, uri)
                bucket = _field(rec, "_BUCKET", int, uri)
                out.append(ManifestEntry(kind, layout.data_file(meta, partition, bucket, uri)))
            self._manifest_cache[name] = out
        return self._manifest_cache[name]

    def index_manifest(self, name: str) -> list[IndexFile]:
        uri = self._file(f"manifest/{name}")
        out = []
        for rec in read_records(self._read(uri, MANIFEST_LIMIT, "index manifest"), uri):
            file_name = _field(rec, "_FILE_NAME", str, uri)
            external = rec.get("_EXTERNAL_PATH")
            out.append(
                IndexFile(
                    normalize_uri(external) if external else f"index/{file_name}", file_name,
                    _field(rec, "_INDEX_TYPE", str, uri), _field(rec, "_PARTITION", bytes, uri),
                    _field(rec, "_BUCKET", int, uri), _field(rec, "_FILE_SIZE", int, uri),
                    _field(rec, "_ROW_COUNT", int, uri), _field(rec, "_KIND", int, uri),
                )
            )  # fmt: skip
        return out

    def _manifests_of(self, list_name: str | None) -> list[ManifestFileMeta]:
        return self.manifest_list(list_name) if list_name else []

    def entries(self, snapshot: Snapshot) -> list[ManifestEntry]:
        """All entries of the base and delta manifests, in order (ADD and DELETE)."""
        out: list[ManifestEntry] = []
        for lst in (snapshot.base_manifest_list, snapshot.delta_manifest_list):
            for meta in self._manifests_of(lst):
                out += self.manifest(meta.file_name)
        return out

    def data_files(self, snapshot: Snapshot) -> list[DataFile]:
        """The snapshot's data files: base + delta entries with every DELETE cancelling the ADD
        of the same ``FileEntry.Identifier`` (``FileEntry.mergeEntries``)."""
        added: dict[tuple, DataFile] = {}
        for entry in self.entries(snapshot):
            key = entry.identifier()
            if entry.kind == ADD:
                added[key] = entry.file
            else:
                added.pop(key, None)
        return sorted(added.values(), key=lambda f: f.path)

    def changelog_files(self, snapshot: Snapshot) -> list[DataFile]:
        return [
            e.file
            for m in self._manifests_of(snapshot.changelog_manifest_list)
            for e in self.manifest(m.file_name)
        ]

    def index_files(self, snapshot: Snapshot) -> list[IndexFile]:
        if (
            not snapshot.index_manifest
            or self.storage.stat(self._file(f"manifest/{snapshot.index_manifest}")) is None
        ):
            return []
        return [f for f in self.index_manifest(snapshot.index_manifest) if f.kind == ADD]

    # -- everything reachable
    def all_snapshots(self) -> Iterator[tuple[str, PaimonTable, Snapshot]]:
        """(source label, branch table, snapshot) of every snapshot, tag and changelog of every
        branch (``OrphanFilesClean.safelyGetAllSnapshots`` over ``validBranches``)."""
        for branch in self._valid_branches():
            table = self if branch == self.branch else self.with_branch(branch)
            prefix = "" if branch == MAIN_BRANCH else f"{BRANCH_PREFIX}{branch}/"
            for s in table.snapshots():
                yield f"{prefix}{SNAPSHOT_PREFIX}{s.id}", table, s
            for name, tag in table.tags().items():
                yield f"{prefix}{TAG_PREFIX}{name}", table, tag.snapshot
            for c in table.changelogs():
                yield f"{prefix}{CHANGELOG_PREFIX}{c.id}", table, c

    def _valid_branches(self) -> list[str]:
        base = self if self.branch == MAIN_BRANCH else self.with_branch(MAIN_BRANCH)
        branches = base.branches()
        broken = [b for b in branches if not self.with_branch(b).schemas()]
        if broken:
            raise CkptError(
                f"branches {', '.join(broken)} have no schema: Paimon aborts orphan cleaning; check them by hand",
                path=self.uri,
            )
        return [*branches, MAIN_BRANCH]

    def live_files(self) -> LiveFiles:
        """Every file any snapshot, tag or changelog of any branch reaches (see :class:`LiveFiles`)."""
        live = LiveFiles()

        def add(where: dict[str, set[str]], path: str, source: str) -> None:
            where.setdefault(path, set()).add(source)

        for source, table, s in self.all_snapshots():
            for lst in (s.base_manifest_list, s.delta_manifest_list, s.changelog_manifest_list):
                if lst:
                    add(live.meta, f"manifest/{lst}", source)
                    for m in table._manifests_of(lst):
                        add(live.meta, f"manifest/{m.file_name}", source)
            for f in table.data_files(s):
                add(live.data, f.path, source)
                for extra in f.extra_files:
                    add(live.data, extra, source)
            for f in table.changelog_files(s):
                add(live.changelog, f.path, source)
                for extra in f.extra_files:
                    add(live.changelog, extra, source)
            if s.index_manifest:
                files = table.index_files(s)
                if files or self.storage.stat(self._file(f"manifest/{s.index_manifest}")) is not None:
                    add(live.meta, f"manifest/{s.index_manifest}", source)
                for f in files:
                    add(live.index, f.path, source)
            if s.statistics:
                add(live.meta, f"statistics/{s.statistics}", source)
        return live

    def used_file_names(self) -> set[str]:
        """File names ``OrphanFilesClean.getUsedFiles`` collects: manifest lists, manifests, the
        file name and extra files of every manifest entry (ADD or DELETE), the index manifest and
        its files, the statistics file, over every snapshot, tag and changelog of every branch."""
        used: set[str] = set()
        for _source, table, s in self.all_snapshots():
            for lst in (s.changelog_manifest_list, s.delta_manifest_list, s.base_manifest_list):
                if not lst:
                    continue
                used.add(lst)
                for m in table._manifests_of(lst):
                    used.add(m.file_name)
                    for e in table.manifest(m.file_name):
                        used.add(e.file.file_name)
                        used.update(x.rpartition("/")[2] for x in e.file.extra_files)
            if s.index_manifest and self.storage.stat(self._file(f"manifest/{s.index_manifest}")) is not None:
                used.add(s.index_manifest)
                used.update(f.file_name for f in table.index_manifest(s.index_manifest))
            if s.statistics:
                used.add(s.statistics)
        return used

    # -- orphans
    def orphan_candidates(self, older_than: float | None = None) -> list[OrphanCandidate]:
        """The files ``LocalOrphanFilesClean`` would delete, by its rules:

        - in ``snapshot/`` and ``changelog/`` of every branch: files that are not ``snapshot-*``
          (``changelog-*``), ``EARLIEST`` or ``LATEST``;
        - files directly in ``manifest/``, ``index/``, ``statistics/`` and in the bucket
          directories (``<k1=v1>/…/bucket-*`` to the depth of the partition keys, below
          ``data-file.path-directory`` and each of ``data-file.external-paths``) whose *name* no
          snapshot, tag or changelog of any branch uses (:meth:`used_file_names`);
        - never ``schema/``, ``tag/``, ``branch/``, ``consumer/`` or any other directory, nor a
          ``*.managed.blob`` file; only files whose mtime is before ``older_than``.

        ``older_than``: seconds since the epoch; ``None`` is Paimon's default, the storage's now
        less one day. It must be in the past (Paimon refuses otherwise: files being written are
        referenced by no snapshot yet). A file without an mtime is never a candidate.
        """
        if older_than is None:
            now, _source = self.storage.now(self.uri)
            older_than = (now if now is not None else time.time()) - DAY_SECONDS

        def old(f: FileInfo) -> bool:
            return f.mtime is not None and f.mtime < older_than

        out: list[OrphanCandidate] = []
        for branch in self._valid_branches():
            table = self if branch == self.branch else self.with_branch(branch)
            for subdir, prefix in (("snapshot", SNAPSHOT_PREFIX), ("changelog", CHANGELOG_PREFIX)):
                for f in table._names(subdir):
                    name = f.uri.rpartition("/")[2]
                    if not name.startswith(prefix) and name not in (EARLIEST, LATEST) and old(f):
                        out.append(
                            OrphanCandidate(
                                self.relative(f.uri), f.uri, f.size, f.mtime, f"not-a-{subdir}", subdir
                            )
                        )
        candidates = [
            (area, f)
            for area, f in self._candidate_files()
            if old(f) and not f.uri.endswith(MANAGED_BLOB_SUFFIX)
        ]
        if candidates:
            used = self.used_file_names()
            for area, f in candidates:
                if f.uri.rpartition("/")[2] not in used:
                    out.append(
                        OrphanCandidate(self.relative(f.uri), f.uri, f.size, f.mtime, "unreferenced", area)
                    )
        return sorted(out, key=lambda c: c.path)

    def latest_commits(self) -> list[tuple[str, FileInfo, Snapshot | None]]:
        """(branch, its newest ``snapshot-N`` file as the listing shows it, that snapshot) for each
        branch that has one: the table's latest commits. The file's time is the storage's, the
        snapshot's ``timeMillis`` the committer's; a copy of the table (or a branch created from a
        snapshot) gives the file a time of its own. The snapshot is ``None`` when it vanished since."""
        out = []
        for branch in self._valid_branches():
            table = self if branch == self.branch else self.with_branch(branch)
            numbered = []
            for f in table._names("snapshot"):
                name = f.uri.rpartition("/")[2]
                if name.startswith(SNAPSHOT_PREFIX) and name[len(SNAPSHOT_PREFIX) :].isdigit():
                    numbered.append((int(name[len(SNAPSHOT_PREFIX) :]), f))
            if numbered:
                n, f = max(numbered)
                out.append((branch, f, table.snapshot(n)))
        return out

    def listed_files(self) -> list[FileInfo]:
        """The files in the directories Paimon's orphan clean-up lists (manifest/, index/,
        statistics/ and the bucket directories), whatever names them."""
        return [f for _area, f in self._candidate_files()]

    def _candidate_files(self) -> Iterator[tuple[str, FileInfo]]:
        """(area, file) of ``OrphanFilesClean.listPaimonFileDirs``: manifest/, index/, statistics/
        (area: the directory's name) and the bucket directories (``data``; partition directories
        are those whose name contains ``=``)."""
        layout = self._layout()
        roots = [layout.data_root] + [normalize_uri(p.strip()) for p in layout.external_paths if p.strip()]
        in_table = {"manifest", "index", "statistics"}
        listed: list[tuple[str, list[FileInfo]]] = [(self.uri, list(self.storage.list_files(self.uri)))]
        for root in roots:
            if root != self.uri and not root.startswith(self.uri + "/"):
                listed.append((root, list(self.storage.list_files(root))))
        for top, files in listed:
            for f in files:
                rest = f.uri[len(top) + 1 :].split("/")
                if top == self.uri and len(rest) == 2 and rest[0] in in_table:
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

    # -- layout
    def _layout(self) -> _Layout:
        if self._layout_cache is None:
            self._layout_cache = self._make_layout()
        return self._layout_cache

    def _make_layout(self) -> _Layout:
        schema = self.latest_schema()
        options = dict(schema.get("options") or {})
        fields = {f.get("name"): f.get("type") for f in schema.get("fields") or []}
        keys = list(schema.get("partitionKeys") or [])
        data_dir = options.get("data-file.path-directory")
        return _Layout(
            table_uri=self.uri,
            partition_keys=keys,
            partition_types=[str(fields.get(k, "")) for k in keys],
            default_name=options.get("partition.default-name", "__DEFAULT_PARTITION__"),
            legacy_name=str(options.get("partition.legacy-name", "true")).lower() != "false",
            data_dir=data_dir.strip("/") if data_dir else None,
            external_paths=[p for p in (options.get("data-file.external-paths") or "").split(",") if p],
        )


def parse_snapshot(raw: dict[str, Any], uri: str) -> Snapshot:
    """A snapshot (or changelog, or tag) JSON object; its required fields checked."""

    def need(key: str, kind: type) -> Any:
        if key not in raw:
            raise PaimonFormatError(f"not a Paimon snapshot: no '{key}'", path=uri)
        value = raw[key]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise PaimonFormatError(f"'{key}' is {value!r}, not a {kind.__name__}", path=uri)
        return value

    def maybe(key: str, kind: type) -> Any:
        value = raw.get(key)
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
            raise PaimonFormatError(f"'{key}' is {value!r}, not a {kind.__name__}", path=uri)
        return value

    return Snapshot(
        id=need("id", int), schema_id=need("schemaId", int), base_manifest_list=need("baseManifestList", str),
        delta_manifest_list=maybe("deltaManifestList", str), changelog_manifest_list=maybe("changelogManifestList", str),
        index_manifest=maybe("indexManifest", str), commit_user=need("commitUser", str),
        commit_identifier=need("commitIdentifier", int), commit_kind=need("commitKind", str),
        time_millis=need("timeMillis", int), watermark=maybe("watermark", int),
        total_record_count=maybe("totalRecordCount", int), delta_record_count=maybe("deltaRecordCount", int),
        changelog_record_count=maybe("changelogRecordCount", int), statistics=maybe("statistics", str),
        uri=uri, raw=raw,
    )  # fmt: skip


def _field(rec: dict[str, Any], key: str, kind: type, uri: str) -> Any:
    if key not in rec:
        raise PaimonFormatError(f"record has no field '{key}': not a Paimon manifest of this kind", path=uri)
    value = rec[key]
    if kind is bytes and isinstance(value, bytearray | memoryview):
        value = bytes(value)
    if not isinstance(value, kind):
        raise PaimonFormatError(f"field '{key}' is a {type(value).__name__}, not {kind.__name__}", path=uri)
    return value


# -- manifest decoding ------------------------------------------------------------------------


def read_records(data: bytes, uri: str) -> list[dict[str, Any]]:
    """The records of an Avro, Parquet or ORC manifest file, told apart by magic bytes."""
    if data[:4] == b"Obj\x01":
        return _read_avro(data, uri)
    if data[:4] == b"PAR1":
        return _read_arrow(data, uri, "parquet")
    if data[:3] == b"ORC":
        return _read_arrow(data, uri, "orc")
    raise PaimonFormatError(
        f"not an Avro, Parquet or ORC manifest (starts with {data[:4]!r}, {len(data)} bytes)",
        path=uri,
        offset=0,
    )


def _read_avro(data: bytes, uri: str) -> list[dict[str, Any]]:
    import fastavro

    buf = io.BytesIO(data)
    records: list[dict[str, Any]] = []
    try:
        for rec in fastavro.reader(buf):
            records.append(rec)
    except Exception as e:  # noqa: BLE001 - fastavro raises EOFError, ValueError, StopIteration, ...
        offset = min(buf.tell(), len(data))
        reason = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
        if offset >= len(data):
            reason = f"truncated Avro file ({type(e).__name__}: {reason})"
        else:
            reason = f"cannot decode Avro ({type(e).__name__}: {reason})"
        raise PaimonFormatError(f"{reason} after {len(records)} records", path=uri, offset=offset) from None
    return records


def _read_arrow(data: bytes, uri: str, fmt: str) -> list[dict[str, Any]]:
    import pyarrow as pa

    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(pa.BufferReader(data))
        else:
            import pyarrow.orc as orc

            table = orc.ORCFile(pa.BufferReader(data)).read()
    except Exception as e:  # noqa: BLE001 - ArrowInvalid, OSError
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise PaimonFormatError(f"cannot decode {fmt} manifest: {first}", path=uri) from None
    return table.to_pylist()


# -- partitions and paths ---------------------------------------------------------------------

_ESCAPE = set("\"#%'*/:=?\\{}[]^\x7f") | {chr(c) for c in range(32)}


def escape_path_name(value: str) -> str:
    """``PartitionPathUtils.escapePathName``."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPE else c for c in value)


@dataclass
class _Layout:
    table_uri: str
    partition_keys: list[str]
    partition_types: list[str]
    default_name: str
    legacy_name: bool
    data_dir: str | None
    external_paths: list[str]
    _partition_paths: dict[bytes, str] = field(default_factory=dict)

    @property
    def partition_depth(self) -> int:
        return len(self.partition_keys)

    @property
    def data_root(self) -> str:
        return f"{self.table_uri}/{self.data_dir}" if self.data_dir else self.table_uri

    def partition_path(self, partition: bytes, uri: str) -> str:
        """``<k1>=<v1>/<k2>=<v2>`` of a BinaryRow (``InternalRowPartitionComputer`` +
        ``PartitionPathUtils.generatePartitionPath``), empty for an unpartitioned table."""
        cached = self._partition_paths.get(partition)
        if cached is None:
            values = decode_partition(partition, self.partition_types, self.legacy_name, uri)
            parts = []
            for key, value in zip(self.partition_keys, values, strict=True):
                if value is None or not value.strip():
                    value = self.default_name
                parts.append(f"{escape_path_name(key)}={escape_path_name(value)}")
            cached = self._partition_paths[partition] = "/".join(parts)
        return cached

    def bucket_dir(self, partition: bytes, bucket: int, uri: str) -> tuple[str, str]:
        """(partition path, the bucket's directory relative to the table): ``part=p0``,
        ``part=p0/bucket-0`` (under ``data-file.path-directory`` when set)."""
        try:
            part = self.partition_path(partition, uri) if self.partition_keys else ""
        except UnsupportedPartitionType:
            part = f"<partition 0x{partition.hex()}>"
        bucket_dir = f"{BUCKET_PREFIX}postpone" if bucket == POSTPONE_BUCKET else f"{BUCKET_PREFIX}{bucket}"
        return part, "/".join(p for p in (self.data_dir, part, bucket_dir) if p)

    def data_file(self, meta: dict[str, Any], partition: bytes, bucket: int, uri: str) -> DataFile:
        name = _field(meta, "_FILE_NAME", str, uri)
        if "/" in name or name in ("", ".", ".."):
            raise PaimonFormatError(f"data file name {name!r} is not a file name", path=uri)
        part, rel_dir = self.bucket_dir(partition, bucket, uri)
        external = meta.get("_EXTERNAL_PATH")
        if external:
            path = normalize_uri(external)
            parent = path.rpartition("/")[0]
        else:
            path = f"{rel_dir}/{name}"
            parent = rel_dir
        extras = tuple(f"{parent}/{x}" for x in (meta.get("_EXTRA_FILES") or []))
        return DataFile(
            path=path, file_name=name, partition=partition, partition_path=part, bucket=bucket,
            level=int(meta.get("_LEVEL") or 0), file_size=int(meta.get("_FILE_SIZE") or 0),
            row_count=int(meta.get("_ROW_COUNT") or 0), schema_id=int(meta.get("_SCHEMA_ID") or 0),
            extra_files=extras, external_path=path if external else None,
        )  # fmt: skip


def decode_partition(data: bytes, types: list[str], legacy_name: bool, uri: str) -> list[str | None]:
    """Values of a serialized partition BinaryRow (``SerializationUtils.serializeBinaryRow``: an
    int32 arity, big-endian, then the row) as Paimon prints them into partition directory names.
    Strings, integers, booleans, dates and compact decimals are decoded; other types are an error."""
    if len(data) < 4:
        raise PaimonFormatError(f"partition BinaryRow of {len(data)} bytes", path=uri)
    arity = int.from_bytes(data[:4], "big")
    if arity != len(types):
        raise PaimonFormatError(
            f"partition BinaryRow has {arity} fields, the schema {len(types)} partition keys", path=uri
        )
    row = data[4:]
    null_bytes = ((arity + 63 + 8) // 64) * 8
    if len(row) < null_bytes + 8 * arity:
        raise PaimonFormatError(
            f"partition BinaryRow of {len(data)} bytes is too short for {arity} fields", path=uri
        )
    values: list[str | None] = []
    for i, type_name in enumerate(types):
        bit = i + 8
        if row[bit // 8] & (1 << (bit % 8)):
            values.append(None)
            continue
        slot = row[null_bytes + 8 * i : null_bytes + 8 * i + 8]
        base = type_name.upper().replace(" NOT NULL", "").strip()
        root = base.split("(", 1)[0].strip()
        if root in ("STRING", "VARCHAR", "CHAR"):
            word = int.from_bytes(slot, "little")
            if word & (1 << 63):
                length = (word >> 56) & 0x7F
                raw = slot[:length]
            else:
                offset, length = word >> 32, word & 0xFFFFFFFF
                if offset + length > len(row):
                    raise PaimonFormatError("partition string points past the end of the BinaryRow", path=uri)
                raw = row[offset : offset + length]
            values.append(raw.decode("utf-8", "replace"))
        elif root in ("TINYINT", "SMALLINT", "INT", "INTEGER", "BIGINT"):
            width = {"TINYINT": 1, "SMALLINT": 2, "INT": 4, "INTEGER": 4, "BIGINT": 8}[root]
            values.append(str(int.from_bytes(slot[:width], "little", signed=True)))
        elif root == "BOOLEAN":
            values.append("true" if slot[0] else "false")
        elif root == "DATE":
            days = int.from_bytes(slot[:4], "little", signed=True)
            if legacy_name:
                values.append(str(days))
            else:
                import datetime

                values.append((datetime.date(1970, 1, 1) + datetime.timedelta(days=days)).isoformat())
        elif root in ("DECIMAL", "NUMERIC", "DEC"):
            m = re.search(r"\((\d+)\s*(?:,\s*(\d+))?\)", base)
            precision, scale = (int(m.group(1)), int(m.group(2) or 0)) if m else (10, 0)
            if precision > 18:
                raise UnsupportedPartitionType(
                    f"partition type {type_name} (non-compact decimal) is not decoded", path=uri
                )
            unscaled = int.from_bytes(slot, "little", signed=True)
            values.append(format(Decimal(unscaled).scaleb(-scale), "f"))
        else:
            raise UnsupportedPartitionType(f"partition type {type_name} is not decoded by ckptctl", path=uri)
    return values
