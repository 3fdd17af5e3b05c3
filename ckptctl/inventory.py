"""S3 Inventory reports as a file universe: what a listing of a huge bucket would say, read from
the report AWS already writes (``manifest.json`` plus CSV.gz, ORC or Parquet data files).

An inventory is a snapshot taken at its ``creationTimestamp``: objects written after it are not
in it, and objects deleted after it still are. gc uses it for the files of ``shared/``,
``taskowned/`` and ``chk-N/`` only; ``_metadata`` discovery is always a fresh listing, and every
file the inventory cannot speak for (written after the report began) is kept.

Rows are filtered and decoded in Arrow (key prefix, ``IsLatest``, ``IsDeleteMarker``, sizes,
times): :func:`iter_batches` yields record batches, which the Spark planner hands to the JVM as
they are; only CSV keys with a ``%`` or ``+`` and times not in S3's own format are decoded by
Python. :func:`iter_files` is the same reader a row at a time. PyArrow is imported lazily.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote_to_bytes

from ckptctl import storage as st
from ckptctl.columns import starts_with_any
from ckptctl.errors import CkptError
from ckptctl.storage import FileInfo, Storage

FORMATS = ("CSV", "ORC", "Parquet")
MANIFEST_LIMIT = 64 << 20  # a manifest lists data files; one of 64 MiB is not one
CSV_BLOCK = 8 << 20
# The bounds every time of a report is held to (a time outside them is a broken report: exit 2,
# never a plan). S3 Inventory was launched on 2016-11-30 (the manifest's "version"): no report was
# created before. No object was written before S3 launched (2006-03-14). Neither is later than the
# ``latest`` the caller gives (the storage clock plus its tolerance): a report cannot speak of a
# time that has not come yet.
INVENTORY_LAUNCH = 1_480_464_000.0  # 2016-11-30T00:00:00Z
S3_LAUNCH = 1_142_294_400.0  # 2006-03-14T00:00:00Z
# S3's largest object (50 TB since December 2025; 5 TiB before): a larger size is a broken row
MAX_OBJECT_SIZE = 50 * 10**12
MD5_HEX = re.compile(r"[0-9a-fA-F]{32}")


class InventoryError(CkptError):
    """The manifest or a data file cannot be used (exit 2, one line naming the file)."""


@dataclass(frozen=True)
class DataFile:
    uri: str
    size: int
    md5: str | None


@dataclass(frozen=True)
class Inventory:
    """A parsed ``manifest.json``."""

    uri: str
    source_bucket: str
    destination_bucket: str
    version: str
    created: float  # creationTimestamp, epoch seconds
    file_format: str
    file_schema: str
    files: tuple[DataFile, ...]
    latest: float = math.inf  # no time of the report may be later (the storage clock plus its tolerance)

    def describe(self) -> dict[str, Any]:
        return {"uri": self.uri, "source_bucket": self.source_bucket, "created": self.created,
                "format": self.file_format, "data_files": len(self.files)}  # fmt: skip


@dataclass
class ReadStats:
    rows_read: int = 0  # every row of every data file
    rows_kept: int = 0  # latest, not a delete marker, under a scope
    files_read: int = 0
    by_file: list[dict[str, Any]] = field(default_factory=list)


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
         f"'creationTimestamp' {stamp} ({_iso(created)}) is not between S3 Inventory's launch ({_iso(INVENTORY_LAUNCH)}) "
         f"and the storage clock ({_iso(latest)}, with its tolerance)")  # fmt: skip
    columns = schema_columns(fmt, data["fileSchema"])
    need(columns is not None, f"'fileSchema' is no {fmt} schema of named columns without duplicates")
    _require([_norm(c) for c in columns or ()], uri)
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


def _iso(t: float) -> str:
    """An epoch time as UTC ISO 8601; one beyond what Python's calendar holds as said."""
    try:
        return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return "beyond year 9999" if t > 0 else "before year 1"


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


