"""Decoding the keyed state handles of a ``_metadata`` file: key groups, incremental snapshots, changelog.

Two layouts share format version 3: Flink 1.14's changelog handles (codes 8, 9, 10) lack the
sizes, materialization and handle ids 1.15 added; ``flink114`` selects 1.14's reading and the
``met_*`` flags tell :func:`ckptctl.metadata.reader.read_metadata` which reading to try and keep.
Layered on :class:`~ckptctl.metadata.read_streams.StreamDecoder`.
"""

from __future__ import annotations

from ckptctl.metadata.codes import (
    CHANGELOG_BYTE_INCREMENT_HANDLE,
    CHANGELOG_FILE_INCREMENT_HANDLE,
    CHANGELOG_FILE_INCREMENT_HANDLE_V2,
    CHANGELOG_HANDLE,
    CHANGELOG_HANDLE_V2,
    INCREMENTAL_KEY_GROUPS_HANDLE,
    INCREMENTAL_KEY_GROUPS_HANDLE_V2,
    KEY_GROUPS_HANDLE,
    KEY_GROUPS_HANDLE_V2,
    NULL_HANDLE,
    SAVEPOINT_KEY_GROUPS_HANDLE,
)
from ckptctl.metadata.handles import (
    ChangelogBackendHandle,
    ChangelogBytesHandle,
    ChangelogFileHandle,
    IncrementalHandle,
    KeyGroupRange,
)
from ckptctl.metadata.read_streams import StreamDecoder

# Keyed handle codes that the releases writing a format version did not know (1.14/1.15 wrote V3;
# the changelog V2 handles came with 1.16, which writes V4).
_KEYED_CODES_UNKNOWN_TO = {3: (CHANGELOG_FILE_INCREMENT_HANDLE_V2, CHANGELOG_HANDLE_V2)}


