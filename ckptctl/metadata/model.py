"""The typed, immutable model of a Flink ``_metadata`` file.

One class per handle kind Flink can write, holding exactly the fields on the wire (and in wire
order), so that :mod:`ckptctl.metadata.writer` can re-encode a model into the original bytes.
NamedTuples keep the model immutable and cheap: a large checkpoint has hundreds of thousands of
handles, and tuple construction is several times faster than frozen dataclasses.

Wire codes are kept where one Java class has several encodings (e.g. legacy vs. V2 key-group
handles), because the writer must reproduce the same code.
"""

from __future__ import annotations

from typing import NamedTuple

# ---------------------------------------------------------------------------------------------
# Constants of the format

MAGIC = 0x4960672D
MASTER_STATE_MAGIC = 0xC96B1696
SUPPORTED_VERSIONS = (3, 4, 5, 6, 7)

# handle type codes (MetadataV2V3SerializerBase)
NULL_HANDLE = 0
BYTE_STREAM_STATE_HANDLE = 1
FILE_STREAM_STATE_HANDLE = 2
KEY_GROUPS_HANDLE = 3
PARTITIONABLE_OPERATOR_STATE_HANDLE = 4
INCREMENTAL_KEY_GROUPS_HANDLE = 5
RELATIVE_STREAM_STATE_HANDLE = 6
SAVEPOINT_KEY_GROUPS_HANDLE = 7
CHANGELOG_HANDLE = 8
CHANGELOG_BYTE_INCREMENT_HANDLE = 9
CHANGELOG_FILE_INCREMENT_HANDLE = 10
INCREMENTAL_KEY_GROUPS_HANDLE_V2 = 11
KEY_GROUPS_HANDLE_V2 = 12
CHANGELOG_FILE_INCREMENT_HANDLE_V2 = 13
CHANGELOG_HANDLE_V2 = 14
SEGMENT_FILE_HANDLE = 15
EMPTY_SEGMENT_FILE_HANDLE = 16
SEGMENT_PARTITIONABLE_OPERATOR_STATE_HANDLE = 17

# OperatorStateHandle.Mode ordinals
DISTRIBUTION_MODES = ("SPLIT_DISTRIBUTE", "UNION", "BROADCAST")
# CheckpointedStateScope ordinals (segment handles)
SCOPES = ("EXCLUSIVE", "SHARED")


def wrap32(n: int) -> int:
    """Java ``int`` arithmetic: ``n`` wrapped to 32 bits, signed."""
    return (n + 0x80000000) % 0x100000000 - 0x80000000


class KeyGroupRange(NamedTuple):
    """The ``(start, count)`` pair as written; Flink's range is ``KeyGroupRange.of(start, start + count - 1)``.

    ``of`` gives the empty range (``[0, -1]``) when the end, computed in Java ``int`` arithmetic,
    falls before the start: a count of 0 (Flink's own encoding of the empty range), a negative
    count, or an end past 2^31 - 1. The reader rejects the non-empty ranges Flink's constructor
    rejects (negative start, size overflow), so ``first``/``end``/``size`` are always Flink's.
    """

    start: int
    count: int

    @property
    def empty(self) -> bool:
        return wrap32(self.start + self.count - 1) < self.start

    @property
    def first(self) -> int:
        """Flink's getStartKeyGroup(): 0 for the empty range."""
        return 0 if self.empty else self.start

    @property
    def end(self) -> int:
        """Inclusive end; -1 for the empty range, as Flink's getEndKeyGroup()."""
        return -1 if self.empty else self.start + self.count - 1

    @property
    def size(self) -> int:
        """Flink's getNumberOfKeyGroups()."""
        return 0 if self.empty else self.count

    def as_list(self) -> list[int]:
        """[start, end] inclusive; the empty range is [0, -1] whatever start was written (as Flink reads it)."""
        return [self.first, self.end]

    def __str__(self) -> str:
        return "[]" if self.empty else f"[{self.start}, {self.end}]"


# ---------------------------------------------------------------------------------------------
# Stream handles: one stream of bytes, inline or in a (segment of a) file


class ByteStreamHandle(NamedTuple):
    """State small enough to be inlined into ``_metadata`` (code 1)."""

    name: str
    data: bytes

    @property
    def size(self) -> int:
        return len(self.data)


class FileHandle(NamedTuple):
    """A whole file, by absolute URI as Flink wrote it (code 2)."""

    path: str
    size: int


class RelativeFileHandle(NamedTuple):
    """A file inside the checkpoint's own directory, by name (code 6); moves with the directory."""

    relative_path: str
    size: int


class SegmentFileHandle(NamedTuple):
    """Bytes ``[offset, offset + size)`` of a file-merging physical file (code 15)."""

    offset: int
    size: int
    scope: int  # 0 EXCLUSIVE, 1 SHARED
    path: str
    logical_file_id: str

    @property
    def scope_name(self) -> str:
        return SCOPES[self.scope] if 0 <= self.scope < len(SCOPES) else str(self.scope)


class EmptySegmentHandle(NamedTuple):
    """Placeholder of file merging for a stream that wrote nothing (code 16); no file."""

    @property
    def size(self) -> int:
        return 0


