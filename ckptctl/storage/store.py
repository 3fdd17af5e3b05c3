"""Storage access through fsspec: list, stat, read, write, move and delete files by canonical URI.

Heavy imports (fsspec, s3fs, botocore) happen only when a filesystem is first needed, which keeps
``ckptctl --help`` instant.
"""

from __future__ import annotations

import contextlib
import email.utils
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import Any

from ckptctl.errors import StorageError, StoreUnanswered
from ckptctl.storage.listing import JOB_AREAS, FileInfo, WalkNotes, is_job_dir_name, walk_local
from ckptctl.storage.options import StorageOptions
from ckptctl.storage.retry import first_line, not_s3, retry_delay, retrying, retrying_async, s3_problem
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


def s3_denied(e: BaseException) -> str:
    """The one line for an S3 request refused (403), whichever call met it: a listing gives AWS's
    message, a HEAD only "Forbidden"; both say what to check."""
    return (
        f"access denied ({first_line(e) or 'Forbidden'}): check the AWS credentials (AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE) and that they may read this bucket"
    )


def listing_failed(e: BaseException, bucket: str, path: str) -> StorageError:
    """The one line for an S3 listing that failed, for every command (``ls`` said "no such
    directory" where ``verify``/``check``/``gc`` said "no such bucket"): what to do when
    retrying cannot help (:func:`s3_problem`), "no such bucket", else the error itself."""
    if s3_problem(e):
        return StorageError(s3_problem(e), path=f"s3://{path}")
    if isinstance(e, PermissionError):
        return StorageError(s3_denied(e), path=f"s3://{path}")
    if not_s3(e):
        return StorageError(
            "the endpoint did not answer as S3 (an HTTP error without an S3 error document): is "
            "--s3-endpoint an S3 server?", path=f"s3://{path}",
        )  # fmt: skip
    if "NoSuchBucket" in str(e) or isinstance(e, FileNotFoundError):
        return StorageError("no such bucket", path=f"s3://{bucket}")
    return StorageError(f"cannot list: {type(e).__name__}: {e}", path=f"s3://{path}")


