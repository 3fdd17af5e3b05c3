"""What one operator holds in a Flink ``_metadata`` file: its subtasks and their handles.

The operator (non-keyed) state handles and the channel state handles (unaligned checkpoints)
live here beside :class:`SubtaskState` and :class:`OperatorState` because only a subtask holds
them; the stream and keyed handles they point into are in :mod:`ckptctl.metadata.handles`.
"""

from __future__ import annotations

from typing import NamedTuple

from ckptctl.metadata.codes import DISTRIBUTION_MODES, INPUT_CHANNEL, MERGED_INPUT_CHANNEL
from ckptctl.metadata.handles import (
    ByteStreamHandle,
    KeyedHandle,
    StreamHandle,
    inline_size_of,
    state_size_of,
)

# ---------------------------------------------------------------------------------------------
# Operator (non-keyed) handles


class NamedOperatorState(NamedTuple):
    """One named list/union/broadcast state: the offsets of its elements in the delegate stream."""

    name: str
    mode: int  # ordinal of DISTRIBUTION_MODES
    offsets: tuple[int, ...]

    @property
    def mode_name(self) -> str:
        return DISTRIBUTION_MODES[self.mode] if 0 <= self.mode < len(DISTRIBUTION_MODES) else str(self.mode)


class OperatorStreamHandle(NamedTuple):
    """Operator state of one subtask (code 4)."""

    states: tuple[NamedOperatorState, ...]
    delegate: StreamHandle | None

    flink_class = "OperatorStreamStateHandle"
    state_size = property(lambda self: state_size_of(self.delegate))
    inline_size = property(lambda self: inline_size_of(self.delegate))


class FileMergingOperatorHandle(NamedTuple):
    """Operator state written through file merging (code 17), with its managed directories."""

    states: tuple[NamedOperatorState, ...]
    taskowned_dir: str
    shared_dir: str
    is_empty: bool
    delegate: StreamHandle | None

    @property
    def flink_class(self) -> str:
        if self.is_empty:
            return "EmptyFileMergingOperatorStreamStateHandle"
        return "FileMergingOperatorStreamStateHandle"

    state_size = property(lambda self: state_size_of(self.delegate))
    inline_size = property(lambda self: inline_size_of(self.delegate))


OperatorHandle = OperatorStreamHandle | FileMergingOperatorHandle


# ---------------------------------------------------------------------------------------------
# Channel state (unaligned checkpoints)


class ChannelHandle(NamedTuple):
    """One input channel or result subpartition's in-flight buffers.

    ``info`` is (gate, channel) for inputs and (partition, subpartition) for outputs.
    ``kind`` is the V6+ type byte (1 input, 2 output); in V3–V5 files it is implied by the list.
    """

    kind: int
    subtask_index: int
    info: tuple[int, int]
    offsets: tuple[int, ...]
    state_size: int
    delegate: StreamHandle | None

    @property
    def flink_class(self) -> str:
        return "InputChannelStateHandle" if self.kind == INPUT_CHANNEL else "ResultSubpartitionStateHandle"

    @property
    def inline_size(self) -> int:
        return self.state_size if type(self.delegate) is ByteStreamHandle else 0


class MergedChannelEntry(NamedTuple):
    info: tuple[int, int]
    state_size: int
    offsets: tuple[int, ...]


class MergedChannelHandle(NamedTuple):
    """Several channels of one subtask sharing a delegate (V6+, kinds 3 input and 4 output)."""

    kind: int
    subtask_index: int
    state_size: int
    delegate: StreamHandle | None
    channels: tuple[MergedChannelEntry, ...]
    # Flink decodes the serialized channel offsets only when it restores the channels, so a blob
    # that does not decode is still a readable file: kept as written (``channels`` is then empty)
    raw_offsets: bytes | None = None

    @property
    def flink_class(self) -> str:
        if self.kind == MERGED_INPUT_CHANNEL:
            return "MergedInputChannelStateHandle"
        return "MergedResultSubpartitionStateHandle"

    @property
    def inline_size(self) -> int:
        return self.state_size if type(self.delegate) is ByteStreamHandle else 0


AnyChannelHandle = ChannelHandle | MergedChannelHandle


# ---------------------------------------------------------------------------------------------
# Subtasks and operators


class SubtaskState(NamedTuple):
    """One subtask of one operator. ``finished`` subtasks carry no state at all."""

    index: int
    finished: bool
    managed_operator: OperatorHandle | None = None
    raw_operator: OperatorHandle | None = None
    managed_keyed: KeyedHandle | None = None
    raw_keyed: KeyedHandle | None = None
    input_channels: tuple[AnyChannelHandle, ...] = ()
    output_channels: tuple[AnyChannelHandle, ...] = ()
    ref_checkpoint_id: int | None = None  # V7 regional checkpoints


class OperatorState(NamedTuple):
    """One operator (by its 32-hex-char id) with its subtasks, in file order.

    ``name``/``uid`` are only on the wire from V5 (empty string = not set; kept as written).
    ``subtasks`` is ``None`` for a fully finished operator (written as count -1).
    ``shadowed``: subtask states a later one with the same index replaced (Flink reads them into a
    map, so the later wins; Flink never writes two). Not restored and not written back, but the
    walk still counts their files as referenced: a file that names one subtask twice is damaged,
    and gc keeps what either copy needs.
    """

    operator_id: str
    parallelism: int
    max_parallelism: int
    coordinator_state: StreamHandle | None
    subtasks: tuple[SubtaskState, ...] | None
    name: str | None = None
    uid: str | None = None
    shadowed: tuple[SubtaskState, ...] = ()

    @property
    def fully_finished(self) -> bool:
        return self.subtasks is None

    @property
    def display_name(self) -> str | None:
        return self.name or None

    @property
    def display_uid(self) -> str | None:
        return self.uid or None
