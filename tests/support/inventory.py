"""S3 Inventory reports for tests: generated from a real listing of the moto bucket, in the format
AWS documents (manifest.json with sourceBucket, destinationBucket ARN, creationTimestamp in ms,
fileFormat, fileSchema, files[{key, size, MD5checksum}]; header-less gzipped CSV with URL-encoded
keys; ORC and Parquet with snake_case columns), plus rows a versioned bucket has: a delete marker
and versions that are not the latest."""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import time
import uuid
from datetime import UTC, datetime
from urllib.parse import quote_plus

from tests.support.s3_clock import next_second
from tests.support.s3_copied import upload_scenario

FORMATS = ("CSV", "Parquet", "ORC")
CSV_SCHEMA = "Bucket, Key, VersionId, IsLatest, IsDeleteMarker, Size, LastModifiedDate, ETag, StorageClass"
PARQUET_SCHEMA = (
    "message s3.inventory { required binary bucket (UTF8); required binary key (UTF8); optional binary version_id "
    "(UTF8); optional boolean is_latest; optional boolean is_delete_marker; optional int64 size; optional int64 "
    "last_modified_date (TIMESTAMP_MILLIS); optional binary e_tag (UTF8); optional binary storage_class (UTF8);}"
)
ORC_SCHEMA = (
    "struct<bucket:string,key:string,version_id:string,is_latest:boolean,is_delete_marker:boolean,size:bigint,"
    "last_modified_date:timestamp,e_tag:string,storage_class:string>"
)
DEST = "inventory-reports"
ODD_NAME = "odd name+plus ü%41.sst"  # a blank, a plus, non-ASCII and a literal %41: URL-encoding matters


