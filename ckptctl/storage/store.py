"""The :class:`Storage`: list, stat, read, write, move and delete files by canonical URI, on any
fsspec filesystem.

The class is the one address of the calls (what every command holds, and what a scan subclasses);
what each call does lives by kind in :mod:`~ckptctl.storage.reading`,
:mod:`~ckptctl.storage.walking` and :mod:`~ckptctl.storage.writing`. Here stay the filesystems
(made once per scheme), the store's clock, the ``-v`` report of each read and the storage shared
per options. Heavy imports (fsspec, s3fs, botocore) happen only when a filesystem is first needed,
which keeps ``ckptctl --help`` instant.
"""

from __future__ import annotations

import email.utils
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ckptctl.errors import StorageError, StoreUnanswered
from ckptctl.storage import reading, walking, writing
from ckptctl.storage.listing import FileInfo, WalkNotes
from ckptctl.storage.options import StorageOptions
from ckptctl.storage.retry import first_line, retrying
from ckptctl.storage.uri import SUPPORTED_SCHEMES, clean_local, scheme_of


def _names_unanswered(method):
    """A storage call: reported to :attr:`Storage.on_call` (``-v``: what a command reads), and
    when its store did not answer (:class:`StoreUnanswered`) the error names the URI asked for."""
    import functools

    what = method.__name__.replace("_", " ")

    @functools.wraps(method)
    def call(self, uri, *args, **kwargs):
        if self.on_call is not None:
            self.on_call(what, uri)
        try:
            return method(self, uri, *args, **kwargs)
        except StoreUnanswered as e:
            raise e.at(uri) from None

    return call


