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


# Printable ASCII that JSON takes as is: everything from space to '~' except the quote and backslash.
_JSON_PLAIN = bytes(range(0x20, 0x7F)).replace(b'"', b"").replace(b"\\", b"")


def _needs_escape(s: str) -> bool:
    """True unless ``s`` is printable ASCII without quotes or backslashes (then it goes in raw).

    Deleting the plain bytes and testing for leftovers is several times faster than
    ``str.isprintable`` on the long joined columns this is called with.
    """
    return not s.isascii() or bool(s.encode("ascii").translate(None, _JSON_PLAIN))


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


def write_ndjson_groups(columns: Sequence[str], groups, out: IO[bytes], split: int) -> None:
    """NDJSON (UTF-8 bytes) from grouped rows (see ``refs.reference_groups``): the columns a group
    shares are encoded once into a line template; only each file's own fields are formatted."""
    varying = columns[split : split + 6]
    quoted = ",".join(f'"{c}":{slot}' for c, slot in zip(varying, ('"%s"',) * 4 + ("%d", "%d"), strict=True))
    encoded = ",".join(f'"{c}":%s' for c in varying)
    buf: list[str] = []
    pending = 0
    for shared, files in groups:
        head = ",".join(f'"{c}":{_encode(v)}' for c, v in zip(columns[:split], shared[:split], strict=True))
        tail = ",".join(
            f'"{c}":{_encode(v)}' for c, v in zip(columns[split + 6 :], shared[split:], strict=True)
        )
        head, tail = "{" + head.replace("%", "%%") + ",", "," + tail.replace("%", "%%") + "}\n"
        if _plain_strings(files):
            template = head + quoted + tail
            lines = [template % f for f in files]
        else:
            template = head + encoded + tail
            lines = [template % tuple(map(_encode, f)) for f in files]
        buf.extend(lines)
        pending += len(lines)
        if pending >= 8192:
            out.write("".join(buf).encode("utf-8"))
            buf.clear()
            pending = 0
    out.write("".join(buf).encode("utf-8"))


def _plain_strings(files: list[tuple]) -> bool:
    """True if the four string fields of every file are present and need no JSON escaping."""
    for i in (0, 1, 2, 3):
        column = list(map(itemgetter(i), files))
        if None in column or _needs_escape(" ".join(column)):
            return False
    return True


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
