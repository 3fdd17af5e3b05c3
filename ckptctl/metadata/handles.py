"""The handles of a Flink ``_metadata`` file: where a state's bytes are (stream and keyed handles).

One class per handle kind Flink can write, holding exactly the fields on the wire (and in wire
order), so that :mod:`ckptctl.metadata.writer` can re-encode a model into the original bytes.
NamedTuples keep the model immutable and cheap: a large checkpoint has hundreds of thousands of
handles, and tuple construction is several times faster than frozen dataclasses.

Wire codes are kept where one Java class has several encodings (e.g. legacy vs. V2 key-group
handles), because the writer must reproduce the same code. The operator and channel handles and
the subtasks that hold them are in :mod:`ckptctl.metadata.operators`, the file itself in
:mod:`ckptctl.metadata.checkpoint`, the traversal in :mod:`ckptctl.metadata.walk`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from ckptctl.metadata.codes import SAVEPOINT_KEY_GROUPS_HANDLE, SCOPES

Resolver = Callable[[Any], str]  # a file handle -> the URI of its file now (see refs.file_resolver)


def state_size_of(h: Any) -> int:
    """Flink's getStateSize of a handle slot that may be empty (``None``: 0 bytes)."""
    return 0 if h is None else h.state_size


def inline_size_of(h: Any) -> int:
    """The bytes a handle slot that may be empty keeps inside ``_metadata``."""
    return 0 if h is None else h.inline_size


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
        return state_size_of(self.delegate)

    @property
    def inline_size(self) -> int:
        return inline_size_of(self.delegate)

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
    with :func:`~ckptctl.metadata.read_streams.skimming_files`): empty, so a walk finds no file in it,
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
    return sum([state_size_of(f.handle) for f in files])


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
        return state_size_of(self.meta) + _files_size(self.shared) + _files_size(self.private)

    @property
    def incremental_size(self) -> int:
        """Flink's getCheckpointedSize (what this checkpoint uploaded); the state size without one."""
        n = self.checkpointed_size
        return n if n is not None and n >= 0 else self.state_size

    @property
    def inline_size(self) -> int:
        return inline_size_of(self.meta) + sum(
            inline_size_of(f.handle) for f in (*self.shared, *self.private)
        )

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
