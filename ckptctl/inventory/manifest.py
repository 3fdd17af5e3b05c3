"""Reading an S3 Inventory ``manifest.json``: every field checked (buckets, format, creation time,
the declared columns, each data file's key, size and MD5), ``manifest.checksum`` when AWS wrote one,
and where each data file is (the destination bucket, or beside a local copy of the report).

Apart from :mod:`~ckptctl.inventory.rows`: a manifest is read once, small and whole; the rows are
streamed in Arrow. Also here: how many rows a report holds at most, from the manifest alone.
"""

from __future__ import annotations

import hashlib
import json
import re

from ckptctl import storage as st
from ckptctl.errors import CkptError
from ckptctl.inventory.report import (
    FORMATS,
    INVENTORY_LAUNCH,
    MAX_OBJECT_SIZE,
    MD5_HEX,
    DataFile,
    Inventory,
    InventoryError,
    iso_time,
)
from ckptctl.inventory.schema import norm, require_columns, schema_columns
from ckptctl.storage import Storage

MANIFEST_LIMIT = 64 << 20  # a manifest lists data files; one of 64 MiB is not one


def _bucket_name(value: str) -> str:
    """``arn:aws:s3:::bucket`` (what manifests carry for the destination) or a bare name."""
    return value.rsplit(":", 1)[-1] if value.startswith("arn:") else value


# Fewer bytes than a current object's row takes compressed in each format (a key's random part
# and an ETag alone are ~34 bytes of entropy; bench/bucket_bench.py's Parquet takes 35 a row with
# no ETag): a report's bytes divided by these over-count its rows, never under-count them.
LEAST_BYTES_PER_ROW = {"CSV": 16, "ORC": 12, "PARQUET": 12}


def most_rows(inventory: Inventory) -> int:
    """At most how many rows the report's data files hold, from the sizes the manifest gives
    (nothing read): enough to tell beforehand whether a plan of them fits in one process."""
    per_row = LEAST_BYTES_PER_ROW.get(inventory.file_format.upper(), min(LEAST_BYTES_PER_ROW.values()))
    return sum(f.size for f in inventory.files) // per_row


