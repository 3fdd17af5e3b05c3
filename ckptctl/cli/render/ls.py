"""``ckptctl ls``: the checkpoints, savepoints and incomplete directories under a root."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ckptctl.cli.output import Col, fitted_table, human_bytes, human_time, or_dash, styled

if TYPE_CHECKING:
    from ckptctl.inspect.ls import Listing


def report(console: Any, r: Listing, named: str | None = None) -> None:
    """``ls``: one compact table per directory (a job's chk-N, a savepoint directory), rows by leaf
    name, so it stays readable on an 80-column terminal: directories relative to the root the user
    named, ids and status never cut, the least useful columns dropped when the width runs out
    (unreadable ``_metadata``: 'unreadable' here, the error on stderr)."""
    from rich import box

    from ckptctl import storage as st
    from ckptctl.inspect.views import short_uri

    root = r.root
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in r.rows:
        groups.setdefault(st.parent(row["path"]), []).append(row)
    for parent, items in groups.items():
        is_job = all(i["kind"] == "checkpoint" and i["job_id"] for i in items)
        where = short_uri(parent, root) if parent != root else (named or parent)
        names = [st.basename(i["path"]) for i in items]
        data: dict[str, list[Any]] = {"checkpoint" if is_job else "directory": names}
        for name in ("id", "kind", "ver", "ops", "state", "incr.", "files", "written UTC", "status"):
            data[name] = []
        for i in items:
            status = styled("[ok]ok[/ok]" if i["complete"] else "[warning]incomplete[/warning]")
            if i.get("error"):
                status = styled("[error]unreadable[/error]")
            data["id"].append(or_dash(i["checkpoint_id"]))
            data["kind"].append((i["savepoint_format"] or "").lower() or i["kind"])
            data["ver"].append(or_dash(i["format_version"]))
            data["ops"].append(or_dash(i["operators"]))
            data["state"].append(human_bytes(i["state_size"]))
            data["incr."].append(human_bytes(i["incremental_size"]))
            data["files"].append(or_dash(i["files"]))
            data["written UTC"].append(human_time(i["metadata_mtime"])[5:16])
            data["status"].append(status)
        if is_job:
            del data["kind"]
        left = ("kind", "written UTC", "status")
        columns = [
            Col(name, cells, justify="left" if name in left or n == 0 else "right")
            for n, (name, cells) in enumerate(data.items())
        ]
        table = fitted_table(
            console, columns, drop=("ops", "ver", "incr.", "written UTC", "kind", "files", "state"),
            title=("job " if is_job else "") + where, title_justify="left", title_style="bold",
            box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True,
        )  # fmt: skip
        console.print(table)
