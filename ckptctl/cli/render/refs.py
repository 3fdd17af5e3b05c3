"""``ckptctl refs``: the reference map as a table (the file formats are :mod:`ckptctl.export`'s)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ckptctl.cli.output import LONG_ROWS, Col, fitted_table, or_dash, print_long_table

if TYPE_CHECKING:
    from ckptctl.inspect.refs import ReferenceMap


def report(console: Any, r: ReferenceMap, named: str | None = None) -> None:
    """``refs``: the reference map for people: numbers whole, paths relative to the root and
    folded, and the least needed columns (slot, offset, RocksDB name, operator) dropped on a
    narrow terminal."""
    from ckptctl.inspect.views import short_uri

    headers = {
        "checkpoint_id": "chk", "operator_id": "operator", "subtask": "sub", "slot": "slot",
        "scope": "scope", "local_name": "local name", "path": "path", "offset": "offset", "size": "size",
    }  # fmt: skip
    idx = {c: list(r.columns).index(c) for c in headers}
    data: dict[str, list[str]] = {c: [] for c in headers}
    for row in r.rows:
        for c, i in idx.items():
            v = row[i]
            if c == "operator_id":
                v = (v or "-")[:8]
            elif c == "path":
                v = short_uri(v, r.root)
            data[c].append(or_dash(v))
    cols = [
        Col(headers[c], cells, justify="right" if c in ("checkpoint_id", "subtask", "offset", "size") else "left",
            fold=c == "path")
        for c, cells in data.items()
    ]  # fmt: skip
    title = f"{len(r.rows)} file references" + (f" under {named}" if named else "")
    nonzero_offsets = any(x != "0" for x in data["offset"])
    drop = ("slot", "local name", "offset") if nonzero_offsets else ("slot", "offset", "local name")
    drop += ("operator", "scope")
    if len(r.rows) > LONG_ROWS:
        print_long_table(console, cols, drop, title)
        return
    console.print(fitted_table(console, cols, drop=drop, title=title, title_justify="left"))