def read_manifest(storage: Storage, uri: str, *, latest: float) -> Inventory:
    """Read and check ``manifest.json`` (local path or ``s3://``) and, when AWS wrote one beside it,
    ``manifest.checksum`` (the manifest's MD5). ``latest``: the latest time the report may name
    (its creation and its rows' LastModifiedDate), the storage clock plus its tolerance."""
    uri = st.normalize_uri(uri)
    try:
        raw = storage.read_bytes(uri, limit=MANIFEST_LIMIT)
    except CkptError as e:
        raise InventoryError(f"cannot read the inventory manifest: {e.message}", path=uri) from None
    _check_manifest_checksum(storage, uri, raw)
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise InventoryError(
            f"not an S3 Inventory manifest (not JSON: {str(e).splitlines()[0]})", path=uri
        ) from None

    def need(cond: bool, what: str) -> None:
        if not cond:
            raise InventoryError(f"not an S3 Inventory manifest: {what}", path=uri)

    need(isinstance(data, dict), "the top level is not an object")
    for key in ("sourceBucket", "destinationBucket", "fileFormat", "fileSchema", "creationTimestamp"):
        need(isinstance(data.get(key), str) and bool(data[key]), f"'{key}' is missing or not a string")
    for key in ("sourceBucket", "destinationBucket"):
        need(
            _BUCKET.fullmatch(_bucket_name(data[key])) is not None,
            f"'{key}' {data[key]!r} is not a bucket name",
        )
    fmt = data["fileFormat"]
    need(fmt.lower() in {f.lower() for f in FORMATS}, f"fileFormat {fmt!r} is none of {', '.join(FORMATS)}")
    fmt = next(f for f in FORMATS if f.lower() == fmt.lower())
    stamp = data["creationTimestamp"]
    need(re.fullmatch(r"[0-9]{1,16}", stamp) is not None, f"'creationTimestamp' {stamp[:40]!r} is not milliseconds "
         "since the epoch")  # fmt: skip
    created = int(stamp) / 1000.0
    need(INVENTORY_LAUNCH <= created <= latest,
         f"'creationTimestamp' {stamp} ({iso_time(created)}) is not between S3 Inventory's launch ({iso_time(INVENTORY_LAUNCH)}) "
         f"and the storage clock ({iso_time(latest)}, with its tolerance)")  # fmt: skip
    columns = schema_columns(fmt, data["fileSchema"])
    need(columns is not None, f"'fileSchema' is no {fmt} schema of named columns without duplicates")
    require_columns([norm(c) for c in columns or ()], uri)
    files = data.get("files")
    need(isinstance(files, list) and bool(files), "'files' is missing or empty")
    dest = _bucket_name(data["destinationBucket"])
    out = []
    for i, f in enumerate(files):
        need(
            isinstance(f, dict) and isinstance(f.get("key"), str) and bool(f["key"]), f"files[{i}] has no key"
        )
        need(st.is_normal(f"s3://{dest}/{f['key']}") and "\x00" not in f["key"], f"files[{i}].key {f['key']!r} "
             "is not a key in normal form")  # fmt: skip
        size = f.get("size")
        need(isinstance(size, int) and not isinstance(size, bool) and 0 < size <= MAX_OBJECT_SIZE,
             f"files[{i}].size is not a size")  # fmt: skip
        md5 = f.get("MD5checksum")
        need(md5 is None or (isinstance(md5, str) and MD5_HEX.fullmatch(md5) is not None),
             f"files[{i}].MD5checksum is not an MD5 in hex")  # fmt: skip
        out.append(DataFile(_data_uri(storage, uri, dest, f["key"]), size, md5))
    need(len({f.uri for f in out}) == len(out), "a data file is listed twice in 'files'")
    return Inventory(uri, data["sourceBucket"], dest, str(data.get("version", "")), created, fmt,
                     data["fileSchema"], tuple(out), latest)  # fmt: skip


# S3's rules for a bucket name: 3-63 of lowercase letters, digits, dots and hyphens (older
# us-east-1 buckets may also hold capitals and underscores), beginning and ending with a letter or digit
_BUCKET = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9._-]{1,61}[a-zA-Z0-9]")


def _check_manifest_checksum(storage: Storage, uri: str, raw: bytes) -> None:
    """``manifest.checksum`` beside ``manifest.json``, when there is one: the manifest's MD5 in hex."""
    if not uri.endswith("/manifest.json"):
        return
    checksum_uri = uri[: -len("json")] + "checksum"
    try:
        if storage.stat(checksum_uri) is None:
            return
        text = storage.read_bytes(checksum_uri, limit=1024)
    except CkptError as e:
        raise InventoryError(f"cannot read the manifest's checksum: {e.message}", path=checksum_uri) from None
    digest = text.strip().decode("ascii", "replace")
    if MD5_HEX.fullmatch(digest) is None:
        raise InventoryError("manifest.checksum is not an MD5 in hex", path=checksum_uri)
    if hashlib.md5(raw, usedforsecurity=False).hexdigest() != digest.lower():
        raise InventoryError("manifest.json does not match its MD5 in manifest.checksum", path=uri)


def _data_uri(storage: Storage, manifest_uri: str, dest_bucket: str, key: str) -> str:
    """Where a data file is: in the destination bucket; for a local copy of the report (tests, an
    ``aws s3 sync`` of the destination bucket), below the nearest ancestor of the manifest that
    holds the key."""
    if st.scheme_of(manifest_uri) == "s3":
        return f"s3://{dest_bucket}/{key}"
    directory = st.parent(manifest_uri)
    while True:
        candidate = st.join(directory, key)
        if storage.stat(candidate) is not None:
            return candidate
        up = st.parent(directory)
        if up == directory or directory in ("file:/", "file:"):
            return st.join(st.parent(manifest_uri), key)  # the error will name it
        directory = up