class KeyGroupsHandle(NamedTuple):
    """Full-snapshot keyed state: per-key-group offsets into one delegate stream (codes 3, 7, 12).

    Code 3 is the legacy encoding without an id, 12 carries ``handle_id``, 7 marks a canonical
    savepoint. Code 3 can also appear in a stream slot.
    """

    code: int
    key_groups: KeyGroupRange
    offsets: tuple[int, ...]
    delegate: StreamHandle | None
    handle_id: str | None = None


StreamHandle = (
    ByteStreamHandle
    | FileHandle
    | RelativeFileHandle
    | SegmentFileHandle
    | EmptySegmentHandle
    | KeyGroupsHandle
)


# ---------------------------------------------------------------------------------------------
# Keyed handles


class LocalFile(NamedTuple):
    """One file of an incremental RocksDB snapshot: its name inside the DB directory and its handle."""

    local_path: str
    handle: StreamHandle | None


class IncrementalHandle(NamedTuple):
    """An incremental RocksDB (or ForSt) snapshot (codes 5, 11).

    ``shared`` files (SSTs) may be referenced by later checkpoints; ``private`` files (MANIFEST,
    CURRENT, OPTIONS) belong to this checkpoint only; ``meta`` holds the serialized state meta info.
    Code 5 has neither ``checkpointed_size`` nor ``handle_id`` on the wire (both ``None`` here).
    ``shadowed`` holds the entries a V3 file repeats a local name for: Flink 1.14/1.15 read the
    lists into a map and keep the later one, but 1.17+ restoring the same file keep both (and
    fetch both), so they stay referenced though they are not part of Flink's reading.
    """

    code: int
    checkpoint_id: int
    backend_id: str
    key_groups: KeyGroupRange
    checkpointed_size: int | None
    meta: StreamHandle | None
    shared: tuple[LocalFile, ...]
    private: tuple[LocalFile, ...]
    handle_id: str | None
    shadowed: tuple[LocalFile, ...] = ()


class ChangelogBytesHandle(NamedTuple):
    """Non-materialized changelog kept inline (code 9): (key group, bytes) changes."""

    key_groups: KeyGroupRange
    from_sequence: int
    to_sequence: int
    changes: tuple[tuple[int, bytes], ...]
    handle_id: str | None  # None: Flink 1.14's layout


class ChangelogFileHandle(NamedTuple):
    """Non-materialized changelog in DSTL files (codes 10, 13): (offset, stream) pieces."""

    code: int
    key_groups: KeyGroupRange
    pieces: tuple[tuple[int, StreamHandle | None], ...]
    state_size: int
    checkpointed_size: int | None  # None (and no handle_id): Flink 1.14's layout
    handle_id: str | None
    storage_identifier: str | None  # code 13 only


class ChangelogBackendHandle(NamedTuple):
    """The changelog state backend's handle (codes 8, 14): materialized + non-materialized parts."""

    code: int
    key_groups: KeyGroupRange
    checkpointed_size: int | None  # None (and no materialization or handle id): Flink 1.14's layout
    materialized: tuple[KeyedHandle, ...]
    non_materialized: tuple[KeyedHandle, ...]
    materialization_id: int | None
    checkpoint_id: int | None  # code 14 only
    handle_id: str | None


KeyedHandle = (
    KeyGroupsHandle | IncrementalHandle | ChangelogBackendHandle | ChangelogBytesHandle | ChangelogFileHandle
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


class FileMergingOperatorHandle(NamedTuple):
    """Operator state written through file merging (code 17), with its managed directories."""

    states: tuple[NamedOperatorState, ...]
    taskowned_dir: str
    shared_dir: str
    is_empty: bool
    delegate: StreamHandle | None


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


AnyChannelHandle = ChannelHandle | MergedChannelHandle
INPUT_CHANNEL, RESULT_SUBPARTITION, MERGED_INPUT_CHANNEL, MERGED_RESULT_SUBPARTITION = 1, 2, 3, 4


# ---------------------------------------------------------------------------------------------
# Checkpoint structure


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
    """

    operator_id: str
    parallelism: int
    max_parallelism: int
    coordinator_state: StreamHandle | None
    subtasks: tuple[SubtaskState, ...] | None
    name: str | None = None
    uid: str | None = None

    @property
    def fully_finished(self) -> bool:
        return self.subtasks is None

    @property
    def display_name(self) -> str | None:
        return self.name or None

    @property
    def display_uid(self) -> str | None:
        return self.uid or None


class MasterState(NamedTuple):
    """State of a master checkpoint hook: opaque payload."""

    version: int
    name: str
    payload: bytes


class CheckpointProperties(NamedTuple):
    """The decoded V4+ trailer (Java-serialized ``CheckpointProperties``), as far as ckptctl needs it.

    ``fields`` holds every primitive and enum/string field found, by Java field name, so that
    version-specific fields are never lost; the named attributes are the ones commands rely on.
    """

    checkpoint_type: str | None  # "Checkpoint", "Full Checkpoint", "Savepoint", ...
    is_savepoint: bool
    savepoint_format: str | None  # "CANONICAL" / "NATIVE" for savepoints
    sharing_strategy: str | None
    fields: tuple[tuple[str, object], ...]


class CheckpointMetadata(NamedTuple):
    """One decoded ``_metadata`` file."""

    version: int
    checkpoint_id: int
    master_states: tuple[MasterState, ...]
    operators: tuple[OperatorState, ...]
    trailer: bytes  # raw Java-serialized CheckpointProperties (V4+), b"" for V3
    properties: CheckpointProperties | None
