"""Storage access through fsspec: one place that knows about URIs, schemes and endpoints.

Everything above this module speaks canonical URIs: ``file:/abs/path`` (the single-slash form
Flink itself writes) and ``s3://bucket/key`` (``s3a``/``s3n``/``s3p`` are folded into ``s3`` so the
same object is never seen under two names). Heavy imports (s3fs, botocore) happen only when an
``s3://`` URI is first touched, which keeps ``ckptctl --help`` instant.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ckptctl.errors import StorageError

S3_ALIASES = ("s3a", "s3n", "s3p")


def normalize_uri(location: str) -> str:
    """Canonical URI of a local path or storage URI (no trailing slash except for roots)."""
    loc = location.strip()
    scheme, sep, rest = loc.partition("://")
    if sep and scheme.lower() in (*S3_ALIASES, "s3"):
        return "s3://" + rest.rstrip("/") if rest.strip("/") else "s3://" + rest
    if sep and scheme.lower() == "file":
        # file:///x -> file:/x ; file://localhost/x -> file:/x
        path = rest[rest.index("/") :] if not rest.startswith("/") and "/" in rest else rest
        return "file:" + _clean_local(path)
    if loc.startswith("file:"):
        return "file:" + _clean_local(loc[5:])
    if sep:
        return loc.rstrip("/")
    return "file:" + _clean_local(os.path.abspath(os.path.expanduser(loc)))


def _clean_local(path: str) -> str:
    path = "/" + path.lstrip("/")
    cleaned = posixpath.normpath(path)
    return "/" if cleaned == "//" else cleaned


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


@dataclass(frozen=True, slots=True)
class FileInfo:
    """One listed file. ``mtime`` is seconds since the epoch, ``None`` when the storage has none."""

    uri: str
    size: int
    mtime: float | None


@dataclass(frozen=True)
class StorageOptions:
    """How to reach object stores: endpoint (MinIO, Ceph, moto) and extra s3fs arguments."""

    s3_endpoint: str | None = None
    s3_anonymous: bool = False

    @classmethod
    def from_env(cls, s3_endpoint: str | None = None) -> StorageOptions:
        endpoint = (
            s3_endpoint
            or os.environ.get("CKPTCTL_S3_ENDPOINT")
            or os.environ.get("AWS_ENDPOINT_URL_S3")
            or os.environ.get("AWS_ENDPOINT_URL")
        )
        return cls(s3_endpoint=endpoint)

    def s3fs_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"anon": self.s3_anonymous}
        if self.s3_endpoint:
            kwargs["client_kwargs"] = {"endpoint_url": self.s3_endpoint}
            kwargs["endpoint_url"] = self.s3_endpoint
        return kwargs


class Storage:
    """List, stat, read and delete files by canonical URI, on any fsspec filesystem."""

    def __init__(self, options: StorageOptions | None = None) -> None:
        self.options = options or StorageOptions.from_env()
        self._filesystems: dict[str, Any] = {}

    # -- filesystem resolution -----------------------------------------------------------
    def fs(self, uri: str) -> tuple[Any, str]:
        scheme = scheme_of(uri)
        fs = self._filesystems.get(scheme)
        if fs is None:
            fs = self._filesystems[scheme] = self._make_fs(scheme)
        if scheme == "file":
            return fs, uri[5:]
        if scheme == "s3":
            return fs, uri[5:]
        return fs, uri

    def _make_fs(self, scheme: str) -> Any:
        import fsspec

        try:
            if scheme == "s3":
                import s3fs

                return s3fs.S3FileSystem(**self.options.s3fs_kwargs())
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
    def read_bytes(self, uri: str) -> bytes:
        fs, path = self.fs(uri)
        try:
            with fs.open(path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            raise StorageError("file not found", path=uri) from None
        except PermissionError:
            raise StorageError("permission denied", path=uri) from None
        except IsADirectoryError:
            raise StorageError("is a directory, not a file", path=uri) from None
        except OSError as e:
            raise StorageError(f"cannot read: {e}", path=uri) from None

    def read_range(self, uri: str, start: int, length: int) -> bytes:
        fs, path = self.fs(uri)
        try:
            return fs.cat_file(path, start=start, end=start + length)
        except FileNotFoundError:
            raise StorageError("file not found", path=uri) from None
        except OSError as e:
            raise StorageError(f"cannot read: {e}", path=uri) from None

    def stat(self, uri: str) -> FileInfo | None:
        """The file's size and mtime, or ``None`` if it does not exist (or is a directory)."""
        fs, path = self.fs(uri)
        try:
            info = fs.info(path)
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

    def list_files(self, uri: str) -> Iterator[FileInfo]:
        """Every file below ``uri`` (recursively), never following symbolic links out of it."""
        fs, path = self.fs(uri)
        scheme = scheme_of(uri)
        if scheme == "file":
            yield from _walk_local(path)
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


def _walk_local(root: str) -> Iterator[FileInfo]:
    """os.scandir walk: one stat per entry, symlinks reported as files but never traversed."""
    stack = [root]
    while stack:
        current = stack.pop()
        try:
            entries = list(os.scandir(current))
        except FileNotFoundError:
            continue
        except NotADirectoryError:
            st = os.stat(current)
            yield FileInfo("file:" + _clean_local(current), st.st_size, st.st_mtime)
            continue
        except PermissionError:
            raise StorageError("permission denied", path="file:" + current) from None
        for entry in sorted(entries, key=lambda e: e.name):
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
            else:
                st = entry.stat(follow_symlinks=False)
                yield FileInfo("file:" + _clean_local(entry.path), st.st_size, st.st_mtime)
