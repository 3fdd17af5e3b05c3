"""Where a Paimon table keeps its data files: partition directories and buckets.

``PartitionPathUtils`` and ``InternalRowPartitionComputer`` in Python: the directory of a partition
BinaryRow and bucket, under ``data-file.path-directory`` or an external path, as the table's
latest schema lays them out. Kept apart from the table because manifests, commit messages and
orphan listing all place files by it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from ckptctl.paimon.records import DataFile, PaimonFormatError, UnsupportedPartitionType, record_field
from ckptctl.storage import normalize_uri

BUCKET_PREFIX = "bucket-"
POSTPONE_BUCKET = -2  # BucketMode.POSTPONE_BUCKET: files under bucket-postpone


_ESCAPE = set("\"#%'*/:=?\\{}[]^\x7f") | {chr(c) for c in range(32)}


def escape_path_name(value: str) -> str:
    """``PartitionPathUtils.escapePathName``."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPE else c for c in value)


@dataclass
class TableLayout:
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
        name = record_field(meta, "_FILE_NAME", str, uri)
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