class Storage:
    """List, stat, read and delete files by canonical URI, on any fsspec filesystem.

    Each call hands itself to the function that does it (so that function calls back this
    storage's public methods: a subclass's answers, and ``-v``'s report, hold for them too)."""

    def __init__(self, options: StorageOptions | None = None) -> None:
        self.options = options or StorageOptions.from_env()
        self._filesystems: dict[str, Any] = {}
        # progress of S3 listings: (what is listed, objects so far) after each page, and
        # (what is listed, None) when it is done; set by the CLI to show a running count
        self.on_listed: Callable[[str, int | None], None] | None = None
        # each call that reads (stat, read bytes, read small, ...) and the URI it asks for: ``-v``
        # shows them for every command (the CLI sets it, ckptctl.cli.base._context)
        self.on_call: Callable[[str, str], None] | None = None

    @classmethod
    def shared(cls, options: StorageOptions) -> Storage:
        """One :class:`Storage` per options in this process: what workers (executors, threads
        of a pool) use, so their filesystems and connection pools are made once."""
        with _SHARED_LOCK:
            storage = _SHARED.get(options)
            if storage is None:
                options.carry_deadline()  # a cluster's executor: the driver's, unless it has its own
                storage = _SHARED[options] = cls(options)
        return storage

    # -- filesystem resolution -----------------------------------------------------------
    def fs(self, uri: str) -> tuple[Any, str]:
        scheme = scheme_of(uri)
        fs = self._filesystems.get(scheme)
        if fs is None:
            fs = self._filesystems[scheme] = self._make_fs(scheme)
        if scheme in ("file", "s3"):
            return fs, uri[5:]  # "file:" and "s3://" are both five characters
        return fs, uri

    def _make_fs(self, scheme: str) -> Any:
        import fsspec

        if scheme not in SUPPORTED_SCHEMES:
            raise StorageError(
                f"unsupported scheme '{scheme}:': ckptctl reads local paths and s3:// (also s3a://, s3n://)"
            )
        try:
            if scheme == "s3":
                import s3fs

                fs = s3fs.S3FileSystem(**self.options.s3fs_kwargs())
                fs.retries = 1  # a class attribute: its retries (of timeouts too) are ckptctl's, bounded
                return fs
            return fsspec.filesystem(scheme)
        except (ImportError, ValueError) as e:
            raise StorageError(f"no filesystem for scheme '{scheme}': {e}") from None

    def to_uri(self, scheme: str, fs_path: str) -> str:
        if scheme == "file":
            return "file:" + clean_local(fs_path)
        if scheme == "s3":
            return "s3://" + fs_path.lstrip("/")
        return fs_path

    # -- reading (ckptctl.storage.reading) -----------------------------------------------
    @_names_unanswered
    def read_bytes(self, uri: str, limit: int | None = None, size: int | None = None) -> bytes:
        """The whole file; with ``limit``, a larger one (or locally not a regular file) refused first."""
        return reading.read_bytes(self, uri, limit, size)

    @_names_unanswered
    def read_small(self, uri: str, limit: int) -> tuple[FileInfo, bytes | None] | None:
        """A file's stat and, on S3, its bytes from the same GET; ``None`` if there is no such file."""
        return reading.read_small(self, uri, limit)

    @_names_unanswered
    def read_recorded(self, uri: str, size: int) -> bytes:
        """The whole file a checkpoint records with ``size`` bytes; a file of another size refused."""
        return reading.read_recorded(self, uri, size)

    @_names_unanswered
    def read_range(self, uri: str, start: int, length: int) -> bytes:
        return reading.read_range(self, uri, start, length)

    @_names_unanswered
    def stat(self, uri: str, fresh: bool = False) -> FileInfo | None:
        """The file's size and mtime, or ``None`` if it does not exist (or is a directory)."""
        return reading.stat(self, uri, fresh)

    @_names_unanswered
    def is_file(self, uri: str) -> bool:
        """``uri`` names a file (not a directory, not nothing): on S3 one HEAD."""
        return reading.is_file(self, uri)

    @_names_unanswered
    def is_dir(self, uri: str) -> bool:
        return reading.is_dir(self, uri)

    # -- listing (ckptctl.storage.walking) -----------------------------------------------
    def list_files(self, uri: str, notes: WalkNotes | None = None) -> Iterator[FileInfo]:
        """Every file below ``uri`` (recursively)."""
        return walking.list_files(self, uri, notes)

    def present(self, uris: Iterable[str], per_run: int = 5000, unanswered: set[str] | None = None,
                ) -> dict[str, FileInfo]:  # fmt: skip
        """Those of the S3 files ``uris`` that a listing shows, by URI, without a request per file."""
        return walking.present(self, uris, per_run, unanswered)

    def stat_many(self, uris: Iterable[str], workers: int = 16, *, unlisted_is_absent: bool = False,
                  ) -> dict[str, FileInfo | None]:  # fmt: skip
        """Each URI's stat (``None``: no such file), in the order given, without a request per S3 file."""
        return walking.stat_many(self, uris, workers, unlisted_is_absent=unlisted_is_absent)

    def find_metadata(self, uri: str) -> Iterator[FileInfo]:
        """Every ``_metadata`` below ``uri``, without reading the (huge) shared/ and taskowned/ of jobs."""
        return walking.find_metadata(self, uri)

    def list_checkpoint_areas(self, uri: str, unreadable: list[str] | None = None) -> Iterator[FileInfo]:
        """Every file below ``uri`` except inside a job's ``shared/`` and ``taskowned/``."""
        return walking.list_checkpoint_areas(self, uri, unreadable)

    # -- time ----------------------------------------------------------------------------
    @_names_unanswered
    def now(self, uri: str) -> tuple[float | None, str]:
        """The storage's idea of the current time, and where it came from.

        Object stores stamp mtimes with their own clock, so age cut-offs are taken from it (the
        HTTP ``Date`` of a cheap request, retried like every storage call) rather than from this
        machine's clock. When it cannot be read the time is ``None``: gc then refuses unless told
        to use the local clock.
        """
        if scheme_of(uri) != "s3":
            return time.time(), "local clock"
        fs, path = self.fs(uri)
        bucket = path.split("/", 1)[0]
        try:
            response = retrying(lambda: fs.call_s3("list_objects_v2", Bucket=bucket, MaxKeys=1), fs)
            date = response["ResponseMetadata"]["HTTPHeaders"]["date"]
            return email.utils.parsedate_to_datetime(date).timestamp(), "S3 Date header"
        except StoreUnanswered:
            raise  # the plan would wait as long for every request after this one
        except Exception as e:  # noqa: BLE001 - any failure: say so, gc refuses
            return None, f"no S3 Date header ({type(e).__name__}: {first_line(e)})"

    # -- changing (ckptctl.storage.writing) ----------------------------------------------
    def write_bytes(self, uri: str, data: bytes) -> None:
        writing.write_bytes(self, uri, data)

    def delete_many(self, uris: list[str]) -> list[tuple[str, str]]:
        """Delete files; returns (uri, error) for those that could not be deleted."""
        return writing.delete_many(self, uris)

    def move_many(self, moves: list[tuple[str, str, int | None]]) -> list[tuple[str, str]]:
        """Move files, each ``(src, dst, size)``; returns ``(src, error)`` for those not moved."""
        return writing.move_many(self, moves)

    def move(self, src: str, dst: str) -> None:
        """Move one file: copy, check the copy, then delete the source."""
        writing.move(self, src, dst)


_SHARED: dict[StorageOptions, Storage] = {}
_SHARED_LOCK = threading.Lock()