def schema_columns(file_format: str, file_schema: str) -> list[str] | None:
    """The column names the manifest's ``fileSchema`` declares (``None``: it declares none, or a
    name twice): CSV's ``"Bucket, Key, ..."``, Parquet's ``message s3.inventory { required binary
    bucket (UTF8); ...}``, ORC's ``struct<bucket:string,key:string,...>``."""
    if file_format == "CSV":
        names = csv_columns(file_schema)
    elif file_format == "Parquet":
        body = re.fullmatch(r"\s*message\s+[\w.]+\s*\{(.*)\}\s*", file_schema, re.S)
        fields = [f.strip() for f in body.group(1).split(";") if f.strip()] if body else []
        names = [m.group(1) if (m := re.fullmatch(r"(?:required|optional|repeated)\s+\w+\s+(\w+)(?:\s*\(.*\))?", f))
                 else "" for f in fields]  # fmt: skip
    else:
        body = re.fullmatch(r"\s*struct<(.*)>\s*", file_schema, re.S)
        names = (
            [f.split(":", 1)[0].strip() if ":" in f else "" for f in body.group(1).split(",")] if body else []
        )
    if not names or not all(re.fullmatch(r"[A-Za-z_][\w ]*", n) for n in names):
        return None
    return names if len({_norm(n) for n in names}) == len(names) else None


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


# ---------------------------------------------------------------------------------------------
# columns


def _norm(name: str) -> str:
    return name.strip().lower().replace("_", "").replace(" ", "")


KEY, SIZE, MTIME, LATEST, DELETE, BUCKET = (
    "key",
    "size",
    "lastmodifieddate",
    "islatest",
    "isdeletemarker",
    "bucket",
)


def csv_columns(file_schema: str) -> list[str]:
    """``"Bucket, Key, VersionId, IsLatest, ..."``: the CSV's column names (it has no header)."""
    return [c.strip() for c in file_schema.split(",")]


def _encoded_prefix_regex(prefix: str) -> str:
    """A regex matching every URL encoding of ``prefix`` (each character literal or ``%XX``, a
    blank also ``+``): a superset test on the encoded key, done in Arrow; the decoded key is then
    checked exactly."""
    parts = []
    for ch in prefix:
        alts = ["(?i:" + "".join(f"%{b:02X}" for b in ch.encode("utf-8")) + ")"]
        if ch != "+":  # a literal + is a blank
            alts.append(re.escape(ch))
        if ch == " ":
            alts.append(r"\+")
        parts.append("(?:" + "|".join(alts) + ")")
    return "^" + "".join(parts)


class _HashingReader:
    """A raw stream that hashes what is read (the MD5 the manifest promises for CSV files)."""

    def __init__(self, raw) -> None:
        self.raw, self.md5, self.closed = raw, hashlib.md5(usedforsecurity=False), False

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(n)
        self.md5.update(data)
        return data

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def close(self) -> None:
        self.closed = True

    def drain(self) -> None:
        while self.read(1 << 20):
            pass


def iter_batches(storage: Storage, inv: Inventory, scopes: Iterable[str], stats: ReadStats | None = None,
                 ) -> Iterator[Any]:  # fmt: skip
    """Every current object (latest version, not a delete marker) of the inventory whose URI lies
    under one of ``scopes`` (``s3://sourceBucket/...``), in Arrow record batches of columns ``uri``
    (string), ``size`` (int64) and ``mtime`` (float64 epoch seconds, null when unknown): the rows of
    a bucket of 10^8 objects never become Python objects here."""
    stats = stats if stats is not None else ReadStats()
    bucket_prefix = f"s3://{inv.source_bucket}/"
    prefixes = []
    for scope in scopes:
        if not scope.startswith(bucket_prefix) and scope != bucket_prefix.rstrip("/"):
            raise InventoryError(
                f"the inventory is of bucket {inv.source_bucket}, not of {scope}", path=inv.uri
            )
        key = scope[len(bucket_prefix) :].strip("/")
        prefixes.append(key + "/" if key else "")
    for df in inv.files:
        yield from _read_data_file(storage, inv, df, tuple(prefixes), stats)


def iter_files(storage: Storage, inv: Inventory, scopes: Iterable[str], stats: ReadStats | None = None,
               ) -> Iterator[FileInfo]:  # fmt: skip
    """:func:`iter_batches` a :class:`FileInfo` at a time (the in-process planner)."""
    for batch in iter_batches(storage, inv, scopes, stats):
        columns = (batch.column(c).to_pylist() for c in ("uri", "size", "mtime"))
        for uri, size, mtime in zip(*columns, strict=True):
            yield FileInfo(uri, size, mtime)


