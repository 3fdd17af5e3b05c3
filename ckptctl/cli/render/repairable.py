"""FLINK-39964 in the reports of ``check`` and ``verify``: what it did to which checkpoint, said
once per checkpoint with the command that repairs it (not once per file)."""

from __future__ import annotations

from typing import Any

from ckptctl.cli.output import styled


def print_repairable(console, repairable: list[dict[str, Any]], root: str) -> None:
    """What FLINK-39964 did to which checkpoint, and the command that repairs it."""
    from ckptctl.inspect.views import short_uri

    for r in repairable:
        where = short_uri(r["checkpoint"], root)
        if r["found"] == r["handles"]:
            dirs = ", ".join(short_uri(d, root) for d in r["savepoint_dirs"])
            console.print(styled(
                "[warning]FLINK-39964[/warning] {}: {} files reused from a CLAIM-restored NATIVE savepoint are "
                "recorded by relative name only, so Flink looks for them in this checkpoint's directory and cannot "
                "restore it; they are in {}. Repair: [bold]ckptctl repair {} -o DEST[/bold]",
                where, r["handles"], dirs, r["checkpoint"],
            ))  # fmt: skip
        else:
            console.print(styled(
                "[warning]FLINK-39964[/warning] {}: {} of {} files reused from a CLAIM-restored NATIVE savepoint "
                "were found in no savepoint directory; pass it with --savepoints",
                where, r["handles"] - r["found"], r["handles"],
            ))  # fmt: skip


def detail_once(problem: dict[str, Any]) -> str:
    """A problem's detail without the repair command, which the FLINK-39964 summary below the
    table gives once per checkpoint (not once per file)."""
    detail = problem.get("detail") or ""
    return detail.split("; fix: ckptctl repair ")[0] if problem.get("repair") else detail
