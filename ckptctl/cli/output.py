"""One output object per invocation: Rich tables for people, JSON for scripts.

Commands hand plain data (from :mod:`ckptctl.views`) to an :class:`Output`; they never print
themselves. Data goes to stdout, warnings and progress to stderr, so ``ckptctl ls --json | jq``
always sees clean JSON. Progress bars appear only when stderr is a terminal.
"""

from __future__ import annotations

import json
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
    def ls(self, root: str, rows: list[dict[str, Any]]) -> None:
        self.json(rows)

    def show(self, view: dict[str, Any]) -> None:
        self.json(view)

    def diff(self, view: dict[str, Any]) -> None:
        self.json(view)

    def refs_table(self, columns: tuple[str, ...], rows: list[tuple], root: str | None) -> None:
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
        if not self.out.is_terminal:
            self.out = Console(highlight=False, soft_wrap=False, width=200)

    def ls(self, root: str, rows: list[dict[str, Any]]) -> None:
        """One compact table per directory (a job's chk-N, a savepoint directory), rows by leaf name,
        so it stays readable on an 80-column terminal."""
        from rich import box
        from rich.table import Table

        from ckptctl import storage as st
        from ckptctl.views import short_uri

        groups: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            groups.setdefault(st.parent(r["path"]), []).append(r)
        for parent, items in groups.items():
            is_job = all(r["kind"] == "checkpoint" and r["job_id"] for r in items)
            where = short_uri(parent, root) if parent != root else parent
            table = Table(
                title=_escape(("job " if is_job else "") + where), title_justify="left", title_style="bold",
                box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True,
            )  # fmt: skip
            names = [st.basename(r["path"]) for r in items]
            table.add_column(
                "checkpoint" if is_job else "directory", no_wrap=True, min_width=max(map(len, names))
            )
            columns = ("id", "ver", "ops", "state", "incr.", "files", "written UTC", "status")
            if not is_job:
                columns = ("id", "kind", *columns[1:])
            for name in columns:
                left = name in ("kind", "written UTC", "status")
                table.add_column(name, justify="left" if left else "right", no_wrap=name != "status")
            for name, r in zip(names, items, strict=True):
                kind = (r["savepoint_format"] or "").lower() or r["kind"]
                status = "[green]ok[/green]" if r["complete"] else "[yellow]incomplete[/yellow]"
                if r.get("error"):
                    status = f"[red]{_escape(r['error'])}[/red]"
                cells = [
                    _escape(name), _s(r["checkpoint_id"]), _s(r["format_version"]), _s(r["operators"]),
                    human_bytes(r["state_size"]), human_bytes(r["incremental_size"]), _s(r["files"]),
                    human_time(r["metadata_mtime"])[5:16], status,
                ]  # fmt: skip
                if not is_job:
                    cells.insert(2, kind)
                table.add_row(*cells)
            self.out.print(table)

    def show(self, view: dict[str, Any]) -> None:
        from rich.tree import Tree

        title = (
            f"[bold]{view['kind']} {view['checkpoint_id']}[/bold]  {view['path']}\n"
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
                node.add(f"coordinator: {_handle_line(op['coordinator_state'])}")
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
                    _add_handle(sub.add(f"{slot}: {_handle_line(h)}"), h)
        self.out.print(tree)

    def diff(self, view: dict[str, Any]) -> None:
        from rich.table import Table

        a, b = view["a"], view["b"]
        table = Table(title=f"{a['checkpoint_id']} → {b['checkpoint_id']}", title_justify="left")
        table.add_column("files")
        table.add_column("count", justify="right")
        table.add_column("bytes", justify="right")
        for key in ("added", "removed", "reused"):
            table.add_row(key, str(len(view[key])), human_bytes(view[f"{key}_bytes"]))
        self.out.print(table)
        self.out.print(
            f"uploaded by {a['checkpoint_id']}: {human_bytes(a['uploaded_bytes'])}; "
            f"by {b['checkpoint_id']}: {human_bytes(b['uploaded_bytes'])}"
        )

    def refs_table(self, columns: tuple[str, ...], rows: list[tuple], root: str | None) -> None:
        from rich.table import Table

        from ckptctl.views import short_uri

        shown = (
            "checkpoint_id",
            "operator_id",
            "subtask",
            "slot",
            "scope",
            "local_name",
            "path",
            "offset",
            "size",
        )
        idx = [columns.index(c) for c in shown]
        table = Table(title=f"{len(rows)} file references", title_justify="left")
        for c in shown:
            table.add_column(
                c, justify="right" if c in ("checkpoint_id", "subtask", "offset", "size") else "left"
            )
        for r in rows:
            cells = [r[i] for i in idx]
            cells[1] = (cells[1] or "-")[:8]
            cells[6] = short_uri(cells[6], root)
            table.add_row(*(_s(c) for c in cells))
        self.out.print(table)

    def gc_plan(self, plan: dict[str, Any], written_to: str | None) -> None:
        from rich.panel import Panel
        from rich.table import Table

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
                    table.add_row(_escape(reason), f"{n:,}")
                self.out.print(table)
        for w in plan["warnings"]:
            self.warn(w)
        for r in plan["refusals"]:
            self.err.print(f"[red]refused:[/red] {_escape(r)}")
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


def _handle_line(h: dict[str, Any]) -> str:
    parts = [f"[bold]{h['type']}[/bold]", human_bytes(h.get("state_size"))]
    if "key_group_range" in h:
        parts.append(f"key groups {h['key_group_range'][0]}..{h['key_group_range'][1]}")
    if "path" in h:
        parts.append(_escape(h["path"]))
    if h.get("start_pos"):
        parts.append(f"@{h['start_pos']}")
    return "  ".join(parts)


def _add_handle(node, h: dict[str, Any]) -> None:
    for key in ("meta", "delegate"):
        if h.get(key):
            child = node.add(f"{key}: {_handle_line(h[key])}")
            _add_handle(child, h[key])
    for key in ("shared", "private"):
        for f in h.get(key, ()):
            if f["handle"]:
                node.add(f"{key} {f['local_path']}: {_handle_line(f['handle'])}")
    for key in ("materialized", "non_materialized"):
        for part in h.get(key, ()):
            _add_handle(node.add(f"{key}: {_handle_line(part)}"), part)
    for piece in h.get("handles_and_offsets", ()):
        if piece["handle"]:
            node.add(f"changelog @{piece['offset']}: {_handle_line(piece['handle'])}")


def _s(v: Any) -> str:
    return "-" if v is None else str(v)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(str(text))


def make_output(as_json: bool) -> Output:
    return Output() if as_json else ConsoleOutput()
