"""``ckptctl repair``: the handles rewritten (FLINK-39964) and, once applied, where the result is."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ckptctl.cli.output import styled

if TYPE_CHECKING:
    from ckptctl.repair import RepairReport


def report(console: Any, repair: RepairReport) -> None:
    """The rewrites, what could not be resolved, and (once applied) the repaired checkpoint."""
    view = repair.to_json()
    n = view["rewritten_handles"]
    console.print(
        f"repair {view['checkpoint']} ({view['issue']}): {n} handle{'s' if n != 1 else ''} to rewrite"
    )
    for r in view["rewrites"]:
        who = f"operator {r['operator_id']} subtask {r['subtask']} {r['slot']} {r['scope']}"
        name = f" {r['local_name']}" if r["local_name"] else ""
        console.print(
            f"  {who}{name}: RelativeFileStateHandle '{r['relative_path']}' ({r['size']} bytes) "
            f"→ FileStateHandle {r['to']['path']}"
        )
    for u in view["unresolved"]:
        if u["alternatives"]:
            console.print(styled(
                "  [error]ambiguous[/error]: {} savepoint files named '{}' ({} bytes) differ in content ({}); pass "
                "the claimed savepoint's directory with --savepoints",
                len(u["alternatives"]), u["relative_path"], u["size"], ", ".join(u["alternatives"][:3]),
            ))  # fmt: skip
            continue
        console.print(styled(
            "  [error]not found[/error]: '{}' ({} bytes) is in no savepoint directory searched ({}); pass it with "
            "--savepoints", u["relative_path"], u["size"], ", ".join(view["searched"]),
        ))  # fmt: skip
    if view.get("rebased_handles"):
        console.print(
            f"  and {view['rebased_handles']} absolute paths of the moved checkpoint mapped with "
            f"--rebase {', '.join(view['rebase'])}, so the copy names every file where it is now"
        )
    if view["dry_run"] and n:
        console.print("dry run: nothing written")
    r = view.get("result")
    if r is None:
        return
    if r["backup"]:
        console.print(f"repaired in place; the old _metadata is kept as {r['backup']}")
    else:
        console.print(
            f"repaired copy at {r['destination']}: {r['copied_files']} files copied "
            f"({r['already_there']} already there), new _metadata written last"
        )
