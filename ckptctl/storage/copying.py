"""Copying files between stores so that an interruption never leaves a half-written file under its
final name: locally a temporary name in the same directory and ``os.replace``; on S3 one PUT (or a
multipart upload, which S3 only makes visible once complete) followed by a size check.

Used by ``repair`` (a repaired copy of a checkpoint directory) and ``relocate``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid

from ckptctl.errors import StorageError
from ckptctl.storage import uri as st
from ckptctl.storage.store import Storage

TMP_MARK = ".ckptctl-tmp-"
CHUNK = 8 << 20


def copy_file(storage: Storage, src: str, dst: str, size: int | None = None, *, checked: bool = True) -> int:
    """Copy ``src`` to ``dst`` (any stores); returns the bytes copied. ``dst`` appears complete or not at all.

    ``size``: the size the source must have (checked after the copy, on the destination).
    ``checked=False`` (with ``size``): an object store's copy is not looked at here; the caller
    checks many at once (:func:`check_copies`: a listing per directory, not a HEAD each).
    """
    if st.scheme_of(dst) == "file":
        final = dst[5:]
        os.makedirs(os.path.dirname(final), exist_ok=True)
        tmp = f"{final}{TMP_MARK}{uuid.uuid4().hex[:12]}"
        try:
            if st.scheme_of(src) == "file":
                try:
                    shutil.copyfile(src[5:], tmp)
                except FileNotFoundError:
                    raise StorageError("file not found", path=src) from None
            else:
                fs, path = storage.fs(src)
                with fs.open(path, "rb") as fin, open(tmp, "wb") as fout:
                    shutil.copyfileobj(fin, fout, CHUNK)
            copied = os.path.getsize(tmp)
            if size is not None and copied != size:
                raise StorageError(f"copied {copied} bytes, expected {size}", path=src)
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
            os.replace(tmp, final)
            return copied
        except OSError as e:
            raise StorageError(f"cannot copy to {dst}: {e}", path=src) from None
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    dst_fs, dst_path = storage.fs(dst)
    try:
        if st.scheme_of(src) == st.scheme_of(dst) == "s3":
            src_fs, src_path = storage.fs(src)
            src_fs.copy(src_path, dst_path)  # server-side copy within one endpoint
        elif st.scheme_of(src) == "file":
            dst_fs.put_file(src[5:], dst_path)  # multipart above the block size: atomic on completion
        else:
            src_fs, src_path = storage.fs(src)
            dst_fs.pipe_file(dst_path, src_fs.cat_file(src_path))
    except FileNotFoundError:
        # no such source, or no such destination bucket: say which (the source usually exists)
        if storage.stat(src) is None:
            raise StorageError("file not found", path=src) from None
        raise StorageError(
            "cannot write there (no such bucket or prefix?); the source exists", path=dst
        ) from None
    except Exception as e:  # noqa: BLE001 - botocore errors are not OSErrors
        raise StorageError(f"cannot copy to {dst}: {type(e).__name__}: {e}", path=src) from None
    dst_fs.invalidate_cache()
    if not checked and size is not None:
        return size
    info = storage.stat(dst)
    _check_copy(dst, info, size)
    return info.size


def check_copies(storage: Storage, copies: list[tuple[str, int]]) -> None:
    """Each ``(dst, size)`` copied with ``checked=False`` is there with its size (raises at the
    first that is not): one listing per destination directory on S3 (:meth:`Storage.stat_many`),
    a HEAD only for a copy no listing shows."""
    found = storage.stat_many(dst for dst, _size in copies)
    for dst, size in copies:
        _check_copy(dst, found[dst], size)


def _check_copy(dst: str, info, size: int | None) -> None:
    if info is None:
        raise StorageError("copied, but the copy is not there", path=dst)
    if size is not None and info.size != size:
        raise StorageError(f"copied {info.size} bytes, expected {size}", path=dst)


def check_writable(storage: Storage, root: str) -> None:
    """Before anything is copied: ``root`` can be written (a probe file written and removed), so a
    dry run already says that a destination is unreachable, misnamed or read-only, naming it."""
    probe = st.join(root, f".ckptctl-write-probe-{uuid.uuid4().hex[:12]}")
    existing = None
    if st.scheme_of(root) == "file":
        existing = root[5:]
        while not os.path.isdir(existing) and os.path.dirname(existing) != existing:
            existing = os.path.dirname(existing)
    try:
        storage.write_bytes(probe, b"")
    except StorageError as e:
        raise StorageError(f"the destination cannot be written: {e}", path=root) from None
    except Exception as e:  # noqa: BLE001 - botocore errors (no such bucket, access denied)
        raise StorageError(f"the destination cannot be written: {type(e).__name__}: {e}", path=root) from None
    with contextlib.suppress(Exception):  # a left-over empty probe is harmless; the write worked
        storage.delete_many([probe])
    if existing is not None:
        # the probe created directories below the nearest existing one: leave none behind a dry run
        d = os.path.dirname(probe[5:])
        while d != existing and len(d) > len(existing):
            with contextlib.suppress(OSError):
                os.rmdir(d)
            d = os.path.dirname(d)


def write_atomic(storage: Storage, uri: str, data: bytes) -> None:
    """Write a whole small file (a ``_metadata``) so that it appears complete or not at all."""
    if st.scheme_of(uri) != "file":
        storage.write_bytes(uri, data)  # a single PUT is atomic
        return
    final = uri[5:]
    os.makedirs(os.path.dirname(final), exist_ok=True)
    tmp = f"{final}{TMP_MARK}{uuid.uuid4().hex[:12]}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
    except OSError as e:
        raise StorageError(f"cannot write: {e}", path=uri) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
