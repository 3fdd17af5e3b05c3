"""Decoding the stream handles of a ``_metadata`` file, and the file lists of incremental snapshots.

A stream handle says where one stream of bytes is (inline, a file, a segment of a merged file, key
groups over a stream). The incremental RocksDB file lists (:meth:`StreamDecoder.local_files`) are
the hot loop of large checkpoints: most of a big ``_metadata`` is those lists, so their common
entry is decoded inline. Layered on :class:`~ckptctl.metadata.read_cursor.Cursor`: a subclass, so
the hot path's ``self.method()`` calls cost what they did in one class.
"""

from __future__ import annotations

import struct
from contextlib import contextmanager
from contextvars import ContextVar

from ckptctl.metadata import flinkpath
from ckptctl.metadata.codes import (
    BYTE_STREAM_STATE_HANDLE,
    EMPTY_SEGMENT_FILE_HANDLE,
    FILE_STREAM_STATE_HANDLE,
    KEY_GROUPS_HANDLE,
    KEY_GROUPS_HANDLE_V2,
    NULL_HANDLE,
    RELATIVE_STREAM_STATE_HANDLE,
    SEGMENT_FILE_HANDLE,
)
from ckptctl.metadata.handles import (
    ByteStreamHandle,
    EmptySegmentHandle,
    FileHandle,
    KeyGroupsHandle,
    LocalFile,
    RelativeFileHandle,
    SegmentFileHandle,
    SkimmedFiles,
)
from ckptctl.metadata.read_cursor import Cursor

_U16 = struct.Struct(">H").unpack_from
_FILE_HEADER = struct.Struct(">bqH").unpack_from  # type code, state size, path length

_ALL_PLAIN = flinkpath.all_plain
EMPTY_SEGMENT = EmptySegmentHandle()
MAX_NESTING = 32  # changelog and key-group handles nest; Flink writes at most three levels

_SKIM_FILES: ContextVar[bool] = ContextVar("skim_files", default=False)


@contextmanager
def skimming_files():
    """Within it, :func:`read_metadata` reads the shared and private file lists of incremental
    handles for their number and bytes only (:class:`SkimmedFiles`): most of a big checkpoint's
    ``_metadata`` is those lists, and a reader that judges state, not files, skips their decoding."""
    token = _SKIM_FILES.set(True)
    try:
        yield
    finally:
        _SKIM_FILES.reset(token)


def _as_map(files: list[LocalFile]) -> tuple[LocalFile, ...]:
    """A file list as 1.14-1.16 hold it, a ``HashMap<StateHandleID, StreamStateHandle>``.

    A repeated local name keeps its first place and takes the later handle (``put`` replaces
    the value). Used for V3 only: V4 was written by 1.16 (a map) and by 1.17-1.20 (a list) with
    the same bytes, and a list keeps every entry, the reading that drops no file.
    """
    by_name: dict[str, LocalFile] = {}
    for f in files:
        by_name[f.local_path] = f
    return tuple(by_name.values())


