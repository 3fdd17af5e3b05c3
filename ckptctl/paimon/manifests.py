"""A Paimon table's manifests: manifest lists, manifests and index manifests, decoded and folded.

Manifests are Avro (fastavro, Paimon's default ``manifest.format``), or Parquet / ORC (PyArrow),
told apart by their magic bytes; fastavro and PyArrow are imported when a manifest is first read.
:class:`Manifests` is the part of a :class:`~ckptctl.paimon.table.PaimonTable` that reads them,
bound once to its table, with the caches that keep a manifest shared by many snapshots read once.
"""

from __future__ import annotations

import io
from typing import Any

from ckptctl.paimon.records import (
    ADD,
    DataFile,
    IndexFile,
    ManifestEntry,
    ManifestFileMeta,
    PaimonFormatError,
    Snapshot,
    record_field,
)
from ckptctl.storage import normalize_uri

# Manifests and manifest lists roll at manifest.target-file-size (8 MiB by default).
MANIFEST_LIMIT = 512 * 1024 * 1024


class Manifests:
    """The manifests of one table (branch): ``table`` is the
    :class:`~ckptctl.paimon.table.PaimonTable` they belong to (its bounded reads, its layout)."""

    def __init__(self, table) -> None:
        self.table = table
        self._manifest_cache: dict[str, list[ManifestEntry]] = {}
        self._list_cache: dict[str, list[ManifestFileMeta]] = {}

    def manifest_list(self, name: str) -> list[ManifestFileMeta]:
        if name not in self._list_cache:
            uri = self.table.table_file(f"manifest/{name}")
            out = []
            for rec in read_records(self.table.read_bounded(uri, MANIFEST_LIMIT, "manifest list"), uri):
                out.append(
                    ManifestFileMeta(
                        record_field(rec, "_FILE_NAME", str, uri), record_field(rec, "_FILE_SIZE", int, uri),
                        record_field(rec, "_NUM_ADDED_FILES", int, uri), record_field(rec, "_NUM_DELETED_FILES", int, uri),
                        record_field(rec, "_SCHEMA_ID", int, uri),
                    )
                )  # fmt: skip
            self._list_cache[name] = out
        return self._list_cache[name]

    def manifest(self, name: str) -> list[ManifestEntry]:
        if name not in self._manifest_cache:
            uri = self.table.table_file(f"manifest/{name}")
            layout = self.table.layout()
            out = []
            for rec in read_records(self.table.read_bounded(uri, MANIFEST_LIMIT, "manifest"), uri):
                kind = record_field(rec, "_KIND", int, uri)
                meta = record_field(rec, "_FILE", dict, uri)
                partition = record_field(rec, "_PARTITION", bytes, uri)
                bucket = record_field(rec, "_BUCKET", int, uri)
                out.append(ManifestEntry(kind, layout.data_file(meta, partition, bucket, uri)))
            self._manifest_cache[name] = out
        return self._manifest_cache[name]

    def index_manifest(self, name: str) -> list[IndexFile]:
        uri = self.table.table_file(f"manifest/{name}")
        out = []
        for rec in read_records(self.table.read_bounded(uri, MANIFEST_LIMIT, "index manifest"), uri):
            file_name = record_field(rec, "_FILE_NAME", str, uri)
            external = rec.get("_EXTERNAL_PATH")
            out.append(
                IndexFile(
                    normalize_uri(external) if external else f"index/{file_name}", file_name,
                    record_field(rec, "_INDEX_TYPE", str, uri), record_field(rec, "_PARTITION", bytes, uri),
                    record_field(rec, "_BUCKET", int, uri), record_field(rec, "_FILE_SIZE", int, uri),
                    record_field(rec, "_ROW_COUNT", int, uri), record_field(rec, "_KIND", int, uri),
                )
            )  # fmt: skip
        return out

    def manifests_of(self, list_name: str | None) -> list[ManifestFileMeta]:
        return self.manifest_list(list_name) if list_name else []

    def entries(self, snapshot: Snapshot) -> list[ManifestEntry]:
        """All entries of the base and delta manifests, in order (ADD and DELETE)."""
        out: list[ManifestEntry] = []
        for lst in (snapshot.base_manifest_list, snapshot.delta_manifest_list):
            for meta in self.manifests_of(lst):
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
            for m in self.manifests_of(snapshot.changelog_manifest_list)
            for e in self.manifest(m.file_name)
        ]

    def index_files(self, snapshot: Snapshot) -> list[IndexFile]:
        if (
            not snapshot.index_manifest
            or self.table.storage.stat(self.table.table_file(f"manifest/{snapshot.index_manifest}")) is None
        ):
            return []
        return [f for f in self.index_manifest(snapshot.index_manifest) if f.kind == ADD]


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
