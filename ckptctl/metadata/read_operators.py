"""Decoding what one operator holds in a ``_metadata`` file: its subtasks, their operator-state and
channel handles (unaligned checkpoints), and the operator's own header.

Layered on :class:`~ckptctl.metadata.read_keyed.KeyedDecoder`, as a subtask holds keyed handles too.
"""

from __future__ import annotations

from ckptctl.errors import MetadataFormatError
from ckptctl.metadata.codes import (
    DISTRIBUTION_MODES,
    INPUT_CHANNEL,
    MERGED_INPUT_CHANNEL,
    MERGED_RESULT_SUBPARTITION,
    NULL_HANDLE,
    PARTITIONABLE_OPERATOR_STATE_HANDLE,
    RESULT_SUBPARTITION,
    SEGMENT_PARTITIONABLE_OPERATOR_STATE_HANDLE,
)
from ckptctl.metadata.handles import (
    ByteStreamHandle,
    EmptySegmentHandle,
    SegmentFileHandle,
    wrap32,
)
from ckptctl.metadata.operators import (
    ChannelHandle,
    FileMergingOperatorHandle,
    MergedChannelEntry,
    MergedChannelHandle,
    NamedOperatorState,
    OperatorState,
    OperatorStreamHandle,
    SubtaskState,
)
from ckptctl.metadata.read_cursor import Cursor
from ckptctl.metadata.read_keyed import KeyedDecoder

MAX_PARALLELISM = 1 << 15  # KeyGroupRangeAssignment.UPPER_BOUND_MAX_PARALLELISM


