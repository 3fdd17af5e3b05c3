"""Listing what lies below a URI of a :class:`~ckptctl.storage.Storage`: every file, the files
outside the jobs' ``shared/`` and ``taskowned/`` (``_metadata`` found without listing millions of
shared files), and which of many given files exist (listings, not a request each).

Apart from the :class:`~ckptctl.storage.Storage` so that the walks and their S3 listings (each
counted to :attr:`~ckptctl.storage.Storage.on_listed`) stay together. Each function takes the
storage it lists through and calls back its public methods, so a subclass's answers hold.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator

from ckptctl.errors import StorageError, StoreUnanswered
from ckptctl.storage.listing import JOB_AREAS, FileInfo, WalkNotes, is_job_dir_name, walk_local
from ckptctl.storage.reading import mtime_of, s3_denied
from ckptctl.storage.retry import not_s3, s3_problem
from ckptctl.storage.uri import scheme_of


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


def list_files(storage, uri: str, notes: WalkNotes | None = None) -> Iterator[FileInfo]:
    """Every file below ``uri`` (recursively). Locally, directory symlinks are walked once and
    their files flagged as links; ``notes`` collects directories, links, aliases and mounts."""
    fs, path = storage.fs(uri)
    scheme = scheme_of(uri)
    if scheme == "file":
        yield from walk_local(path, notes=notes)
        return
    if scheme == "s3":
        yield from _list_s3(storage, fs, path)
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
        yield FileInfo(storage.to_uri(scheme, fs_path), int(info.get("size") or 0), mtime_of(info))


def _list_s3(storage, fs, path: str) -> Iterator[FileInfo]:
    """List an S3 prefix with concurrent requests (see :mod:`ckptctl.storage.s3list`)."""
    from fsspec.asyn import sync

    from ckptctl.storage.s3list import list_prefix

    bucket, _, prefix = path.partition("/")
    prefix = prefix.rstrip("/") + "/" if prefix.strip("/") else ""
    try:
        with _listing(storage, f"s3://{path}") as on_page:
            objects = sync(fs.loop, list_prefix, fs, bucket, prefix, None, on_page)
    except StoreUnanswered as e:
        raise e.at(f"s3://{path}") from None
    except Exception as e:  # noqa: BLE001 - botocore errors are not OSErrors
        raise listing_failed(e, bucket, path) from None
    for key, size, modified in objects:
        yield FileInfo(f"s3://{bucket}/{key}", size, modified.timestamp() if modified else None)


def present(storage, uris: Iterable[str], per_run: int = 5000, unanswered: set[str] | None = None,
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
    fs, _ = storage.fs("s3://" + next(iter(by_dir))[0])

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
    with _listing(storage, what) as on_page:
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


def stat_many(storage, uris: Iterable[str], workers: int = 16, *, unlisted_is_absent: bool = False,
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
    found: dict[str, FileInfo | None] = dict(storage.present(ordered, unanswered=unanswered))
    rest = [u for u in ordered if u not in found
            and not (unlisted_is_absent and scheme_of(u) == "s3" and u not in unanswered)]  # fmt: skip
    if len(rest) < 64 or workers <= 1 or all(scheme_of(u) == "file" for u in rest):
        found.update((u, storage.stat(u)) for u in rest)
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(workers) as pool:
            found.update(zip(rest, pool.map(storage.stat, rest), strict=True))
    return {u: found.get(u) for u in ordered}


@contextlib.contextmanager
def _listing(storage, what: str) -> Iterator[Callable[[int], None] | None]:
    """The ``on_page`` of one listing: reports to :attr:`on_listed`, and says when it ends."""
    report = storage.on_listed
    if report is None:
        yield None
        return
    try:
        yield lambda n: report(what, n)
    finally:
        report(what, None)


def find_metadata(storage, uri: str) -> Iterator[FileInfo]:
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
        for f in storage.list_files(uri):
            if f.uri.endswith("/_metadata"):
                yield f
        return
    yield from _walk_s3(storage, uri, only="_metadata")


def list_checkpoint_areas(storage, uri: str, unreadable: list[str] | None = None) -> Iterator[FileInfo]:
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
        for f in storage.list_files(uri):
            rest = f.uri[len(uri.rstrip("/")) + 1 :].split("/")
            if not any(p in JOB_AREAS and is_job_dir_name(rest[i - 1]) for i, p in enumerate(rest) if i):
                yield f
        return
    yield from _walk_s3(storage, uri)


def _walk_s3(storage, uri: str, only: str | None = None) -> Iterator[FileInfo]:
    """Every object below ``uri`` except inside ``<job-id>/shared`` and ``<job-id>/taskowned``
    (and directory marker objects), with one listing that leaves those areas out
    (:func:`~ckptctl.storage.s3list.list_outside`): each job's ``shared/`` rolled up by the
    delimiter, a page that runs into a ``taskowned/`` going on after it. It costs the pages of
    the files outside the areas (the ``_metadata`` and exclusive files of ``chk-N`` and
    savepoint directories): one request for a root of a few jobs, where a walk of delimiter
    listings took 2 J + 1 (the root, each job, its ``chk-N`` directories)."""
    from fsspec.asyn import sync

    from ckptctl.storage.s3list import list_outside

    fs, path = storage.fs(uri)
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
        with _listing(storage, uri) as on_page:
            objects = sync(fs.loop, list_outside, fs, bucket, prefix, area_of, None, on_page, within)
    except StoreUnanswered as e:
        raise e.at(f"s3://{path}") from None
    except Exception as e:  # noqa: BLE001 - botocore errors are not OSErrors
        raise listing_failed(e, bucket, path) from None
    for name, size, modified in objects:
        if name.endswith("/") or (only is not None and name.rpartition("/")[2] != only):
            continue  # a directory marker object ("…/chk-5/"), or not what is asked for
        yield FileInfo(f"s3://{bucket}/{name}", size, modified.timestamp() if modified else None)
