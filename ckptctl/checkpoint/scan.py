"""One scan of a checkpoint root: its listing, and every ``_metadata`` read once.

``check`` needs the same facts three times: the checkpoints to verify, the listing the
FLINK-39964 diagnosis searches for savepoint files, and gc's plan (the orphan count), which on
its own lists the root and reads every ``_metadata`` again. A :class:`RootScan` lists the root
once and loads each checkpoint once; its :attr:`RootScan.storage` is a read-only
:class:`~ckptctl.storage.Storage` that answers listings at or below the root and ``_metadata``
reads from the scan, so every consumer (verify, the diagnosis, gc's planner, unchanged) sees the
same snapshot and costs no further listing or ``_metadata`` request.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ckptctl import storage as st
from ckptctl.checkpoint.layout import METADATA_FILE, RootLayout, is_checkpoint_metadata, scan_root
from ckptctl.checkpoint.loading import LoadedCheckpoint, each_checkpoint
from ckptctl.checkpoint.rebase import Rebase
from ckptctl.errors import CkptError, StorageError
from ckptctl.storage import FileInfo, Storage, WalkNotes
from ckptctl.storage.reading import refuse_larger


class ScanStorage(Storage):
    """A storage seen through one listing of ``root``: read-only, and each ``_metadata`` read once.

    ``list_files`` and ``find_metadata`` at or below ``root`` are answered from ``files``; a
    ``_metadata`` below ``root`` is read from ``inner`` the first time and its bytes (or the
    error) kept for every later read. Everything else goes to ``inner``. Writing is refused: a
    scan is for looking (gc's planner may run on it; nothing built on it can delete).
    """

    def __init__(
        self, inner: Storage, root: str, files: list[FileInfo], notes: WalkNotes | None = None
    ) -> None:
        super().__init__(inner.options)
        self.inner, self.root, self.files = inner, root.rstrip("/"), files
        self.notes = notes or st.WalkNotes()
        self._prefix = self.root + "/"
        self._metadata: dict[str, bytes | StorageError] = {}

    @classmethod
    def primed(cls, inner: Storage, metadata: FileInfo, data: bytes) -> ScanStorage:
        """A storage whose read of one ``_metadata`` (read already, with its stat) is answered
        from ``data``: loading the checkpoint costs no second request. Its listing of the
        checkpoint directory is that one file: use it to load the checkpoint, nothing else."""
        view = cls(inner, st.parent(metadata.uri), [metadata])
        view._metadata[metadata.uri] = data
        return view

    def covers(self, uri: str) -> bool:
        """``uri`` is the root or lies below it (its listing is part of the scan)."""
        return uri.rstrip("/") == self.root or uri.startswith(self._prefix)

    # -- answered from the scan --------------------------------------------------------------
    def list_files(self, uri: str, notes: WalkNotes | None = None) -> Iterator[FileInfo]:
        if not self.covers(uri):
            yield from self.inner.list_files(uri, notes)
            return
        if notes is not None:  # what the one walk saw, as if this listing had walked it
            below = self.root if uri.rstrip("/") == self.root else uri.rstrip("/")
            notes.dirs.update((d, m) for d, m in self.notes.dirs.items() if st.is_under(d, below))
            notes.followed.extend(x for x in self.notes.followed if st.is_under(x[0], below))
            notes.aliases.extend(x for x in self.notes.aliases if st.is_under(x[0], below))
            notes.mounts.extend(m for m in self.notes.mounts if st.is_under(m, below))
        if uri.rstrip("/") == self.root:
            yield from self.files
            return
        prefix = uri.rstrip("/") + "/"
        for f in self.files:
            if f.uri.startswith(prefix):
                yield f

    def find_metadata(self, uri: str) -> Iterator[FileInfo]:
        if not self.covers(uri):
            yield from self.inner.find_metadata(uri)
            return
        for f in self.list_files(uri):
            if f.uri.endswith("/" + METADATA_FILE) and is_checkpoint_metadata(uri, f.uri):
                yield f

    def read_bytes(self, uri: str, limit: int | None = None, size: int | None = None) -> bytes:
        if st.basename(uri) != METADATA_FILE or not self.covers(uri):
            return self.inner.read_bytes(uri, limit, size)
        kept = self._metadata.get(uri)
        if kept is None:
            try:
                kept = self.inner.read_bytes(uri, limit, size)
            except StorageError as e:
                kept = e
            self._metadata[uri] = kept
        if isinstance(kept, StorageError):
            raise kept
        if limit is not None:
            refuse_larger(uri, len(kept), limit)
        return kept

    # -- passed through ------------------------------------------------------------------------
    def fs(self, uri: str) -> tuple[Any, str]:
        return self.inner.fs(uri)

    def to_uri(self, scheme: str, fs_path: str) -> str:
        return self.inner.to_uri(scheme, fs_path)

    def read_range(self, uri: str, start: int, length: int) -> bytes:
        return self.inner.read_range(uri, start, length)

    def stat(self, uri: str, fresh: bool = False) -> FileInfo | None:
        return self.inner.stat(uri, fresh)

    def is_dir(self, uri: str) -> bool:
        return self.inner.is_dir(uri)

    def now(self, uri: str) -> tuple[float | None, str]:
        return self.inner.now(uri)

    # -- refused -------------------------------------------------------------------------------
    def _read_only(self, uri: str) -> StorageError:
        return StorageError("not written: a scan of the root is read-only", path=uri)

    def write_bytes(self, uri: str, data: bytes) -> None:
        raise self._read_only(uri)

    def delete_many(self, uris: list[str]) -> list[tuple[str, str]]:
        raise self._read_only(uris[0] if uris else self.root)

    def move(self, src: str, dst: str) -> None:
        raise self._read_only(src)


@dataclass
class RootScan:
    """A root listed once, its layout, and every completed checkpoint under it loaded once.

    ``unreadable`` maps a checkpoint directory to why its ``_metadata`` could not be loaded.
    ``storage`` answers from the scan (see :class:`ScanStorage`): pass it to whatever else looks
    at the root.
    """

    root: str
    files: list[FileInfo]
    layout: RootLayout
    loaded: list[LoadedCheckpoint]
    unreadable: dict[str, CkptError]
    storage: ScanStorage

    @classmethod
    def of(
        cls, storage: Storage, root: str, rebase: Rebase | None = None, apply_inferred: bool = True
    ) -> RootScan:
        """List ``root`` and read each completed checkpoint's ``_metadata`` (with ``rebase`` and
        the mapping a moved directory suggests, as :func:`~ckptctl.checkpoint.loading.load_checkpoint` does)."""
        root = st.normalize_uri(root)
        notes = st.WalkNotes()
        files = list(storage.list_files(root, notes))
        layout = scan_root(storage, root, files)
        view = ScanStorage(storage, layout.root, files, notes)
        loaded: list[LoadedCheckpoint] = []
        unreadable: dict[str, CkptError] = {}
        complete = [loc for loc in layout.locations() if loc.complete]
        for loc, ck, error in each_checkpoint(view, complete, rebase, apply_inferred=apply_inferred):
            if error is not None:
                unreadable[loc.uri] = error
            else:
                loaded.append(ck)
        return cls(layout.root, files, layout, loaded, unreadable, view)

    def listings(self) -> dict[str, list[FileInfo]]:
        """The listing by root, as :func:`ckptctl.checkpoint.flink39964.explain_missing` takes it."""
        return {self.root: self.files}
