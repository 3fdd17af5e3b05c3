"""Writing row sets (the reference map) as JSON, NDJSON, CSV or Parquet.

NDJSON is the format scripts pipe into other tools and the one the benchmarks time on ~400k rows,
so it has its own encoder: each value is formatted directly, and only strings that need escaping
go through :func:`json.dumps` (the paths Flink writes almost never do).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import IO, Any

FORMATS = ("table", "json", "ndjson", "csv", "parquet")


def _needs_escape(s: str) -> bool:
    return not (s.isascii() and s.isprintable()) or '"' in s or "\\" in s


def _encode(v: Any) -> str:
    if v is None:
        return "null"
    if type(v) is str:
        return json.dumps(v) if _needs_escape(v) else '"' + v + '"'
    if type(v) is bool:
        return "true" if v else "false"
    return str(v) if type(v) is int else json.dumps(v)


def write_ndjson(columns: Sequence[str], rows: Sequence[tuple], out: IO[str]) -> None:
    keys = ['"' + c + '":' for c in columns]
    last = len(keys) - 1
    enc = _encode
    buf: list[str] = []
    for row in rows:
        parts = ["{"]
        for i, v in enumerate(row):
            parts.append(keys[i])
            parts.append(enc(v))
            parts.append("}\n" if i == last else ",")
        buf.append("".join(parts))
        if len(buf) >= 4096:
            out.write("".join(buf))
            buf.clear()
    out.write("".join(buf))


def write_json(columns: Sequence[str], rows: Sequence[tuple], out: IO[str]) -> None:
    out.write("[\n")
    keys = ['"' + c + '": ' for c in columns]
    for n, row in enumerate(rows):
        body = ", ".join(k + _encode(v) for k, v in zip(keys, row, strict=True))
        out.write(("  {" if n == 0 else ",\n  {") + body + "}")
    out.write("\n]\n" if rows else "]\n")


def write_csv(columns: Sequence[str], rows: Sequence[tuple], out: IO[str]) -> None:
    import csv

    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(("" if v is None else v for v in row) for row in rows)


def write_parquet(table: Any, path: str) -> None:
    import pyarrow.parquet as pq

    pq.write_table(table, path, compression="zstd")
