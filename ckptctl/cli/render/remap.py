"""``ckptctl remap``: what moved where, what was dropped, and where the new snapshot is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ckptctl.remap import Proposal, RemapPlan, RemapResult


@dataclass
class Done:
    plan: RemapPlan
    result: RemapResult

    def to_json(self) -> dict[str, Any]:
        return {**self.plan.to_json(), "result": self.result.to_json()}


@dataclass
class Proposed:
    proposals: list[Proposal]
    notes: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"proposals": [p.to_json() for p in self.proposals], "not_paired": self.notes}


def _who(s: dict[str, Any]) -> str:
    parts = [s["operator_id"]]
    if s.get("uid"):
        parts.append(f"uid '{s['uid']}'")
    if s.get("name"):
        parts.append(f"'{s['name']}'")
    return " ".join(parts)


def _what(s: dict[str, Any]) -> str:
    bits = []
    if s["coordinator_state_bytes"] is not None:
        bits.append(f"coordinator state {s['coordinator_state_bytes']} bytes")
    if s["subtasks_with_operator_state"]:
        bits.append(f"operator state of {s['subtasks_with_operator_state']} subtasks")
    if s["subtasks_with_keyed_state"]:
        bits.append(f"keyed state of {s['subtasks_with_keyed_state']} subtasks")
    if s["fully_finished"]:
        bits.append("fully finished")
    return ", ".join(bits) or "no state"


def done(console: Any, d: Done) -> None:
    view = d.to_json()
    console.print(f"remap {view['snapshot']}", style="bold")
    for m in view["moved"]:
        to = m["to"]["operator_id"] + (f" uid '{m['to']['uid']}'" if m["to"]["uid"] else "")
        console.print(f"  moved   {_who(m['from'])} → {to}: {_what(m['from'])}")
    for s in view["dropped"]:
        console.print(f"  dropped {_who(s)}: {_what(s)}", style="warning")
    r = view["result"]
    console.print(
        f"new snapshot at {r['destination']}: _metadata {view['metadata_bytes']} bytes "
        f"(sha256 {view['metadata_sha256']}), {r['copied_files']} relative files copied "
        f"({r['already_there']} already there), {view['absolute_files_referenced']} absolute file "
        "references kept where they are"
    )


def proposed(console: Any, p: Proposed) -> None:
    if not p.proposals:
        console.print("no pair proposed by name")
    for x in p.proposals:
        console.print(f"  propose {_who(x.old)} → {_who(x.new)}: {_what(x.old)}   [{x.flag()}]")
    for n in p.notes:
        console.print(f"  not paired: {n}")
