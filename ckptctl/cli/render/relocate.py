"""``ckptctl relocate``: the plan and, with ``--apply``, the copy and its shallow verify."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ckptctl.cli.output import human_bytes, styled
from ckptctl.words import plural

if TYPE_CHECKING:
    from ckptctl.relocate.apply import RelocateReport


def report(console: Any, relocation: RelocateReport) -> None:
    """What is copied where, the rewritten prefixes, conflicts; after ``--apply`` the copy and
    its verify."""
    view = relocation.to_json()
    console.print(
        f"relocate {view['source']} → {view['written_destination']}: "
        f"{plural(len(view['checkpoints']), 'checkpoint')}, {plural(view['files'], 'file')}, "
        f"{human_bytes(view['bytes'])} ({plural(view['shared_files'], 'file')} shared by several checkpoints, "
        "copied once)"
    )
    for c in view["checkpoints"]:
        console.print(
            f"  {c['kind']} {c['checkpoint_id']}: {c['source']} → {c['destination']} "
            f"({c['rewritten_handles']} paths rewritten, {c['relative_handles']} relative handles move as they are)"
        )
    if view["rewritten_prefixes"]:
        console.print("rewritten path prefixes:")
        for p in view["rewritten_prefixes"]:
            console.print(f"  {p['from']} → {p['to']}  ({p['handles']})")
    for c in view["conflicts"]:
        console.print(styled("[error]conflict[/error]: {} already holds a different checkpoint", c))
    for c in view["already_relocated"]:
        console.print(f"already relocated: {c} (identical)")
    if not view["applied"]:
        console.print("dry run: nothing written; add --apply to copy")
        return
    r = view["result"]
    console.print(
        f"copied {plural(r['copied_files'], 'file')} ({r['copied_bytes']:,} bytes), {r['already_there']} already there, "
        f"{len(r['metadata_written'])} _metadata written last, in {r['seconds']:.1f}s"
    )
    report = view.get("verify")
    if report is not None:
        if report["ok"]:
            c = report["checked"]
            console.print(
                styled("[ok]verified[/ok]: {} files of the copies exist with their sizes", c["files"])
            )
        else:
            for p in report["problems"][:20]:
                console.print(styled("[error]{}[/error] {}: {}", p["check"], p["path"], p["detail"]))
