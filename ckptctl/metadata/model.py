"""The typed, immutable model of a Flink ``_metadata`` file.

One class per handle kind Flink can write, holding exactly the fields on the wire (and in wire
order), so that :mod:`ckptctl.metadata.writer` can re-encode a model into the original bytes.
NamedTuples keep the model immutable and cheap: a large checkpoint has hundreds of thousands of
handles, and tuple construction is several times faster than frozen dataclasses.

Wire codes are kept where one Java class has several encodings (e.g. legacy vs. V2 key-group
handles), because the writer must reproduce the same code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

Resolver = Callable[[Any], str]  # a file handle -> the URI of its file now (see refs.file_resolver)

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

    flink_class = "ByteStreamStateHandle"
    state_size = size
    inline_size = size

    def source(self, resolve: Resolver) -> tuple:
        return ("inline", self.data)


class FileHandle(NamedTuple):
    """A whole file, by absolute URI as Flink wrote it (code 2)."""

    path: str
    size: int

    flink_class = "FileStateHandle"
    state_size = property(lambda self: self.size)
    inline_size = 0

    def source(self, resolve: Resolver) -> tuple:
        return ("file", resolve(self), self.size)  # the size Flink recorded: what a read of it may take


class RelativeFileHandle(NamedTuple):
    """A file inside the checkpoint's own directory, by name (code 6); moves with the directory."""

    relative_path: str
    size: int

    flink_class = "RelativeFileStateHandle"
    state_size = property(lambda self: self.size)
    inline_size = 0

    def source(self, resolve: Resolver) -> tuple:
        return ("file", resolve(self), self.size)  # the size Flink recorded: what a read of it may take


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

    flink_class = "SegmentFileStateHandle"
    state_size = property(lambda self: self.size)
    inline_size = 0

    def source(self, resolve: Resolver) -> tuple:
        return ("range", resolve(self), self.offset, self.size)


class EmptySegmentHandle(NamedTuple):
    """Placeholder of file merging for a stream that wrote nothing (code 16); no file."""

    @property
    def size(self) -> int:
        return 0

    flink_class = "EmptySegmentFileStateHandle"
    state_size = 0
    inline_size = 0

    def source(self, resolve: Resolver) -> None:
        return None


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

    @property
    def flink_class(self) -> str:
        return (
            "KeyGroupsSavepointStateHandle"
            if self.code == SAVEPOINT_KEY_GROUPS_HANDLE
            else "KeyGroupsStateHandle"
        )

    @property
    def state_size(self) -> int:
        return _size(self.delegate)

    @property
    def inline_size(self) -> int:
        return _inline(self.delegate)

    incremental_size = state_size

    def source(self, resolve: Resolver) -> None:
        return None  # key groups inside a stream slot: no bytes of its own to read


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


class SkimmedFiles(tuple):
    """An incremental handle's shared or private file list read for its size only (``read_metadata``
    with :func:`~ckptctl.metadata.reader.skimming_files`): empty, so a walk finds no file in it,
    with the number of entries and their bytes kept. A reader that only judges state
    (``preflight``) needs none of a big checkpoint's hundreds of thousands of file references; the
    writer refuses it (the files would be lost)."""

    count_skimmed: int
    size: int

    def __new__(cls, count: int, size: int) -> SkimmedFiles:
        obj = super().__new__(cls)
        obj.count_skimmed, obj.size = count, size
        return obj


