"""Reading one file of a :class:`~ckptctl.storage.Storage`: its bytes (whole, bounded, a range, as
a checkpoint records them) and its stat.

Apart from the :class:`~ckptctl.storage.Storage` so that the class stays the one address of the
calls and these, the rules of each read (what is refused before a byte is read, how S3 is asked
with the fewest requests), stay together. Each function takes the storage it reads through and
calls back its public methods, so a subclass's answers (a scan's) and ``-v``'s report hold.
"""

from __future__ import annotations

import os
import sys
from datetime import datetime
from typing import Any

from ckptctl.errors import StorageError, StoreUnanswered
from ckptctl.storage.listing import FileInfo
from ckptctl.storage.retry import first_line, retrying, retrying_async, s3_problem
from ckptctl.storage.uri import scheme_of


def s3_denied(e: BaseException) -> str:
    """The one line for an S3 request refused (403), whichever call met it: a listing gives AWS's
    message, a HEAD only "Forbidden"; both say what to check."""
    return (
        f"access denied ({first_line(e) or 'Forbidden'}): check the AWS credentials (AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE) and that they may read this bucket"
    )


def read_bytes(storage, uri: str, limit: int | None = None, size: int | None = None) -> bytes:
    """The whole file. With ``limit``, a file larger than that (or, locally, anything but a
    regular file: a FIFO would block forever, ``/dev/zero`` never end) is refused first.

    ``size``: the object's size from a listing or stat just made, so that S3 is not asked
    again (a HEAD per ``_metadata``); the read is then bounded to ``limit + 1`` bytes, so an
    object that grew past the limit since is refused all the same, never read whole. An
    object listed empty is empty, not asked for: no range of it can be read (a 416, retried
    for seconds, then a "cannot read" where the parser says what is wrong at which byte)."""
    fs, path = storage.fs(uri)
    s3 = scheme_of(uri) == "s3"
    bounded = limit is not None and size is not None and s3
    if bounded:
        refuse_larger(uri, size, limit)
        if size == 0:
            return b""
    elif limit is not None:
        _check_readable(storage, uri, path, limit)
    try:
        if bounded:
            data = retrying(lambda: fs.cat_file(path, start=0, end=limit + 1), fs)
            refuse_larger(uri, len(data), limit)
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


def read_small(storage, uri: str, limit: int) -> tuple[FileInfo, bytes | None] | None:
    """A file's stat and, on S3, its bytes; ``None`` if there is no such file.

    On S3 one GET of the first ``limit + 1`` bytes, whose headers give the size and mtime:
    no HEAD before the read. The bytes are ``None`` when the file is larger than ``limit``
    (not read: :meth:`read_bytes` refuses it), when the GET could not answer (any error, which
    a HEAD and the read then report as before) and off S3 (a stat costs no request there). An
    empty object, whose range no GET can satisfy, is found by the HEAD: nothing to read."""
    if scheme_of(uri) == "s3":
        got = _get_head(storage, uri, limit)
        if got is not None:
            return got if got[0] is not None else None
    info = storage.stat(uri)
    if info is None:
        return None
    return info, (b"" if info.size == 0 and scheme_of(uri) == "s3" else None)  # nothing to read


def _get_head(storage, uri: str, limit: int) -> tuple[FileInfo | None, bytes | None] | None:
    """``(info, bytes)`` from one ranged GET, ``(None, None)``: no such file; ``None``: ask
    otherwise. Not retried: an empty object's 416 would be, for seconds; a transient failure
    costs the HEAD and the read that follow, each retried."""
    from fsspec.asyn import sync

    fs, path = storage.fs(uri)
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


def refuse_larger(uri: str, size: int, limit: int) -> None:
    if size > limit:
        raise StorageError(
            f"{size:,} bytes, more than the {limit:,} such a file may have: not read", path=uri
        )


