"""The columns of an S3 Inventory report: their names as the manifest's ``fileSchema`` declares them
(CSV, ORC, Parquet), the ones a plan needs and the Arrow types each may have, and the regex that
finds a key prefix in CSV's URL-encoded keys.

Apart from :mod:`~ckptctl.inventory.manifest` and :mod:`~ckptctl.inventory.rows` because both check
columns: the manifest its declared schema, the rows each data file's own.
"""

from __future__ import annotations

import re

from ckptctl.inventory.report import Inventory, InventoryError


def norm(name: str) -> str:
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


def encoded_prefix_regex(prefix: str) -> str:
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
    return names if len({norm(n) for n in names}) == len(names) else None


def require_columns(names: list[str], uri: str) -> None:
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
COLUMN_TYPES = {KEY: ("string", "large_string"), SIZE: ("integer",), MTIME: ("timestamp", "integer"),
          LATEST: ("boolean",), DELETE: ("boolean",), BUCKET: ("string", "large_string")}  # fmt: skip


def file_columns(inv: Inventory, schema) -> dict[str, str]:
    """An ORC or Parquet file's columns (normalised name -> name), checked against the manifest's
    ``fileSchema`` (the same names) and of the types S3 Inventory writes."""
    import pyarrow as pa

    by_norm = {norm(n): n for n in schema.names}
    declared = {norm(n) for n in schema_columns(inv.file_format, inv.file_schema) or ()}
    if len(by_norm) != len(schema.names) or set(by_norm) != declared:
        raise InventoryError(f"the data file's columns ({', '.join(schema.names)}) are not those of the manifest's "
                             "fileSchema")  # fmt: skip
    for k, kinds in COLUMN_TYPES.items():
        if k in by_norm:
            kind = schema.field(by_norm[k]).type
            if not any(getattr(pa.types, f"is_{t}")(kind) for t in kinds):
                raise InventoryError(
                    f"the data file's column {by_norm[k]} is of type {kind}, not {' or '.join(kinds)}"
                )
    return by_norm
