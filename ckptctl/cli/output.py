"""One output object per invocation: Rich tables for people, JSON for scripts.

Commands hand plain data (from :mod:`ckptctl.views`) to an :class:`Output`; they never print
themselves. Data goes to stdout, warnings and progress to stderr, so ``ckptctl ls --json | jq``
always sees clean JSON. Progress bars appear only when stderr is a terminal.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

T = TypeVar("T")


def human_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def human_time(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


class Output:
    """Base: the JSON behaviour; :class:`ConsoleOutput` overrides the rendering."""

    def __init__(self) -> None:
        self._stderr = None

    @property
    def err(self):
        if self._stderr is None:
            from rich.console import Console

            self._stderr = Console(stderr=True, highlight=False, soft_wrap=True)
        return self._stderr

    def warn(self, message: str) -> None:
        self.err.print(f"[yellow]warning:[/yellow] {message}", markup=True)

    def error(self, message: str) -> None:
        self.err.print(f"[red]error:[/red] {_escape(message)}", markup=True)

    def json(self, data: Any) -> None:
        sys.stdout.write(json.dumps(data, indent=2, default=str))
        sys.stdout.write("\n")

    @contextmanager
    def progress(self, items: Iterable[T], total: int, label: str) -> Iterator[Iterable[T]]:
        """Iterate with a progress bar on a terminal; silently otherwise."""
        if not self.err.is_terminal or total < 2:
            yield items
            return
        with self.counter(total, label) as advance:

            def tick() -> Iterator[T]:
                for item in items:
                    yield item
                    advance(1)

            yield tick()

    @contextmanager
    def status(self, label: str) -> Iterator[None]:
        """A spinner with ``label`` on a terminal while something without a count runs."""
        if not self.err.is_terminal:
            yield
            return
        with self.err.status(label):
            yield

    @contextmanager
    def counter(self, total: int, label: str) -> Iterator[Any]:
        """A progress bar advanced by hand (``advance(n)``); a no-op when stderr is not a terminal."""
        if not self.err.is_terminal or total < 1:
            yield lambda n: None
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=self.err, transient=True,
        ) as bar:  # fmt: skip
            task = bar.add_task(label, total=total)
            yield lambda n: bar.advance(task, n)

    # -- command renderers (JSON) ------------------------------------------------------------
    def ls(self, root: str, rows: list[dict[str, Any]], named: str | None = None) -> None:
        self.json(rows)

    def show(self, view: dict[str, Any], named: str | None = None) -> None:
        self.json(view)

    def diff(self, view: dict[str, Any]) -> None:
        self.json(view)

    def refs_table(
        self, columns: tuple[str, ...], rows: list[tuple], root: str | None, named: str | None = None
    ) -> None:
        self.json([dict(zip(columns, r, strict=True)) for r in rows])

    def gc_plan(self, plan: dict[str, Any], written_to: str | None) -> None:
        self.json(plan)

    def gc_apply(self, result: dict[str, Any]) -> None:
        self.json(result)


class ConsoleOutput(Output):
    """Rich rendering for a person at a terminal (also used when piping without --json)."""

    def __init__(self) -> None:
        super().__init__()
        from rich.console import Console

        self.out = Console(highlight=False, soft_wrap=False)
        if not self.out.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
            self.out = Console(highlight=False, soft_wrap=False, width=200)  # piped: a wide page

    def ls(self, root: str, rows: list[dict[str, Any]], named: str | None = None) -> None:
        """One compact table per directory (a job's chk-N, a savepoint directory), rows by leaf name,
        so it stays readable on an 80-column terminal: directories relative to the root the user
        named, ids and status never cut, the least useful columns dropped when the width runs out
        (unreadable ``_metadata``: 'unreadable' here, the error on stderr)."""
        from rich import box

        from ckptctl import storage as st
        from ckptctl.views import short_uri

        groups: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            groups.setdefault(st.parent(r["path"]), []).append(r)
        for parent, items in groups.items():
            is_job = all(r["kind"] == "checkpoint" and r["job_id"] for r in items)
            where = short_uri(parent, root) if parent != root else (named or parent)
            names = [st.basename(r["path"]) for r in items]
            data: dict[str, list[str]] = {
                "checkpoint" if is_job else "directory": [_escape(n) for n in names]
            }
            data.update(
                {
                    name: []
                    for name in (
                        "id",
                        "kind",
                        "ver",
                        "ops",
                        "state",
                        "incr.",
                        "files",
                        "written UTC",
                        "status",
                    )
                }
            )
            for r in items:
                status = "[green]ok[/green]" if r["complete"] else "[yellow]incomplete[/yellow]"
                if r.get("error"):
                    status = "[red]unreadable[/red]"
                data["id"].append(_s(r["checkpoint_id"]))
                data["kind"].append((r["savepoint_format"] or "").lower() or r["kind"])
                data["ver"].append(_s(r["format_version"]))
                data["ops"].append(_s(r["operators"]))
                data["state"].append(human_bytes(r["state_size"]))
                data["incr."].append(human_bytes(r["incremental_size"]))
                data["files"].append(_s(r["files"]))
                data["written UTC"].append(human_time(r["metadata_mtime"])[5:16])
                data["status"].append(status)
            if is_job:
                del data["kind"]
            columns = [
                Col(
                    name,
                    cells,
                    justify="left" if name in ("kind", "written UTC", "status") or i == 0 else "right",
                )
                for i, (name, cells) in enumerate(data.items())
            ]
            table = fitted_table(
                self.out, columns, drop=("ops", "ver", "incr.", "written UTC", "kind", "files", "state"),
                title=_escape(("job " if is_job else "") + where), title_justify="left", title_style="bold",
                box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True,
            )  # fmt: skip
            self.out.print(table)

    def show(self, view: dict[str, Any], named: str | None = None) -> None:
        """The checkpoint as a tree; file paths relative to the directory holding the checkpoint
        (``chk-7/…``, ``shared/…``, ``savepoint-…/…``), the checkpoint as the user named it."""
        from rich.tree import Tree

        from ckptctl import storage as st

        base = st.parent(view["path"])
        title = (
            f"[bold]{view['kind']} {view['checkpoint_id']}[/bold]  {_escape(named or view['path'])}\n"
            f"format V{view['format_version']}"
            + (f", {view['checkpoint_type']}" if view.get("checkpoint_type") else "")
            + (f" ({view['savepoint_format']})" if view.get("savepoint_format") else "")
            + f", state {human_bytes(view['state_size'])}, incremental {human_bytes(view['incremental_size'])}"
            + f", inline {human_bytes(view['inline_size'])}"
        )
        tree = Tree(title)
        for op in view["operators"]:
            label = f"[cyan]{op['operator_id']}[/cyan]"
            if op.get("name"):
                label += f" {_escape(op['name'])}"
            if op.get("uid"):
                label += f" (uid {_escape(op['uid'])})"
            label += f"  parallelism {op['parallelism']}/{op['max_parallelism']}"
            if op["fully_finished"]:
                label += " [dim]fully finished[/dim]"
            node = tree.add(label)
            if op.get("coordinator_state"):
                node.add(f"coordinator: {_handle_line(op['coordinator_state'], base)}")
            for s in op["subtasks"]:
                if s["finished"]:
                    node.add(f"subtask {s['index']} [dim]finished[/dim]")
                    continue
                handles = [
                    (slot, h)
                    for slot in ("managed_keyed", "raw_keyed", "managed_operator", "raw_operator",
                                 "input_channels", "output_channels")
                    for h in s[slot]
                ]  # fmt: skip
                sub = node.add(f"subtask {s['index']}" + ("" if handles else " [dim](no state)[/dim]"))
                for slot, h in handles:
                    _add_handle(sub.add(f"{slot}: {_handle_line(h, base)}"), h, base)
        self.out.print(tree)

    def diff(self, view: dict[str, Any]) -> None:
        from rich.table import Table

        from ckptctl.views import short_uri

        a, b = view["a"], view["b"]
        table = Table(title=f"{a['checkpoint_id']} → {b['checkpoint_id']}", title_justify="left")
        table.add_column("files")
        table.add_column("count", justify="right")
        table.add_column("bytes", justify="right")
        for key in ("added", "removed", "reused"):
            table.add_row(key, str(len(view[key])), human_bytes(view[f"{key}_bytes"]))
        for side in ("a", "b"):
            inh = view[side].get("inherited") or {}
            if inh.get("files"):
                table.add_row(
                    f"{view[side]['checkpoint_id']}: from a claimed savepoint (FLINK-39964)",
                    str(inh["files"]), human_bytes(inh["bytes"]),
                )  # fmt: skip
        self.out.print(table)
        self.out.print(
            f"uploaded by {a['checkpoint_id']}: {human_bytes(a['uploaded_bytes'])}; "
            f"by {b['checkpoint_id']}: {human_bytes(b['uploaded_bytes'])}"
        )
        base = _common_dir(a["path"], b["path"])
        for key in ("added", "removed"):
            files = sorted(view[key], key=lambda f: (-f["size"], f["path"]))
            if not files:
                continue
            listed = Table(
                title=f"{key} ({len(files)}, largest first)" if len(files) > DIFF_TOP else key,
                title_justify="left", show_header=False, box=None, pad_edge=False,
            )  # fmt: skip
            listed.add_column("size", justify="right", no_wrap=True)
            listed.add_column("path", overflow="fold")
            for f in files[:DIFF_TOP]:
                listed.add_row(human_bytes(f["size"]), _escape(short_uri(f["path"], base)))
            self.out.print(listed)
            if len(files) > DIFF_TOP:
                self.out.print(f"… and {len(files) - DIFF_TOP} more (--json lists every file)")

    def refs_table(
        self, columns: tuple[str, ...], rows: list[tuple], root: str | None, named: str | None = None
    ) -> None:
        """The reference map for people: numbers whole, paths relative to ROOT and folded, and the
        least needed columns (slot, offset, RocksDB name, operator) dropped on a narrow terminal."""
        from ckptctl.views import short_uri

        headers = {
            "checkpoint_id": "chk", "operator_id": "operator", "subtask": "sub", "slot": "slot",
            "scope": "scope", "local_name": "local name", "path": "path", "offset": "offset", "size": "size",
        }  # fmt: skip
        idx = {c: columns.index(c) for c in headers}
        data: dict[str, list[str]] = {c: [] for c in headers}
        for r in rows:
            for c, i in idx.items():
                v = r[i]
                if c == "operator_id":
                    v = (v or "-")[:8]
                elif c == "path":
                    v = _escape(short_uri(v, root))
                data[c].append(_s(v))
        cols = [
            Col(headers[c], cells, justify="right" if c in ("checkpoint_id", "subtask", "offset", "size") else "left",
                fold=c == "path")
            for c, cells in data.items()
        ]  # fmt: skip
        title = f"{len(rows)} file references" + (f" under {named}" if named else "")
        nonzero_offsets = any(x != "0" for x in data["offset"])
        drop = ("slot", "local name", "offset") if nonzero_offsets else ("slot", "offset", "local name")
        drop += ("operator", "scope")
        self.out.print(fitted_table(self.out, cols, drop=drop, title=_escape(title), title_justify="left"))

    def gc_plan(self, plan: dict[str, Any], written_to: str | None) -> None:
        from rich.panel import Panel
        from rich.table import Table

        from ckptctl.gc.reasons import describe

        grid = Table.grid(padding=(0, 2))
        grid.add_column(justify="left")
        grid.add_column(justify="right")
        grid.add_column(justify="right")
        grid.add_row("", "[bold]files[/bold]", "[bold]bytes[/bold]")
        grid.add_row("live (referenced)", f"{plan['live_files']:,}", human_bytes(plan["live_bytes"]))
        grid.add_row(
            "[bold]orphans to delete[/bold]",
            f"{plan['candidate_files']:,}",
            human_bytes(plan["candidate_bytes"]),
        )
        grid.add_row("protected", f"{plan['protected_files']:,}", human_bytes(plan["protected_bytes"]))
        grid.add_row("total under the roots", f"{plan['total_files']:,}", human_bytes(plan["total_bytes"]))
        grid.add_row("retained checkpoints/savepoints", f"{plan['retained_checkpoints']:,}", "")
        if plan["expired_checkpoints"]:
            grid.add_row("expired checkpoints (--keep-last)", f"{plan['expired_checkpoints']:,}", "")
        if plan["partially_live_files"]:
            grid.add_row(
                "partially live merged files", f"{plan['partially_live_files']:,}",
                human_bytes(plan["dead_bytes_in_partially_live_files"]) + " dead",
            )  # fmt: skip
        if plan["oldest_candidate_mtime"]:
            grid.add_row(
                "orphans written",
                human_time(plan["oldest_candidate_mtime"]),
                human_time(plan["newest_candidate_mtime"]),
            )
        title = "gc plan" + (" [red](blocked)[/red]" if plan["blocked"] else " (dry run)")
        self.out.print(Panel(grid, title=title, title_align="left", expand=False))
        for label, counter in (("orphans by reason", plan["candidates_by_reason"]),
                               ("kept by guard", plan["protected_by_reason"])):  # fmt: skip
            if counter:
                table = Table(title=label, title_justify="left", show_header=False)
                table.add_column("reason")
                table.add_column("files", justify="right")
                for reason, n in counter.items():
                    table.add_row(_escape(describe(reason)), f"{n:,}")
                self.out.print(table)
        if plan.get("dead_jobs"):
            table = Table(title="jobs with no retained checkpoint", title_justify="left")
            table.add_column("job")
            table.add_column("files", justify="right")
            table.add_column("bytes", justify="right")
            for d in plan["dead_jobs"]:
                table.add_row(_escape(d["job"].rpartition("/")[2]), f"{d['files']:,}", human_bytes(d["bytes"]))
            self.out.print(table)
        for w in plan["warnings"]:
            self.warn(w)
        for r in plan["refusals"]:
            self.err.print(f"[red]refused ({r['code']}):[/red] {_escape(r['message'])}")
        if written_to:
            self.out.print(f"plan written to {written_to}; apply with: ckptctl gc apply {written_to}")
        elif not plan["blocked"] and plan["candidate_files"]:
            self.out.print(
                "dry run: nothing deleted. Write the plan with -o plan.json, review it, then `ckptctl gc apply plan.json`."
            )

    def gc_apply(self, result: dict[str, Any]) -> None:
        verb = "moved to " + result["trash"] if result["trash"] else "deleted"
        self.out.print(f"{verb}: {result['deleted_files']:,} files, {human_bytes(result['deleted_bytes'])}")
        if result["skipped"]:
            self.out.print(f"skipped (no longer orphans or changed): {len(result['skipped']):,}")
        for f in result["failed"][:20]:
            self.error(f"{f['path']}: {f['error']}")
        if result["manifest"]:
            self.out.print(f"manifest: {result['manifest']}")


class Col:
    """A table column: header, cells (Rich markup), alignment; ``fold``: may wrap (paths)."""

    def __init__(self, header: str, cells: list[str], justify: str = "left", fold: bool = False) -> None:
        self.header, self.cells, self.justify, self.fold = header, cells, justify, fold


FOLD_MIN = 24  # the narrowest a folded (path) column may get before other columns are dropped


def fitted_table(console, columns: list[Col], drop: Iterable[str] = (), **table_kwargs: Any):
    """A Rich table that fits ``console.width`` without cutting a cell: every column but the
    folded ones keeps its full width (no ellipsis in ids, numbers or status), folded columns wrap,
    and columns named in ``drop`` are left out, in that order, until the rest fits."""
    from rich.table import Table

    def build(cols: list[Col], cap_folds: bool) -> Table:
        table = Table(**table_kwargs)
        for c in cols:
            width = max(len(c.header), *(cell_len(x) for x in c.cells)) if c.cells else len(c.header)
            if c.fold:
                table.add_column(
                    c.header, justify=c.justify, overflow="fold",
                    max_width=min(width, FOLD_MIN) if cap_folds else None,
                )  # fmt: skip
            else:
                table.add_column(c.header, justify=c.justify, no_wrap=True, min_width=width)
        for row in zip(*(c.cells for c in cols), strict=True):
            table.add_row(*row)
        return table

    unbounded = console.options.update_width(1 << 20)  # measure the natural width, not the clamped one
    shown = list(columns)
    for victim in [None, *drop]:
        if victim is not None:
            shown = [c for c in shown if c.header != victim]
        if console.measure(build(shown, cap_folds=True), options=unbounded).maximum <= console.width:
            break
    return build(shown, cap_folds=False)


def cell_len(markup: str) -> int:
    """Terminal cells of a cell's text (markup parsed only when there is any: tables can be long)."""
    if "[" not in markup:
        return len(markup) if markup.isascii() else _cells(markup)
    from rich.text import Text

    return Text.from_markup(markup).cell_len


def _cells(text: str) -> int:
    from rich.cells import cell_len as rich_cell_len

    return rich_cell_len(text)


DIFF_TOP = 10  # files listed per kind in the human diff


def _common_dir(a: str, b: str) -> str:
    """The deepest directory holding both URIs (e.g. the job directory of two checkpoints)."""
    from ckptctl import storage as st

    d = st.parent(a)
    while d and not st.is_under(b, d) and st.parent(d) != d:
        d = st.parent(d)
    return d


def _handle_line(h: dict[str, Any], base: str | None = None) -> str:
    from ckptctl.views import short_uri

    parts = [f"[bold]{h['type']}[/bold]", human_bytes(h.get("state_size"))]
    if "key_group_range" in h:
        parts.append(f"key groups {h['key_group_range'][0]}..{h['key_group_range'][1]}")
    if "path" in h:
        parts.append(_escape(short_uri(h["path"], base)))
    if h.get("start_pos"):
        parts.append(f"@{h['start_pos']}")
    return "  ".join(parts)


def _add_handle(node, h: dict[str, Any], base: str | None = None) -> None:
    for key in ("meta", "delegate"):
        if h.get(key):
            child = node.add(f"{key}: {_handle_line(h[key], base)}")
            _add_handle(child, h[key], base)
    for key in ("shared", "private"):
        for f in h.get(key, ()):
            if f["handle"]:
                node.add(f"{key} {f['local_path']}: {_handle_line(f['handle'], base)}")
    for key in ("materialized", "non_materialized"):
        for part in h.get(key, ()):
            _add_handle(node.add(f"{key}: {_handle_line(part, base)}"), part, base)
    for piece in h.get("handles_and_offsets", ()):
        if piece["handle"]:
            node.add(f"changelog @{piece['offset']}: {_handle_line(piece['handle'], base)}")


def _s(v: Any) -> str:
    return "-" if v is None else str(v)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(str(text))


def make_output(as_json: bool) -> Output:
    return Output() if as_json else ConsoleOutput()
