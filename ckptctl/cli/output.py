"""The result of a command, for people or for scripts: one :class:`Output` per invocation.

:class:`Output` is the interface: one method per command result (``ls``, ``show``, ``diff``,
``refs``, ``gc_plan``, ``gc_apply``, ``verify``, ``rescale_plan``, ``rescale_sweep``,
``repair``, ``relocate``). :class:`JsonOutput` writes each result as one JSON document
on stdout; :class:`ConsoleOutput` renders it with Rich. Which one is chosen once per invocation
(:meth:`ckptctl.cli.session.Session.output`, from ``--json``); commands hand plain data (from
:mod:`ckptctl.views` and the core) to it and never branch on the format or print themselves.

Everything else (warnings, errors, progress, prompts, verbosity) belongs to the invocation's
:class:`~ckptctl.cli.terminal.Terminal`, which both implementations share; it writes to stderr, so
``ckptctl ls --json | jq`` always sees clean JSON.
"""

from __future__ import annotations

import json
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from ckptctl.cli.terminal import Terminal


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


class Output(ABC):
    """A command's result, rendered one way; messages go to the shared :attr:`term`."""

    def __init__(self, terminal: Terminal | None = None) -> None:
        self.term = terminal if terminal is not None else Terminal()

    def warn(self, message: str) -> None:
        self.term.warn(message)

    def error(self, message: str) -> None:
        self.term.error(message)

    # -- one method per command result -------------------------------------------------------
    @abstractmethod
    def ls(self, root: str, rows: list[dict[str, Any]], named: str | None = None) -> None:
        """``ls``: one summary row per checkpoint, savepoint or incomplete directory."""

    @abstractmethod
    def show(self, view: dict[str, Any], named: str | None = None) -> None:
        """``show``: one checkpoint, operators → subtasks → handles."""

    @abstractmethod
    def diff(self, view: dict[str, Any]) -> None:
        """``diff``: files added, removed and reused between two checkpoints."""

    @abstractmethod
    def refs(
        self, columns: tuple[str, ...], rows: list[tuple], root: str | None, named: str | None = None
    ) -> None:
        """``refs`` (table or JSON; the file formats are written by :mod:`ckptctl.export`)."""

    @abstractmethod
    def gc_plan(self, plan: Any, written_to: str | None) -> None:
        """``gc plan``: a :class:`ckptctl.gc.plan.Plan` (JSON: the whole plan, every file)."""

    @abstractmethod
    def gc_apply(self, result: dict[str, Any]) -> None:
        """``gc apply``: what was deleted, skipped, failed."""

    @abstractmethod
    def verify(self, result: Any, root: str, named: str) -> None:
        """``verify``: a :class:`ckptctl.verify.VerifyResult`; paths shown relative to ``root``."""

    @abstractmethod
    def rescale_plan(self, plan: dict[str, Any]) -> None:
        """``plan-rescale -p N``: one restore plan."""

    @abstractmethod
    def rescale_sweep(self, result: dict[str, Any]) -> None:
        """``plan-rescale -p LOW..HIGH``: the cost of each parallelism and the recommendation."""

    @abstractmethod
    def repair(self, view: dict[str, Any]) -> None:
        """``repair``: the rewrites (and, once applied, where the repaired checkpoint is)."""

    @abstractmethod
    def relocate(self, view: dict[str, Any]) -> None:
        """``relocate``: the plan (and, with --apply, the copy and its shallow verify)."""

    @abstractmethod
    def result(self, result: Any, render: Callable[[Any, Any], None]) -> None:
        """A typed result: its ``to_json()`` is the JSON contract; ``render(console, result)``
        (a function of :mod:`ckptctl.cli.render`) draws it for a person."""