def _read_data_file(
    storage: Storage, inv: Inventory, df: DataFile, prefixes: tuple[str, ...], stats: ReadStats
):
    found = storage.stat(df.uri)
    if found is None:
        raise InventoryError("inventory data file not found (listed in the manifest)", path=df.uri)
    if found.size != df.size:
        raise InventoryError(
            f"inventory data file has {found.size} bytes, the manifest says {df.size}", path=df.uri
        )
    fs, path = storage.fs(df.uri)
    before = stats.rows_read, stats.rows_kept
    try:
        with fs.open(path, "rb") as raw:
            if inv.file_format == "CSV":
                reader = _HashingReader(raw)
                yield from _csv_batches(inv, reader, prefixes, stats)
                reader.drain()
                if df.md5 and reader.md5.hexdigest() != df.md5.lower():
                    raise InventoryError("inventory data file does not match its MD5checksum in the manifest",
                                         path=df.uri)  # fmt: skip
            else:
                yield from _columnar_batches(inv, _checked(raw, df), prefixes, stats)
    except CkptError as e:
        if e.path is None:
            e.path = df.uri
        raise
    except Exception as e:  # noqa: BLE001 - Arrow, gzip, s3fs: one line naming the file
        raise InventoryError(
            f"cannot read the inventory data file ({inv.file_format}): {type(e).__name__}: "
            f"{(str(e).strip().splitlines() or [''])[0][:200]}", path=df.uri,
        ) from None  # fmt: skip
    stats.files_read += 1
    stats.by_file.append(
        {"uri": df.uri, "rows": stats.rows_read - before[0], "kept": stats.rows_kept - before[1]}
    )


# A columnar file up to this size is read once, into memory, and hashed there; a larger one is
# hashed as it streams, then read again by Arrow (which seeks): twice the bytes, not its size in memory.
HASHED_IN_MEMORY = 512 << 20


def _checked(raw, df: DataFile):
    """What Arrow reads an ORC or Parquet file from, its MD5 checked first when the manifest gives
    one (a CSV's is hashed as it streams)."""
    if not df.md5:
        return raw
    md5 = hashlib.md5(usedforsecurity=False)
    if df.size <= HASHED_IN_MEMORY:
        import pyarrow as pa

        data = raw.read()
        md5.update(data)
        source = pa.BufferReader(data)
    else:
        while chunk := raw.read(8 << 20):
            md5.update(chunk)
        raw.seek(0)
        source = raw
    if md5.hexdigest() != df.md5.lower():
        raise InventoryError(
            "inventory data file does not match its MD5checksum in the manifest", path=df.uri
        )
    return source


def _csv_batches(inv: Inventory, reader, prefixes, stats):
    import pyarrow as pa
    from pyarrow import csv

    names = csv_columns(inv.file_schema)
    by_norm = {_norm(n): n for n in names}
    wanted = [by_norm[k] for k in (KEY, SIZE, MTIME, LATEST, DELETE, BUCKET) if k in by_norm]
    stream = pa.CompressedInputStream(pa.PythonFile(reader, mode="r"), "gzip")
    batches = csv.open_csv(
        stream,
        read_options=csv.ReadOptions(column_names=names, block_size=CSV_BLOCK),
        parse_options=csv.ParseOptions(newlines_in_values=False),
        convert_options=csv.ConvertOptions(include_columns=wanted, column_types={n: pa.string() for n in wanted},
                                           strings_can_be_null=False, quoted_strings_can_be_null=False),
    )  # fmt: skip
    regex = "|".join(f"(?:{_encoded_prefix_regex(p)})" for p in prefixes) if prefixes else None
    for batch in batches:
        yield from _select(inv, batch, by_norm, prefixes, regex, stats, encoded=True)


def _columnar_batches(inv: Inventory, raw, prefixes, stats):
    if inv.file_format == "Parquet":
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(raw)
        by_norm = _file_columns(inv, pf.schema_arrow)
        cols = [by_norm[k] for k in (KEY, SIZE, MTIME, LATEST, DELETE, BUCKET) if k in by_norm]
        batches: Iterable[Any] = pf.iter_batches(batch_size=256 * 1024, columns=cols)
    else:
        from pyarrow import orc

        of = orc.ORCFile(raw)
        by_norm = _file_columns(inv, of.schema)
        cols = [by_norm[k] for k in (KEY, SIZE, MTIME, LATEST, DELETE, BUCKET) if k in by_norm]
        batches = (of.read_stripe(i, columns=cols) for i in range(of.nstripes))
    for batch in batches:
        yield from _select(inv, batch, by_norm, prefixes, None, stats, encoded=False)


def _require(names: list[str], uri: str) -> None:
    """The columns a plan needs are in the report (``names`` normalised); a report of every
    version (a ``VersionId`` column) says which is the latest and which a delete marker."""
    missing = [n for n, k in (("Key", KEY), ("Size", SIZE), ("LastModifiedDate", MTIME)) if k not in names]
    if missing:
        raise InventoryError(
            f"the inventory has no {', '.join(missing)} column: configure it with the optional fields Size "
            "and LastModifiedDate", path=uri,
        )  # fmt: skip
    if "versionid" in names and not {LATEST, DELETE} <= set(names):
        raise InventoryError(
            "the inventory lists versions (VersionId) without IsLatest and IsDeleteMarker", path=uri
        )


