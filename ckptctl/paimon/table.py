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

A :class:`PaimonTable` reads one branch's schemas, snapshots, tags and changelogs; its
``manifests`` part (:mod:`ckptctl.paimon.manifests`) the manifests; :mod:`ckptctl.paimon.tablelayout`
places data files; :mod:`ckptctl.paimon.reachable` walks every branch for live files and orphans.

:meth:`PaimonTable.latest_snapshot_of_user` follows ``SnapshotManager.latestSnapshotOfUser`` (what
``FileStoreCommitImpl.filterCommitted`` uses on a Flink restore) and
:func:`ckptctl.paimon.reachable.orphan_candidates` follows ``LocalOrphanFilesClean`` (which directories it
lists, that used files are matched by file name, what it never deletes). Every problem with the
input is a one-line :class:`~ckptctl.errors.CkptError` naming the file.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ckptctl.errors import CkptError, StorageError
from ckptctl.paimon.manifests import Manifests
from ckptctl.paimon.records import PaimonFormatError, Snapshot, Tag, parse_snapshot
from ckptctl.paimon.tablelayout import BUCKET_PREFIX, TableLayout
from ckptctl.storage import FileInfo, Storage, normalize_uri

# Bounded reads: a snapshot, tag, hint or schema file larger than this is not a Paimon file.
JSON_LIMIT = 16 * 1024 * 1024

SNAPSHOT_PREFIX = "snapshot-"
CHANGELOG_PREFIX = "changelog-"
TAG_PREFIX = "tag-"
SCHEMA_PREFIX = "schema-"
BRANCH_PREFIX = "branch-"
EARLIEST = "EARLIEST"
LATEST = "LATEST"
MAIN_BRANCH = "main"


class PaimonTable:
    """A Paimon table directory. ``location``: a local path, ``file:`` or ``s3://`` URI."""

    def __init__(self, location: str, storage: Storage | None = None, branch: str = MAIN_BRANCH) -> None:
        self.uri = normalize_uri(location)
        self.storage = storage or Storage()
        self.branch = branch
        self._schemas: dict[int, dict[str, Any]] | None = None
        self._snapshot_cache: dict[int, Snapshot | None] = {}
        self._layout_cache: TableLayout | None = None
        self.manifests = Manifests(self)  # its manifests, read through this table (bound once)

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

    def table_file(self, rel: str) -> str:
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
            return f"{self.layout().bucket_dir(partition, bucket, self.uri)[1]}/{name}"
        except PaimonFormatError:  # a partition row that does not fit the schema: the bucket alone
            return f"<partition 0x{partition.hex()}>/{BUCKET_PREFIX}{bucket}/{name}"

    def with_branch(self, branch: str) -> PaimonTable:
        other = PaimonTable(self.uri, self.storage, branch)
        return other

    # -- reading
    def read_bounded(self, uri: str, limit: int, what: str) -> bytes:
        found = self.storage.stat(uri)
        if found is None:
            raise StorageError("file not found", path=uri)
        if found.size > limit:
            raise PaimonFormatError(
                f"{found.size:,} bytes, more than the {limit:,} a Paimon {what} may have: not read", path=uri
            )
        return self.storage.read_bytes(uri, limit=limit)

    def _json(self, uri: str, what: str) -> dict[str, Any]:
        data = self.read_bounded(uri, JSON_LIMIT, what)
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

    def files_in(self, subdir: str) -> list[FileInfo]:
        """Files directly in ``<branch>/<subdir>`` (its subdirectories are not Paimon's)."""
        base = f"{self.branch_uri}/{subdir}"
        return [f for f in self.storage.list_files(base) if "/" not in f.uri[len(base) + 1 :]]

    def _numbered(self, subdir: str, prefix: str) -> list[int]:
        ids = []
        for f in self.files_in(subdir):
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
                text = self.read_bounded(uri, 1024, "hint file").decode("utf-8", "replace").strip()
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
        for f in self.files_in("tag"):
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
    # -- layout
    def layout(self) -> TableLayout:
        if self._layout_cache is None:
            self._layout_cache = self._make_layout()
        return self._layout_cache

    def _make_layout(self) -> TableLayout:
        schema = self.latest_schema()
        options = dict(schema.get("options") or {})
        fields = {f.get("name"): f.get("type") for f in schema.get("fields") or []}
        keys = list(schema.get("partitionKeys") or [])
        data_dir = options.get("data-file.path-directory")
        return TableLayout(
            table_uri=self.uri,
            partition_keys=keys,
            partition_types=[str(fields.get(k, "")) for k in keys],
            default_name=options.get("partition.default-name", "__DEFAULT_PARTITION__"),
            legacy_name=str(options.get("partition.legacy-name", "true")).lower() != "false",
            data_dir=data_dir.strip("/") if data_dir else None,
            external_paths=[p for p in (options.get("data-file.external-paths") or "").split(",") if p],
        )
