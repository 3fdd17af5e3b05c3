"""The records a Paimon table's files hold (snapshots, tags, manifest entries, data and index
files), the answers built from them (live files, orphan candidates), and the error for a file that
does not decode.

Plain frozen dataclasses below everything that reads a table (:mod:`ckptctl.paimon.table`,
:mod:`ckptctl.paimon.manifests`, :mod:`ckptctl.paimon.tablelayout`,
:mod:`ckptctl.paimon.reachable`), so that each of them names the same record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ckptctl.errors import CkptError

ADD, DELETE = 0, 1  # FileKind


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


def record_field(rec: dict[str, Any], key: str, kind: type, uri: str) -> Any:
    if key not in rec:
        raise PaimonFormatError(f"record has no field '{key}': not a Paimon manifest of this kind", path=uri)
    value = rec[key]
    if kind is bytes and isinstance(value, bytearray | memoryview):
        value = bytes(value)
    if not isinstance(value, kind):
        raise PaimonFormatError(f"field '{key}' is a {type(value).__name__}, not {kind.__name__}", path=uri)
    return value