class StreamDecoder(Cursor):
    """A cursor that decodes stream handles; ``version`` is the format version (which handle
    codes its writers knew)."""

    __slots__ = ("version", "depth", "shadowed", "skim_files")

    def __init__(
        self, buf: bytes, path: str | None, start: int = 0, end: int | None = None, version: int = 0
    ) -> None:
        super().__init__(buf, path, start, end)
        self.depth = 0
        self.version = version  # the format version: which handle codes its writers knew
        self.shadowed: list[LocalFile] = []  # V3 entries a repeated local name hides (see _as_map)
        # incremental handles' file lists read for their size only (V3 keeps them: see _as_map)
        self.skim_files = _SKIM_FILES.get() and version != 3

    def nest(self) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self.fail(f"state handles nested more than {MAX_NESTING} levels deep")

    # -- stream handles -------------------------------------------------------------------
    def stream(self):
        at = self.pos
        code = self.u8()
        if code == FILE_STREAM_STATE_HANDLE:
            size = self.i64()
            path = self.path_utf("file path")
            if size < -1:  # FileStateHandle: -1 is "unknown"
                raise self.fail(f"negative file size {size}", at + 1)
            return FileHandle(path, size)
        if code == NULL_HANDLE:
            return None
        if code == RELATIVE_STREAM_STATE_HANDLE:
            rel_at = self.pos
            rel = self.utf()
            size = self.i64()
            self.check_path(rel, "relative file path", rel_at, relative=True)
            if size < -1:
                raise self.fail(f"negative file size {size}", self.pos - 8)
            return RelativeFileHandle(rel, size)
        if code == BYTE_STREAM_STATE_HANDLE:
            name = self.utf()
            return ByteStreamHandle(name, self.raw(self.i32(), "inline state bytes"))
        if code >= SEGMENT_FILE_HANDLE and self.version == 3:  # file merging came with V4 (1.20)
            raise self.fail(f"unknown stream state handle type {code}", at)
        if code == SEGMENT_FILE_HANDLE:
            offset = self.i64()
            size = self.i64()
            scope = self.i32()
            if scope not in (0, 1):
                raise self.fail(f"unknown segment scope {scope}", self.pos - 4)
            return SegmentFileHandle(offset, size, scope, self.path_utf("segment file path"), self.utf())
        if code == EMPTY_SEGMENT_FILE_HANDLE:
            return EMPTY_SEGMENT
        if code == KEY_GROUPS_HANDLE:
            return self.key_groups_body(code)
        raise self.fail(f"unknown stream state handle type {code}", at)

    def key_groups_body(self, code: int) -> KeyGroupsHandle:
        self.nest()
        at = self.pos
        start, count = self.i32(), self.i32()
        kgr = self.checked_range(start, count, at)
        if count < 0 or count * 8 > self.end - self.pos:
            raise self.fail(f"invalid key-group count {count}", at + 4)
        offsets = struct.unpack_from(f">{count}q", self.buf, self.pos)
        self.pos += 8 * count
        if kgr.size != count:
            raise self.fail(f"{count} key-group offsets for the empty key-group range", at + 4)
        delegate_at = self.pos
        delegate = self.stream()
        if delegate is None:
            raise self.fail("key-groups state handle without a delegate stream", delegate_at)
        handle_id = self.utf() if code == KEY_GROUPS_HANDLE_V2 else None
        self.depth -= 1
        return KeyGroupsHandle(code, kgr, offsets, delegate, handle_id)

    def skimmed_files(self) -> SkimmedFiles:
        """``List<HandleAndLocalPath>`` walked for its entries' sizes only: bounds are checked,
        names and paths are not decoded (:func:`skimming_files`)."""
        n = self.count("incremental state files", 3)
        buf, end = self.buf, self.end
        file_header = _FILE_HEADER
        pos, total = self.pos, 0
        for _ in range(n):
            if pos + 2 > end:
                self.pos = pos
                raise self.fail("truncated: expected a local file name")
            q = pos + 2 + _U16(buf, pos)[0]
            if q + 11 <= end:
                code, size, lp = file_header(buf, q)
                if code == FILE_STREAM_STATE_HANDLE and q + 11 + lp <= end:
                    if size < -1:
                        raise self.fail(f"negative file size {size}", q + 1)
                    total += size
                    pos = q + 11 + lp
                    continue
            self.pos = pos
            total += self.local_file().handle.state_size
            pos = self.pos
        self.pos = pos
        return SkimmedFiles(n, total)

    def local_files(self) -> tuple[LocalFile, ...]:
        """``List<HandleAndLocalPath>``: the hot loop of large incremental checkpoints.

        The common entry (ASCII name, absolute file handle, ASCII path) is decoded inline with one
        struct call for (code, size, path length); anything else goes through the general path.
        """
        n = self.count("incremental state files", 3)
        buf, end = self.buf, self.end
        out = []
        append = out.append
        file_header = _FILE_HEADER
        pos = list_start = self.pos
        fast_paths: list[str] = []
        add_path = fast_paths.append
        new = tuple.__new__
        for _ in range(n):
            if pos + 2 > end:
                self.pos = pos
                raise self.fail("truncated: expected a local file name")
            q = pos + 2 + _U16(buf, pos)[0]
            if q + 11 <= end:
                code, size, lp = file_header(buf, q)
                r = q + 11 + lp
                if code == FILE_STREAM_STATE_HANDLE and r <= end:
                    try:
                        name = buf[pos + 2 : q].decode("ascii")
                        path = buf[q + 11 : r].decode("ascii")
                    except UnicodeDecodeError:
                        pass
                    else:
                        if size < -1:
                            raise self.fail(f"negative file size {size}", q + 1)
                        add_path(path)  # Path rules checked for the whole list below
                        append(new(LocalFile, (name, new(FileHandle, (path, size)))))  # no __new__ frames
                        pos = r
                        continue
            self.pos = pos
            name = self.utf()
            at = self.pos
            handle = self.stream()
            if handle is None:
                raise self.fail(f"null state handle for incremental file '{name}'", at)
            append(LocalFile(name, handle))
            pos = self.pos
        if fast_paths and not _ALL_PLAIN(fast_paths):
            # some path is not a plain URI: decode the list again entry by entry, so that the
            # first path Flink's Path rejects is reported at its own offset
            self.pos = list_start
            out = [self.local_file() for _ in range(n)]
        else:
            self.pos = pos
        if self.version == 3 and len({f.local_path for f in out}) < n:
            kept = _as_map(out)
            self.shadowed.extend(f for f in out if f not in kept)
            return kept
        return tuple(out)

    def local_file(self) -> LocalFile:
        name = self.utf()
        at = self.pos
        handle = self.stream()
        if handle is None:
            raise self.fail(f"null state handle for incremental file '{name}'", at)
        return LocalFile(name, handle)