def listing(s3_server, bucket: str) -> list[dict]:
    """Every object of the bucket, from a real ListObjectsV2."""
    import boto3

    client = boto3.client("s3", endpoint_url=s3_server.endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")  # fmt: skip
    rows = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for o in page.get("Contents", []):
            rows.append({"bucket": bucket, "key": o["Key"], "version_id": None, "is_latest": True,
                         "is_delete_marker": False, "size": o["Size"], "last_modified_date": o["LastModified"],
                         "e_tag": o["ETag"].strip('"'), "storage_class": "STANDARD"})  # fmt: skip
    return rows


def versioned_rows(bucket: str, job: str, rows: list[dict]) -> list[dict]:
    """What a versioned bucket's inventory also has: a key whose latest version is a delete marker
    (with an older version), and an older version of an existing orphan (another size)."""
    old = datetime(2020, 1, 1, tzinfo=UTC)
    gone = f"checkpoints/{job}/shared/deleted-since"
    base = {"bucket": bucket, "e_tag": "x", "storage_class": "STANDARD"}
    planted = next(r for r in rows if r["key"].endswith("/shared/planted-0"))
    return [
        {**base, "key": gone, "version_id": "v2", "is_latest": True, "is_delete_marker": True, "size": None,
         "last_modified_date": old},
        {**base, "key": gone, "version_id": "v1", "is_latest": False, "is_delete_marker": False, "size": 100,
         "last_modified_date": old},
        {**base, "key": planted["key"], "version_id": "v0", "is_latest": False, "is_delete_marker": False,
         "size": 999_999, "last_modified_date": old},
    ]  # fmt: skip


def csv_gz(rows: list[dict]) -> bytes:
    text = io.StringIO()
    writer = csv.writer(text, quoting=csv.QUOTE_ALL, lineterminator="\n")
    for r in rows:
        writer.writerow([
            r["bucket"], quote_plus(r["key"], safe=""), r["version_id"] or "", str(r["is_latest"]).lower(),
            str(r["is_delete_marker"]).lower(), "" if r["size"] is None else str(r["size"]),
            r["last_modified_date"].astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.")
            + f"{r['last_modified_date'].microsecond // 1000:03d}Z",
            r["e_tag"], r["storage_class"],
        ])  # fmt: skip
    return gzip.compress(text.getvalue().encode("utf-8"))


def _table(rows: list[dict]):
    import pyarrow as pa

    return pa.table({
        "bucket": pa.array([r["bucket"] for r in rows], pa.string()),
        "key": pa.array([r["key"] for r in rows], pa.string()),
        "version_id": pa.array([r["version_id"] for r in rows], pa.string()),
        "is_latest": pa.array([r["is_latest"] for r in rows], pa.bool_()),
        "is_delete_marker": pa.array([r["is_delete_marker"] for r in rows], pa.bool_()),
        "size": pa.array([r["size"] for r in rows], pa.int64()),
        "last_modified_date": pa.array([r["last_modified_date"] for r in rows], pa.timestamp("ms", tz="UTC")),
        "e_tag": pa.array([r["e_tag"] for r in rows], pa.string()),
        "storage_class": pa.array([r["storage_class"] for r in rows], pa.string()),
    })  # fmt: skip


def encode(rows: list[dict], fmt: str) -> tuple[bytes, str, str]:
    """(data file bytes, file suffix, fileSchema)."""
    if fmt == "CSV":
        return csv_gz(rows), "csv.gz", CSV_SCHEMA
    out = io.BytesIO()
    if fmt == "Parquet":
        import pyarrow.parquet as pq

        pq.write_table(_table(rows), out)
        return out.getvalue(), "parquet", PARQUET_SCHEMA
    from pyarrow import orc

    orc.write_table(_table(rows), out)
    return out.getvalue(), "orc", ORC_SCHEMA


def write_inventory(s3_server, rows: list[dict], fmt: str, *, source: str, created: float | None = None,
                    parts: int = 2, corrupt: bytes | None = None) -> str:  # fmt: skip
    """Write data files and manifest.json into the destination bucket as S3 Inventory lays them out;
    the manifest's URI. ``corrupt`` replaces the bytes of the last data file (its manifest entry
    still describes them)."""
    fs = s3_server.filesystem()
    if not fs.exists(DEST):
        s3_server.create_bucket(DEST)
    created_ms = int((created if created is not None else time.time()) * 1000)
    stamp = time.strftime("%Y-%m-%dT%H-%MZ", time.gmtime(created_ms / 1000)) + f"-{uuid.uuid4().hex[:6]}"
    files = []
    chunk = -(-len(rows) // parts)
    for i in range(parts):
        data, suffix, schema = encode(rows[i * chunk : (i + 1) * chunk], fmt)
        key = f"{source}/cfg/data/{uuid.uuid4()}.{suffix}"
        files.append({"key": key, "size": len(data), "MD5checksum": hashlib.md5(data).hexdigest()})
        fs.pipe_file(f"{DEST}/{key}", corrupt if (corrupt is not None and i == parts - 1) else data)
    manifest = {
        "sourceBucket": source, "destinationBucket": f"arn:aws:s3:::{DEST}", "version": "2016-11-30",
        "creationTimestamp": str(created_ms), "fileFormat": fmt, "fileSchema": schema, "files": files,
    }  # fmt: skip
    key = f"{source}/cfg/{stamp}/manifest.json"
    fs.pipe_file(f"{DEST}/{key}", json.dumps(manifest).encode())
    return f"s3://{DEST}/{key}"


def setup(s3_server, bucket: str) -> dict:
    """The fixture scenario with planted orphans, uploaded, and a file with an awkward name (newer
    than the _metadata: kept as in flight, in both plans alike)."""
    up = upload_scenario(s3_server, bucket)
    job = next(iter(up["orphans"])).split("/checkpoints/")[1].split("/")[0]
    odd = f"checkpoints/{job}/shared/{ODD_NAME}"
    up["fs"].pipe_file(f"{bucket}/{odd}", b"odd orphan")
    # S3 keeps whole seconds: wait until the planted file is past the --older-than cut-off (else it is
    # 'young' in one plan and 'in-flight' in the next), and the report begins after every upload
    next_second()
    up["odd"] = f"s3://{bucket}/{odd}"
    up["job"] = job
    return up


_SHARED: dict = {}


def shared(s3_server) -> dict:
    """One uploaded scenario for the tests that only read it (each upload waits out S3's one-second
    mtimes twice): made once per session, with its listing."""
    if not _SHARED:
        up = setup(s3_server, "inv-shared")
        _SHARED.update(up, bucket="inv-shared", rows=listing(s3_server, "inv-shared"))
    return _SHARED


def local_report(dest, rows: list[dict], fmt: str, *, data: bytes | None = None, **manifest) -> str:
    """A report as ``aws s3 sync`` of the destination bucket leaves it on local disk (one data
    file; ``data`` replaces its bytes, the manifest describing them; ``manifest`` replaces or, as
    ``None``, drops the manifest's fields): the path of its manifest.json."""
    encoded, suffix, schema = encode(rows, fmt)
    data = encoded if data is None else data
    key = f"src/cfg/data/part.{suffix}"
    (dest / "src/cfg/data").mkdir(parents=True, exist_ok=True)
    (dest / key).write_bytes(data)
    (dest / "src/cfg/2026-01-03T00-00Z").mkdir(exist_ok=True)
    fields = {
        "sourceBucket": "src", "destinationBucket": "arn:aws:s3:::dest", "version": "2016-11-30",
        "creationTimestamp": "1767398400000", "fileFormat": fmt, "fileSchema": schema,
        "files": [{"key": key, "size": len(data), "MD5checksum": hashlib.md5(data).hexdigest()}],
    }  # fmt: skip
    fields.update(manifest)
    path = dest / "src/cfg/2026-01-03T00-00Z/manifest.json"
    path.write_text(json.dumps({k: v for k, v in fields.items() if v is not None}))
    return str(path)


def report_rows(keys: list[str], **fields) -> list[dict]:
    """Rows of current objects of bucket ``src`` (written 2026-01-02), ``fields`` replacing any field."""
    t = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    return [{"bucket": "src", "key": k, "version_id": None, "is_latest": True, "is_delete_marker": False,
             "size": 1, "last_modified_date": t, "e_tag": "e", "storage_class": "STANDARD", **fields}
            for k in keys]  # fmt: skip
