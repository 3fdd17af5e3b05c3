"""Reading the rows of an S3 Inventory report: each data file the manifest lists (its size and MD5
checked), its rows filtered and decoded in Arrow (key prefix, ``IsLatest``, ``IsDeleteMarker``) and
every kept row's key, size and time validated: a broken row is one line naming the file, never a plan.

:func:`iter_batches` yields record batches, which the Spark planner hands to the JVM as they are;
only CSV keys with a ``%`` or ``+`` and times not in S3's own format are decoded by Python.
:func:`iter_files` is the same reader a row at a time. PyArrow is imported lazily.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any
from urllib.parse import unquote_to_bytes

from ckptctl.columns import starts_with_any
from ckptctl.errors import CkptError
from ckptctl.inventory.report import (
    MAX_OBJECT_SIZE,
    S3_LAUNCH,
    DataFile,
    Inventory,
    InventoryError,
    ReadStats,
    iso_time,
)
from ckptctl.inventory.schema import (
    BUCKET,
    DELETE,
    KEY,
    LATEST,
    MTIME,
    SIZE,
    csv_columns,
    encoded_prefix_regex,
    file_columns,
    norm,
)
from ckptctl.storage import FileInfo, Storage

CSV_BLOCK = 8 << 20


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
    by_norm = {norm(n): n for n in names}
    wanted = [by_norm[k] for k in (KEY, SIZE, MTIME, LATEST, DELETE, BUCKET) if k in by_norm]
    stream = pa.CompressedInputStream(pa.PythonFile(reader, mode="r"), "gzip")
    batches = csv.open_csv(
        stream,
        read_options=csv.ReadOptions(column_names=names, block_size=CSV_BLOCK),
        parse_options=csv.ParseOptions(newlines_in_values=False),
        convert_options=csv.ConvertOptions(include_columns=wanted, column_types={n: pa.string() for n in wanted},
                                           strings_can_be_null=False, quoted_strings_can_be_null=False),
    )  # fmt: skip
    regex = "|".join(f"(?:{encoded_prefix_regex(p)})" for p in prefixes) if prefixes else None
    for batch in batches:
        yield from _select(inv, batch, by_norm, prefixes, regex, stats, encoded=True)


def _columnar_batches(inv: Inventory, raw, prefixes, stats):
    if inv.file_format == "Parquet":
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(raw)
        by_norm = file_columns(inv, pf.schema_arrow)
        cols = [by_norm[k] for k in (KEY, SIZE, MTIME, LATEST, DELETE, BUCKET) if k in by_norm]
        batches: Iterable[Any] = pf.iter_batches(batch_size=256 * 1024, columns=cols)
    else:
        from pyarrow import orc

        of = orc.ORCFile(raw)
        by_norm = file_columns(inv, of.schema)
        cols = [by_norm[k] for k in (KEY, SIZE, MTIME, LATEST, DELETE, BUCKET) if k in by_norm]
        batches = (of.read_stripe(i, columns=cols) for i in range(of.nstripes))
    for batch in batches:
        yield from _select(inv, batch, by_norm, prefixes, None, stats, encoded=False)


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
        shown = iso_time(value) if what == "LastModifiedDate" else value
        raise InventoryError(f"{what} {shown} of the row of key {keys[i].as_py()!r} is not between "
                             f"{iso_time(low) if what == 'LastModifiedDate' else low} and "
                             f"{iso_time(high) if what == 'LastModifiedDate' else high}")  # fmt: skip


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
