"""What Apache Paimon's Flink sink keeps in Flink operator state, decoded without a JVM.

The sink's operators (``Writer : <table>`` and ``Global Committer : <table>``) keep four
operator (non-keyed) list states; see ``fixtures/paimon/paimon-sink-state.md``:

========================================  ======  =========================================
``streaming_committer_raw_states``        split   ``byte[]``: one uncommitted ManifestCommittable each
``commit_user_state``                     union   ``String``: the sink's commit user (every task the same)
``paimon_store_sink_write_state``         union   ``Tuple5<String table, String key, byte[] partition,
                                                  Integer bucket, byte[] value>``: per-bucket writer state
``streaming_committer_for_tags_states``   split   ``Long``: savepoint ids still waiting for their tag
========================================  ======  =========================================

Each element sits at its offset in the handle's delegate stream, written by its Flink serializer
(an element ends where the next offset of the handle, or the stream, begins). The elements'
formats, and their decoding, are in :mod:`ckptctl.paimon.sinkelements`; here the states are found
among a checkpoint's operator state handles and their elements read out of the handles' streams,
one ranged read per run of elements.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ckptctl.errors import CkptError, MetadataFormatError
from ckptctl.metadata.operators import FileMergingOperatorHandle, OperatorStreamHandle
from ckptctl.paimon.sinkelements import (
    Committable,
    WriterState,
    decode_commit_user,
    decode_committable_element,
    decode_tag_id,
    decode_writer_state,
)

RAW_STATES = "streaming_committer_raw_states"
COMMIT_USER = "commit_user_state"
WRITE_STATE = "paimon_store_sink_write_state"
TAG_STATES = "streaming_committer_for_tags_states"
SINK_STATES = (RAW_STATES, COMMIT_USER, WRITE_STATE, TAG_STATES)
READ_GAP = 1 << 16  # bytes of other states read through rather than a second request


@dataclass
class HandleState:
    """The sink states of one operator state handle (one subtask)."""

    path: str
    states: list[str] = field(default_factory=list)
    committables: list[Committable] = field(default_factory=list)
    commit_users: list[str | None] = field(default_factory=list)
    writer_states: list[WriterState] = field(default_factory=list)
    tag_ids: list[int] = field(default_factory=list)


@dataclass
class OperatorSinkState:
    operator_id: str
    name: str | None
    uid: str | None
    parallelism: int
    subtasks: int = 0
    states: list[str] = field(default_factory=list)
    commit_users: dict[int, list[str | None]] = field(default_factory=dict)  # subtask -> its elements
    committables: list[Committable] = field(default_factory=list)
    writer_states: list[WriterState] = field(default_factory=list)
    tag_ids: list[int] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def commit_user(self) -> str | None:
        users = {u for values in self.commit_users.values() for u in values}
        return next(iter(users)) if len(users) == 1 else None

    @property
    def distinct_commit_users(self) -> list[str | None]:
        return sorted({u for values in self.commit_users.values() for u in values}, key=str)

    def writer_summary(self) -> dict[str, Any]:
        by: dict[str, int] = {}
        for w in self.writer_states:
            k = f"{w.table}/{w.key}"
            by[k] = by.get(k, 0) + 1
        return {"elements": len(self.writer_states), "value_bytes": sum(w.value_size for w in self.writer_states),
                "by_table_key": by}  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return {
            "operator_id": self.operator_id, "name": self.name, "uid": self.uid,
            "parallelism": self.parallelism, "subtasks": self.subtasks, "states": self.states,
            "commit_user": self.commit_user, "commit_users": self.distinct_commit_users,
            "committables": [c.to_json() for c in self.committables],
            "pending_tag_ids": self.tag_ids,
            "writer_states": {**self.writer_summary(), "states": [w.to_json() for w in self.writer_states]},
            "problems": self.problems,
        }  # fmt: skip


@dataclass
class PaimonSinkState:
    checkpoint_id: int
    operators: list[OperatorSinkState]

    @property
    def commit_users(self) -> list[str | None]:
        return sorted({u for op in self.operators for u in op.distinct_commit_users}, key=str)

    @property
    def committables(self) -> list[Committable]:
        return sorted((c for op in self.operators for c in op.committables), key=lambda c: c.identifier)

    @property
    def problems(self) -> list[str]:
        return [f"operator {op.operator_id}: {p}" for op in self.operators for p in op.problems]

    def to_json(self) -> dict[str, Any]:
        return {"checkpoint_id": self.checkpoint_id, "commit_users": self.commit_users,
                "operators": [op.to_json() for op in self.operators], "problems": self.problems}  # fmt: skip


SINK_HANDLES = (OperatorStreamHandle, FileMergingOperatorHandle)


def is_sink_handle(h: Any) -> bool:
    return type(h) in SINK_HANDLES and any(st.name in SINK_STATES for st in h.states)


def sink_handles(ck) -> Iterator[tuple[Any, Any, Any]]:
    """(operator, subtask, handle) for every managed operator state handle with a Paimon sink state."""
    for op in ck.metadata.operators:
        for s in op.subtasks or ():
            if is_sink_handle(s.managed_operator):
                yield op, s, s.managed_operator


def _where(h, resolve) -> tuple[str | None, int]:
    """The file a handle's bytes are in and where its stream starts in it (file merging: a range)."""
    src = h.delegate.source(resolve) if h.delegate is not None else None
    if src is None:
        return None, 0
    if src[0] == "range":
        return src[1], src[2]
    return (f"{h.delegate.name} (inline)", 0) if src[0] == "inline" else (src[1], 0)