class JsonOutput(Output):
    """Each result as one JSON document on stdout (indented; the documents tests and scripts read)."""

    def _json(self, data: Any) -> None:
        sys.stdout.write(json.dumps(data, indent=2, default=str))
        sys.stdout.write("\n")

    def ls(self, root: str, rows: list[dict[str, Any]], named: str | None = None) -> None:
        self._json(rows)

    def show(self, view: dict[str, Any], named: str | None = None) -> None:
        self._json(view)

    def diff(self, view: dict[str, Any]) -> None:
        self._json(view)

    def refs(
        self, columns: tuple[str, ...], rows: list[tuple], root: str | None, named: str | None = None
    ) -> None:
        from ckptctl.export import write_json

        write_json(columns, rows, sys.stdout)

    def gc_plan(self, plan: Any, written_to: str | None) -> None:
        sys.stdout.flush()
        plan.write_json(sys.stdout.buffer)  # streamed: a plan can list millions of files
        sys.stdout.buffer.flush()

    def gc_apply(self, result: dict[str, Any]) -> None:
        self._json(result)

    def verify(self, result: Any, root: str, named: str) -> None:
        self._json(result.to_json())

    def rescale_plan(self, plan: dict[str, Any]) -> None:
        self._json(plan)

    def rescale_sweep(self, result: dict[str, Any]) -> None:
        self._json(result)

    def repair(self, view: dict[str, Any]) -> None:
        self._json(view)

    def relocate(self, view: dict[str, Any]) -> None:
        self._json(view)

    def result(self, result: Any, render: Callable[[Any, Any], None]) -> None:
        self._json(result.to_json())


def print_repairable(console, repairable: list[dict[str, Any]], root: str) -> None:
    """What FLINK-39964 did to which checkpoint, and the command that repairs it."""
    from ckptctl.views import short_uri

    for r in repairable:
        where = _escape(short_uri(r["checkpoint"], root))
        if r["found"] == r["handles"]:
            dirs = ", ".join(_escape(short_uri(d, root)) for d in r["savepoint_dirs"])
            console.print(
                f"[warning]FLINK-39964[/warning] {where}: {r['handles']} files reused from a CLAIM-restored "
                f"NATIVE savepoint are recorded by relative name only, so Flink looks for them in this "
                f"checkpoint's directory and cannot restore it; they are in {dirs}. "
                f"Repair: [bold]ckptctl repair {_escape(r['checkpoint'])} -o DEST[/bold]"
            )
        else:
            console.print(
                f"[warning]FLINK-39964[/warning] {where}: {r['handles'] - r['found']} of {r['handles']} files reused "
                "from a CLAIM-restored NATIVE savepoint were found in no savepoint directory; pass it with --savepoints"
            )


def _once(problem: dict[str, Any]) -> str:
    """A problem's detail without the repair command, which the FLINK-39964 summary below the
    table gives once per checkpoint (not once per file)."""
    detail = problem.get("detail") or ""
    return detail.split("; fix: ckptctl repair ")[0] if problem.get("repair") else detail


GC_SHOWN_CANDIDATES = 10  # the largest orphans a console plan shows (all of them: --json or -o)