class Storage:
    """List, stat, read and delete files by canonical URI, on any fsspec filesystem."""

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

    # -- reading -------------------------------------------------------------------------
    @_names_unanswered
    def read_bytes(self, uri: str, limit: int | None = None, size: int | None = None) -> bytes:
        """The whole file. With ``limit``, a file larger than that (or, locally, anything but a
        regular file: a FIFO would block forever, ``/dev/zero`` never end) is refused first.

        ``size``: the object's size from a listing or stat just made, so that S3 is not asked
        again (a HEAD per ``_metadata``); the read is then bounded to ``limit + 1`` bytes, so an
        object that grew past the limit since is refused all the same, never read whole. An
        object listed empty is empty, not asked for: no range of it can be read (a 416, retried
        for seconds, then a "cannot read" where the parser says what is wrong at which byte)."""
        fs, path = self.fs(uri)
        s3 = scheme_of(uri) == "s3"
        bounded = limit is not None and size is not None and s3
        if bounded:
            self._refuse_larger(uri, size, limit)
            if size == 0:
                return b""
        elif limit is not None:
            self._check_readable(uri, path, limit)
        try:
            if bounded:
                data = retrying(lambda: fs.cat_file(path, start=0, end=limit + 1), fs)
                self._refuse_larger(uri, len(data), limit)
                return data
            if s3:
                return retrying(lambda: _get_object(fs, path), fs)
            return retrying(lambda: _read_all(fs, path), s3=False)
        except FileNotFoundError:
            raise StorageError("file not found", path=uri) from None
        except PermissionError:
            raise StorageError("permission denied", path=uri) from None
        except IsADirectoryError:
            raise StorageError("is a directory, not a file", path=uri) from None
        except OSError as e:
            raise StorageError(f"cannot read: {e}", path=uri) from None

    @_names_unanswered
    def read_small(self, uri: str, limit: int) -> tuple[FileInfo, bytes | None] | None:
        """A file's stat and, on S3, its bytes; ``None`` if there is no such file.

        On S3 one GET of the first ``limit + 1`` bytes, whose headers give the size and mtime:
        no HEAD before the read. The bytes are ``None`` when the file is larger than ``limit``
        (not read: :meth:`read_bytes` refuses it), when the GET could not answer (any error, which
        a HEAD and the read then report as before) and off S3 (a stat costs no request there). An
        empty object, whose range no GET can satisfy, is found by the HEAD: nothing to read."""
        if scheme_of(uri) == "s3":
            got = self._get_head(uri, limit)
            if got is not None:
                return got if got[0] is not None else None
        info = self.stat(uri)
        if info is None:
            return None
        return info, (b"" if info.size == 0 and scheme_of(uri) == "s3" else None)  # nothing to read

    def _get_head(self, uri: str, limit: int) -> tuple[FileInfo | None, bytes | None] | None:
        """``(info, bytes)`` from one ranged GET, ``(None, None)``: no such file; ``None``: ask
        otherwise. Not retried: an empty object's 416 would be, for seconds; a transient failure
        costs the HEAD and the read that follow, each retried."""
        from fsspec.asyn import sync

        fs, path = self.fs(uri)
        bucket, _, key = path.partition("/")

        async def get():
            response = await fs._call_s3("get_object", Bucket=bucket, Key=key, Range=f"bytes=0-{limit}")
            return response, await response["Body"].read()

        try:
            response, data = sync(fs.loop, retrying_async, get, fs, retry=False)
        except FileNotFoundError:
            return None, None
        except StoreUnanswered:
            raise  # the endpoint said nothing until the deadline: a HEAD would wait as long
        except Exception:  # noqa: BLE001 - an empty object, a server without ranges...: a HEAD says
            return None
        total = str(response.get("ContentRange") or "").rpartition("/")[2]
        size = int(total) if total.isdigit() else len(data)
        modified = response.get("LastModified")
        info = FileInfo(uri, size, modified.timestamp() if modified else None)
        return info, (data if size <= limit and len(data) == size else None)

    @staticmethod
    def _refuse_larger(uri: str, size: int, limit: int) -> None:
        if size > limit:
            raise StorageError(
                f"{size:,} bytes, more than the {limit:,} such a file may have: not read", path=uri
            )

    def _check_readable(self, uri: str, path: str, limit: int) -> None:
        if scheme_of(uri) == "file":
            size = self._regular_size(uri, path)
        else:
            found = self.stat(uri)
            if found is None:
                raise StorageError("file not found", path=uri)
            size = found.size
        self._refuse_larger(uri, size, limit)

    @_names_unanswered
    def read_recorded(self, uri: str, size: int) -> bytes:
        """The whole file a checkpoint records with ``size`` bytes (-1: Flink did not know). A
        file of another size is refused before it is read (a 1 KiB SST padded to 50 GB was read
        whole, until MemoryError; the checkpoint is broken either way: verify says so), and
        locally anything but a regular file (a FIFO blocked ``states`` forever)."""
        if size < 0:
            return self.read_bytes(uri, limit=sys.maxsize)
        if scheme_of(uri) == "file":
            found = self._regular_size(uri, self.fs(uri)[1])
        elif size > 0:  # one ranged GET, one byte past the end: no HEAD first
            data = self.read_range(uri, 0, size + 1)
            if len(data) > size:
                raise StorageError(
                    f"larger than the {size:,} bytes the checkpoint records: not read", path=uri
                )
            found = len(data)
            if found == size:
                return data
        else:  # no range of an empty object can be read
            info = self.stat(uri)
            if info is None:
                raise StorageError("file not found", path=uri)
            found = info.size
        if found != size:
            raise StorageError(
                f"ends at byte {found:,}, the checkpoint records {size:,} bytes: not read", path=uri
            )
        return self.read_bytes(uri)

    @staticmethod
    def _regular_size(uri: str, path: str) -> int:
        """A local file's size; anything but a regular file refused (opening a FIFO blocks)."""
        import stat as _stat

        try:
            info = os.stat(path)
        except FileNotFoundError:
            raise StorageError("file not found", path=uri) from None
        except OSError as e:
            raise StorageError(f"cannot stat: {e.strerror or e}", path=uri) from None
        if not _stat.S_ISREG(info.st_mode):
            raise StorageError("not a regular file (a FIFO, device or directory): not read", path=uri)
        return info.st_size

    @_names_unanswered
    def read_range(self, uri: str, start: int, length: int) -> bytes:
        fs, path = self.fs(uri)
        if scheme_of(uri) == "file":
            self._regular_size(uri, path)  # a FIFO's open would block
        try:  # retried here: botocore itself does not retry (see StorageOptions.s3fs_kwargs)
            return retrying(
                lambda: fs.cat_file(path, start=start, end=start + length), fs, s3=scheme_of(uri) == "s3"
            )
        except FileNotFoundError:
            raise StorageError("file not found", path=uri) from None
        except OSError as e:
            raise StorageError(f"cannot read: {e}", path=uri) from None

    @_names_unanswered
    def stat(self, uri: str, fresh: bool = False) -> FileInfo | None:
        """The file's size and mtime, or ``None`` if it does not exist (or is a directory).

        ``fresh``: ask the store (a HEAD on S3), never a listing of its directory cached earlier."""
        fs, path = self.fs(uri)
        if fresh and scheme_of(uri) == "s3":
            fs.invalidate_cache(path)
        try:
            info = retrying(lambda: fs.info(path), fs, s3=scheme_of(uri) == "s3")
        except FileNotFoundError:
            return None
        except PermissionError as e:
            raise StorageError(
                s3_denied(e) if scheme_of(uri) == "s3" else f"cannot stat: {e}", path=uri
            ) from None
        except OSError as e:
            raise StorageError(f"cannot stat: {e}", path=uri) from None
        if info.get("type") == "directory":
            return None
        return FileInfo(uri, int(info.get("size") or 0), _mtime_of(info))

    @_names_unanswered
    def is_file(self, uri: str) -> bool:
        """``uri`` names a file (not a directory, not nothing). On S3 one HEAD of the key, without
        the listing ``stat`` adds to tell a directory from nothing, and none for a bucket."""
        if scheme_of(uri) != "s3":
            return self.stat(uri) is not None
        fs, path = self.fs(uri)
        bucket, _, key = path.partition("/")
        if not key.strip("/"):
            return False  # a bucket is a directory
        try:
            retrying(lambda: fs.call_s3("head_object", Bucket=bucket, Key=key), fs)
        except FileNotFoundError:
            return False
        except StoreUnanswered:
            raise
        except PermissionError as e:
            raise StorageError(s3_denied(e), path=uri) from None
        except Exception as e:  # noqa: BLE001 - botocore errors are not OSErrors
            raise StorageError(f"cannot stat: {s3_problem(e) or first_line(e)}", path=uri) from None
        return True

    @_names_unanswered
    def is_dir(self, uri: str) -> bool:
        fs, path = self.fs(uri)
        try:
            return bool(retrying(lambda: fs.isdir(path), fs, s3=scheme_of(uri) == "s3"))
        except PermissionError as e:
            raise StorageError(
                s3_denied(e) if scheme_of(uri) == "s3" else f"cannot stat: {e}", path=uri
            ) from None
        except OSError as e:
            raise StorageError(f"cannot stat: {e}", path=uri) from None

    def list_files(self, uri: str, notes: WalkNotes | None = None) -> Iterator[FileInfo]:
        """Every file below ``uri`` (recursively). Locally, directory symlinks are walked once and
        their files flagged as links; ``notes`` collects directories, links, aliases and mounts."""
        fs, path = self.fs(uri)
        scheme = scheme_of(uri)
        if scheme == "file":
            yield from walk_local(path, notes=notes)
            return
        if scheme == "s3":
            yield from self._list_s3(fs, path)
            return
        try:
            found = fs.find(path.rstrip("/") + "/", detail=True, withdirs=False)
        except FileNotFoundError:
            return
        except OSError as e:
            raise StorageError(f"cannot list: {e}", path=uri) from None
        for fs_path, info in found.items():
            if info.get("type") == "directory":
                continue
            yield FileInfo(self.to_uri(scheme, fs_path), int(info.get("size") or 0), _mtime_of(info))

    def _list_s3(self, fs, path: str) -> Iterator[FileInfo]:
        """List an S3 prefix with concurrent requests (see :mod:`ckptctl.storage.s3list`)."""
        from fsspec.asyn import sync

        from ckptctl.storage.s3list import list_prefix

        bucket, _, prefix = path.partition("/")
        prefix = prefix.rstrip("/") + "/" if prefix.strip("/") else ""
        try:
            with self._listing(f"s3://{path}") as on_page:
                objects = sync(fs.loop, list_prefix, fs, bucket, prefix, None, on_page)
        except StoreUnanswered as e:
            raise e.at(f"s3://{path}") from None
        except Exception as e:  # noqa: BLE001 - botocore errors are not OSErrors
            raise listing_failed(e, bucket, path) from None
        for key, size, modified in objects:
            yield FileInfo(f"s3://{bucket}/{key}", size, modified.timestamp() if modified else None)

    def present(self, uris: Iterable[str], per_run: int = 5000, unanswered: set[str] | None = None,
                ) -> dict[str, FileInfo]:  # fmt: skip
        """Those of the S3 files ``uris`` that a listing shows, by URI, without a request per file.

        Each directory's files are decided by :func:`~ckptctl.storage.s3list.list_present`: listings
        that start just before the next file not yet seen, so a directory of ``n`` of these files
        among ``P`` pages of others (orphans) costs at most ``min(n, P + runs)`` requests, ``runs``
        being ``n / per_run`` rounded up (consecutive runs listed concurrently). Directories are
        listed concurrently. A directory whose listing fails is left out: its files are then asked
        for one by one, which words the error. ``unanswered`` receives the S3 URIs no listing
        answered for (a failed one, or a key at the top of its bucket, never listed). Not S3:
        nothing (a local stat costs no request)."""
        from fsspec.asyn import sync

        from ckptctl.storage.s3list import list_present

        by_dir: dict[tuple[str, str], list[str]] = {}
        for uri in uris:
            if scheme_of(uri) == "s3":
                directory, _, name = uri[5:].rpartition("/")
                bucket, _, prefix = directory.partition("/")
                if name and prefix:
                    by_dir.setdefault((bucket, prefix + "/"), []).append(name)
                elif unanswered is not None:
                    unanswered.add(uri)
        if not by_dir:
            return {}
        fs, _ = self.fs("s3://" + next(iter(by_dir))[0])

        what = f"{len(by_dir)} directories of referenced files"
        listed: dict[tuple[str, str], int] = {}  # objects listed so far, per directory

        def counted(directory: tuple[str, str], on_page: Callable[[int], None] | None):
            if on_page is None:
                return None

            def count(n: int) -> None:
                listed[directory] = n
                on_page(sum(listed.values()))

            return count

        async def everything(on_page):
            import asyncio

            calls = [
                list_present(fs, d[0], d[1], names, -(-len(names) // per_run), None, counted(d, on_page))
                for d, names in by_dir.items()
            ]
            return zip(by_dir, await asyncio.gather(*calls, return_exceptions=True), strict=True)

        found: dict[str, FileInfo] = {}
        with self._listing(what) as on_page:
            answered = sync(fs.loop, everything, on_page)
        for (bucket, prefix), objects in answered:
            if isinstance(objects, BaseException):
                if unanswered is not None:
                    unanswered.update(f"s3://{bucket}/{prefix}{name}" for name in by_dir[(bucket, prefix)])
                continue
            for key, size, modified in objects:
                uri = f"s3://{bucket}/{key}"
                found[uri] = FileInfo(uri, size, modified.timestamp() if modified else None)
        return found

    def stat_many(self, uris: Iterable[str], workers: int = 16, *, unlisted_is_absent: bool = False,
                  ) -> dict[str, FileInfo | None]:  # fmt: skip
        """Each URI's stat (``None``: no such file), in the order given, without a request per S3
        file: :meth:`present`'s listings answer for the files they show; a file they do not show
        is asked for itself (a listing may lag behind the store, and its HEAD words any error),
        in a thread pool when there are many (a checkpoint names hundreds).

        ``unlisted_is_absent``: a file a listing that answered does not show is absent, with no
        request -- for the callers a wrong "absent" costs nothing but a repeated copy or a
        suffixed name (a destination already copied to, a free trash name); an absent key is two
        requests to s3fs's stat (a HEAD, then a listing)."""
        ordered = list(dict.fromkeys(uris))
        unanswered: set[str] = set()
        found: dict[str, FileInfo | None] = dict(self.present(ordered, unanswered=unanswered))
        rest = [u for u in ordered if u not in found
                and not (unlisted_is_absent and scheme_of(u) == "s3" and u not in unanswered)]  # fmt: skip
        if len(rest) < 64 or workers <= 1 or all(scheme_of(u) == "file" for u in rest):
            found.update((u, self.stat(u)) for u in rest)
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(workers) as pool:
                found.update(zip(rest, pool.map(self.stat, rest), strict=True))
        return {u: found.get(u) for u in ordered}

    @contextlib.contextmanager
    def _listing(self, what: str) -> Iterator[Callable[[int], None] | None]:
        """The ``on_page`` of one listing: reports to :attr:`on_listed`, and says when it ends."""
        report = self.on_listed
        if report is None:
            yield None
            return
        try:
            yield lambda n: report(what, n)
        finally:
            report(what, None)

    def find_metadata(self, uri: str) -> Iterator[FileInfo]:
        """Every ``_metadata`` below ``uri``, without reading the (huge) shared/ and taskowned/ dirs
        of jobs.

        Flink never writes a ``_metadata`` inside ``<job-id>/shared`` or ``<job-id>/taskowned``; a
        directory with that name anywhere else is searched like any other (a root may live below
        ``<fleet>/shared/``). Locally a pruned walk that follows directory symlinks (a ``chk-N``
        moved to another volume); on object stores a walk of delimiter listings that never descends
        into a job's areas either, so it costs one request per directory outside them, not a full
        listing. gc runs it again after the full listing: a checkpoint that completed meanwhile
        shows up as a difference.
        """
        if scheme_of(uri) == "file":
            yield from walk_local(uri[5:], prune_job_areas=True, only="_metadata")
            return
        if scheme_of(uri) != "s3":
            for f in self.list_files(uri):
                if f.uri.endswith("/_metadata"):
                    yield f
            return
        yield from self._walk_s3(uri, only="_metadata")

    def list_checkpoint_areas(self, uri: str, unreadable: list[str] | None = None) -> Iterator[FileInfo]:
        """Every file below ``uri`` except inside a job's ``shared/`` and ``taskowned/``: the
        ``_metadata`` files and the contents of ``chk-N`` and savepoint directories, all that ``ls``
        needs. On S3 a delimiter walk (one request per directory outside the job areas, never one
        per object in a flat ``shared/`` of millions). ``unreadable``: collects the local
        directories below ``uri`` that cannot be read, instead of stopping there."""
        if scheme_of(uri) == "file":
            notes = WalkNotes(unreadable=unreadable) if unreadable is not None else None
            yield from walk_local(uri[5:], prune_job_areas=True, notes=notes)
            return
        if scheme_of(uri) != "s3":
            for f in self.list_files(uri):
                rest = f.uri[len(uri.rstrip("/")) + 1 :].split("/")
                if not any(p in JOB_AREAS and is_job_dir_name(rest[i - 1]) for i, p in enumerate(rest) if i):
                    yield f
            return
        yield from self._walk_s3(uri)

    def _walk_s3(self, uri: str, only: str | None = None) -> Iterator[FileInfo]:
        """Every object below ``uri`` except inside ``<job-id>/shared`` and ``<job-id>/taskowned``
        (and directory marker objects), with one listing that leaves those areas out
        (:func:`~ckptctl.storage.s3list.list_outside`): each job's ``shared/`` rolled up by the
        delimiter, a page that runs into a ``taskowned/`` going on after it. It costs the pages of
        the files outside the areas (the ``_metadata`` and exclusive files of ``chk-N`` and
        savepoint directories): one request for a root of a few jobs, where a walk of delimiter
        listings took 2 J + 1 (the root, each job, its ``chk-N`` directories)."""
        from fsspec.asyn import sync

        from ckptctl.storage.s3list import list_outside

        fs, path = self.fs(uri)
        bucket, _, key = path.rstrip("/").partition("/")
        within = key + "/" if key else ""
        # the root's own name decides whether its shared/ is a job's (a root that is a job directory)
        top = (key or bucket).rpartition("/")[2]
        # a job directory is listed from "…/<job-id>" so that its own shared/ rolls up too
        prefix = key if key and is_job_dir_name(top) else within

        def area_of(k: str) -> str | None:
            parts = [top, *k[len(within) :].split("/")]
            for i in range(1, len(parts) - 1):  # a directory: something follows it
                if parts[i] in JOB_AREAS and is_job_dir_name(parts[i - 1]):
                    return within + "/".join(parts[1 : i + 1]) + "/"
            return None

        try:
            with self._listing(uri) as on_page:
                objects = sync(fs.loop, list_outside, fs, bucket, prefix, area_of, None, on_page, within)
        except StoreUnanswered as e:
            raise e.at(f"s3://{path}") from None
        except Exception as e:  # noqa: BLE001 - botocore errors are not OSErrors
            raise listing_failed(e, bucket, path) from None
        for name, size, modified in objects:
            if name.endswith("/") or (only is not None and name.rpartition("/")[2] != only):
                continue  # a directory marker object ("…/chk-5/"), or not what is asked for
            yield FileInfo(f"s3://{bucket}/{name}", size, modified.timestamp() if modified else None)

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

    # -- writing -------------------------------------------------------------------------
    def write_bytes(self, uri: str, data: bytes) -> None:
        fs, path = self.fs(uri)
        try:
            if scheme_of(uri) == "file":
                os.makedirs(os.path.dirname(path), exist_ok=True)
            with fs.open(path, "wb") as f:
                f.write(data)
        except OSError as e:
            raise StorageError(f"cannot write: {e}", path=uri) from None

    def delete_many(self, uris: list[str]) -> list[tuple[str, str]]:
        """Delete files; returns (uri, error) for those that could not be deleted.

        S3 keys go 1000 per DeleteObjects request; a failed request and the keys a request
        reports as failed are retried under the one retry policy (:func:`retry_delay`). A file
        that is already gone counts as deleted, so an interrupted run can simply be repeated.
        """
        failed: list[tuple[str, str]] = []
        local = [u for u in uris if scheme_of(u) == "file"]
        for uri in local:
            try:
                os.unlink(uri[5:])
            except FileNotFoundError:
                pass
            except OSError as e:
                failed.append((uri, str(e)))
        by_bucket: dict[str, list[str]] = {}
        for uri in uris:
            if scheme_of(uri) == "s3":
                bucket, _, key = uri[5:].partition("/")
                by_bucket.setdefault(bucket, []).append(key)
        for bucket, keys in by_bucket.items():
            fs, _ = self.fs("s3://" + bucket)
            for start in range(0, len(keys), 1000):
                failed += self._delete_s3_batch(fs, bucket, keys[start : start + 1000])
            fs.invalidate_cache()
        return failed

    def _delete_s3_batch(self, fs, bucket, keys) -> list[tuple[str, str]]:
        pending = list(keys)
        last_error: dict[str, str] = {}
        attempt = 0
        while pending:
            try:
                request = {"Objects": [{"Key": k} for k in pending], "Quiet": True}
                response = retrying(
                    lambda r=request: fs.call_s3("delete_objects", Bucket=bucket, Delete=r), fs
                )
            except StoreUnanswered as e:  # each next batch would wait out the same deadline: stop
                raise e.at(f"s3://{bucket}/{pending[0]}") from None
            except Exception as e:  # noqa: BLE001 - retried already: these keys failed
                last_error = {k: f"{type(e).__name__}: {first_line(e)}" for k in pending}
                break
            errors = response.get("Errors") or []
            last_error = {err["Key"]: f"{err.get('Code')}: {err.get('Message')}" for err in errors}
            pending = [k for k in pending if k in last_error]
            delay = retry_delay(Exception("keys failed"), attempt)
            if not pending or delay is None:
                break
            time.sleep(delay)
            attempt += 1
        return [(f"s3://{bucket}/{k}", last_error.get(k, "unknown error")) for k in pending]

    def move_many(self, moves: list[tuple[str, str, int | None]]) -> list[tuple[str, str]]:
        """Move files, each ``(src, dst, size)`` (``size``: the source's size from a listing just
        made, else ``None``: asked for); returns ``(src, error)`` for those not moved. As
        :meth:`move` for each -- copy, check the copy is there with the source's size, delete the
        source; a source already gone is nothing to do; a failure keeps the source -- but within
        one S3 endpoint without a request more than a move needs: concurrent ``CopyObject``s
        (server side; no HEAD of the source when its size is known), a HEAD of each copy (its size,
        and its ETag the copy's: not another object written there since), and the
        sources deleted 1,000 per request. :meth:`move` went one file at a time with five
        requests each (a HEAD of the source, two for the copy, a HEAD of the copy, a delete).

        Two sources given one destination both stay: on S3 the later copy would replace the
        earlier, and the HEAD of each, same size, would let both sources go."""
        shared = {dst for dst, n in Counter(m[1] for m in moves).items() if n > 1}
        errors = [
            (src, f"another file moves to {dst} too: source kept") for src, dst, _s in moves if dst in shared
        ]
        moves = [m for m in moves if m[1] not in shared]
        copy_here = [m for m in moves if scheme_of(m[0]) == scheme_of(m[1]) == "s3" and m[2] is not None
                     and m[2] < COPY_OBJECT_LIMIT]  # fmt: skip
        elsewhere = set(moves) - set(copy_here)
        for src, dst, _size in (m for m in moves if m in elsewhere):
            try:
                self.move(src, dst)
            except StorageError as e:
                errors.append((src, str(e)))
        if not copy_here:
            return errors
        from fsspec.asyn import sync

        fs, _ = self.fs(copy_here[0][0])

        async def one(gate, src: str, dst: str, size: int) -> str | None:
            """``None``: copied and checked; ``"gone"``: no source; else why it was not copied."""
            src_bucket, _, src_key = src[5:].partition("/")
            dst_bucket, _, dst_key = dst[5:].partition("/")
            async with gate:
                try:
                    made = await retrying_async(lambda: fs._call_s3(
                        "copy_object", Bucket=dst_bucket, Key=dst_key, CopySource={"Bucket": src_bucket, "Key": src_key}
                    ), fs)  # fmt: skip
                except FileNotFoundError:
                    # the source gone (an interrupted run repeated), or no such destination bucket
                    try:
                        there = await _exists(fs, src_bucket, src_key)
                    except StoreUnanswered as e:
                        raise e.at(src) from None
                    except Exception as e:  # noqa: BLE001 - botocore errors are not OSErrors
                        return f"cannot move to {dst}: {type(e).__name__}: {first_line(e)}"
                    return f"cannot move to {dst}: no such bucket" if there else "gone"
                except StoreUnanswered as e:  # each next copy would wait out the same deadline: stop
                    raise e.at(src) from None
                except Exception as e:  # noqa: BLE001 - botocore errors are not OSErrors
                    return f"cannot move to {dst}: {type(e).__name__}: {first_line(e)}"
                try:
                    copied = await retrying_async(
                        lambda: fs._call_s3("head_object", Bucket=dst_bucket, Key=dst_key), fs
                    )
                except StoreUnanswered as e:
                    raise e.at(dst) from None
                except Exception:  # noqa: BLE001 - not there, or not readable: the source stays
                    copied = None
                if copied is None or copied.get("ContentLength") != size:
                    return f"the copy at {dst} is missing or has the wrong size: source kept"
                etag = (made.get("CopyObjectResult") or {}).get("ETag")
                if etag and copied.get("ETag") and etag != copied["ETag"]:  # replaced since, same size
                    return f"the copy at {dst} was replaced by another object: source kept"
                return None

        async def everything():
            import asyncio

            gate = asyncio.Semaphore(MOVE_CONCURRENCY)
            return await asyncio.gather(*(one(gate, src, dst, size) for src, dst, size in copy_here))

        outcomes = sync(fs.loop, everything)
        copied = [m for m, why in zip(copy_here, outcomes, strict=True) if why is None]
        errors += [
            (m[0], why) for m, why in zip(copy_here, outcomes, strict=True) if why not in (None, "gone")
        ]
        failed = dict(self.delete_many([src for src, _dst, _size in copied]))
        errors += [
            (src, f"copied to {dst} but could not delete: {failed[src]}")
            for src, dst, _s in copied
            if src in failed
        ]
        return errors

    def move(self, src: str, dst: str) -> None:
        """Move one file: copy, check the copy is there with the source's size, then delete the
        source. A source already gone is nothing to do; any failure on the destination's side (no
        such bucket, a missing local directory, no permission) is an error naming the destination,
        and the source stays."""
        if scheme_of(src) == "file" and scheme_of(dst) == "file":
            os.makedirs(os.path.dirname(dst[5:]), exist_ok=True)
            os.replace(src[5:], dst[5:])
            return
        source = self.stat(src)
        if source is None:
            return  # already gone (an interrupted run repeated)
        fs, src_path = self.fs(src)
        dst_fs, dst_path = self.fs(dst)
        try:
            if scheme_of(dst) == "file":
                os.makedirs(os.path.dirname(dst_path), exist_ok=True)
            if fs is dst_fs:
                retrying(lambda: fs.copy(src_path, dst_path), fs)
            else:
                data = retrying(lambda: fs.cat_file(src_path), fs, s3=scheme_of(src) == "s3")
                retrying(lambda: dst_fs.pipe_file(dst_path, data), dst_fs, s3=scheme_of(dst) == "s3")
        except StoreUnanswered as e:  # not this file's error: every next move would wait as long
            raise e.at(src) from None
        except Exception as e:  # noqa: BLE001 - botocore errors are not OSErrors
            raise StorageError(
                f"cannot move to {dst}: {type(e).__name__}: {first_line(e)}", path=src
            ) from None
        copied = self.stat(dst)
        if copied is None or copied.size != source.size:
            raise StorageError(f"the copy at {dst} is missing or has the wrong size: source kept", path=src)
        failed = self.delete_many([src])
        if failed:
            raise StorageError(f"copied to {dst} but could not delete: {failed[0][1]}", path=src)


COPY_OBJECT_LIMIT = 5 << 30  # S3's largest CopyObject source; a larger file takes s3fs's multipart copy
MOVE_CONCURRENCY = 32  # copies in flight in one move_many

_SHARED: dict[StorageOptions, Storage] = {}
_SHARED_LOCK = threading.Lock()


async def _exists(fs: Any, bucket: str, key: str) -> bool:
    try:
        await retrying_async(lambda: fs._call_s3("head_object", Bucket=bucket, Key=key), fs)
    except FileNotFoundError:
        return False
    return True


def _read_all(fs: Any, path: str) -> bytes:
    with fs.open(path, "rb") as f:
        return f.read()


def _get_object(fs: Any, path: str) -> bytes:
    """An S3 object whole, in one GET. Not ``fs.cat_file``: s3fs asks for the size first (a HEAD
    per read) to split large objects into concurrent ranges, which files read whole -- a
    ``_metadata``, a backend's meta file -- never need; an empty object needs no range either."""
    from fsspec.asyn import sync

    bucket, _, key = path.partition("/")

    async def get() -> bytes:
        response = await fs._call_s3("get_object", Bucket=bucket, Key=key)
        try:
            return await response["Body"].read()
        finally:
            response["Body"].close()

    return sync(fs.loop, get)


def _mtime_of(info: dict[str, Any]) -> float | None:
    value = info.get("mtime", info.get("LastModified", info.get("last_modified")))
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.timestamp()
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