def _check_readable(storage, uri: str, path: str, limit: int) -> None:
    if scheme_of(uri) == "file":
        size = _regular_size(uri, path)
    else:
        found = storage.stat(uri)
        if found is None:
            raise StorageError("file not found", path=uri)
        size = found.size
    refuse_larger(uri, size, limit)


def read_recorded(storage, uri: str, size: int) -> bytes:
    """The whole file a checkpoint records with ``size`` bytes (-1: Flink did not know). A
    file of another size is refused before it is read (a 1 KiB SST padded to 50 GB was read
    whole, until MemoryError; the checkpoint is broken either way: verify says so), and
    locally anything but a regular file (a FIFO blocked ``states`` forever)."""
    if size < 0:
        return storage.read_bytes(uri, limit=sys.maxsize)
    if scheme_of(uri) == "file":
        found = _regular_size(uri, storage.fs(uri)[1])
    elif size > 0:  # one ranged GET, one byte past the end: no HEAD first
        data = storage.read_range(uri, 0, size + 1)
        if len(data) > size:
            raise StorageError(f"larger than the {size:,} bytes the checkpoint records: not read", path=uri)
        found = len(data)
        if found == size:
            return data
    else:  # no range of an empty object can be read
        info = storage.stat(uri)
        if info is None:
            raise StorageError("file not found", path=uri)
        found = info.size
    if found != size:
        raise StorageError(
            f"ends at byte {found:,}, the checkpoint records {size:,} bytes: not read", path=uri
        )
    return storage.read_bytes(uri)


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


def read_range(storage, uri: str, start: int, length: int) -> bytes:
    fs, path = storage.fs(uri)
    if scheme_of(uri) == "file":
        _regular_size(uri, path)  # a FIFO's open would block
    try:  # retried here: botocore itself does not retry (see StorageOptions.s3fs_kwargs)
        return retrying(
            lambda: fs.cat_file(path, start=start, end=start + length), fs, s3=scheme_of(uri) == "s3"
        )
    except FileNotFoundError:
        raise StorageError("file not found", path=uri) from None
    except OSError as e:
        raise StorageError(f"cannot read: {e}", path=uri) from None


def stat(storage, uri: str, fresh: bool = False) -> FileInfo | None:
    """The file's size and mtime, or ``None`` if it does not exist (or is a directory).

    ``fresh``: ask the store (a HEAD on S3), never a listing of its directory cached earlier."""
    fs, path = storage.fs(uri)
    if fresh and scheme_of(uri) == "s3":
        fs.invalidate_cache(path)
    try:
        info = retrying(lambda: fs.info(path), fs, s3=scheme_of(uri) == "s3")
    except FileNotFoundError:
        return None
    except OSError as e:
        raise _cannot_stat(e, uri) from None
    if info.get("type") == "directory":
        return None
    return FileInfo(uri, int(info.get("size") or 0), mtime_of(info))


def is_file(storage, uri: str) -> bool:
    """``uri`` names a file (not a directory, not nothing). On S3 one HEAD of the key, without
    the listing ``stat`` adds to tell a directory from nothing, and none for a bucket."""
    if scheme_of(uri) != "s3":
        return storage.stat(uri) is not None
    fs, path = storage.fs(uri)
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


def is_dir(storage, uri: str) -> bool:
    fs, path = storage.fs(uri)
    try:
        return bool(retrying(lambda: fs.isdir(path), fs, s3=scheme_of(uri) == "s3"))
    except OSError as e:
        raise _cannot_stat(e, uri) from None


def _cannot_stat(e: OSError, uri: str) -> StorageError:
    """The one line for a stat or directory test the store refused (S3's denial names the
    credentials' problem) or could not answer."""
    if isinstance(e, PermissionError) and scheme_of(uri) == "s3":
        return StorageError(s3_denied(e), path=uri)
    return StorageError(f"cannot stat: {e}", path=uri)


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


def mtime_of(info: dict[str, Any]) -> float | None:
    value = info.get("mtime", info.get("LastModified", info.get("last_modified")))
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.timestamp()
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
