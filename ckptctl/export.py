"""Writing row sets (the reference map) as JSON, NDJSON, CSV or Parquet.

NDJSON is the format scripts pipe into other tools and the one the benchmarks time on ~400k rows,
so it has its own encoder: each value is formatted directly, and only strings that need escaping
go through :func:`json.dumps` (the paths Flink writes almost never do).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from operator import itemgetter
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


def transpose(rows: Sequence[tuple], width: int) -> list[list[Any]]:
    """Rows to columns; ``zip(*rows)`` is quadratic-ish for 10^5 rows (one argument per row)."""
    return [list(map(itemgetter(i), rows)) for i in range(width)]


def _column_slot(values: list[Any]) -> tuple[str, list[Any] | None]:
    """How one column goes into the line template: (template slot, values to format into it).

    A value constant over the batch becomes a literal of the template (no per-line work); a
    column of plain strings that need no escaping goes in raw between quotes; ints go in raw;
    anything else is encoded once per distinct value.
    """
    first = values[0]
    if values.count(first) == len(values) and (type(first) is not int or all(type(v) is int for v in values)):
        return _encode(first).replace("%", "%%"), None
    kinds = set(map(type, values))
    if kinds <= {int}:
        return "%d", values
    if kinds == {str}:
        if not _needs_escape(" ".join(values)):
            return '"%s"', values
        memo = {v: _encode(v) for v in set(values)}
        return "%s", [memo[v] for v in values]
    memo: dict[tuple[type, Any], str] = {}  # keyed by type too: True == 1 must not share a slot
    out = []
    for v in values:
        key = (v.__class__, v)
        e = memo.get(key)
        if e is None:
            e = memo[key] = _encode(v)
        out.append(e)
    return "%s", out


def write_ndjson(columns: Sequence[str], rows: Sequence[tuple], out: IO[str], batch: int = 1024) -> None:
    """One JSON object per line, encoded column by column in batches (bounded extra memory)."""
    for start in range(0, len(rows), batch):
        chunk = rows[start : start + batch]
        slots = [_column_slot(col) for col in transpose(chunk, len(columns))]
        template = (
            "{" + ",".join(f'"{c}":{slot}' for c, (slot, _v) in zip(columns, slots, strict=True)) + "}\n"
        )
        template = template.replace("%d", "%s")
        varying = [v for _s, v in slots if v is not None]
        if not varying:
            out.write(template.replace("%%", "%") * len(chunk))
            continue
        out.write("".join([template % line for line in zip(*varying, strict=True)]))


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
