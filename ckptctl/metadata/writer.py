"""Encoder of :class:`CheckpointMetadata` back into Flink's ``_metadata`` bytes.

The exact inverse of :mod:`ckptctl.metadata.reader`: ``write(read(b)) == b`` for every file Flink
writes. The commands that write a ``_metadata`` are built on it, through
:func:`ckptctl.metadata.transform.map_file_handles`: ``ckptctl repair`` (FLINK-39964: the relative
handles of files reused from a CLAIM-restored NATIVE savepoint become absolute paths to the
savepoint's files) and ``ckptctl relocate`` (the absolute paths rewritten for the new place); so
are the large synthetic benchmarks. It encodes each wire code the model records instead of
picking "the current" one, so everything the rewrite does not touch stays byte for byte.
(A V3 file that repeats a local file name in one handle, or any file that repeats a subtask index
in one operator, neither of which Flink writes, comes back without the hidden entries: see
``IncrementalHandle.shadowed`` and ``OperatorState.shadowed``.)
"""

from __future__ import annotations

import struct

from ckptctl.metadata import mutf8
from ckptctl.metadata.checkpoint import CheckpointMetadata
from ckptctl.metadata.codes import (
    BYTE_STREAM_STATE_HANDLE,
    CHANGELOG_BYTE_INCREMENT_HANDLE,
    CHANGELOG_FILE_INCREMENT_HANDLE_V2,
    CHANGELOG_HANDLE_V2,
    EMPTY_SEGMENT_FILE_HANDLE,
    FILE_STREAM_STATE_HANDLE,
    INCREMENTAL_KEY_GROUPS_HANDLE_V2,
    KEY_GROUPS_HANDLE_V2,
    MAGIC,
    MASTER_STATE_MAGIC,
    PARTITIONABLE_OPERATOR_STATE_HANDLE,
    RELATIVE_STREAM_STATE_HANDLE,
    SEGMENT_FILE_HANDLE,
    SEGMENT_PARTITIONABLE_OPERATOR_STATE_HANDLE,
)
from ckptctl.metadata.handles import (
    ByteStreamHandle,
    ChangelogBackendHandle,
    ChangelogBytesHandle,
    ChangelogFileHandle,
    EmptySegmentHandle,
    FileHandle,
    IncrementalHandle,
    KeyGroupRange,
    KeyGroupsHandle,
    RelativeFileHandle,
    SegmentFileHandle,
    SkimmedFiles,
)
from ckptctl.metadata.operators import (
    ChannelHandle,
    FileMergingOperatorHandle,
    MergedChannelEntry,
    MergedChannelHandle,
    OperatorState,
    OperatorStreamHandle,
    SubtaskState,
)

_I32 = struct.Struct(">i").pack
_I64 = struct.Struct(">q").pack
_U16 = struct.Struct(">H").pack


class MetadataWriteError(ValueError):
    """The model holds something Flink could not have written (e.g. a string over 64 KiB)."""


