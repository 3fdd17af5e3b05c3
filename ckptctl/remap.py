"""Operator state moved to new operator ids: a uid renamed without losing state (``ckptctl remap``).

Flink matches a snapshot's state to the new program by operator id only (``StateAssignmentOperation``):
a renamed uid is a new id, and the old id's state is either refused or, with ``-n``, dropped. The
State Processor API's ``changeOperatorIdentifier`` moves the subtask state but leaves the operator
coordinator's state behind (FLINK-40837: a FLIP-27 source's enumerator starts again). Here the
whole ``OperatorState`` record moves -- coordinator state, operator, keyed and channel state,
parallelism and max parallelism -- so nothing is left behind, and ``--drop`` removes an operator's
state explicitly (an auditable ``-n``).

The result is a new directory holding the new ``_metadata``. Files named by absolute paths stay where
they are and are referenced as written (through the checkpoint's one path mapping, as ``repair`` does);
the files of relative handles (``RelativeFileStateHandle``: a savepoint's own files) are copied next
to the new ``_metadata``, because Flink resolves them against the directory of the ``_metadata`` it
reads. The relative handles stay relative, so the new ``_metadata`` is a function of the snapshot and
the pairs alone -- the same bytes wherever the snapshot or DEST sit -- and DEST stays self-contained
like the savepoint it came from. The snapshot itself is never written.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ckptctl import storage as st
from ckptctl.checkpoint.layout import METADATA_FILE
from ckptctl.checkpoint.loading import LoadedCheckpoint, canonical
from ckptctl.errors import CkptError
from ckptctl.metadata import read_metadata, write_metadata
from ckptctl.metadata.checkpoint import CheckpointMetadata
from ckptctl.metadata.handles import FileHandle, RelativeFileHandle, SegmentFileHandle
from ckptctl.metadata.operators import OperatorState
from ckptctl.metadata.transform import map_file_handles
from ckptctl.preflight.uidhash import operator_id_of_uid
from ckptctl.repair import missing_files, written_now
from ckptctl.storage import Storage
from ckptctl.storage.copying import copy_file, write_atomic

_HEX_ID = re.compile(r"[0-9a-fA-F]{32}")


class RemapError(CkptError):
    """The remap cannot be done as asked (an id not in the snapshot, a target holding state, ...)."""


@dataclass(frozen=True)
class OperatorRef:
    """An operator named on the command line: by uid (its id is the uid's MurmurHash3) or by 32-hex id."""

    text: str
    operator_id: str
    uid: str | None  # None: named by id

    @classmethod
    def parse(cls, text: str) -> OperatorRef:
        if not text:
            raise RemapError("an empty operator name: give a uid or a 32-hex operator id")
        if _HEX_ID.fullmatch(text):
            return cls(text, text.lower(), None)
        return cls(text, operator_id_of_uid(text), text)

    def describe(self) -> str:
        return self.text if self.uid is None else f"uid '{self.uid}' (id {self.operator_id})"


def parse_pair(spec: str) -> tuple[OperatorRef, OperatorRef]:
    """``OLD=NEW``; a uid holding '=' is named by its 32-hex id instead."""
    if spec.count("=") != 1:
        raise RemapError(
            f"--uid {spec!r}: expected OLD=NEW (a uid holding '=' is given by its 32-hex operator id)"
        )
    old, new = spec.split("=")
    return OperatorRef.parse(old), OperatorRef.parse(new)


def has_state(op: OperatorState) -> bool:
    """Flink's test for an operator that cannot be left unmapped without ``-n``: coordinator state,
    or any subtask with operator, keyed or channel state (a fully finished operator counts: Flink
    restores it as finished)."""
    if op.coordinator_state is not None or op.subtasks is None:
        return True
    return any(
        s.managed_operator or s.raw_operator or s.managed_keyed or s.raw_keyed or s.input_channels
        or s.output_channels
        for s in op.subtasks
    )  # fmt: skip


def _summary(op: OperatorState) -> dict[str, Any]:
    subtasks = op.subtasks or ()
    coord = op.coordinator_state
    return {
        "operator_id": op.operator_id,
        "uid": op.uid or None,
        "name": op.name or None,
        "parallelism": op.parallelism,
        "max_parallelism": op.max_parallelism,
        "coordinator_state_bytes": coord.state_size if coord is not None else None,
        "subtasks_with_keyed_state": sum(1 for s in subtasks if s.managed_keyed or s.raw_keyed),
        "subtasks_with_operator_state": sum(1 for s in subtasks if s.managed_operator or s.raw_operator),
        "fully_finished": op.subtasks is None,
    }


@dataclass
class RemapPlan:
    checkpoint: str
    moves: list[dict[str, Any]]  # {"from": summary, "to": {"operator_id", "uid"}}
    drops: list[dict[str, Any]]
    remapped: CheckpointMetadata
    data: bytes  # the new _metadata
    relative_files: list[tuple[str, int]]  # (relative path, size) to copy next to the new _metadata
    absolute_files: int  # absolute file references kept where they are
    missing: list[str] = field(default_factory=list)  # absolute files named that do not exist

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    def to_json(self) -> dict[str, Any]:
        return {
            "snapshot": self.checkpoint,
            "moved": self.moves,
            "dropped": self.drops,
            "relative_files_copied": len(self.relative_files),
            "absolute_files_referenced": self.absolute_files,
            "missing_files": self.missing,
            "metadata_bytes": len(self.data),
            "metadata_sha256": self.sha256,
        }


def plan_remap(
    storage: Storage,
    ck: LoadedCheckpoint,
    pairs: Iterable[tuple[OperatorRef, OperatorRef]],
    drops: Iterable[OperatorRef] = (),
) -> RemapPlan:
    """The new model and bytes. Refused, in one line: an OLD or dropped id not in the snapshot, an
    operator moved twice or both moved and dropped, two OLDs onto one NEW, a NEW id that already
    holds state in the snapshot (unless that state is itself moved away or dropped)."""
    md = ck.metadata
    where = ck.location.uri
    by_id = {op.operator_id: op for op in md.operators}
    pairs, drops = list(pairs), list(drops)
    if not pairs and not drops:
        raise RemapError(
            "nothing to do: name pairs with --uid OLD=NEW (or --by-name) or operators with --drop"
        )
    leaving: dict[str, str] = {}  # old id -> what the command line said
    for old, _new in pairs:
        _in_snapshot(by_id, old, "--uid", where)
        if old.operator_id in leaving:
            raise RemapError(
                f"{old.describe()} is named twice (moved twice, or moved and dropped)", path=where
            )
        leaving[old.operator_id] = old.text
    for d in drops:
        _in_snapshot(by_id, d, "--drop", where)
        if d.operator_id in leaving:
            raise RemapError(f"{d.describe()} is named twice (moved twice, or moved and dropped)", path=where)
        leaving[d.operator_id] = d.text
    targets: dict[str, OperatorRef] = {}
    for old, new in pairs:
        if new.operator_id == old.operator_id:
            raise RemapError(f"--uid {old.text}={new.text}: the old and the new id are the same", path=where)
        if new.operator_id in targets:
            raise RemapError(
                f"two operators onto one: {targets[new.operator_id].text} and {old.text} both onto {new.describe()}",
                path=where,
            )
        targets[new.operator_id] = old
        there = by_id.get(new.operator_id)
        if there is not None and has_state(there) and new.operator_id not in leaving:
            raise RemapError(
                f"--uid {old.text}={new.text}: {new.describe()} already holds state in the snapshot "
                "(drop it with --drop or move it away first)",
                path=where,
            )
    new_of = {old.operator_id: new for old, new in pairs}
    dropped = {d.operator_id for d in drops}
    operators = []
    for op in md.operators:
        if op.operator_id in dropped:
            continue
        new = new_of.get(op.operator_id)
        if new is not None:
            uid = op.uid if op.uid is None else (new.uid or "")  # V5+: the new uid when it is known
            operators.append(op._replace(operator_id=new.operator_id, uid=uid))
        elif op.operator_id in targets and op.operator_id not in leaving:
            continue  # the stateless entry of the new id: the moved state takes its place
        else:
            operators.append(op)
    remapped, relative, absolute, named = _referenced(md._replace(operators=tuple(operators)), ck)
    data = write_metadata(remapped)
    if read_metadata(data, path="<remapped _metadata>") != remapped:  # never write what does not read back
        raise RemapError("internal error: the remapped _metadata does not read back as written", path=where)
    moves = [
        {"from": _summary(by_id[old.operator_id]), "to": {"operator_id": new.operator_id, "uid": new.uid}}
        for old, new in pairs
    ]  # fmt: skip
    return RemapPlan(
        where, moves, [_summary(by_id[d.operator_id]) for d in drops], remapped, data, relative, absolute,
        missing_files(storage, named),
    )  # fmt: skip


def _in_snapshot(by_id: dict[str, OperatorState], ref: OperatorRef, option: str, where: str) -> None:
    if ref.operator_id not in by_id:
        raise RemapError(
            f"{option} {ref.text}: {ref.describe()} is not an operator of the snapshot", path=where
        )


def _referenced(md: CheckpointMetadata, ck: LoadedCheckpoint):
    """``md`` with absolute paths through the checkpoint's path mapping (``repair``'s rule), and the
    relative files it names (to copy, sorted, once each), the number of absolute references, and
    the absolute URIs (to check they exist)."""
    relative: dict[str, int] = {}
    named: set[str] = set()
    count = {"absolute": 0}

    def visit(h, _where):
        if type(h) is RelativeFileHandle:
            relative[h.relative_path] = h.size
            return h
        if type(h) in (FileHandle, SegmentFileHandle):
            count["absolute"] += 1
            now = written_now(ck.rebase, h.path)
            named.add(canonical(now))
            return h if now == h.path else h._replace(path=now)
        return h

    out = map_file_handles(md, visit)
    return out, sorted(relative.items()), count["absolute"], named


# ---------------------------------------------------------------------------------------------
# --by-name: pairs proposed from the operator names V5+ metadata records


@dataclass(frozen=True)
class Proposal:
    old: dict[str, Any]
    new: dict[str, Any]

    def flag(self) -> str:
        old = self.old["uid"] or self.old["operator_id"]
        new = self.new["uid"] or self.new["operator_id"]
        return f"--uid {old}={new}"

    def to_json(self) -> dict[str, Any]:
        return {"from": self.old, "to": self.new, "as_flag": self.flag()}


def propose_by_name(old: CheckpointMetadata, new: CheckpointMetadata) -> tuple[list[Proposal], list[str]]:
    """Pairs (OLD operator with state whose id NEW lacks, NEW operator whose id OLD lacks or holds
    without state) with the same recorded name, each name once on both sides; and why the others
    were not paired. Names are only in V5+ metadata (Flink 1.15+); a name is not an identity,
    hence a proposal, never applied without a person's yes."""
    if old.version < 5 or new.version < 5:
        raise RemapError(
            f"--by-name needs operator names, recorded from metadata version 5 (Flink 1.15); "
            f"the snapshot is version {old.version}, NEW version {new.version}"
        )
    new_ids = {op.operator_id for op in new.operators}
    old_by_id = {op.operator_id: op for op in old.operators}
    orphans = [op for op in old.operators if op.operator_id not in new_ids and has_state(op)]
    free = [
        op for op in new.operators
        if op.operator_id not in old_by_id or not has_state(old_by_id[op.operator_id])
    ]  # fmt: skip
    proposals, notes = [], []
    for op in orphans:
        if not op.name:
            notes.append(f"operator {op.operator_id} has no recorded name")
            continue
        same_old = [o for o in orphans if o.name == op.name]
        same_new = [n for n in free if n.name == op.name]
        if len(same_old) > 1 or len(same_new) > 1:
            notes.append(
                f"name '{op.name}' is not unique ({len(same_old)} old, {len(same_new)} new operators)"
            )
            continue
        if not same_new:
            notes.append(f"operator '{op.name}' ({op.operator_id}): no operator of NEW has this name")
            continue
        proposals.append(Proposal(_summary(op), _summary(same_new[0])))
    return proposals, sorted(set(notes))


# ---------------------------------------------------------------------------------------------
# writing DEST


@dataclass
class RemapResult:
    destination: str
    metadata: str
    copied_files: int
    copied_bytes: int
    already_there: int

    def to_json(self) -> dict[str, Any]:
        return {
            "destination": self.destination, "metadata": self.metadata, "copied_files": self.copied_files,
            "copied_bytes": self.copied_bytes, "already_there": self.already_there,
        }  # fmt: skip


def apply_remap(storage: Storage, ck: LoadedCheckpoint, plan: RemapPlan, dest: str) -> RemapResult:
    """Write DEST: the relative files first, the new ``_metadata`` last (a ``_metadata`` never names
    files not yet there). DEST outside the snapshot; a DEST already holding the same ``_metadata``
    is a finished earlier run, a different one is refused."""
    if plan.missing:
        raise RemapError(
            f"the remapped _metadata would name {len(plan.missing)} files that do not exist; first: "
            f"{plan.missing[0]}. If the snapshot was moved, map where it was written with --rebase OLD=NEW",
            path=plan.checkpoint,
        )
    src = ck.location.uri
    dest = st.normalize_uri(dest)
    if st.nest(dest, src):
        raise RemapError(f"the destination {dest} must be outside the snapshot's directory (and not hold it)")
    dest_md = st.join(dest, METADATA_FILE)
    if storage.stat(dest_md) is not None:
        if storage.read_bytes(dest_md) == plan.data:
            return RemapResult(dest, dest_md, 0, 0, len(plan.relative_files))
        raise RemapError("holds a different _metadata; choose a new directory", path=dest)
    copied = nbytes = skipped = 0
    for rel, size in plan.relative_files:
        source, target = st.join(src, rel), st.join(dest, rel)
        there = storage.stat(target)
        if there is not None and there.size == size:
            skipped += 1  # a re-run after an interruption
            continue
        nbytes += copy_file(storage, source, target, size)
        copied += 1
    write_atomic(storage, dest_md, plan.data)
    return RemapResult(dest, dest_md, copied, nbytes, skipped)