def _files_size(files: Sequence) -> int:
    if type(files) is SkimmedFiles:
        return files.size
    return sum([_size(f.handle) for f in files])


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

    flink_class = "IncrementalRemoteKeyedStateHandle"

    @property
    def state_size(self) -> int:
        """Flink's getStateSize: the meta data stream, the shared and the private files (not the
        ``shadowed`` ones, which Flink's reading of the file does not hold)."""
        return _size(self.meta) + _files_size(self.shared) + _files_size(self.private)

    @property
    def incremental_size(self) -> int:
        """Flink's getCheckpointedSize (what this checkpoint uploaded); the state size without one."""
        n = self.checkpointed_size
        return n if n is not None and n >= 0 else self.state_size

    @property
    def inline_size(self) -> int:
        return _inline(self.meta) + sum(_inline(f.handle) for f in (*self.shared, *self.private))

    def sources(self, resolve: Resolver) -> list[tuple[str, tuple]]:
        """``(RocksDB file name, source)`` of every shared and private file that has bytes (see
        ``source`` of the stream handles), in file order: what a restore reads. The ``shadowed``
        entries are not among them (Flink's reading of the file does not hold them), though the
        walk still counts their files as referenced."""
        out = []
        for f in (*self.shared, *self.private):
            src = f.handle.source(resolve) if f.handle is not None else None
            if src is not None:
                out.append((f.local_path, src))
        return out


class ChangelogBytesHandle(NamedTuple):
    """Non-materialized changelog kept inline (code 9): (key group, bytes) changes."""

    key_groups: KeyGroupRange
    from_sequence: int
    to_sequence: int
    changes: tuple[tuple[int, bytes], ...]
    handle_id: str | None  # None: Flink 1.14's layout

    flink_class = "InMemoryChangelogStateHandle"

    @property
    def state_size(self) -> int:
        return sum(len(d) for _kg, d in self.changes)

    incremental_size = inline_size = state_size


class ChangelogFileHandle(NamedTuple):
    """Non-materialized changelog in DSTL files (codes 10, 13): (offset, stream) pieces."""

    code: int
    key_groups: KeyGroupRange
    pieces: tuple[tuple[int, StreamHandle | None], ...]
    state_size: int
    checkpointed_size: int | None  # None (and no handle_id): Flink 1.14's layout
    handle_id: str | None
    storage_identifier: str | None  # code 13 only

    flink_class = "ChangelogStateHandleStreamImpl"

    @property
    def incremental_size(self) -> int:
        """getCheckpointedSize; Flink 1.14's layout has none: the state size then."""
        n = self.checkpointed_size
        return self.state_size if n is None else n

    inline_size = 0  # as ckptctl has always counted it: DSTL pieces are files


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

    flink_class = "ChangelogStateBackendHandleImpl"

    @property
    def parts(self) -> tuple[KeyedHandle, ...]:
        """The materialized and non-materialized parts, ``None`` slots left out."""
        return tuple(p for p in (*self.materialized, *self.non_materialized) if p is not None)

    @property
    def state_size(self) -> int:
        return sum(p.state_size for p in self.parts)

    @property
    def incremental_size(self) -> int:
        """getCheckpointedSize; Flink 1.14's layout has none: the state size then."""
        n = self.checkpointed_size
        return self.state_size if n is None else n

    @property
    def inline_size(self) -> int:
        return sum(p.inline_size for p in self.parts)


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

    flink_class = "OperatorStreamStateHandle"
    state_size = property(lambda self: _size(self.delegate))
    inline_size = property(lambda self: _inline(self.delegate))


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

    state_size = property(lambda self: _size(self.delegate))
    inline_size = property(lambda self: _inline(self.delegate))


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


# ---------------------------------------------------------------------------------------------
# The one walk. Every handle class above knows its own sizes (``state_size``, Flink's
# getStateSize; ``incremental_size``, getCheckpointedSize, on keyed handles; ``inline_size``, the
# bytes kept inside ``_metadata``), its Flink class name (``flink_class``) and, for stream handles,
# where its bytes are (``source``). Which handle holds which is written once, in
# :class:`HandleWalk`. A new handle type: the reader, the writer and this section.

FileItems = Sequence[tuple[str | None, Any]]  # (local name, file handle) pairs: LocalFiles or pairs


def _size(h: Any) -> int:
    return 0 if h is None else h.state_size


