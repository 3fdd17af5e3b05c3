"""One element of a Paimon Flink sink's operator states, decoded from its bytes without a JVM:
a committable (``ManifestCommittable`` and its ``CommitMessage`` s), a commit user, a writer
state, a pending tag's savepoint id.

Kept apart from :mod:`ckptctl.paimon.sinkstate` (which finds the states in a checkpoint and reads
their streams) because this is Paimon's and Flink's serializers, version by version, and nothing
of the checkpoint. Each element is written by its Flink serializer:

- ``byte[]`` (``BytePrimitiveArraySerializer``): int32 length, bytes.
- ``String`` (``StringSerializer`` = ``StringValue.writeString``): a 7-bit varint of length + 1 (0:
  null), then every UTF-16 unit as a 7-bit varint.
- ``Long``: int64; ``Integer``: int32; a tuple: its fields in order. All big-endian.

A committable element is ``byte[]`` holding ``SimpleVersionedSerialization.writeVersionAndSerialize``
of Paimon's ``ManifestCommittableSerializer``: int32 version, int32 length (Flink 1.20/2.x write
both; the length must equal the byte[]'s minus 8), then the ManifestCommittable::

    int64 identifier                         the Flink checkpoint id (Long.MAX_VALUE: end of input)
    bool  watermark is null; [int64 watermark]
    v<=4: int32 n; n x (int32 bucket, int64 offset)       legacy log offsets
    v>=4: int32 n; n x (writeUTF key, writeUTF value)     properties
    int32 CommitMessageSerializer version; int32 n; n x CommitMessage

ManifestCommittableSerializer versions 2..5 (v2 and v3 share a layout) are read. A CommitMessage
(``CommitMessageSerializer`` versions 2..14, 14 being pypaimon's)::

    int32 len; int32 arity; BinaryRow       partition (its field types are the table's: unknown here,
                                            so every field is shown as its raw slot and the reading
                                            that slot allows, see binaryrow.RawField)
    int32 bucket
    v>=7: bool present; [int32 totalBuckets]
    v<10:  new, deleted, changelog, compactBefore, compactAfter, compactChangelog  (DataFileMeta lists)
           newIndex, [v>2: deletedIndex]                                          (IndexFileMeta lists)
    v>=10: new, deleted, changelog, newIndex, deletedIndex,
           compactBefore, compactAfter, compactChangelog, compactNewIndex, compactDeletedIndex
    v14:   bool present; [int64 checkFromSnapshot]
    list := int32 n; n x (int32 size; BinaryRow of the version's arity)

Before v10 the wire has one pair of index lists, reported as ``new_index_files`` /
``deleted_index_files`` (current Java attributes them to the compact increment when that is
non-empty). For v2, as Java does, a message list that does not decode falls back to the legacy v2
layout (``CommitMessageLegacyV2Serializer``: new, changelog, compactBefore/After/Changelog, newIndex;
13-field files, 4-field index entries).

DataFileMeta row arity per CommitMessage version (Paimon's ``DataFileMeta08Serializer`` 15,
``09`` 16, ``10Legacy`` 17 for v4-5, ``12Legacy`` 18 for v6-7, ``FirstRowIdLegacy`` 19 for v8,
``WriteColsLegacy`` 20 for v9-12, ``DataFileMeta`` 21 for v13+); fields read: 0 file name, 1 size,
2 row count, 7/8 min/max sequence number, 9 schema id, 10 level, 11 extra files, 12 creation time
(millis), 13 delete row count, 15 file source, 17 external path (arity >= 18). IndexFileMeta
(``IndexFileMetaV1`` 5 fields for v<=4, ``V2`` 5 for v5-8, ``V3`` 6 for v9-10, ``V4`` 7 for v11,
``IndexFileMeta`` 7 for v12+): 0 index type, 1 file name, 2 size, 3 row count, 5 external path.

An unknown version is an error naming it; every count and length is checked against the bytes
left before anything is allocated; errors are one line naming the file and the absolute byte offset.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, NamedTuple

from ckptctl.errors import MetadataFormatError
from ckptctl.metadata import mutf8
from ckptctl.metadata.bytereader import ByteReader
from ckptctl.paimon.binaryrow import BinaryRowError, RawRow, Row, raw_row

MANIFEST_VERSIONS = range(2, 6)
MESSAGE_VERSIONS = range(2, 15)
FILE_SOURCES = ("APPEND", "COMPACT")
END_INPUT_IDENTIFIER = (1 << 63) - 1


# ---------------------------------------------------------------------------------------------
# the byte reader


class _In(ByteReader):
    """Big-endian reads over ``data``; errors name ``path`` and the absolute offset ``base + pos``."""

    SUBJECT = "Paimon sink state"

    def i64(self, what: str) -> int:
        return self._unpack(">q", 8, what)

    def count(self, what: str, min_size: int) -> int:
        """A non-negative int32 count of items of at least ``min_size`` bytes each that must fit."""
        at = self.pos
        n = self.i32(what)
        if n < 0 or n * min_size > self.left:
            raise self.fail(f"{what}: count {n} does not fit the {self.left} bytes left", at)
        return n

    def take(self, n: int, what: str) -> bytes:
        self.need(n, what)
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def utf(self, what: str) -> str:
        """``DataOutput.writeUTF``: uint16 length, modified UTF-8."""
        at = self.pos
        n = self._unpack(">H", 2, what)
        raw = self.take(n, what)
        try:
            return mutf8.decode(raw)
        except (mutf8.MalformedUtf, UnicodeDecodeError) as e:
            raise self.fail(f"{what}: not a modified UTF-8 string ({e})", at) from None

    def _varint(self, what: str) -> int:
        shift, value = 0, 0
        while True:
            self.need(1, what)
            b = self.data[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7
            if shift > 28:
                raise self.fail(f"{what}: varint longer than 5 bytes", self.pos - 1)

    def string_value(self, what: str) -> str | None:
        """Flink ``StringValue.readString``: varint(length + 1) (0 = null), then each char as a varint."""
        at = self.pos
        n = self._varint(f"{what} length")
        if n == 0:
            return None
        n -= 1
        if n > self.left:
            raise self.fail(f"{what}: string of {n} chars does not fit the {self.left} bytes left", at)
        units = [self._varint(what) for _ in range(n)]
        if any(u > 0xFFFF for u in units):
            raise self.fail(f"{what}: char beyond U+FFFF", at)
        return struct.pack(f"<{n}H", *units).decode("utf-16-le", "surrogatepass")


# ---------------------------------------------------------------------------------------------
# result types


class DataFile(NamedTuple):
    file_name: str
    file_size: int
    row_count: int
    level: int
    min_sequence_number: int
    max_sequence_number: int
    schema_id: int
    creation_time_ms: int | None
    delete_row_count: int | None
    file_source: str | None
    extra_files: tuple[str, ...]
    external_path: str | None

    def to_json(self) -> dict[str, Any]:
        d = self._asdict()
        d["extra_files"] = list(self.extra_files)
        return d


class IndexFile(NamedTuple):
    index_type: str
    file_name: str
    file_size: int
    row_count: int
    external_path: str | None

    def to_json(self) -> dict[str, Any]:
        return self._asdict()


@dataclass
class CommitMessage:
    version: int  # CommitMessageSerializer version
    layout: str  # "v<version>" or "v2-legacy"
    partition: RawRow
    bucket: int
    total_buckets: int | None
    lists: dict[str, list[DataFile] | list[IndexFile]]  # in wire order; only the layout's lists
    check_from_snapshot: int | None = None

    def files(self, name: str) -> list:
        return self.lists.get(name, [])

    @property
    def file_names(self) -> dict[str, list[str]]:
        return {k: [f.file_name for f in v] for k, v in self.lists.items()}

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version, "layout": self.layout, "partition": self.partition.to_json(),
            "bucket": self.bucket, "total_buckets": self.total_buckets,
            "check_from_snapshot": self.check_from_snapshot,
            "lists": {k: [f.to_json() for f in v] for k, v in self.lists.items()},
        }  # fmt: skip


@dataclass
class Committable:
    """One uncommitted ``ManifestCommittable`` (one element of ``streaming_committer_raw_states``)."""

    identifier: int
    watermark: int | None
    log_offsets: dict[int, int]
    properties: dict[str, str]
    manifest_version: int
    message_version: int
    messages: list[CommitMessage]
    path: str = ""
    offset: int = 0  # of the element in ``path``
    subtask: int | None = None

    @property
    def end_input(self) -> bool:
        return self.identifier == END_INPUT_IDENTIFIER

    def to_json(self) -> dict[str, Any]:
        return {
            "identifier": self.identifier, "end_input": self.end_input, "watermark": self.watermark,
            "log_offsets": {str(k): v for k, v in self.log_offsets.items()}, "properties": self.properties,
            "manifest_version": self.manifest_version, "message_version": self.message_version,
            "messages": [m.to_json() for m in self.messages], "path": self.path, "offset": self.offset,
            "subtask": self.subtask,
        }  # fmt: skip


class WriterState(NamedTuple):
    """One ``paimon_store_sink_write_state`` element."""

    table: str | None
    key: str | None
    partition: RawRow
    bucket: int
    value_size: int
    subtask: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"table": self.table, "key": self.key, "partition": self.partition.to_json(),
                "bucket": self.bucket, "value_size": self.value_size, "subtask": self.subtask}  # fmt: skip


# CommitMessage layouts


class Layout(NamedTuple):
    name: str
    data_arity: int
    index_arity: int
    total_buckets: bool
    lists: tuple[tuple[str, str], ...]  # (name, "data" | "index") in wire order
    check_from_snapshot: bool = False


_V3_LISTS = (
    ("new_files", "data"), ("deleted_files", "data"), ("changelog_files", "data"),
    ("compact_before", "data"), ("compact_after", "data"), ("compact_changelog_files", "data"),
    ("new_index_files", "index"), ("deleted_index_files", "index"),
)  # fmt: skip
_V10_LISTS = (
    ("new_files", "data"), ("deleted_files", "data"), ("changelog_files", "data"),
    ("new_index_files", "index"), ("deleted_index_files", "index"),
    ("compact_before", "data"), ("compact_after", "data"), ("compact_changelog_files", "data"),
    ("compact_new_index_files", "index"), ("compact_deleted_index_files", "index"),
)  # fmt: skip
LEGACY_V2 = Layout(
    "v2-legacy", 13, 4, False,
    (("new_files", "data"), ("changelog_files", "data"), ("compact_before", "data"),
     ("compact_after", "data"), ("compact_changelog_files", "data"), ("new_index_files", "index")),
)  # fmt: skip


def message_layout(version: int) -> Layout:
    """The CommitMessage layout of a ``CommitMessageSerializer`` version (2..14)."""
    if version not in MESSAGE_VERSIONS:
        raise ValueError(f"unknown CommitMessageSerializer version {version}")
    if version >= 13:
        data = 21
    elif version >= 9:
        data = 20
    else:
        data = {2: 15, 3: 16, 4: 17, 5: 17, 6: 18, 7: 18, 8: 19}[version]
    index = 7 if version >= 11 else 6 if version >= 9 else 5
    lists = _V10_LISTS if version >= 10 else _V3_LISTS if version > 2 else _V3_LISTS[:-1]
    return Layout(f"v{version}", data, index, version >= 7, lists, version >= 14)


# ---------------------------------------------------------------------------------------------
# decoding


def _row_bytes(r: _In, what: str, arity: int) -> tuple[Row, int]:
    """``int32 size; BinaryRow`` of ``arity`` fields; returns the row and its offset in ``r``."""
    n = r.count(f"{what} size", 1)
    at = r.pos
    data = r.take(n, what)
    try:
        return Row(data, arity), at
    except BinaryRowError as e:
        raise r.fail(f"{what}: {e}", at + e.offset) from None


def _data_file(r: _In, arity: int, what: str) -> DataFile:
    row, at = _row_bytes(r, what, arity)
    try:
        source = row.nullable(15, "byte")
        return DataFile(
            row.string(0), row.long(1), row.long(2), row.int(10), row.long(7), row.long(8), row.long(9),
            row.nullable(12, "long"), row.nullable(13, "long"),
            None if source is None else FILE_SOURCES[source] if 0 <= source < len(FILE_SOURCES) else str(source),
            tuple(row.string_array(11)), row.nullable(17, "string"),
        )  # fmt: skip
    except BinaryRowError as e:
        raise r.fail(f"{what}: {e}", at + e.offset) from None


def _index_file(r: _In, arity: int, what: str) -> IndexFile:
    row, at = _row_bytes(r, what, arity)
    try:
        return IndexFile(row.string(0), row.string(1), row.long(2), row.long(3), row.nullable(5, "string"))
    except BinaryRowError as e:
        raise r.fail(f"{what}: {e}", at + e.offset) from None


def _partition(r: _In, what: str) -> RawRow:
    """``SerializationUtils.serializeBinaryRow``: int32 len (4 + row), int32 arity, row bytes."""
    n = r.count(f"{what} length", 1)
    if n < 4:
        raise r.fail(f"{what}: length {n} leaves no room for the arity", r.pos - 4)
    at = r.pos
    arity = r.i32(f"{what} arity")
    if arity < 0 or arity > 8 * (n - 4):
        raise r.fail(f"{what}: arity {arity} does not fit a row of {n - 4} bytes", at)
    data = r.take(n - 4, what)
    try:
        return raw_row(data, arity)
    except BinaryRowError as e:
        raise r.fail(f"{what}: {e}", at + 4 + e.offset) from None


def _message(r: _In, version: int, layout: Layout, i: int) -> CommitMessage:
    what = f"commit message {i}"
    partition = _partition(r, f"{what} partition")
    bucket = r.i32(f"{what} bucket")
    total = (
        r.i32(f"{what} total buckets")
        if layout.total_buckets and r.bool(f"{what} total buckets flag")
        else None
    )
    lists: dict[str, list] = {}
    for name, kind in layout.lists:
        n = r.count(f"{what} {name} count", 4)
        if kind == "data":
            lists[name] = [_data_file(r, layout.data_arity, f"{what} {name}[{k}]") for k in range(n)]
        else:
            lists[name] = [_index_file(r, layout.index_arity, f"{what} {name}[{k}]") for k in range(n)]
    check = None
    if layout.check_from_snapshot and r.bool(f"{what} checkFromSnapshot flag"):
        check = r.i64(f"{what} checkFromSnapshot")
    return CommitMessage(version, layout.name, partition, bucket, total, lists, check)


def decode_commit_message(
    data: bytes, version: int, path: str = "<commit message>", base: int = 0
) -> CommitMessage:
    """One ``CommitMessageSerializer.serialize`` body of ``version`` (2..14), all of ``data``."""
    r = _In(data, path, base)
    if version not in MESSAGE_VERSIONS:
        raise r.fail(f"unknown CommitMessageSerializer version {version} (known: 2-14)")
    m = _message(r, version, message_layout(version), 0)
    if r.left:
        raise r.fail(f"{r.left} bytes after the commit message")
    return m


def _messages(r: _In, version: int, layout: Layout) -> list[CommitMessage]:
    n = r.count("commit message count", 12)
    out = [_message(r, version, layout, i) for i in range(n)]
    if r.left:
        raise r.fail(f"{r.left} bytes after the last commit message")
    return out


def decode_committable(
    payload: bytes, version: int, path: str = "<committable>", base: int = 0
) -> Committable:
    """A ``ManifestCommittableSerializer`` (``version`` 2..5) payload, all of ``payload``."""
    r = _In(payload, path, base)
    if version not in MANIFEST_VERSIONS:
        raise r.fail(f"unknown ManifestCommittableSerializer version {version} (known: 2-5)")
    identifier = r.i64("identifier")
    watermark = None if r.bool("watermark-is-null flag") else r.i64("watermark")
    offsets: dict[int, int] = {}
    if version <= 4:
        for _ in range(r.count("log offset count", 12)):
            bucket = r.i32("log offset bucket")
            offsets[bucket] = r.i64("log offset")
    properties: dict[str, str] = {}
    if version >= 4:
        for _ in range(r.count("property count", 4)):
            key = r.utf("property key")
            properties[key] = r.utf("property value")
    at = r.pos
    mversion = r.i32("CommitMessageSerializer version")
    if mversion not in MESSAGE_VERSIONS:
        raise r.fail(f"unknown CommitMessageSerializer version {mversion} (known: 2-14)", at)
    start = r.pos
    try:
        messages = _messages(r, mversion, message_layout(mversion))
    except MetadataFormatError:
        if mversion != 2:
            raise
        # Paimon's own fallback: v2 bytes written before 0.8's layout (CommitMessageLegacyV2Serializer)
        r.pos = start
        try:
            messages = _messages(r, mversion, LEGACY_V2)
        except MetadataFormatError:
            r.pos = start
            messages = _messages(r, mversion, message_layout(mversion))  # re-raise the v2 error
    return Committable(identifier, watermark, offsets, properties, version, mversion, messages, path, base)


def decode_committable_element(data: bytes, path: str = "<committable>", base: int = 0) -> Committable:
    """One ``streaming_committer_raw_states`` element: ``byte[]`` of
    ``SimpleVersionedSerialization.writeVersionAndSerialize(ManifestCommittableSerializer, committable)``."""
    r = _In(data, path, base)
    n = r.count("byte[] length", 1)
    end = r.pos + n
    version = r.i32("ManifestCommittableSerializer version")
    at = r.pos
    length = r.i32("serialized committable length")
    if length != n - 8:
        raise r.fail(
            f"serialized committable length {length} is not the byte[] length {n} minus 8 (version + length)",
            at,
        )
    payload = r.take(length, "serialized committable")
    if version not in MANIFEST_VERSIONS:
        raise r.fail(f"unknown ManifestCommittableSerializer version {version} (known: 2-5)", at - 4)
    c = decode_committable(payload, version, path, base + end - length)
    c.offset = base
    return c


def decode_commit_user(data: bytes, path: str = "<commit user>", base: int = 0) -> str | None:
    """One ``commit_user_state`` element (``StringSerializer``)."""
    return _In(data, path, base).string_value("commit user")


def decode_tag_id(data: bytes, path: str = "<tag state>", base: int = 0) -> int:
    """One ``streaming_committer_for_tags_states`` element (``LongSerializer``)."""
    return _In(data, path, base).i64("savepoint checkpoint id")


def decode_writer_state(data: bytes, path: str = "<writer state>", base: int = 0) -> WriterState:
    """One ``paimon_store_sink_write_state`` element (``TupleSerializer`` of String, String, byte[],
    Integer, byte[]); the partition byte[] is ``SerializationUtils.serializeBinaryRow`` (int32 arity
    then the row)."""
    r = _In(data, path, base)
    table = r.string_value("writer state table")
    key = r.string_value("writer state key")
    n = r.count("writer state partition length", 1)
    if n < 4:
        raise r.fail(f"writer state partition: {n} bytes leave no room for the arity", r.pos - 4)
    at = r.pos
    arity = r.i32("writer state partition arity")
    if arity < 0 or arity > 8 * (n - 4):
        raise r.fail(f"writer state partition: arity {arity} does not fit a row of {n - 4} bytes", at)
    row = r.take(n - 4, "writer state partition")
    try:
        partition = raw_row(row, arity)
    except BinaryRowError as e:
        raise r.fail(f"writer state partition: {e}", at + 4 + e.offset) from None
    bucket = r.i32("writer state bucket")
    value = r.count("writer state value length", 1)
    r.take(value, "writer state value")
    return WriterState(table, key, partition, bucket, value)


# ---------------------------------------------------------------------------------------------
# the handles of a checkpoint