# the Arrow types each column a plan reads may have in an ORC or Parquet report
_TYPES = {KEY: ("string", "large_string"), SIZE: ("integer",), MTIME: ("timestamp", "integer"),
          LATEST: ("boolean",), DELETE: ("boolean",), BUCKET: ("string", "large_string")}  # fmt: skip


def _file_columns(inv: Inventory, schema) -> dict[str, str]:
    """An ORC or Parquet file's columns (normalised name -> name), checked against the manifest's
    ``fileSchema`` (the same names) and of the types S3 Inventory writes."""
    import pyarrow as pa

    by_norm = {_norm(n): n for n in schema.names}
    declared = {_norm(n) for n in schema_columns(inv.file_format, inv.file_schema) or ()}
    if len(by_norm) != len(schema.names) or set(by_norm) != declared:
        raise InventoryError(f"the data file's columns ({', '.join(schema.names)}) are not those of the manifest's "
                             "fileSchema")  # fmt: skip
    for k, kinds in _TYPES.items():
        if k in by_norm:
            kind = schema.field(by_norm[k]).type
            if not any(getattr(pa.types, f"is_{t}")(kind) for t in kinds):
                raise InventoryError(
                    f"the data file's column {by_norm[k]} is of type {kind}, not {' or '.join(kinds)}"
                )
    return by_norm


def _truthy(column):
    """A boolean column (ORC, Parquet) or CSV's ``true``/``false`` strings, as booleans."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_boolean(column.type):
        return pc.fill_null(column, False)
    text = pc.utf8_lower(pc.utf8_trim_whitespace(column))
    known = pc.fill_null(pc.is_in(text, value_set=pa.array(["true", "false"])), False)
    if not pc.all(known).as_py():
        bad = pc.filter(column, pc.invert(known))[0].as_py()
        raise InventoryError(f"{bad[:40]!r} in a row's IsLatest or IsDeleteMarker is neither true nor false")
    return pc.equal(text, "true")


def _select(inv: Inventory, batch, by_norm, prefixes, regex, stats: ReadStats, *, encoded: bool):
    """The rows of ``batch`` that are current objects under ``prefixes``, as a record batch of
    :func:`iter_batches` (nothing when none is)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    stats.rows_read += batch.num_rows
    key = batch.column(by_norm[KEY])
    under = prefixes and "" not in prefixes
    mask = None
    if under:
        mask = pc.match_substring_regex(key, regex) if encoded else starts_with_any(key, prefixes)
    if LATEST in by_norm:
        m = _truthy(batch.column(by_norm[LATEST]))
        mask = m if mask is None else pc.and_(mask, m)
    if DELETE in by_norm:
        m = pc.invert(_truthy(batch.column(by_norm[DELETE])))
        mask = m if mask is None else pc.and_(mask, m)
    if mask is not None:
        batch = batch.filter(pc.fill_null(mask, False))
    if not batch.num_rows:
        return
    if BUCKET in by_norm:
        buckets = batch.column(by_norm[BUCKET])
        if not pc.all(pc.equal(buckets, inv.source_bucket)).as_py():
            other = next(b for b in buckets.to_pylist() if b != inv.source_bucket)
            raise InventoryError(
                f"a row names bucket {other!r}, the manifest's sourceBucket is {inv.source_bucket!r}"
            )
    key = batch.column(by_norm[KEY])
    size = batch.column(by_norm[SIZE])
    if not pa.types.is_int64(size.type):
        size = _sizes(size)
    if key.null_count or size.null_count:
        raise InventoryError("a row of a current object has no key or no size")
    _check_range(size, 0, MAX_OBJECT_SIZE, "Size", key)
    mtime = _epoch_seconds(batch.column(by_norm[MTIME]))
    _check_range(mtime, S3_LAUNCH, inv.latest, "LastModifiedDate", key)
    if encoded:
        key = _unquoted(key)
    else:
        _check_utf8(key)
    if not pc.all(pc.greater(pc.binary_length(key), 0)).as_py():
        raise InventoryError("a row of a current object has an empty key")
        if under:  # the regex matched the encoded key: the decoded one must be under a prefix too
            inside = starts_with_any(key, prefixes)
            key, size, mtime = (pc.filter(c, inside) for c in (key, size, mtime))
    if not len(key):
        return
    stats.rows_kept += len(key)
    uri = pc.binary_join_element_wise(
        f"s3://{inv.source_bucket}/", pc.cast(key, pa.string()), ""
    )  # not large_string
    yield pa.RecordBatch.from_arrays([uri, size, mtime], names=["uri", "size", "mtime"])


