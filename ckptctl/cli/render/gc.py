"""``ckptctl gc plan`` and ``gc apply``: what a plan would delete and keep, and what was deleted."""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Any

from ckptctl.cli.output import human_bytes, human_time, styled
from ckptctl.words import plural

if TYPE_CHECKING:
    from ckptctl.cli.terminal import Terminal
    from ckptctl.gc.apply import ApplyResult
    from ckptctl.gc.plan import GcPlan
    from ckptctl.gc.spark.delete import ExecutorApplyResult

SHOWN_CANDIDATES = 10  # the largest orphans a console plan shows (all of them: --json or -o)


def plan(console: Any, result: GcPlan, written_to: str | None, term: Terminal) -> None:
    """``gc plan``: the totals, orphans and kept files by reason, the largest orphans, dead jobs;
    its warnings and refusals go to the terminal (stderr)."""
    from rich.panel import Panel

    from ckptctl.cli.output import Table
    from ckptctl.gc.reasons import describe

    candidates = result.candidates
    plan = result.header()

    grid = Table.grid(padding=(0, 2))
    grid.add_column(justify="left")
    grid.add_column(justify="right")
    grid.add_column(justify="right")
    grid.add_row("", styled("[bold]files[/bold]"), styled("[bold]bytes[/bold]"))
    grid.add_row("live (referenced)", f"{plan['live_files']:,}", human_bytes(plan["live_bytes"]))
    grid.add_row(
        styled("[bold]orphans to delete[/bold]"),
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
    title = styled("gc plan" + (" [error](blocked)[/error]" if plan["blocked"] else " (dry run)"))
    console.print(Panel(grid, title=title, title_align="left", expand=False))
    for label, counter in (("orphans by reason", plan["candidates_by_reason"]),
                           ("kept by guard", plan["protected_by_reason"])):  # fmt: skip
        if counter:
            table = Table(title=label, title_justify="left", show_header=False)
            table.add_column("reason")
            table.add_column("files", justify="right")
            for reason, n in counter.items():
                table.add_row(describe(reason), f"{n:,}")
            console.print(table)
    # the same as sorted(...)[:n], holding n entries: the local plan builds each as it is read
    largest = heapq.nsmallest(SHOWN_CANDIDATES, candidates, key=lambda c: -c.size)
    if largest:
        table = Table(title=f"largest orphans (of {len(candidates):,})", title_justify="left")
        table.add_column("path", overflow="fold")
        table.add_column("size", justify="right", no_wrap=True)
        table.add_column("written", no_wrap=True)
        table.add_column("reason")
        base = plan["options"]["roots"][0] if len(plan["options"]["roots"]) == 1 else ""
        for c in largest:
            path = c.path[len(base) + 1 :] if base and c.path.startswith(base + "/") else c.path
            table.add_row(path, human_bytes(c.size), human_time(c.mtime) if c.mtime else "?", str(c.reason))
        console.print(table)
    if plan.get("dead_jobs"):
        table = Table(title="jobs with no retained checkpoint", title_justify="left")
        table.add_column("job")
        table.add_column("files", justify="right")
        table.add_column("bytes", justify="right")
        table.add_column("files are")
        for d in plan["dead_jobs"]:
            table.add_row(
                d["job"].rpartition("/")[2],
                f"{d['files']:,}",
                human_bytes(d["bytes"]),
                "collected" if d.get("collected", True) else "kept",
            )
        console.print(table)
    for w in plan["warnings"]:
        term.warn(w)
    for r in plan["refusals"]:
        term.refusal(r["code"], r["message"])
    if written_to and plan["blocked"]:
        console.print(f"plan written to {written_to} for review; it is blocked and can never be applied")
    elif written_to:
        console.print(f"plan written to {written_to}; apply with: ckptctl gc apply {written_to}")
    elif not plan["blocked"] and plan["candidate_files"]:
        console.print(
            "dry run: nothing deleted. Write the plan with -o plan.json, review it, then `ckptctl gc apply plan.json`."
        )


def applied(console: Any, result: ApplyResult, term: Terminal) -> None:
    """``gc apply``: what was deleted (or moved to the trash), skipped and failed."""
    verb = "moved to " + result.trashed_to if result.trashed_to else "deleted"
    deleted_bytes = sum(d.size for d in result.deleted)
    console.print(f"{verb}: {plural(len(result.deleted), 'file')}, {human_bytes(deleted_bytes)}")
    for line in skip_lines(result.skipped):
        console.print(line)
    for f in result.failed[:20]:
        term.error(f"{f['path']}: {f['error']}")
    if result.manifest:
        console.print(f"manifest: {result.manifest}")


def skip_lines(skipped: list[dict[str, Any]]) -> list[str]:
    """One line per reason code of the candidates not deleted: "already gone (done): N" reads
    apart from "referenced again (kept): N" (a re-run after a completed apply is all done)."""
    from collections import Counter

    from ckptctl.gc.revalidation import SKIP_WORDS

    counts = Counter(s.get("code") for s in skipped)
    return [f"{SKIP_WORDS.get(code, 'skipped')}: {n:,}" for code, n in counts.items()]


def applied_on_executors(console: Any, result: ExecutorApplyResult, term: Terminal) -> None:
    """``gc apply`` on Spark executors: counts (the per-file lists stay in the batch manifests),
    the first failures and skips, and what earlier runs had already settled."""
    data = result.to_json()
    verb = "moved to " + data["trash"] if data["trash"] else "deleted"
    console.print(f"{verb}: {plural(data['deleted_files'], 'file')}, {human_bytes(data['deleted_bytes'])} "
                  f"in {data['batches']:,} batches on Spark executors")  # fmt: skip
    from ckptctl.gc.revalidation import GONE, SKIP_WORDS

    by_code = data["skipped_by_code"]  # re-validation's skips, in the words of an in-process apply
    gone = data["gone_files"] + by_code.get(GONE, 0)  # found gone by re-validation or at deletion
    if gone:
        console.print(f"{SKIP_WORDS[GONE]}: {gone:,}")
    for code, n in by_code.items():
        if code != GONE and n:
            console.print(f"{SKIP_WORDS.get(code, 'skipped')}: {n:,}")
    at_deletion = data["skipped_files"] - sum(by_code.values())
    if at_deletion:
        console.print(f"skipped at deletion (changed since the plan, or not a regular file): {at_deletion:,}")
    if data["not_attempted_files"]:
        console.print(
            f"not attempted (an expired _metadata could not go first): {data['not_attempted_files']:,}"
        )
    earlier = sum(data["settled_by_earlier_runs"].values())
    if earlier:
        console.print(f"settled by earlier runs (their manifests): {earlier:,}")
    for f in data["failed"][:20]:
        term.error(f"{f['path']}: {f['error']}")
    console.print(f"manifests: {data['manifest']}")