def _inline(h: Any) -> int:
    return 0 if h is None else h.inline_size


def keyed_parts(h: KeyedHandle | None) -> Iterator[KeyedHandle]:
    """The keyed handles a backend restores its state from: ``h`` itself, or for a changelog
    handle its materialized parts (the non-materialized changes are replayed on top of them)."""
    if h is None:
        return
    if type(h) is ChangelogBackendHandle:
        for part in h.materialized:
            yield from keyed_parts(part)
    else:
        yield h


def incremental_parts(h: KeyedHandle | None) -> Iterator[IncrementalHandle]:
    """The incremental RocksDB/ForSt snapshots among :func:`keyed_parts`; each one's files are
    ``(*h.shared, *h.private)`` (``LocalFile``: RocksDB file name, stream handle), whose bytes are
    at ``lf.handle.source(resolve)``."""
    for part in keyed_parts(h):
        if type(part) is IncrementalHandle:
            yield part


def state_sizes(md: CheckpointMetadata) -> tuple[int, int, int]:
    """(full state bytes, incremental bytes, inline bytes) of a checkpoint, as Flink accounts them."""
    full = incremental = inline = 0
    for op in md.operators:
        f, i, n = coordinator_sizes(op)
        full, incremental, inline = full + f, incremental + i, inline + n
        for s in op.subtasks or ():
            f, i, n = subtask_sizes(s)
            full, incremental, inline = full + f, incremental + i, inline + n
    return full, incremental, inline


def coordinator_sizes(op: OperatorState) -> tuple[int, int, int]:
    """(full, incremental, inline) bytes of an operator's coordinator state: always inline
    (a ByteStreamStateHandle) when Flink writes it, and all of it new in every checkpoint."""
    n = op.coordinator_state.state_size if op.coordinator_state is not None else 0
    return n, n, n


def subtask_sizes(s: SubtaskState) -> tuple[int, int, int]:
    """(full, incremental, inline) bytes of one subtask, as Flink accounts them (``getStateSize``,
    ``getCheckpointedSize``): :func:`state_sizes` per subtask, for ``history``'s per-operator figures."""
    full = incremental = inline = 0
    for h in (s.managed_operator, s.raw_operator):
        if h is not None:
            n = h.state_size
            full += n
            incremental += n
            inline += h.inline_size
    for h in (s.managed_keyed, s.raw_keyed):
        if h is not None:
            full += h.state_size
            incremental += h.incremental_size
            inline += h.inline_size
    for ch in (*s.input_channels, *s.output_channels):
        full += ch.state_size
        incremental += ch.state_size
        inline += ch.inline_size
    return full, incremental, inline