class ConsoleOutput(Output):
    """Rich rendering for a person at a terminal (also used when piping without --json)."""

    @property
    def out(self):
        return self.term.out

    def result(self, result: Any, render: Callable[[Any, Any], None]) -> None:
        render(self.out, result)

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
                status = "[ok]ok[/ok]" if r["complete"] else "[warning]incomplete[/warning]"
                if r.get("error"):
                    status = "[error]unreadable[/error]"
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
            label = f"[accent]{op['operator_id']}[/accent]"
            if op.get("name"):
                label += f" {_escape(op['name'])}"
            if op.get("uid"):
                label += f" (uid {_escape(op['uid'])})"
            label += f"  parallelism {op['parallelism']}/{op['max_parallelism']}"
            if op["fully_finished"]:
                label += " [muted]fully finished[/muted]"
            node = tree.add(label)
            if op.get("coordinator_state"):
                node.add(f"coordinator: {_handle_line(op['coordinator_state'], base)}")
            for s in op["subtasks"]:
                if s["finished"]:
                    node.add(f"subtask {s['index']} [muted]finished[/muted]")
                    continue
                handles = [
                    (slot, h)
                    for slot in ("managed_keyed", "raw_keyed", "managed_operator", "raw_operator",
                                 "input_channels", "output_channels")
                    for h in s[slot]
                ]  # fmt: skip
                sub = node.add(f"subtask {s['index']}" + ("" if handles else " [muted](no state)[/muted]"))
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

    def refs(
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

    def gc_plan(self, plan: Any, written_to: str | None) -> None:
        from rich.panel import Panel
        from rich.table import Table

        from ckptctl.gc.reasons import describe

        candidates = plan.candidates
        plan = plan.header()

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
        title = "gc plan" + (" [error](blocked)[/error]" if plan["blocked"] else " (dry run)")
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
        largest = sorted(candidates, key=lambda c: -c.size)[:GC_SHOWN_CANDIDATES]
        if largest:
            table = Table(title=f"largest orphans (of {len(candidates):,})", title_justify="left")
            table.add_column("path", overflow="fold")
            table.add_column("size", justify="right", no_wrap=True)
            table.add_column("written", no_wrap=True)
            table.add_column("reason")
            base = plan["options"]["roots"][0] if len(plan["options"]["roots"]) == 1 else ""
            for c in largest:
                path = c.path[len(base) + 1 :] if base and c.path.startswith(base + "/") else c.path
                table.add_row(_escape(path), human_bytes(c.size), human_time(c.mtime) if c.mtime else "?", str(c.reason))
            self.out.print(table)
        if plan.get("dead_jobs"):
            table = Table(title="jobs with no retained checkpoint", title_justify="left")
            table.add_column("job")
            table.add_column("files", justify="right")
            table.add_column("bytes", justify="right")
            table.add_column("files are")
            for d in plan["dead_jobs"]:
                table.add_row(
                    _escape(d["job"].rpartition("/")[2]), f"{d['files']:,}", human_bytes(d["bytes"]),
                    "collected" if d.get("collected", True) else "kept",
                )
            self.out.print(table)
        for w in plan["warnings"]:
            self.warn(w)
        for r in plan["refusals"]:
            self.term.refusal(r["code"], r["message"])
        if written_to and plan["blocked"]:
            self.out.print(f"plan written to {written_to} for review; it is blocked and can never be applied")
        elif written_to:
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

    # -- verify, check -----------------------------------------------------------------------
    def verify(self, result: Any, root: str, named: str) -> None:
        from rich.table import Table

        from ckptctl.verify import CHECKS
        from ckptctl.views import short_uri

        c = result.counts
        where = result.engine + (f" on {result.master}" if result.master else "")
        grid = Table(title=_escape(f"verify {named}"), title_justify="left", show_header=True)
        grid.add_column("check")
        grid.add_column("checked", justify="right")
        grid.add_column("problems", justify="right")
        by_check: dict[str, int] = {}
        for p in result.problems:
            by_check[p["check"]] = by_check.get(p["check"], 0) + 1
        for check in CHECKS:
            if c[check]:
                n = by_check.get(check, 0)
                grid.add_row(check, f"{c[check]:,}", f"[error]{n:,}[/error]" if n else "0")
        self.out.print(grid)
        self.out.print(
            f"{c['checkpoints']} checkpoints, {c['references']:,} references, {c['files']:,} files"
            + (f", {c['handles']:,} RocksDB handles" if c["handles"] else "")
            + f" — {where}, {result.elapsed:.1f}s"
        )
        verdicts = result.per_checkpoint()
        if len(verdicts) > 1 or not result.ok:
            per = Table(title="per checkpoint (broken first)", title_justify="left")
            per.add_column("checkpoint", overflow="fold")
            per.add_column("files", justify="right", no_wrap=True)
            per.add_column("result", overflow="fold")
            for v in verdicts:
                why = (v["why"] or "").split("; fix: ckptctl repair ")[0]  # the summary below gives it once
                status = "[ok]sound[/ok]" if v["ok"] else f"[error]broken[/error]: {_escape(why)}"
                per.add_row(_escape(short_uri(v["checkpoint"], root)), f"{v['files']:,}", status)
            self.out.print(per)
        for m in result.moved:
            self.warn(
                f"{len(m['checkpoints'])} checkpoints were written at another location: Flink reads the paths as "
                f"written, so they are checked there (to check this copy instead, as a what-if: --rebase "
                f"{' --rebase '.join(m['rebase'])})"
            )
        if result.what_if:
            self.warn(
                f"what-if: paths mapped with --rebase {', '.join(result.what_if)}; Flink itself reads the paths as "
                "written in _metadata"
            )
        if result.problems:
            table = Table(title=f"{len(result.problems)} problems", title_justify="left")
            table.add_column("path", overflow="fold", ratio=3)
            table.add_column("check", no_wrap=True)
            table.add_column("detail", overflow="fold", ratio=2)
            for p in result.problems[:200]:
                table.add_row(_escape(short_uri(p["path"], root)), p["check"], _escape(_once(p)))
            self.out.print(table)
            if len(result.problems) > 200:
                self.out.print(f"… and {len(result.problems) - 200} more (use --json or --report)")
        if not result.ok:
            print_repairable(self.out, result.to_json()["repairable"], root)
            broken = sum(1 for v in verdicts if not v["ok"])
            self.out.print(
                f"[error]NOT SOUND[/error]: {broken} of {len(verdicts)} checkpoints would fail to restore"
            )
        else:
            self.out.print("[ok]sound[/ok]: every file is present, complete and well-formed")

    # -- plan-rescale ------------------------------------------------------------------------
    def rescale_plan(self, plan: dict[str, Any]) -> None:
        from rich.table import Table

        self.out.print(
            f"[bold]restore of checkpoint {plan['checkpoint_id']} at parallelism {plan['new_parallelism']}[/bold] "
            f"— Flink {plan['flink_family']} rules ({_escape(plan['family_from'])})"
        )
        for op in plan["operators"]:
            if not op["keyed"] and not op["operator_state"]:
                continue
            title = f"{op['operator_id']}" + (f" {op['name']}" if op.get("name") else "")
            title += f"  {op['old_parallelism']} → {op['new_parallelism']} (max {op['max_parallelism']})"
            if op["keyed"]:
                t = Table(title=_escape(title), title_justify="left")
                columns = [
                    "subtask",
                    "key groups",
                    "handles received (overlap, fraction)",
                    "base",
                    "clip",
                    "copied",
                    "download",
                ]
                if "data" in op:  # --data-aware: measured bytes instead of uniform key groups
                    columns += ["keeps", "clipped", "copied bytes"]
                for col in columns:
                    left = col in (
                        "key groups",
                        "handles received (overlap, fraction)",
                        "base",
                        "clip",
                        "copied",
                    )
                    t.add_column(col, justify="left" if left else "right")
                for s in op["subtasks"]:
                    handles = (
                        ", ".join(
                            f"{h['key_group_range'][0]}-{h['key_group_range'][1]} ({h['overlap']}/{h['fraction']:.2f})"
                            for h in s["handles"]
                        )
                        or "-"
                    )
                    base = s["base"]
                    base_text = {
                        "direct": "direct restore (history kept)"
                        if s["incremental_history_kept"]
                        else "direct restore",
                        "empty": "[warning]empty DB[/warning]",
                        "ingest": "ingest all (import)",
                        "full": "full snapshot read",
                        "none": "-",
                    }.get(s["mode"]) or f"{base['key_group_range'][0]}-{base['key_group_range'][1]}"
                    clip = ", ".join(f"{a}-{b}" for a, b in s["clip"]) or "-"
                    copied = (
                        ", ".join(f"{c['copy_range'][0]}-{c['copy_range'][1]}" for c in s["copied"]) or "-"
                    )
                    extra = []
                    if "data" in s:
                        d = s["data"]
                        extra = [
                            human_bytes(d["keep_bytes"]),
                            human_bytes(d["clip_bytes"]),
                            human_bytes(d["copy_bytes"]),
                        ]
                    t.add_row(
                        str(s["index"]), f"{s['key_group_range'][0]}-{s['key_group_range'][1]}", handles, base_text,
                        clip, copied, human_bytes(s["download_bytes"]), *extra,
                    )  # fmt: skip
                self.out.print(t)
            for osp in op["operator_state"]:
                modes = ", ".join(
                    f"{st['name']} ({st['mode'].lower()}, {st['elements']})" for st in osp["states"]
                )
                reads = ", ".join(human_bytes(b) for b in osp["bytes_per_subtask"])
                self.out.print(
                    f"  operator state of {op['operator_id'][:8]}: {_escape(modes)}; read per subtask: {reads}"
                )
        skew = f"{plan['skew']:.2f}" if plan["skew"] else "-"
        self.out.print(
            f"total download {human_bytes(plan['download_bytes'])}; critical path subtask {plan['critical_subtask']} "
            f"({human_bytes(plan['max_subtask_bytes'])}); skew {skew}; subtasks merging RocksDB instances: "
            f"{plan['merging_subtasks']}"
        )

    def rescale_sweep(self, result: dict[str, Any]) -> None:
        from rich.table import Table

        rows = result["rows"]
        peak = max((r["max_subtask_bytes"] for r in rows), default=0) or 1
        t = Table(
            title="restore cost by parallelism (bar: largest subtask download = critical path)",
            title_justify="left",
        )
        data_aware = bool(result.get("data_aware"))
        columns = ["parallelism", "critical path", "", "total", "merging", "skew"]
        if data_aware:  # measured bytes (verify --deep --histogram)
            columns += ["clipped", "copied bytes"]
        for col in columns:
            t.add_column(col, justify="left" if col == "" else "right", no_wrap=True)
        # the bar gets what the numbers leave of the terminal (80 columns included), never cut
        width = max(8, min(40, self.out.width - (90 if data_aware else 64)))
        for r in rows:
            bar = "█" * max(1, round(width * r["max_subtask_bytes"] / peak)) if r["max_subtask_bytes"] else ""
            style = "ok" if r["merging_subtasks"] == 0 else "warning"
            extra = (
                [human_bytes(r["data"]["clip_bytes"]), human_bytes(r["data"]["copy_bytes"])]
                if data_aware
                else []
            )
            t.add_row(
                f"{r['parallelism']}{' (now)' if r.get('current') else ''}", human_bytes(r["max_subtask_bytes"]),
                f"[{style}]{bar}[/{style}]",
                human_bytes(r["download_bytes"]), str(r["merging_subtasks"]), f"{r['skew']:.2f}" if r["skew"] else "-",
                *extra,
            )  # fmt: skip
        self.out.print(t)
        if result["no_merge"]:
            self.out.print(
                f"no merging of RocksDB instances at parallelism: {', '.join(map(str, result['no_merge']))}"
            )
        tie = "fewest copied bytes" if data_aware else "fewest merges"
        self.out.print(f"recommended (smallest critical path, {tie}): {result['recommended']}")

    # -- repair, relocate --------------------------------------------------------------------
    def repair(self, view: dict[str, Any]) -> None:
        n = view["rewritten_handles"]
        self.out.print(
            f"repair {_escape(view['checkpoint'])} ({view['issue']}): {n} handle{'s' if n != 1 else ''} to rewrite"
        )
        for r in view["rewrites"]:
            who = f"operator {r['operator_id']} subtask {r['subtask']} {r['slot']} {r['scope']}"
            name = f" {r['local_name']}" if r["local_name"] else ""
            self.out.print(
                f"  {who}{_escape(name)}: RelativeFileStateHandle '{_escape(r['relative_path'])}' ({r['size']} bytes) "
                f"→ FileStateHandle {_escape(r['to']['path'])}"
            )
        for u in view["unresolved"]:
            if u["alternatives"]:
                self.out.print(
                    f"  [error]ambiguous[/error]: {len(u['alternatives'])} savepoint files named "
                    f"'{_escape(u['relative_path'])}' ({u['size']} bytes) differ in content "
                    f"({_escape(', '.join(u['alternatives'][:3]))}); pass the claimed savepoint's directory with --savepoints"
                )
                continue
            self.out.print(
                f"  [error]not found[/error]: '{_escape(u['relative_path'])}' ({u['size']} bytes) is in no savepoint "
                f"directory searched ({', '.join(view['searched'])}); pass it with --savepoints"
            )
        if view.get("rebased_handles"):
            self.out.print(
                f"  and {view['rebased_handles']} absolute paths of the moved checkpoint mapped with "
                f"--rebase {_escape(', '.join(view['rebase']))}, so the copy names every file where it is now"
            )
        if view["dry_run"] and n:
            self.out.print("dry run: nothing written")
        r = view.get("result")
        if r is None:
            return
        if r["backup"]:
            self.out.print(f"repaired in place; the old _metadata is kept as {r['backup']}")
        else:
            self.out.print(
                f"repaired copy at {r['destination']}: {r['copied_files']} files copied "
                f"({r['already_there']} already there), new _metadata written last"
            )

    def relocate(self, view: dict[str, Any]) -> None:
        self.out.print(
            f"relocate {_escape(view['source'])} → {_escape(view['written_destination'])}: "
            f"{len(view['checkpoints'])} checkpoint(s), {view['files']} files, {human_bytes(view['bytes'])} "
            f"({view['shared_files']} files shared by several checkpoints, copied once)"
        )
        for c in view["checkpoints"]:
            self.out.print(
                f"  {c['kind']} {c['checkpoint_id']}: {_escape(c['source'])} → {_escape(c['destination'])} "
                f"({c['rewritten_handles']} paths rewritten, {c['relative_handles']} relative handles move as they are)"
            )
        if view["rewritten_prefixes"]:
            self.out.print("rewritten path prefixes:")
            for p in view["rewritten_prefixes"]:
                self.out.print(f"  {_escape(p['from'])} → {_escape(p['to'])}  ({p['handles']})")
        for c in view["conflicts"]:
            self.out.print(f"[error]conflict[/error]: {_escape(c)} already holds a different checkpoint")
        for c in view["already_relocated"]:
            self.out.print(f"already relocated: {_escape(c)} (identical)")
        if not view["applied"]:
            self.out.print("dry run: nothing written; add --apply to copy")
            return
        r = view["result"]
        self.out.print(
            f"copied {r['copied_files']} files ({r['copied_bytes']:,} bytes), {r['already_there']} already there, "
            f"{len(r['metadata_written'])} _metadata written last, in {r['seconds']:.1f}s"
        )
        report = view.get("verify")
        if report is not None:
            if report["ok"]:
                c = report["checked"]
                self.out.print(f"[ok]verified[/ok]: {c['files']} files of the copies exist with their sizes")
            else:
                for p in report["problems"][:20]:
                    self.out.print(f"[error]{p['check']}[/error] {p['path']}: {p['detail']}")

    # -- states ------------------------------------------------------------------------------


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


def make_output(as_json: bool, terminal: Terminal | None = None) -> Output:
    """The JSON or the console implementation, sharing ``terminal`` (a default one if None)."""
    return JsonOutput(terminal) if as_json else ConsoleOutput(terminal)
