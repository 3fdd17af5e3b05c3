"""The one retry policy of storage calls, its deadline, and the S3 failures retrying cannot fix.

botocore stays lazy: its errors are recognised by class name.
"""

from __future__ import annotations

import asyncio
import errno
import os
import time

from ckptctl.errors import StorageError, StoreUnanswered

# One storage call (with every retry) has a total deadline (see ckptctl.storage.options for the
# timeouts of each request). It can be set for slow links (and small ones make the tests fast).
S3_DEADLINE = 20.0  # seconds per storage call, retries included, CKPTCTL_S3_DEADLINE


def env_seconds(name: str, default: float) -> float:
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


# The one retry policy of storage calls (on top of s3fs's few quick retries of one request):
# attempts, and the back-off before attempt n+1 of min(RETRY_BASE * 2**n, RETRY_CAP) seconds.
RETRY_ATTEMPTS = 8
RETRY_BASE = 0.1
RETRY_CAP = 5.0
_FINAL = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)
_PERMANENT_ERRNOS = frozenset({errno.ELOOP, errno.ENAMETOOLONG, errno.EINVAL, errno.ENXIO, errno.ENODEV})


def first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [""])[0][:200]


def retry_delay(error: Exception, attempt: int) -> float | None:
    """Seconds to wait before trying again after ``error``, or ``None``: give up. Answers that
    will not change (missing file, no permission, a directory) and failures retrying cannot fix
    (no credentials, no server: :func:`s3_problem`) are final, as is the last attempt."""
    if isinstance(error, _FINAL) or attempt >= RETRY_ATTEMPTS - 1 or s3_problem(error):
        return None
    if isinstance(error, MemoryError) or (isinstance(error, OSError) and error.errno in _PERMANENT_ERRNOS):
        return None  # a symlink loop or a read too large for memory: the same the next eight times
    return min(RETRY_BASE * 2**attempt, RETRY_CAP)


def retrying(call):
    """Run a storage call, retrying transient failures (throttling, 5xx, resets, a read timeout)
    with back-off, within a total deadline (:data:`S3_DEADLINE`)."""
    attempt = 0
    give_up = time.monotonic() + env_seconds("CKPTCTL_S3_DEADLINE", S3_DEADLINE)
    while True:
        try:
            return call()
        except Exception as e:  # noqa: BLE001 - botocore/aiohttp errors have no common base
            delay = retry_delay(e, attempt)
            if delay is None:
                raise
            if time.monotonic() + delay >= give_up:
                raise _past_deadline(e) from None
            time.sleep(delay)
            attempt += 1


def _past_deadline(error: Exception) -> Exception:
    """The error to raise when retries ran out of time: one line that says the server did not answer
    (:class:`StoreUnanswered`: the command stops there)."""
    names = {cls.__name__ for cls in type(error).__mro__}
    if names & set(_NO_ANSWER):
        return StoreUnanswered(
            f"the S3 endpoint accepted the connection but did not answer in time ({type(error).__name__}); "
            "retried until the deadline (CKPTCTL_S3_DEADLINE). Is --s3-endpoint an S3 server?"
        )
    return error


async def retrying_async(call):
    """:func:`retrying` for a coroutine function (the concurrent S3 listing)."""
    attempt = 0
    give_up = time.monotonic() + env_seconds("CKPTCTL_S3_DEADLINE", S3_DEADLINE)
    while True:
        try:
            return await call()
        except Exception as e:  # noqa: BLE001 - SlowDown, InternalError, connection resets
            delay = retry_delay(e, attempt)
            if delay is None:
                raise
            if time.monotonic() + delay >= give_up:
                raise _past_deadline(e) from None
            await asyncio.sleep(delay)
            attempt += 1