class _Encoder:
    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def utf(self, text: str) -> None:
        raw = mutf8.encode(text)
        if len(raw) > 0xFFFF:
            raise MetadataWriteError(f"string of {len(raw)} encoded bytes exceeds writeUTF's 65535")
        self.parts.append(_U16(len(raw)) + raw)

    def kgr(self, r: KeyGroupRange) -> None:
        self.parts.append(_I32(r.start) + _I32(r.count))

    def longs(self, values: tuple[int, ...]) -> None:
        self.parts.append(_I32(len(values)) + struct.pack(f">{len(values)}q", *values))

    def stream(self, h) -> None:
        out = self.parts.append
        if h is None:
            out(b"\x00")
        elif type(h) is FileHandle:
            out(bytes((FILE_STREAM_STATE_HANDLE,)) + _I64(h.size))
            self.utf(h.path)
        elif type(h) is RelativeFileHandle:
            out(bytes((RELATIVE_STREAM_STATE_HANDLE,)))
            self.utf(h.relative_path)
            out(_I64(h.size))
        elif type(h) is ByteStreamHandle:
            out(bytes((BYTE_STREAM_STATE_HANDLE,)))
            self.utf(h.name)
            out(_I32(len(h.data)) + h.data)
        elif type(h) is SegmentFileHandle:
            out(bytes((SEGMENT_FILE_HANDLE,)) + _I64(h.offset) + _I64(h.size) + _I32(h.scope))
            self.utf(h.path)
            self.utf(h.logical_file_id)
        elif type(h) is EmptySegmentHandle:
            out(bytes((EMPTY_SEGMENT_FILE_HANDLE,)))
        elif type(h) is KeyGroupsHandle:
            self.key_groups(h)
        else:
            raise MetadataWriteError(f"not a stream state handle: {type(h).__name__}")

    def key_groups(self, h: KeyGroupsHandle) -> None:
        self.parts.append(bytes((h.code,)))
        self.kgr(h.key_groups)
        self.parts.append(struct.pack(f">{len(h.offsets)}q", *h.offsets))
        self.stream(h.delegate)
        if h.code == KEY_GROUPS_HANDLE_V2:
            self.utf(h.handle_id or "")

    def keyed(self, h) -> None:
        out = self.parts.append
        if h is None:
            out(b"\x00")
        elif type(h) is IncrementalHandle:
            out(bytes((h.code,)) + _I64(h.checkpoint_id))
            self.utf(h.backend_id)
            self.kgr(h.key_groups)
            if h.code == INCREMENTAL_KEY_GROUPS_HANDLE_V2:
                out(_I64(h.checkpointed_size if h.checkpointed_size is not None else -1))
            self.stream(h.meta)
            for files in (h.shared, h.private):
                if type(files) is SkimmedFiles:  # read for its size only: writing it would lose the files
                    raise ValueError("an incremental handle's files were skimmed (read for their size only)")
                out(_I32(len(files)))
                for f in files:
                    self.utf(f.local_path)
                    self.stream(f.handle)
            if h.code == INCREMENTAL_KEY_GROUPS_HANDLE_V2:
                self.utf(h.handle_id or "")
        elif type(h) is KeyGroupsHandle:
            self.key_groups(h)
        elif type(h) is ChangelogBackendHandle:
            out(bytes((h.code,)))
            self.kgr(h.key_groups)
            legacy = h.checkpointed_size is None  # Flink 1.14's layout (see the reader)
            if not legacy:
                out(_I64(h.checkpointed_size))
            for parts in (h.materialized, h.non_materialized):
                out(_I32(len(parts)))
                for part in parts:
                    self.keyed(part)
            if legacy:
                return
            out(_I64(h.materialization_id))
            if h.code == CHANGELOG_HANDLE_V2:
                out(_I64(h.checkpoint_id if h.checkpoint_id is not None else h.materialization_id))
            self.utf(h.handle_id)
        elif type(h) is ChangelogBytesHandle:
            out(bytes((CHANGELOG_BYTE_INCREMENT_HANDLE,)))
            self.kgr(h.key_groups)
            out(_I64(h.from_sequence) + _I64(h.to_sequence) + _I32(len(h.changes)))
            for key_group, data in h.changes:
                out(_I32(key_group) + _I32(len(data)) + data)
            if h.handle_id is not None:  # None: Flink 1.14's layout
                self.utf(h.handle_id)
        elif type(h) is ChangelogFileHandle:
            out(bytes((h.code,)))
            self.kgr(h.key_groups)
            out(_I32(len(h.pieces)))
            for offset, stream in h.pieces:
                out(_I64(offset))
                self.stream(stream)
            if h.checkpointed_size is None:  # Flink 1.14's layout
                out(_I64(h.state_size))
                return
            out(_I64(h.state_size) + _I64(h.checkpointed_size))
            self.utf(h.handle_id)
            if h.code == CHANGELOG_FILE_INCREMENT_HANDLE_V2:
                self.utf(h.storage_identifier if h.storage_identifier is not None else "filesystem")
        else:
            raise MetadataWriteError(f"not a keyed state handle: {type(h).__name__}")

    def operator(self, h) -> None:
        out = self.parts.append
        if h is None:
            out(b"\x00")
            return
        is_merging = type(h) is FileMergingOperatorHandle
        if not is_merging and type(h) is not OperatorStreamHandle:
            raise MetadataWriteError(f"not an operator state handle: {type(h).__name__}")
        out(
            bytes(
                (
                    SEGMENT_PARTITIONABLE_OPERATOR_STATE_HANDLE
                    if is_merging
                    else PARTITIONABLE_OPERATOR_STATE_HANDLE,
                )
            )
        )
        out(_I32(len(h.states)))
        for state in h.states:
            self.utf(state.name)
            out(bytes((state.mode,)))
            self.longs(state.offsets)
        if is_merging:
            self.utf(h.taskowned_dir)
            self.utf(h.shared_dir)
            out(b"\x01" if h.is_empty else b"\x00")
        self.stream(h.delegate)

    def channel(self, h, version: int) -> None:
        out = self.parts.append
        if type(h) is ChannelHandle:
            if version >= 6:
                out(bytes((h.kind,)))
            out(_I32(h.subtask_index) + _I32(h.info[0]) + _I32(h.info[1]))
            self.longs(h.offsets)
            out(_I64(h.state_size))
            self.stream(h.delegate)
        elif type(h) is MergedChannelHandle:
            if version < 6:
                raise MetadataWriteError(
                    f"merged channel state cannot be written in format version {version}"
                )
            out(bytes((h.kind,)) + _I32(h.subtask_index) + _I64(h.state_size))
            self.stream(h.delegate)
            data = h.raw_offsets if h.raw_offsets is not None else encode_merged_channel_offsets(h.channels)
            out(_I32(len(data)) + data)
        else:
            raise MetadataWriteError(f"not a channel state handle: {type(h).__name__}")

    def subtask(self, s: SubtaskState, version: int) -> None:
        out = self.parts.append
        if s.finished:
            out(_I32(-s.index - 1))
            return
        out(_I32(s.index))
        for op in (s.managed_operator, s.raw_operator):
            if op is None:
                out(_I32(0))
            else:
                out(_I32(1))
                self.operator(op)
        self.keyed(s.managed_keyed)
        self.keyed(s.raw_keyed)
        for channels in (s.input_channels, s.output_channels):
            out(_I32(len(channels)))
            for ch in channels:
                self.channel(ch, version)
        if version >= 7:
            out(b"\x00" if s.ref_checkpoint_id is None else b"\x01" + _I64(s.ref_checkpoint_id))

    def operator_state(self, op: OperatorState, version: int) -> None:
        if version >= 5:
            self.utf(op.name or "")
            self.utf(op.uid or "")
        self.parts.append(bytes.fromhex(op.operator_id) + _I32(op.parallelism) + _I32(op.max_parallelism))
        self.stream(op.coordinator_state)
        if op.subtasks is None:
            self.parts.append(_I32(-1))
            return
        self.parts.append(_I32(len(op.subtasks)))
        for s in op.subtasks:
            self.subtask(s, version)


