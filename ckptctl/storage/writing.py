"""Changing a :class:`~ckptctl.storage.Storage`: writing a file, deleting many, moving many.

Apart from the :class:`~ckptctl.storage.Storage` so that everything that changes the store (what
gc apply, relocate and repair rely on never to lose a file: a copy checked before its source
goes, a key already gone counted as deleted) reads in one place. Each function takes the storage
it changes and calls back its public methods, so a subclass (a read-only scan) can refuse them.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from typing import Any

from ckptctl.errors import StorageError, StoreUnanswered
from ckptctl.storage.retry import first_line, retry_delay, retrying, retrying_async
from ckptctl.storage.uri import scheme_of

COPY_OBJECT_LIMIT = 5 << 30  # S3's largest CopyObject source; a larger file takes s3fs's multipart copy
MOVE_CONCURRENCY = 32  # copies in flight in one move_many


def write_bytes(storage, uri: str, data: bytes) -> None:
    fs, path = storage.fs(uri)
    try:
        if scheme_of(uri) == "file":
            os.makedirs(os.path.dirname(path), exist_ok=True)
        with fs.open(path, "wb") as f:
            f.write(data)
    except OSError as e:
        raise StorageError(f"cannot write: {e}", path=uri) from None


def delete_many(storage, uris: list[str]) -> list[tuple[str, str]]:
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
        fs, _ = storage.fs("s3://" + bucket)
        for start in range(0, len(keys), 1000):
            failed += _delete_s3_batch(fs, bucket, keys[start : start + 1000])
        fs.invalidate_cache()
    return failed


def _delete_s3_batch(fs, bucket, keys) -> list[tuple[str, str]]:
    pending = list(keys)
    last_error: dict[str, str] = {}
    attempt = 0
    while pending:
        try:
            request = {"Objects": [{"Key": k} for k in pending], "Quiet": True}
            response = retrying(lambda r=request: fs.call_s3("delete_objects", Bucket=bucket, Delete=r), fs)
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


def move_many(storage, moves: list[tuple[str, str, int | None]]) -> list[tuple[str, str]]:
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
            storage.move(src, dst)
        except StorageError as e:
            errors.append((src, str(e)))
    if not copy_here:
        return errors
    from fsspec.asyn import sync

    fs, _ = storage.fs(copy_here[0][0])

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
    errors += [(m[0], why) for m, why in zip(copy_here, outcomes, strict=True) if why not in (None, "gone")]
    failed = dict(storage.delete_many([src for src, _dst, _size in copied]))
    errors += [
        (src, f"copied to {dst} but could not delete: {failed[src]}")
        for src, dst, _s in copied
        if src in failed
    ]
    return errors


def move(storage, src: str, dst: str) -> None:
    """Move one file: copy, check the copy is there with the source's size, then delete the
    source. A source already gone is nothing to do; any failure on the destination's side (no
    such bucket, a missing local directory, no permission) is an error naming the destination,
    and the source stays."""
    if scheme_of(src) == "file" and scheme_of(dst) == "file":
        os.makedirs(os.path.dirname(dst[5:]), exist_ok=True)
        os.replace(src[5:], dst[5:])
        return
    source = storage.stat(src)
    if source is None:
        return  # already gone (an interrupted run repeated)
    fs, src_path = storage.fs(src)
    dst_fs, dst_path = storage.fs(dst)
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
        raise StorageError(f"cannot move to {dst}: {type(e).__name__}: {first_line(e)}", path=src) from None
    copied = storage.stat(dst)
    if copied is None or copied.size != source.size:
        raise StorageError(f"the copy at {dst} is missing or has the wrong size: source kept", path=src)
    failed = storage.delete_many([src])
    if failed:
        raise StorageError(f"copied to {dst} but could not delete: {failed[0][1]}", path=src)


async def _exists(fs: Any, bucket: str, key: str) -> bool:
    try:
        await retrying_async(lambda: fs._call_s3("head_object", Bucket=bucket, Key=key), fs)
    except FileNotFoundError:
        return False
    return True
