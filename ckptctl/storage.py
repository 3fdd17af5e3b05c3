"""Storage access through fsspec: one place that knows about URIs, schemes and endpoints.

Everything above this module speaks canonical URIs: ``file:/abs/path`` (the single-slash form
Flink itself writes) and ``s3://bucket/key`` (``s3a``/``s3n``/``s3p`` are folded into ``s3`` so the
same object is never seen under two names). Heavy imports (s3fs, botocore) happen only when an
``s3://`` URI is first touched, which keeps ``ckptctl --help`` instant.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import os
import posixpath
import stat as stat_mod
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from ckptctl.errors import StorageError

S3_ALIASES = ("s3a", "s3n", "s3p")


def normalize_uri(location: str) -> str:
    """Canonical URI of a local path or storage URI, with Flink ``Path`` semantics.

    Flink's ``Path`` turns backslashes into slashes, collapses runs of slashes and then applies
    ``URI.normalize()`` (drops ``.`` segments, resolves ``..``), so ``s3://b/ck//job/./shared/x``
    and ``s3://b/ck/job/shared/sub/../x`` name the same object Flink opens. ckptctl must see the
    same file, or gc would keep the literal spelling alive and delete the real one. A ``..`` that
    climbs above the bucket stays in the result (Flink keeps it too): see :func:`escapes`.
    """
    loc = java_trim(location)
    scheme, sep, rest = loc.partition("://")
    if sep and scheme.lower() in (*S3_ALIASES, "s3"):
        bucket, slash, key = rest.partition("/")
        if not slash:
            return "s3://" + bucket
        return "s3://" + bucket + "/" + _clean_key(key)
    if sep and scheme.lower() == "file":
        # file:///x -> file:/x ; file://localhost/x -> file:/x
        path = rest[rest.index("/") :] if not rest.startswith("/") and "/" in rest else rest
        return "file:" + _clean_local(path)
    if loc.startswith("file:"):
        return "file:" + _clean_local(loc[5:])
    if sep:
        return loc.rstrip("/")
    return "file:" + _clean_local(os.path.abspath(os.path.expanduser(loc)))


def java_trim(text: str) -> str:
    """``String.trim()``: Flink's ``Path(String)`` drops every character up to U+0020 at both ends
    (Python's ``strip()`` drops other ones), so ``shared/x `` names the file ``shared/x``."""
    i, j = 0, len(text)
    while i < j and text[i] <= " ":
        i += 1
    while j > i and text[j - 1] <= " ":
        j -= 1
    return text[i:j]


def check_user_path(what: str, value: str) -> None:
    """A path the user typed (or a plan file carries) must mean exactly what it says: not empty
    (an unset ``$ROOT`` is not the current directory), no blanks at its ends that Flink-style
    trimming would silently drop, no NUL, encodable."""
    from ckptctl.errors import CkptError

    if not value or java_trim(value) != value:
        raise CkptError(f"{what} {value!r} is empty or has blanks or control characters at an end")
    if "\x00" in value:
        raise CkptError(f"{what} {value!r} contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise CkptError(f"{what} {value!r} is not valid Unicode") from None


SUPPORTED_SCHEMES = ("file", "s3")


def _clean_key(key: str) -> str:
    """An object key as Flink's ``Path`` normalises it: no empty, ``.`` or resolvable ``..`` parts."""
    out: list[str] = []
    for part in key.replace("\\", "/").split("/"):
        if part in ("", "."):
            continue
        if part == ".." and out and out[-1] != "..":
            out.pop()
        else:
            out.append(part)
    return "/".join(out)


def _clean_local(path: str) -> str:
    path = "/" + path.replace("\\", "/").lstrip("/")
    cleaned = posixpath.normpath(path)
    return "/" if cleaned == "//" else cleaned


def escapes(uri: str) -> bool:
    """True if a normalised URI still climbs above its bucket (``s3://b/../x``): it names no
    object under any root, whatever its prefix looks like."""
    return uri.startswith("s3://") and ("/../" in uri or uri.endswith("/.."))


def is_normal(uri: str) -> bool:
    """True if ``uri`` is already in the form :func:`normalize_uri` gives (checked cheaply)."""
    if not uri.startswith(("s3://", "file:")):
        return True
    body = uri[5:]
    return not (
        "//" in body or "/./" in body or "/../" in body or "\\" in body
        or body.endswith(("/.", "/..")) or (body.endswith("/") and len(body) > 1)
    )  # fmt: skip


def resolve_relative(base_dir: str, relative: str) -> str:
    """The file a ``RelativeFileStateHandle`` names: ``new Path(exclusiveDir, new Path(relative))``.

    As in Flink, a relative path with a scheme is absolute, a leading slash is dropped, and
    ``..`` is resolved, so ``../shared/x`` in ``chk-9`` is the job's ``shared/x``.
    """
    colon, slash = relative.find(":"), relative.find("/")
    if colon > 0 and (slash < 0 or colon < slash):
        return normalize_uri(relative)
    return normalize_uri(base_dir.rstrip("/") + "/" + relative.lstrip("/\\"))


def scheme_of(uri: str) -> str:
    return "s3" if uri.startswith("s3://") else "file" if uri.startswith("file:") else uri.split(":", 1)[0]


def join(uri: str, *names: str) -> str:
    out = uri.rstrip("/")
    for name in names:
        out = out + "/" + name.strip("/")
    return out


def parent(uri: str) -> str:
    head, _, _ = uri.rstrip("/").rpartition("/")
    if head in ("file:", "s3:/"):
        return head + "/"
    return head


def basename(uri: str) -> str:
    return uri.rstrip("/").rpartition("/")[2]


def is_under(uri: str, root: str) -> bool:
    """True if ``uri`` is ``root`` or inside it; compares whole path segments (job-a is not job-ab)."""
    root = root.rstrip("/")
    return uri == root or uri.startswith(root + "/")


class FileInfo(NamedTuple):
    """One listed file. ``mtime`` is seconds since the epoch, ``None`` when the storage has none.

    A NamedTuple: listings hold millions of these, and tuples are the cheapest immutable record.
    """

    uri: str
    size: int
    mtime: float | None
    is_link: bool = False


S3_CONNECT_TIMEOUT = 3.0  # seconds
# An endpoint that accepts the connection and never answers must not hang a command: each request
# gets a read timeout, and one storage call (with every retry) a total deadline. Both can be set
# for slow links (and small ones make the tests fast).
S3_READ_TIMEOUT = 5.0  # seconds, CKPTCTL_S3_READ_TIMEOUT
S3_DEADLINE = 20.0  # seconds per storage call, retries included, CKPTCTL_S3_DEADLINE


def _env_seconds(name: str, default: float) -> float:
    value = os.environ.get(name)
    if not value:
        return default
    try:
        seconds = float(value)
    except ValueError:
        raise StorageError(f"{name}={value!r} is not a number of seconds") from None
    if not (seconds > 0 and seconds < 1e6):
        raise StorageError(f"{name}={value!r} must be a positive number of seconds")
    return seconds

_NO_CREDENTIALS = ("NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError")
_UNREACHABLE = ("EndpointConnectionError", "ConnectTimeoutError")
_NO_ANSWER = ("ReadTimeoutError", "TimeoutError", "ServerTimeoutError")


def s3_problem(error: BaseException) -> str | None:
    """One line for S3 failures that retrying cannot fix (no credentials, endpoint unreachable),
    saying what to do; ``None`` for anything else. Matched by class name: botocore stays lazy."""
    names = {cls.__name__ for cls in type(error).__mro__}
    if names & set(_NO_CREDENTIALS):
        return (
            f"no AWS credentials ({error}): set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
            "(and AWS_SESSION_TOKEN for temporary ones), or AWS_PROFILE naming a profile in "
            "~/.aws/credentials, or run with an instance or container role"
        )
    if "ProfileNotFound" in names:
        return f"{error}: AWS_PROFILE names no profile in ~/.aws/config or ~/.aws/credentials"
    if names & set(_UNREACHABLE):
        return (
            f"cannot reach the S3 endpoint ({error}); check --s3-endpoint / AWS_ENDPOINT_URL_S3 "
            "and that the server is running"
        )
    return None


@dataclass(frozen=True)
class StorageOptions:
    """Everything needed to reach the stores, and the one thing that travels to workers (gc's
    process, Spark executors): a :class:`Storage` is rebuilt from it (:meth:`Storage.shared`).

    The endpoint (MinIO, Ceph, moto), the credentials the driver found in its environment (all
    ``None``: botocore's own chain decides, e.g. profile files or an instance role, wherever the
    storage is built) and the connect timeout. Picklable; the secrets stay out of ``repr``.
    """

    s3_endpoint: str | None = None
    aws_access_key_id: str | None = field(default=None, repr=False)
    aws_secret_access_key: str | None = field(default=None, repr=False)
    aws_session_token: str | None = field(default=None, repr=False)
    aws_profile: str | None = None
    aws_region: str | None = None
    connect_timeout: float = S3_CONNECT_TIMEOUT
    read_timeout: float = S3_READ_TIMEOUT

    @classmethod
    def from_env(cls, s3_endpoint: str | None = None) -> StorageOptions:
        env = os.environ.get
        endpoint = s3_endpoint or env("CKPTCTL_S3_ENDPOINT") or env("AWS_ENDPOINT_URL_S3") or env("AWS_ENDPOINT_URL")
        if endpoint and not endpoint.strip().lower().startswith(("http://", "https://")):
            raise StorageError(
                f"the S3 endpoint '{endpoint}' is not a URL: give it with its scheme, e.g. http://{endpoint}"
            )
        return cls(
            s3_endpoint=endpoint,
            aws_access_key_id=env("AWS_ACCESS_KEY_ID") or None,
            aws_secret_access_key=env("AWS_SECRET_ACCESS_KEY") or None,
            aws_session_token=env("AWS_SESSION_TOKEN") or None,
            aws_profile=env("AWS_DEFAULT_PROFILE") or env("AWS_PROFILE") or None,  # botocore's order
            aws_region=env("AWS_DEFAULT_REGION") or None,
            read_timeout=_env_seconds("CKPTCTL_S3_READ_TIMEOUT", S3_READ_TIMEOUT),
        )

    def s3fs_kwargs(self) -> dict[str, Any]:
        # a closed or unreachable endpoint must fail in seconds: a bounded connect timeout and no
        # botocore retries on top of s3fs's own (a few quick ones) and ckptctl's back-off
        # (_retrying), which retries throttling and 5xx but stops at once on an unreachable
        # endpoint or missing credentials (see s3_problem). botocore's own retry modes cannot do
        # that: they count a refused connection as transient and back off on it.
        # s3fs's own retries (of timeouts among others) are off too: ckptctl's deadline bounds them
        kwargs: dict[str, Any] = {
            "config_kwargs": {
                "connect_timeout": self.connect_timeout, "read_timeout": self.read_timeout,
                "retries": {"max_attempts": 1},
            },
        }  # fmt: skip
        client: dict[str, Any] = {}
        if self.s3_endpoint:
            client["endpoint_url"] = self.s3_endpoint
            kwargs["endpoint_url"] = self.s3_endpoint
        if self.aws_region:
            client["region_name"] = self.aws_region
        if client:
            kwargs["client_kwargs"] = client
        if self.aws_access_key_id or self.aws_secret_access_key:
            kwargs["key"], kwargs["secret"] = self.aws_access_key_id, self.aws_secret_access_key
            if self.aws_session_token:
                kwargs["token"] = self.aws_session_token
        if self.aws_profile:
            kwargs["profile"] = self.aws_profile
        return kwargs


class Storage:
    """List, stat, read and delete files by canonical URI, on any fsspec filesystem."""

    def __init__(self, options: StorageOptions | None = None) -> None:
        self.options = options or StorageOptions.from_env()
        self._filesystems: dict[str, Any] = {}

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
            return "file:" + _clean_local(fs_path)
        if scheme == "s3":
            return "s3://" + fs_path.lstrip("/")
        return fs_path

    # -- reading -------------------------------------------------------------------------
    def read_bytes(self, uri: str, limit: int | None = None) -> bytes:
        """The whole file. With ``limit``, a file larger than that (or, locally, anything but a
        regular file: a FIFO would block forever, ``/dev/zero`` never end) is refused first."""
        fs, path = self.fs(uri)
        if limit is not None:
            self._check_readable(uri, path, limit)
        try:
            return _retrying(lambda: fs.cat_file(path) if scheme_of(uri) == "s3" else _read_all(fs, path))
        except FileNotFoundError:
            raise StorageError("file not found", path=uri) from None
        except PermissionError:
            raise StorageError("permission denied", path=uri) from None
        except IsADirectoryError:
            raise StorageError("is a directory, not a file", path=uri) from None
        except OSError as e:
            raise StorageError(f"cannot read: {e}", path=uri) from None

    def _check_readable(self, uri: str, path: str, limit: int) -> None:
        if scheme_of(uri) == "file":
            import stat as _stat

            try:
                info = os.stat(path)
            except FileNotFoundError:
                raise StorageError("file not found", path=uri) from None
            except OSError as e:
                raise StorageError(f"cannot stat: {e.strerror or e}", path=uri) from None
            if not _stat.S_ISREG(info.st_mode):
                raise StorageError("not a regular file (a FIFO, device or directory): not read", path=uri)
            size = info.st_size
        else:
            found = self.stat(uri)
            if found is None:
                raise StorageError("file not found", path=uri)
            size = found.size
        if size > limit:
            raise StorageError(f"{size:,} bytes, more than the {limit:,} a _metadata may have: not read", path=uri)

    def read_range(self, uri: str, start: int, length: int) -> bytes:
        fs, path = self.fs(uri)
        try:  # retried here: botocore itself does not retry (see StorageOptions.s3fs_kwargs)
            return _retrying(lambda: fs.cat_file(path, start=start, end=start + length))
        except FileNotFoundError:
            raise StorageError("file not found", path=uri) from None
        except OSError as e:
            raise StorageError(f"cannot read: {e}", path=uri) from None

    def stat(self, uri: str, fresh: bool = False) -> FileInfo | None:
        """The file's size and mtime, or ``None`` if it does not exist (or is a directory).

        ``fresh``: ask the store (a HEAD on S3), never a listing of its directory cached earlier."""
        fs, path = self.fs(uri)
        if fresh and scheme_of(uri) == "s3":
            fs.invalidate_cache(path)
        try:
            info = _retrying(lambda: fs.info(path))
        except FileNotFoundError:
            return None
        except OSError as e:
            raise StorageError(f"cannot stat: {e}", path=uri) from None
        if info.get("type") == "directory":
            return None
        return FileInfo(uri, int(info.get("size") or 0), _mtime_of(info))

    def is_dir(self, uri: str) -> bool:
        fs, path = self.fs(uri)
        try:
            return bool(fs.isdir(path))
        except OSError as e:
            raise StorageError(f"cannot stat: {e}", path=uri) from None

    def list_files(self, uri: str, notes: WalkNotes | None = None) -> Iterator[FileInfo]:
        """Every file below ``uri`` (recursively). Locally, directory symlinks are walked once and
        their files flagged as links; ``notes`` collects directories, links, aliases and mounts."""
        fs, path = self.fs(uri)
        scheme = scheme_of(uri)
        if scheme == "file":
            yield from _walk_local(path, notes=notes)
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
        """List an S3 prefix with concurrent requests (see :mod:`ckptctl.s3list`)."""
        from fsspec.asyn import sync

        from ckptctl.s3list import list_prefix

        bucket, _, prefix = path.partition("/")
        prefix = prefix.rstrip("/") + "/" if prefix.strip("/") else ""
        try:
            objects = sync(fs.loop, list_prefix, fs, bucket, prefix)
        except Exception as e:  # noqa: BLE001 - botocore errors are not OSErrors
            if s3_problem(e):
                raise StorageError(s3_problem(e), path=f"s3://{path}") from None
            if "NoSuchBucket" in str(e) or isinstance(e, FileNotFoundError):
                raise StorageError("no such bucket", path=f"s3://{bucket}") from None
            raise StorageError(f"cannot list: {type(e).__name__}: {e}", path=f"s3://{path}") from None
        for key, size, modified in objects:
            yield FileInfo(f"s3://{bucket}/{key}", size, modified.timestamp() if modified else None)

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
            yield from _walk_local(uri[5:], prune_job_areas=True, only="_metadata")
            return
        if scheme_of(uri) != "s3":
            for f in self.list_files(uri):
                if f.uri.endswith("/_metadata"):
                    yield f
            return
        yield from self._walk_s3(uri, only="_metadata")

    def list_checkpoint_areas(self, uri: str) -> Iterator[FileInfo]:
        """Every file below ``uri`` except inside a job's ``shared/`` and ``taskowned/``: the
        ``_metadata`` files and the contents of ``chk-N`` and savepoint directories, all that ``ls``
        needs. On S3 a delimiter walk (one request per directory outside the job areas, never one
        per object in a flat ``shared/`` of millions)."""
        if scheme_of(uri) == "file":
            yield from _walk_local(uri[5:], prune_job_areas=True)
            return
        if scheme_of(uri) != "s3":
            for f in self.list_files(uri):
                rest = f.uri[len(uri.rstrip("/")) + 1 :].split("/")
                if not any(p in JOB_AREAS and is_job_dir_name(rest[i - 1]) for i, p in enumerate(rest) if i):
                    yield f
            return
        yield from self._walk_s3(uri)

    def _walk_s3(self, uri: str, only: str | None = None) -> Iterator[FileInfo]:
        """Delimiter listings from ``uri`` down, never into ``<job-id>/shared`` or ``<job-id>/taskowned``."""
        fs, path = self.fs(uri)
        stack = [path.rstrip("/")]
        while stack:
            current = stack.pop()
            try:
                entries = _retrying(lambda c=current: fs.ls(c, detail=True, refresh=True))
            except FileNotFoundError:
                continue
            except StorageError:
                raise
            except Exception as e:  # noqa: BLE001 - botocore errors are not OSErrors
                if s3_problem(e):
                    raise StorageError(s3_problem(e), path="s3://" + current) from None
                raise StorageError(f"cannot list: {type(e).__name__}: {e}", path="s3://" + current) from None
            in_job = is_job_dir_name(current.rpartition("/")[2])
            for info in entries:
                name = info["name"].rstrip("/")
                base = name.rpartition("/")[2]
                if name == current:
                    continue  # the directory's own marker object ("…/chk-5/"), not a file in it
                if info.get("type") == "directory":
                    if not (in_job and base in JOB_AREAS):
                        stack.append(name)
                elif only is None or base == only:
                    yield FileInfo("s3://" + name, int(info.get("size") or 0), _mtime_of(info))

    # -- time ----------------------------------------------------------------------------
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
            response = _retrying(lambda: fs.call_s3("list_objects_v2", Bucket=bucket, MaxKeys=1))
            date = response["ResponseMetadata"]["HTTPHeaders"]["date"]
            return email.utils.parsedate_to_datetime(date).timestamp(), "S3 Date header"
        except Exception as e:  # noqa: BLE001 - any failure: say so, gc refuses
            return None, f"no S3 Date header ({type(e).__name__}: {_first_line(e)})"

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
        reports as failed are retried under the one retry policy (:func:`_retry_delay`). A file
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
                response = _retrying(lambda r=request: fs.call_s3("delete_objects", Bucket=bucket, Delete=r))
            except Exception as e:  # noqa: BLE001 - retried already: these keys failed
                last_error = {k: f"{type(e).__name__}: {_first_line(e)}" for k in pending}
                break
            errors = response.get("Errors") or []
            last_error = {err["Key"]: f"{err.get('Code')}: {err.get('Message')}" for err in errors}
            pending = [k for k in pending if k in last_error]
            delay = _retry_delay(Exception("keys failed"), attempt)
            if not pending or delay is None:
                break
            time.sleep(delay)
            attempt += 1
        return [(f"s3://{bucket}/{k}", last_error.get(k, "unknown error")) for k in pending]

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
                _retrying(lambda: fs.copy(src_path, dst_path))
            else:
                data = _retrying(lambda: fs.cat_file(src_path))
                _retrying(lambda: dst_fs.pipe_file(dst_path, data))
        except Exception as e:  # noqa: BLE001 - botocore errors are not OSErrors
            raise StorageError(f"cannot move to {dst}: {type(e).__name__}: {_first_line(e)}", path=src) from None
        copied = self.stat(dst)
        if copied is None or copied.size != source.size:
            raise StorageError(f"the copy at {dst} is missing or has the wrong size: source kept", path=src)
        failed = self.delete_many([src])
        if failed:
            raise StorageError(f"copied to {dst} but could not delete: {failed[0][1]}", path=src)

    def remove_empty_dirs(self, uri: str) -> None:
        """Remove empty directories below and including ``uri`` (local only; object stores have none)."""
        if scheme_of(uri) != "file":
            return
        for dirpath, _dirs, _files in sorted(os.walk(uri[5:]), key=lambda t: -len(t[0])):
            with contextlib.suppress(OSError):  # not empty: keep it
                os.rmdir(dirpath)


_SHARED: dict[StorageOptions, Storage] = {}
_SHARED_LOCK = threading.Lock()


def _read_all(fs: Any, path: str) -> bytes:
    with fs.open(path, "rb") as f:
        return f.read()


# The one retry policy of storage calls (on top of s3fs's few quick retries of one request):
# attempts, and the back-off before attempt n+1 of min(RETRY_BASE * 2**n, RETRY_CAP) seconds.
RETRY_ATTEMPTS = 8
RETRY_BASE = 0.1
RETRY_CAP = 5.0
_FINAL = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [""])[0][:200]


def _retry_delay(error: Exception, attempt: int) -> float | None:
    """Seconds to wait before trying again after ``error``, or ``None``: give up. Answers that
    will not change (missing file, no permission, a directory) and failures retrying cannot fix
    (no credentials, no server: :func:`s3_problem`) are final, as is the last attempt."""
    if isinstance(error, _FINAL) or attempt >= RETRY_ATTEMPTS - 1 or s3_problem(error):
        return None
    return min(RETRY_BASE * 2**attempt, RETRY_CAP)


def _retrying(call):
    """Run a storage call, retrying transient failures (throttling, 5xx, resets, a read timeout)
    with back-off, within a total deadline (:data:`S3_DEADLINE`)."""
    attempt = 0
    give_up = time.monotonic() + _env_seconds("CKPTCTL_S3_DEADLINE", S3_DEADLINE)
    while True:
        try:
            return call()
        except Exception as e:  # noqa: BLE001 - botocore/aiohttp errors have no common base
            delay = _retry_delay(e, attempt)
            if delay is None:
                raise
            if time.monotonic() + delay >= give_up:
                raise _past_deadline(e) from None
            time.sleep(delay)
            attempt += 1


def _past_deadline(error: Exception) -> Exception:
    """The error to raise when retries ran out of time: one line that says the server did not answer."""
    names = {cls.__name__ for cls in type(error).__mro__}
    if names & set(_NO_ANSWER):
        return StorageError(
            f"the S3 endpoint accepted the connection but did not answer in time ({type(error).__name__}); "
            "retried until the deadline (CKPTCTL_S3_DEADLINE). Is --s3-endpoint an S3 server?"
        )
    return error


async def retrying_async(call):
    """:func:`_retrying` for a coroutine function (the concurrent S3 listing)."""
    attempt = 0
    give_up = time.monotonic() + _env_seconds("CKPTCTL_S3_DEADLINE", S3_DEADLINE)
    while True:
        try:
            return await call()
        except Exception as e:  # noqa: BLE001 - SlowDown, InternalError, connection resets
            delay = _retry_delay(e, attempt)
            if delay is None:
                raise
            if time.monotonic() + delay >= give_up:
                raise _past_deadline(e) from None
            await asyncio.sleep(delay)
            attempt += 1


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


def _contains_walk_root(link: str, root: str) -> bool:
    """Whether the directory a symlink points at is the walk's root or one of its ancestors."""
    try:
        target = os.path.realpath(link)
        top = os.path.realpath(root)
    except OSError:
        return True
    return top == target or top.startswith(target.rstrip("/") + "/")


# Directory names Flink writes no ``_metadata`` into, when they sit right below a job directory
# (a 32-hex JobID). The same name anywhere else is an ordinary directory (a platform's
# ``<fleet>/shared/ckpts`` root): pruning it by name alone hides whole jobs from gc.
JOB_AREAS = ("shared", "taskowned")


def is_job_dir_name(name: str) -> bool:
    """A JobID as Flink prints it: 32 lowercase hex digits."""
    return len(name) == 32 and all(c in "0123456789abcdef" for c in name)


@dataclass
class WalkNotes:
    """What a local walk saw besides files: what gc must know to never miss or double-count one.

    ``dirs``: every directory and its mtime (a job that was just restored has created empty
    ``shared/`` and ``taskowned/`` directories before it writes any file). ``followed``: directory
    symlinks walked into (their files are flagged as links, so never deleted). ``aliases``: a
    directory reached a second time under another name (a bind mount, a symlink into the root):
    the same file would be both live and "unreferenced" under two paths. ``mounts``: directories on
    another device than their parent.
    """

    dirs: dict[str, float] = field(default_factory=dict)
    followed: list[tuple[str, str]] = field(default_factory=list)  # (symlink uri, its target)
    aliases: list[tuple[str, str]] = field(default_factory=list)  # (uri, the uri seen first)
    mounts: list[str] = field(default_factory=list)
    # (device, inode) -> path of every directory entered; share one between the walks of several
    # scopes so that a directory of one reached through a symlink from another is an alias too
    seen: dict[tuple[int, int], str] = field(default_factory=dict, repr=False)


def _walk_local(
    root: str, prune_job_areas: bool = False, only: str | None = None, notes: WalkNotes | None = None
) -> Iterator[FileInfo]:
    """os.scandir walk: one stat per file; directory symlinks followed once.

    A directory symlink (``chk-N`` moved to another volume) is walked into, and every file below
    it is flagged ``is_link`` (kept by gc, never deleted through a link); each directory is entered
    once by (device, inode), so a symlink loop, a second mount or a link back into the root is
    recorded in ``notes.aliases`` instead of listed twice. ``prune_job_areas`` skips
    ``<job-id>/shared`` and ``<job-id>/taskowned`` (no ``_metadata`` there, millions of files).
    Entries are consumed as the directory is read (a flat shared/ with a million files must not be
    held as a million DirEntry objects). Any OS error is one line naming the directory.
    """
    try:
        top = os.stat(root)
    except FileNotFoundError:
        return
    except OSError as e:
        raise StorageError(f"cannot list: {e.strerror or e}", path="file:" + root) from None
    if not stat_mod.S_ISDIR(top.st_mode):
        if only is None or os.path.basename(root) == only:
            yield FileInfo("file:" + _clean_local(root), top.st_size, top.st_mtime)
        return
    seen: dict[tuple[int, int], str] = notes.seen if notes is not None else {}
    first_top = seen.get((top.st_dev, top.st_ino))
    if first_top is not None and notes is not None:  # this scope itself was reached from another
        notes.aliases.append(("file:" + _clean_local(root), "file:" + _clean_local(first_top)))
        return
    seen[(top.st_dev, top.st_ino)] = root
    stack: list[tuple[str, bool, int]] = [(root, False, top.st_dev)]
    while stack:
        current, linked, dev = stack.pop()
        clean = _clean_local(current).rstrip("/")
        prefix = "file:" + clean + "/"
        prune_here = prune_job_areas and is_job_dir_name(clean.rpartition("/")[2])
        try:
            it = os.scandir(current)
        except FileNotFoundError:
            continue  # removed while we walked
        except PermissionError:
            raise StorageError("permission denied", path="file:" + clean) from None
        except OSError as e:
            raise StorageError(f"cannot list: {e.strerror or e}", path="file:" + clean) from None
        try:
            with it:
                for entry in it:
                    is_symlink = entry.is_symlink()
                    try:
                        is_dir = entry.is_dir(follow_symlinks=True)
                    except OSError:  # a symlink loop (ELOOP) or an unreadable target: a link, kept
                        is_dir = False
                    if is_dir and is_symlink and _contains_walk_root(entry.path, root):
                        # a link to the root or above it (`up -> /`): following it would walk the
                        # machine; it is the root under another name, an alias
                        if notes is not None:
                            notes.aliases.append((prefix + entry.name, "file:" + _clean_local(root)))
                        continue
                    if is_dir:
                        if prune_here and entry.name in JOB_AREAS:
                            continue
                        try:
                            ds = entry.stat(follow_symlinks=True)
                        except FileNotFoundError:
                            continue
                        uri = prefix + entry.name
                        first = seen.get((ds.st_dev, ds.st_ino))
                        if first is not None:
                            if notes is not None:
                                notes.aliases.append((uri, "file:" + _clean_local(first)))
                            continue
                        seen[(ds.st_dev, ds.st_ino)] = entry.path
                        if notes is not None:
                            notes.dirs[uri] = ds.st_mtime
                            if is_symlink:
                                notes.followed.append((uri, "file:" + os.path.realpath(entry.path)))
                            if ds.st_dev != dev:
                                notes.mounts.append(uri)
                        stack.append((entry.path, linked or is_symlink, ds.st_dev))
                    elif only is not None and entry.name != only:
                        continue
                    else:
                        fs = entry.stat(follow_symlinks=False)
                        yield FileInfo(prefix + entry.name, fs.st_size, fs.st_mtime, linked or is_symlink)
        except StorageError:
            raise
        except OSError as e:  # a name too long (PATH_MAX), an I/O error while reading the directory
            raise StorageError(f"cannot list: {e.strerror or e}", path="file:" + clean) from None