def encode_merged_channel_offsets(channels: tuple[MergedChannelEntry, ...]) -> bytes:
    """The blob of a merged channel handle: per channel (info, size, offsets) - note the order."""
    blob = [_I32(len(channels))]
    for ch in channels:
        blob.append(_I32(ch.info[0]) + _I32(ch.info[1]) + _I64(ch.state_size))
        blob.append(_I32(len(ch.offsets)) + struct.pack(f">{len(ch.offsets)}q", *ch.offsets))
    return b"".join(blob)


def write_metadata(md: CheckpointMetadata) -> bytes:
    """Encode a model into ``_metadata`` bytes (header, body, and the trailer as recorded)."""
    e = _Encoder()
    e.parts.append(struct.pack(">Ii", MAGIC, md.version))
    e.parts.append(_I64(md.checkpoint_id) + _I32(len(md.master_states)))
    for m in md.master_states:
        block = _Encoder()
        block.parts.append(_I32(m.version))
        block.utf(m.name)
        block.parts.append(_I32(len(m.payload)) + m.payload)
        data = b"".join(block.parts)
        e.parts.append(struct.pack(">I", MASTER_STATE_MAGIC) + _I32(len(data)) + data)
    e.parts.append(_I32(len(md.operators)))
    for op in md.operators:
        e.operator_state(op, md.version)
    e.parts.append(md.trailer)
    return b"".join(e.parts)