class OperatorDecoder(KeyedDecoder):
    """A keyed decoder that also decodes operator and channel state handles, subtasks and operators."""

    __slots__ = ()

    # -- operator handles -----------------------------------------------------------------
    def named_states(self) -> tuple[NamedOperatorState, ...]:
        states = []
        for _ in range(self.count("named operator states", 7)):
            name = self.utf()
            at = self.pos
            mode = self.u8()
            if mode >= len(DISTRIBUTION_MODES):
                raise self.fail(f"unknown operator state distribution mode {mode}", at)
            states.append(NamedOperatorState(name, mode, self.longs("operator state offsets")))
        return tuple(states)

    def operator(self):
        at = self.pos
        code = self.u8()
        if code == NULL_HANDLE:
            return None
        if code == PARTITIONABLE_OPERATOR_STATE_HANDLE:
            states = self.named_states()
            delegate_at = self.pos
            delegate = self.stream()
            if delegate is None:
                raise self.fail("operator state handle without a delegate stream", delegate_at)
            return OperatorStreamHandle(states, delegate)
        if code == SEGMENT_PARTITIONABLE_OPERATOR_STATE_HANDLE and self.version != 3:
            states = self.named_states()
            taskowned_at = self.pos
            taskowned = self.utf()
            shared_at = self.pos
            shared = self.utf()
            is_empty = self.u8() != 0
            delegate_at = self.pos
            delegate = self.stream()
            if not isinstance(delegate, (SegmentFileHandle, EmptySegmentHandle)):
                raise self.fail("file-merging operator state must delegate to a segment handle", delegate_at)
            self.check_path(taskowned, "task-owned directory", taskowned_at)
            self.check_path(shared, "shared directory", shared_at)
            return FileMergingOperatorHandle(states, taskowned, shared, is_empty, delegate)
        raise self.fail(f"unknown operator state handle type {code}", at)

    def present_operator(self):
        """An operator handle announced by a non-zero flag: Flink's builder rejects a null one."""
        at = self.pos
        h = self.operator()
        if h is None:
            raise self.fail("operator state flagged present but null", at)
        return h

    # -- channel state --------------------------------------------------------------------
    def channel_v1(self, kind: int) -> ChannelHandle:
        subtask = self.i32()
        info = (self.i32(), self.i32())
        offsets = self.longs("channel state offsets")
        size = self.i64()
        return ChannelHandle(kind, subtask, info, offsets, size, self.stream())

    def channel(self, version: int, expect: tuple[int, int]):
        if version < 6:
            return self.channel_v1(expect[0])
        at = self.pos
        kind = self.u8()
        if kind not in expect:
            raise self.fail(f"unexpected channel state handle type {kind}", at)
        if kind in (INPUT_CHANNEL, RESULT_SUBPARTITION):
            return self.channel_v1(kind)
        subtask = self.i32()
        size = self.i64()
        delegate = self.stream()
        blob_len = self.i32()
        blob_start = self.pos
        self.raw(blob_len, "merged channel offsets")
        inner = Cursor(self.buf, self.path, blob_start, blob_start + blob_len)
        entries = []
        try:
            for _ in range(inner.count("merged channels", 20)):
                info = (inner.i32(), inner.i32())
                ch_size = inner.i64()
                entries.append(MergedChannelEntry(info, ch_size, inner.longs("merged channel offsets")))
            if inner.pos != inner.end:
                raise inner.fail("trailing bytes in merged channel offsets")
        except MetadataFormatError:
            blob = self.buf[blob_start : blob_start + blob_len]
            return MergedChannelHandle(kind, subtask, size, delegate, (), blob)
        return MergedChannelHandle(kind, subtask, size, delegate, tuple(entries))

    # -- structure ------------------------------------------------------------------------
    def subtask(self, index: int, version: int) -> SubtaskState:
        managed_op = self.present_operator() if self.i32() != 0 else None
        raw_op = self.present_operator() if self.i32() != 0 else None
        managed_keyed = self.keyed()
        raw_keyed = self.keyed()
        inputs = tuple(
            self.channel(version, (INPUT_CHANNEL, MERGED_INPUT_CHANNEL))
            for _ in range(self.collection_count("input channel handles"))
        )
        outputs = tuple(
            self.channel(version, (RESULT_SUBPARTITION, MERGED_RESULT_SUBPARTITION))
            for _ in range(self.collection_count("result subpartition handles"))
        )
        ref = None
        if version >= 7 and self.u8() == 1:
            ref = self.i64()
        return SubtaskState(index, False, managed_op, raw_op, managed_keyed, raw_keyed, inputs, outputs, ref)

    def operator_state(self, version: int) -> OperatorState:
        name = uid = None
        if version >= 5:
            name, uid = self.utf(), self.utf()
        self.need(16, "operator id")
        operator_id = self.buf[self.pos : self.pos + 16].hex()
        self.pos += 16
        par_at = self.pos
        parallelism, max_parallelism = self.i32(), self.i32()
        at = self.pos
        coordinator = self.stream()
        if coordinator is not None and not isinstance(coordinator, ByteStreamHandle):
            raise self.fail("operator coordinator state must be inline bytes", at)
        at = self.pos
        n = self.i32()
        if parallelism > max_parallelism:  # OperatorState's constructor
            raise self.fail(f"parallelism {parallelism} above max parallelism {max_parallelism}", par_at)
        if parallelism < 0:  # ... sizing its subtask map by the parallelism
            raise self.fail(f"negative parallelism {parallelism}", par_at)
        if parallelism > MAX_PARALLELISM and n > 0:
            # No Flink job can restore it: a vertex's parallelism and max parallelism must lie in
            # 1..UPPER_BOUND_MAX_PARALLELISM (DefaultVertexParallelismInfo.checkBounds), and the
            # restore adopts the state's max parallelism (>= this parallelism) or fails. Flink's
            # reader still loads it, sizing the subtask map by the parallelism at the first subtask,
            # so whether it accepts depends on its heap (it runs out of memory at 256 MB on the
            # largest). Rejected here, whatever the heap: bench/differential.py lists these cases
            # as ckptctl's own bound.
            raise self.fail(f"parallelism {parallelism} above Flink's limit of {MAX_PARALLELISM}", par_at)
        if n < 0:
            if coordinator is not None:
                raise self.fail("fully finished operator with coordinator state", at)
            return OperatorState(operator_id, parallelism, max_parallelism, None, None, name, uid)
        if n * 4 > self.end - self.pos:
            raise self.fail(f"subtask count {n} exceeds the {self.end - self.pos} bytes left", at)
        subtasks = []
        shadowed = []
        indexes: set[int] = set()
        for _ in range(n):
            index_at = self.pos
            index = self.i32()
            state = SubtaskState(wrap32(-index - 1), True) if index < 0 else self.subtask(index, version)
            # OperatorState.putState: a map from index to state, bounded by the parallelism
            if not 0 <= state.index < parallelism:
                raise self.fail(f"subtask index {state.index} outside parallelism {parallelism}", index_at)
            if state.index in indexes:  # the later state replaces the earlier one, as in Flink's map
                shadowed.extend(s for s in subtasks if s.index == state.index)  # its files stay referenced
                subtasks = [s for s in subtasks if s.index != state.index]
            indexes.add(state.index)
            subtasks.append(state)
        return OperatorState(
            operator_id,
            parallelism,
            max_parallelism,
            coordinator,
            tuple(subtasks),
            name,
            uid,
            tuple(shadowed),
        )