def _sizes(column):
    """Sizes as int64: another integer type cast; a CSV's strings digits only (Arrow's cast also
    takes ``+5`` and ``-0``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_integer(column.type):
        return pc.cast(column, pa.int64())  # a uint64 beyond int64 raises: one line naming the file
    digits = pc.match_substring_regex(column, r"^[0-9]{1,19}$")
    if not pc.all(pc.fill_null(digits, True)).as_py():
        bad = pc.filter(column, pc.invert(pc.fill_null(digits, True)))[0].as_py()
        raise InventoryError(f"Size {bad[:40]!r} of a row is not a size")
    try:
        return pc.cast(column, pa.int64())
    except pa.ArrowInvalid:
        raise InventoryError("a Size of a row is beyond 64 bits") from None


def _check_range(values, low: float, high: float, what: str, keys) -> None:
    """Every non-null value in [low, high], or one line naming the first row's key and value."""
    import pyarrow.compute as pc

    bad = pc.fill_null(pc.or_(pc.less(values, low), pc.greater(values, high)), False)
    if pc.any(bad).as_py():
        i = pc.indices_nonzero(bad)[0].as_py()
        value = values[i].as_py()
        shown = _iso(value) if what == "LastModifiedDate" else value
        raise InventoryError(f"{what} {shown} of the row of key {keys[i].as_py()!r} is not between "
                             f"{_iso(low) if what == 'LastModifiedDate' else low} and "
                             f"{_iso(high) if what == 'LastModifiedDate' else high}")  # fmt: skip


def _check_utf8(key) -> None:
    """Keys are UTF-8 (S3's are): Parquet's and ORC's string columns are not checked as they are read."""
    import pyarrow as pa

    try:
        key.validate(full=True)
    except pa.ArrowInvalid:
        raise InventoryError("a key of a row is not UTF-8") from None


def _unquoted(key):
    """CSV's URL-encoded keys decoded (``unquote_plus``): in Python only those with a ``%`` or ``+``.
    An encoding of bytes that are no UTF-8 is a broken row (``unquote_plus`` would make each of
    them U+FFFD: two keys one name)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    encoded = pc.match_substring_regex(key, "[%+]")
    if not pc.any(encoded).as_py():
        return key
    decoded = []
    for k in pc.filter(key, encoded).to_pylist():
        try:
            decoded.append(unquote_to_bytes(k.replace("+", " ")).decode("utf-8"))
        except UnicodeDecodeError:
            raise InventoryError(f"the key {k[:200]!r} of a row is the URL encoding of no UTF-8") from None
    return pc.replace_with_mask(key, encoded, pa.array(decoded, pa.string()))


_UNIT = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}
# what S3 Inventory writes (2026-01-02T03:04:05.000Z), parsed by Arrow; any other form by Python
_ISO_UTC = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$"


def _epoch_seconds(column):
    """LastModifiedDate as float64 epoch seconds (null where there is none)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_timestamp(column.type):
        return pc.divide(
            pc.cast(pc.cast(column, pa.int64()), pa.float64(), safe=False), _UNIT[column.type.unit]
        )
    if pa.types.is_integer(column.type):  # milliseconds, as Parquet's TIMESTAMP_MILLIS without its annotation
        return pc.divide(pc.cast(column, pa.float64(), safe=False), 1e3)
    text = pc.utf8_trim_whitespace(column)
    fast = pc.fill_null(pc.match_substring_regex(text, _ISO_UTC), False)
    seconds = pa.nulls(len(text), pa.float64())
    if pc.any(fast).as_py():
        try:
            micros = pc.cast(pc.cast(pc.filter(text, fast), pa.timestamp("us", "UTC")), pa.int64())
            seconds = pc.replace_with_mask(seconds, fast, pc.divide(pc.cast(micros, pa.float64()), 1e6))
        except pa.ArrowInvalid:  # a date that is none (02-30): Python's message names it
            fast = pa.repeat(False, len(text))
    slow = pc.invert(fast)
    if pc.any(slow).as_py():
        parsed = [_iso_seconds(v) for v in pc.filter(column, slow).to_pylist()]
        seconds = pc.replace_with_mask(seconds, slow, pa.array(parsed, pa.float64()))
    return seconds


def _iso_seconds(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.strip().replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise InventoryError(f"LastModifiedDate {value!r} is not an ISO 8601 time") from None