def read_handle(storage, resolve, h, subtask: int | None = None) -> HandleState:
    """Decode the sink states of one operator state handle: one ranged read covering their elements.

    An element ends where the next offset of any state of the handle (or the stream) begins."""
    from ckptctl.checkpoint.streams import read_stream

    if h.delegate is None:
        raise CkptError(f"operator state handle without a stream ({type(h).__name__})")
    size = h.state_size
    wanted = [st for st in h.states if st.name in SINK_STATES]
    bounds = sorted({o for st in h.states for o in st.offsets} | {size})
    name, file_base = _where(h, resolve)
    out = HandleState(name or "<stream>", [st.name for st in wanted])
    offsets = [o for st in wanted for o in st.offsets]
    if not offsets:
        return out
    for o in offsets:
        if not 0 <= o < size:
            raise MetadataFormatError(
                f"state element offset {o} outside the stream of {size} bytes", path=name, offset=file_base
            )
    end_of = {o: bounds[i + 1] for i, o in enumerate(bounds[:-1])}
    # one ranged read per run of sink elements (runs closer than READ_GAP bytes are joined)
    runs: list[list[int]] = []
    for o in sorted(set(offsets)):
        if runs and o - runs[-1][1] <= READ_GAP:
            runs[-1][1] = max(runs[-1][1], end_of[o])
        else:
            runs.append([o, end_of[o]])
    chunks = [(lo, read_stream(storage, resolve, h.delegate, lo, hi - lo)[0]) for lo, hi in runs]

    def element(o: int) -> bytes:
        lo, data = next((lo, d) for lo, d in reversed(chunks) if lo <= o)
        return data[o - lo : end_of[o] - lo]

    path = out.path
    for st in wanted:
        for o in st.offsets:
            elem = element(o)
            base = file_base + o
            if st.name == RAW_STATES:
                c = decode_committable_element(elem, path, base)
                c.subtask = subtask
                out.committables.append(c)
            elif st.name == COMMIT_USER:
                out.commit_users.append(decode_commit_user(elem, path, base))
            elif st.name == WRITE_STATE:
                out.writer_states.append(decode_writer_state(elem, path, base)._replace(subtask=subtask))
            else:
                out.tag_ids.append(decode_tag_id(elem, path, base))
    return out


def read_sink_state(storage, ck) -> PaimonSinkState:
    """The Paimon sink state of a loaded checkpoint, per operator that has any."""
    from ckptctl.checkpoint.refs import file_resolver

    resolve = file_resolver(ck)
    by_op: dict[str, OperatorSinkState] = {}
    for op, s, h in sink_handles(ck):
        o = by_op.get(op.operator_id)
        if o is None:
            o = by_op[op.operator_id] = OperatorSinkState(
                op.operator_id, op.display_name, op.display_uid, op.parallelism
            )
        hs = read_handle(storage, resolve, h, s.index)
        o.subtasks += 1
        o.states.extend(n for n in hs.states if n not in o.states)
        if COMMIT_USER in hs.states:
            o.commit_users[s.index] = hs.commit_users
        o.committables.extend(hs.committables)
        o.writer_states.extend(hs.writer_states)
        o.tag_ids.extend(hs.tag_ids)
    for o in by_op.values():
        o.committables.sort(key=lambda c: (c.identifier, c.subtask or 0))
        users = o.distinct_commit_users
        if len(users) > 1:
            per = "; ".join(
                f"subtask {k}: {', '.join(map(str, v))}" for k, v in sorted(o.commit_users.items())
            )
            o.problems.append(
                f"the tasks disagree on the commit user ({per}); a restore fails Paimon's check"
                " that every element of the union state is the same"
            )
        for k, v in sorted(o.commit_users.items()):
            if len(v) != 1:
                o.problems.append(f"subtask {k} holds {len(v)} commit_user_state elements, expected 1")
        ids = [c.identifier for c in o.committables]
        if len(ids) != len(set(ids)):
            o.problems.append("several committables with the same identifier")
    return PaimonSinkState(ck.metadata.checkpoint_id, list(by_op.values()))
