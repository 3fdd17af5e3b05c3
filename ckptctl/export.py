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


def needs_escape(s: str) -> bool:
    """True unless ``s`` is printable ASCII without quotes or backslashes (then it goes in raw).

    Deleting the plain bytes and testing for leftovers is several times faster than
    ``str.isprintable`` on the long joined columns this is called with.
    """
    return not s.isascii() or bool(s.encode("ascii").translate(None, _JSON_PLAIN))


def json_value(v: Any) -> str:
    if v is None:
        return "null"
    if type(v) is str:
        return json.dumps(v) if needs_escape(v) else '"' + v + '"'
    if type(v) is bool:
        return "true" if v else "false"
    return str(v) if type(v) is int else json.dumps(v)


def transpose(rows: Sequence[tuple], width: int) -> list[list[Any]]:
    """Rows to columns; ``zip(*rows)`` is quadratic-ish for 10^5 rows (one argument per row)."""
    return [list(map(itemgetter(i), rows)) for i in range(width)]


def write_ndjson_groups(columns: Sequence[str], groups, out: IO[bytes], split: int) -> None:
    """NDJSON (UTF-8 bytes) from grouped rows (see ``refs.reference_groups``).

    The columns a group shares are encoded once into a line template, per-file columns that are
    constant within the group (handle type, offset) too; only the rest is formatted per line.
    Writing happens on a background thread (``write`` releases the GIL) while lines are formatted.
    """
    names = columns[split : split + 6]
    with _BackgroundWriter(out) as write:
        buf: list[str] = []
        pending = 0
        for shared, files in groups:
            head = ",".join(
                f'"{c}":{json_value(v)}' for c, v in zip(columns[:split], shared[:split], strict=True)
            )
            tail = ",".join(
                f'"{c}":{json_value(v)}' for c, v in zip(columns[split + 6 :], shared[split:], strict=True)
            )
            head, tail = "{" + head.replace("%", "%%") + ",", "," + tail.replace("%", "%%") + "}\n"
            if _plain_strings(files):
                lines = _format_plain(head, tail, names, files)
            else:
                template = head + ",".join(f'"{c}":%s' for c in names) + tail
                lines = [template % tuple(map(json_value, f)) for f in files]
            buf.extend(lines)
            pending += len(lines)
            if pending >= 8192:
                write("".join(buf).encode("utf-8"))
                buf.clear()
                pending = 0
        write("".join(buf).encode("utf-8"))


def _format_plain(head: str, tail: str, names: Sequence[str], files: list[tuple]) -> list[str]:
    """Lines for files whose strings need no escaping; group-constant fields become literals."""
    first = files[0]
    constant = [i in (0, 4) and len(files) > 1 and all(f[i] == first[i] for f in files) for i in range(6)]
    parts, picks = [], []
    for i, name in enumerate(names):
        if constant[i]:
            value = f'"{first[i]}"' if i < 4 else str(first[i])
            parts.append(f'"{name}":' + value.replace("%", "%%"))
        else:
            parts.append(f'"{name}":' + ('"%s"' if i < 4 else "%d"))
            picks.append(i)
    template = head + ",".join(parts) + tail
    if picks == [1, 2, 3, 5]:  # the bulk: local name, path, written path, size
        return [template % (f[1], f[2], f[3], f[5]) for f in files]
    getter = itemgetter(*picks)
    return [template % getter(f) for f in files]


class _BackgroundWriter:
    """Hands byte chunks to a thread that writes them, keeping at most a few chunks in flight."""

    def __init__(self, out: IO[bytes]) -> None:
        import queue
        import threading

        self.out = out
        self.queue: queue.Queue = queue.Queue(maxsize=4)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while True:
            chunk = self.queue.get()
            if chunk is None:
                return
            if self.error is None:
                try:
                    self.out.write(chunk)
                except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
                    self.error = e

    def write(self, chunk: bytes) -> None:
        if self.error is not None:
            raise self.error
        self.queue.put(chunk)

    def __enter__(self):
        self.thread.start()
        return self.write

    def __exit__(self, *exc) -> None:
        self.queue.put(None)
        self.thread.join()
        if self.error is not None and exc[0] is None:
            raise self.error


def _plain_strings(files: list[tuple]) -> bool:
    """True if the four string fields of every file are present and need no JSON escaping
    (the written path is only checked where it is not the very same string as the path)."""
    for i in (0, 1, 2):
        column = list(map(itemgetter(i), files))
        if None in column or needs_escape(" ".join(column)):
            return False
    written = [f[3] for f in files if f[3] is not f[2]]
    return None not in written and not needs_escape(" ".join(written))


def write_json(columns: Sequence[str], rows: Sequence[tuple], out: IO[str]) -> None:
    out.write("[\n")
    keys = ['"' + c + '": ' for c in columns]
    for n, row in enumerate(rows):
        body = ", ".join(k + json_value(v) for k, v in zip(keys, row, strict=True))
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