class HandleWalk:
    """The one traversal of a checkpoint's handles, down to the files: a visitor.

    :meth:`checkpoint` visits every slot of every subtask (operator, keyed, channel state) and
    the coordinator, recursing through key-group, incremental, changelog and file-merging
    handles, and hands each group of file handles to :meth:`files` with where it sits:

    * ``op`` (the :class:`OperatorState`), ``subtask`` (index; ``None`` for the coordinator),
      ``slot`` (managed_keyed | raw_keyed | managed_operator | raw_operator | input_channel |
      output_channel | coordinator), ``scope`` (shared | private | metadata | exclusive |
      changelog | segment) and ``key_groups`` (:class:`KeyGroupRange` or ``None``);
    * ``items``: ``(local_name, file_handle)`` pairs. An incremental handle's shared files that are
      all whole files come as one group, its ``LocalFile`` tuple itself (no copy); every other
      file handle comes alone.

    :meth:`files` returns ``None`` (nothing changes) or the new handles, one per item; the walk
    then rebuilds only what changed and :meth:`checkpoint` returns the new metadata (the same
    object when nothing changed). :meth:`directory` does the same for the managed directories
    of file-merging operator handles. Inline bytes and empty segments hold no file; a handle
    type the walk does not know is a ``TypeError``, never skipped.
    """

    def files(self, op, subtask, slot, scope, key_groups, items: FileItems) -> Sequence[Any] | None:
        return None

    def directory(self, op, subtask, slot, path: str) -> str:
        return path

    # -- the structure ---------------------------------------------------------------------

    def checkpoint(self, md: CheckpointMetadata) -> CheckpointMetadata:
        ops = tuple(self.operator(op) for op in md.operators)
        if all(a is b for a, b in zip(ops, md.operators, strict=True)):
            return md
        return md._replace(operators=ops)

    def operator(self, op: OperatorState) -> OperatorState:
        coord = self.stream(op, None, "coordinator", "exclusive", None, None, op.coordinator_state)
        subtasks = op.subtasks
        if subtasks is not None:
            new = tuple(self.subtask(op, s) for s in subtasks)
            if any(a is not b for a, b in zip(new, subtasks, strict=True)):
                subtasks = new
        shadowed = op.shadowed  # replaced by a later state of the same index: still referenced
        if shadowed:
            new = tuple(self.subtask(op, s) for s in shadowed)
            if any(a is not b for a, b in zip(new, shadowed, strict=True)):
                shadowed = new
        if coord is op.coordinator_state and subtasks is op.subtasks and shadowed is op.shadowed:
            return op
        return op._replace(coordinator_state=coord, subtasks=subtasks, shadowed=shadowed)

    def subtask(self, op: OperatorState, s: SubtaskState) -> SubtaskState:
        # a finished subtask holds no state when read; it is walked all the same (nothing to skip)
        i = s.index
        changes = {}
        for slot, h in (("managed_operator", s.managed_operator), ("raw_operator", s.raw_operator)):
            if h is not None:
                new = self.operator_handle(op, i, slot, h)
                if new is not h:
                    changes[slot] = new
        for slot, h in (("managed_keyed", s.managed_keyed), ("raw_keyed", s.raw_keyed)):
            if h is not None:
                new = self.keyed(op, i, slot, h, None)
                if new is not h:
                    changes[slot] = new
        for field, slot, chans in (
            ("input_channels", "input_channel", s.input_channels),
            ("output_channels", "output_channel", s.output_channels),
        ):
            if chans:
                new_chans = tuple(self.channel(op, i, slot, c) for c in chans)
                if any(a is not b for a, b in zip(new_chans, chans, strict=True)):
                    changes[field] = new_chans
        return s._replace(**changes) if changes else s

    def stream(self, op, subtask, slot, scope, local_name, key_groups, h):
        """A stream slot: a file, a segment, key groups over a stream, inline bytes or nothing."""
        t = type(h)
        if t is FileHandle or t is RelativeFileHandle or t is SegmentFileHandle:
            if t is SegmentFileHandle:
                scope = "segment"
            new = self.files(op, subtask, slot, scope, key_groups, ((local_name, h),))
            return h if new is None else new[0]
        if t is KeyGroupsHandle:
            d = self.stream(op, subtask, slot, scope, local_name, h.key_groups, h.delegate)
            return h if d is h.delegate else h._replace(delegate=d)
        if h is None or t is ByteStreamHandle or t is EmptySegmentHandle:
            return h  # inline bytes, an empty segment: no file
        raise TypeError(f"the handle walk does not know {t.__name__}")

    def local_files(self, op, subtask, slot, scope, key_groups, files, grouped):
        """An incremental handle's shared or private files (a tuple of ``LocalFile``)."""
        if grouped and files and all(type(f.handle) is FileHandle for f in files):
            new = self.files(op, subtask, slot, scope, key_groups, files)  # hot path: one group
            if new is None:
                return files
        else:
            new = [self.stream(op, subtask, slot, scope, f.local_path, key_groups, f.handle) for f in files]
        if all(n is f.handle for f, n in zip(files, new, strict=True)):
            return files
        return tuple(
            f if n is f.handle else LocalFile(f.local_path, n) for f, n in zip(files, new, strict=True)
        )

    def keyed(self, op, subtask, slot, h, scope_override: str | None):
        t = type(h)
        if t is IncrementalHandle:
            kgr = h.key_groups
            meta = self.stream(op, subtask, slot, scope_override or "metadata", None, kgr, h.meta)
            grouped = scope_override is None
            shared = self.local_files(op, subtask, slot, scope_override or "shared", kgr, h.shared, grouped)
            private = self.local_files(op, subtask, slot, scope_override or "private", kgr, h.private, False)
            # a local name a V3 file repeats: not read by 1.14/1.15, but fetched by 1.17+ restoring
            # the same file, so still a referenced file (a shared one, as ckptctl has counted it)
            shadowed = self.local_files(op, subtask, slot, scope_override or "shared", kgr, h.shadowed, False)
            if meta is h.meta and shared is h.shared and private is h.private and shadowed is h.shadowed:
                return h
            return h._replace(meta=meta, shared=shared, private=private, shadowed=shadowed)
        if t is KeyGroupsHandle:
            return self.stream(op, subtask, slot, scope_override or "exclusive", None, None, h)
        if t is ChangelogBackendHandle:
            mat = tuple(p if p is None else self.keyed(op, subtask, slot, p, None) for p in h.materialized)
            non = tuple(
                p if p is None else self.keyed(op, subtask, slot, p, "changelog") for p in h.non_materialized
            )
            same = all(a is b for a, b in zip(mat, h.materialized, strict=True)) and all(
                a is b for a, b in zip(non, h.non_materialized, strict=True)
            )
            return h if same else h._replace(materialized=mat, non_materialized=non)
        if t is ChangelogFileHandle:
            kgr = h.key_groups
            pieces = tuple(
                (o, self.stream(op, subtask, slot, "changelog", None, kgr, s)) for o, s in h.pieces
            )
            if all(a[1] is b[1] for a, b in zip(pieces, h.pieces, strict=True)):
                return h
            return h._replace(pieces=pieces)
        if t is ChangelogBytesHandle:
            return h  # inline changes, no file
        raise TypeError(f"the handle walk does not know {t.__name__}")

    def operator_handle(self, op, subtask, slot, h):
        d = self.stream(op, subtask, slot, "exclusive", None, None, h.delegate)
        if type(h) is FileMergingOperatorHandle:
            taskowned = self.directory(op, subtask, slot, h.taskowned_dir)
            shared = self.directory(op, subtask, slot, h.shared_dir)
            if d is not h.delegate or taskowned != h.taskowned_dir or shared != h.shared_dir:
                return h._replace(delegate=d, taskowned_dir=taskowned, shared_dir=shared)
            return h
        return h if d is h.delegate else h._replace(delegate=d)

    def channel(self, op, subtask, slot, c):
        d = self.stream(op, subtask, slot, "exclusive", None, None, c.delegate)
        return c if d is c.delegate else c._replace(delegate=d)


class _Collect(HandleWalk):
    def __init__(self) -> None:
        self.groups: list[tuple] = []

    def files(self, op, subtask, slot, scope, key_groups, items):
        self.groups.append((op, subtask, slot, scope, key_groups, items))
        return None


def file_groups(md: CheckpointMetadata) -> list[tuple]:
    """Every file of a checkpoint in groups, in file order: ``(op, subtask, slot, scope,
    key_groups, items)`` with ``items`` the ``(local_name, file_handle)`` pairs (see :class:`HandleWalk`)."""
    walk = _Collect()
    walk.checkpoint(md)
    return walk.groups


def file_handles(md: CheckpointMetadata) -> Iterator[tuple[str, Any]]:
    """``(scope, file_handle)`` of every file reference (a handle naming the same file twice counts twice)."""
    for _op, _subtask, _slot, scope, _kgr, items in file_groups(md):
        for _name, h in items:
            yield scope, h