class KeyedDecoder(StreamDecoder):
    """A stream decoder that also decodes keyed state handles."""

    __slots__ = ("flink114", "met_changelog", "met_114_codes")

    def __init__(
        self,
        buf: bytes,
        path: str | None,
        start: int = 0,
        end: int | None = None,
        version: int = 0,
        flink114: bool = False,
    ) -> None:
        super().__init__(buf, path, start, end, version)
        self.flink114 = flink114  # V3 as Flink 1.14 wrote it (see reader._read_metadata)
        self.met_changelog = False  # a changelog handle (8, 9, 10) was decoded
        self.met_114_codes = False  # a code 1.14 writes and 1.15 never does (3, 5)

    def keyed(self):
        at = self.pos
        code = self.u8()
        if code == NULL_HANDLE:
            return None
        if code in _KEYED_CODES_UNKNOWN_TO.get(self.version, ()) or (
            self.flink114 and code in (INCREMENTAL_KEY_GROUPS_HANDLE_V2, KEY_GROUPS_HANDLE_V2)
        ):  # the releases that wrote this version throw "Reading invalid KeyedStateHandle"
            raise self.fail(f"unknown keyed state handle type {code}", at)
        if code in (KEY_GROUPS_HANDLE, INCREMENTAL_KEY_GROUPS_HANDLE):
            self.met_114_codes = True
        elif code in (CHANGELOG_HANDLE, CHANGELOG_BYTE_INCREMENT_HANDLE, CHANGELOG_FILE_INCREMENT_HANDLE):
            self.met_changelog = True
            if self.flink114:
                return self.changelog_114(code, at)
        if code in (INCREMENTAL_KEY_GROUPS_HANDLE_V2, INCREMENTAL_KEY_GROUPS_HANDLE):
            checkpoint_id = self.i64()
            backend_id = self.utf()
            kgr = self.key_group_range()
            checkpointed = self.i64() if code == INCREMENTAL_KEY_GROUPS_HANDLE_V2 else None
            meta = self.stream()
            hidden = len(self.shadowed)
            files = self.skimmed_files if self.skim_files else self.local_files
            shared = files()
            private = files()
            handle_id = self.utf() if code == INCREMENTAL_KEY_GROUPS_HANDLE_V2 else None
            shadowed = tuple(self.shadowed[hidden:])
            del self.shadowed[hidden:]
            return IncrementalHandle(
                code, checkpoint_id, backend_id, kgr, checkpointed, meta, shared, private, handle_id, shadowed
            )
        if code in (KEY_GROUPS_HANDLE, KEY_GROUPS_HANDLE_V2, SAVEPOINT_KEY_GROUPS_HANDLE):
            return self.key_groups_body(code)
        if code in (CHANGELOG_HANDLE, CHANGELOG_HANDLE_V2):
            self.nest()
            kgr = self.key_group_range()
            checkpointed = self.i64()
            materialized = tuple(self.keyed() for _ in range(self.count("materialized handles", 1)))
            non_materialized = self.changelog_parts()
            materialization_id = self.i64()
            checkpoint_id = self.i64() if code == CHANGELOG_HANDLE_V2 else None
            handle_id = self.utf()
            self.depth -= 1
            if kgr.empty:  # ChangelogStateBackendHandleImpl: checkArgument(numberOfKeyGroups > 0)
                raise self.fail(
                    f"changelog state handle with the empty key-group range {kgr.start}+{kgr.count}", at + 1
                )
            return ChangelogBackendHandle(
                code, kgr, checkpointed, materialized, non_materialized, materialization_id,
                checkpoint_id, handle_id,
            )  # fmt: skip
        if code == CHANGELOG_BYTE_INCREMENT_HANDLE:
            kgr = self.key_group_range()
            return self.changelog_bytes(kgr, legacy=False)
        if code in (CHANGELOG_FILE_INCREMENT_HANDLE, CHANGELOG_FILE_INCREMENT_HANDLE_V2):
            self.nest()
            kgr = self.key_group_range()
            pieces = []
            for _ in range(self.count("changelog file pieces", 9)):
                offset = self.i64()
                pieces.append((offset, self.stream()))
            state_size, checkpointed = self.i64(), self.i64()
            handle_id = self.utf()
            storage = self.utf() if code == CHANGELOG_FILE_INCREMENT_HANDLE_V2 else None
            self.depth -= 1
            return ChangelogFileHandle(code, kgr, tuple(pieces), state_size, checkpointed, handle_id, storage)
        raise self.fail(f"unknown keyed state handle type {code}", at)

    def changelog_parts(self) -> tuple:
        """The non-materialized part: Flink casts each to ``ChangelogStateHandle`` (null passes)."""
        parts = []
        for _ in range(self.count("changelog handles", 1)):
            at = self.pos
            h = self.keyed()
            if h is not None and not isinstance(h, (ChangelogBytesHandle, ChangelogFileHandle)):
                raise self.fail(
                    f"non-materialized changelog part is a {type(h).__name__}, not a changelog handle", at
                )
            parts.append(h)
        return tuple(parts)

    def changelog_bytes(self, kgr: KeyGroupRange, legacy: bool) -> ChangelogBytesHandle:
        """Code 9 after its key-group range; ``legacy``: 1.14's layout, without a handle id."""
        seq_at = self.pos
        from_seq, to_seq = self.i64(), self.i64()
        changes = []
        for _ in range(self.count("changelog changes", 8)):
            key_group = self.i32()
            changes.append((key_group, self.raw(self.i32(), "changelog change bytes")))
        handle_id = None if legacy else self.utf()
        for n, value in enumerate((from_seq, to_seq)):  # SequenceNumber.of: checkArgument(number >= 0)
            if value < 0:
                raise self.fail(f"negative changelog sequence number {value}", seq_at + 8 * n)
        return ChangelogBytesHandle(kgr, from_seq, to_seq, tuple(changes), handle_id)

    def changelog_114(self, code: int, at: int):
        """Codes 8, 9, 10 as Flink 1.14 lays them out: no sizes, materialization or handle ids.

        The fields 1.15 added are ``None`` in the model, which is how the writer knows to write
        them back the 1.14 way.
        """
        kgr = self.key_group_range()
        if code == CHANGELOG_HANDLE:
            self.nest()
            materialized = tuple(self.keyed() for _ in range(self.count("materialized handles", 1)))
            non_materialized = self.changelog_parts()
            self.depth -= 1
            if kgr.empty:
                raise self.fail(
                    f"changelog state handle with the empty key-group range {kgr.start}+{kgr.count}", at + 1
                )
            return ChangelogBackendHandle(code, kgr, None, materialized, non_materialized, None, None, None)
        if code == CHANGELOG_BYTE_INCREMENT_HANDLE:
            return self.changelog_bytes(kgr, legacy=True)
        self.nest()
        pieces = []
        for _ in range(self.count("changelog file pieces", 9)):
            offset = self.i64()
            pieces.append((offset, self.stream()))
        state_size = self.i64()
        self.depth -= 1
        return ChangelogFileHandle(code, kgr, tuple(pieces), state_size, None, None, None)
