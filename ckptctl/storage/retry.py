"""The one retry policy of storage calls, its deadline, and the S3 failures retrying cannot fix.

botocore stays lazy: its errors are recognised by class name.
"""

from __future__ import annotations

import asyncio
import errno
import os
import threading
import time
from typing import Any

from ckptctl.errors import StorageError, StoreUnanswered

# How long the S3 endpoint may answer nothing before the command stops (see _Silence), and how long
# one storage call may retry failures that are answers (throttling, 5xx). It can be set for slow
# links (and small ones make the tests fast).
S3_DEADLINE = 20.0  # seconds, CKPTCTL_S3_DEADLINE
DEADLINE_VARIABLE = "CKPTCTL_S3_DEADLINE"


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


def not_s3(e: BaseException) -> bool:
    """An answer from something that is not S3: botocore found no error code, only the HTTP
    status (a web server's 404 page; S3 answers every failed request but a HEAD with an XML error
    document and its code)."""
    response = _response_of(e)
    if response is None:
        return False
    code = str(response.get("Error", {}).get("Code", ""))
    headers = response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
    return (not code or code.isdigit()) and "xml" not in str(headers.get("content-type", ""))


def _response_of(e: BaseException) -> dict | None:
    """The botocore response an error (or the error it was translated from: s3fs makes OSErrors of
    them) carries, if any."""
    cause: BaseException | None = e
    while cause is not None:
        response = getattr(cause, "response", None)
        if isinstance(response, dict):
            return response
        cause = cause.__cause__ or cause.__context__
    return None


def no_answer(error: BaseException) -> bool:
    """The endpoint answered nothing within a request's time (a read timeout, or the attempt cut
    at the deadline): not an answer, so it does not end a silence (:class:`_Silence`)."""
    return bool({cls.__name__ for cls in type(error).__mro__} & set(_NO_ANSWER))


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
    will not change (missing file, no permission, a directory, an answer that is not S3's but a
    gateway's 5xx or 429) and failures retrying cannot fix (no credentials, no server:
    :func:`s3_problem`) are final, as is the last attempt."""
    if isinstance(error, _FINAL) or attempt >= RETRY_ATTEMPTS - 1 or s3_problem(error):
        return None
    if isinstance(error, MemoryError) or (isinstance(error, OSError) and error.errno in _PERMANENT_ERRNOS):
        return None  # a symlink loop or a read too large for memory: the same the next eight times
    if not_s3(error) and not _busy(error):
        return None  # a web server's 404 page: it will not turn into S3 (m8: 20 s of retries)
    return min(RETRY_BASE * 2**attempt, RETRY_CAP)


def _busy(error: BaseException) -> bool:
    """An HTTP status that says "later" (5xx, 429), whoever sent it: a load balancer in front of
    S3 answers its own page while its backends restart."""
    response = _response_of(error) or {}
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return isinstance(status, int) and (status >= 500 or status == 429)


class _Silence:
    """Since when the S3 endpoint has answered nothing: the start of the first request sent after
    its last answer (``None``: it answered the last request, or none was sent). Shared by every
    S3 call of this process, so that the deadline bounds a command, not each of its calls: a call
    whose request went unanswered used to be followed by the next call (a HEAD after a GET, the
    listing without a delimiter after the one with it), each waiting out its own deadline."""

    def __init__(self) -> None:
        self._since: float | None = None
        self._lock = threading.Lock()

    def sending(self, now: float) -> float:
        with self._lock:
            if self._since is None:
                self._since = now
            return self._since

    def answered(self) -> None:
        self._since = None

    def since(self) -> float | None:
        return self._since


_SILENCE = _Silence()


class _Call:
    """One storage call's attempts under the policy. A request that gets no answer (its read
    timeout, CKPTCTL_S3_READ_TIMEOUT, capped at the deadline: :mod:`ckptctl.storage.options`)
    is tried again until the endpoint has answered nothing for the deadline, counted from the
    first request since its last answer, whichever call sent it; then :class:`StoreUnanswered`,
    and the command stops: at most one read timeout after the deadline. Answers that failed
    (throttling, 5xx) are retried (:func:`retry_delay`) until the deadline after the call began.
    ``s3``: false for a local call, which neither starts nor ends the endpoint's silence."""

    def __init__(self, fs: Any, s3: bool = True) -> None:
        self.deadline = env_seconds(DEADLINE_VARIABLE, S3_DEADLINE)
        self.give_up = time.monotonic() + self.deadline
        self.fs, self.s3, self.attempt = fs, s3, 0

    def sending(self) -> None:
        """Before each attempt: the endpoint's silence starts here unless it had already."""
        if self.s3:
            _SILENCE.sending(time.monotonic())

    def answered(self) -> None:
        if self.s3:
            _SILENCE.answered()

    def failed(self, error: Exception, retry: bool = True) -> float | None:
        """Seconds to wait before the next attempt; ``None``: raise ``error`` itself. Raises
        :class:`StoreUnanswered` when the endpoint answered nothing until the deadline."""
        quiet = no_answer(error)
        if not quiet:
            self.answered()  # an error answer (a 503, a 404) is an answer
        delay = retry_delay(error, self.attempt) if retry else None
        now = time.monotonic()
        since = _SILENCE.since() if self.s3 else None
        silent_until = since + self.deadline if since is not None else float("inf")
        if quiet and (
            now + (delay or 0.0) >= silent_until or (delay is not None and now + delay >= self.give_up)
        ):
            raise self.unanswered(type(error).__name__) from None
        if delay is None or now + delay >= self.give_up:
            return None  # final, or answers that failed until the deadline: the last one says why
        self.attempt += 1
        return delay

    def unanswered(self, why: str) -> StoreUnanswered:
        """The one line when the endpoint did not answer in time: the command stops there."""
        endpoint = _endpoint_of(self.fs)
        where = f"the S3 endpoint {endpoint}" if endpoint else "the S3 endpoint"
        return StoreUnanswered(
            f"{where} accepted the connection but did not answer in time ({why}): nothing for "
            f"{self.deadline:g} s (CKPTCTL_S3_DEADLINE). Is --s3-endpoint an S3 server?"
        )


def retrying(call, fs: Any = None, *, s3: bool = True, retry: bool = True):
    """Run a storage call, retrying transient failures (throttling, 5xx, resets, a read timeout)
    with back-off within the deadline (:class:`_Call`). ``fs``: the filesystem, whose endpoint an
    error names; ``s3``: false for a local call; ``retry``: false for one attempt (a trial whose
    failure the caller handles, but that stops the command all the same when the endpoint is
    silent)."""
    state = _Call(fs, s3)
    while True:
        state.sending()
        try:
            result = call()
        except Exception as e:  # noqa: BLE001 - botocore/aiohttp errors have no common base
            delay = state.failed(e, retry)
            if delay is None:
                raise
            time.sleep(delay)
        else:
            state.answered()
            return result


async def retrying_async(call, fs: Any = None, *, retry: bool = True):
    """:func:`retrying` for a coroutine function (the concurrent S3 listing)."""
    state = _Call(fs)
    while True:
        state.sending()
        try:
            result = await call()
        except Exception as e:  # noqa: BLE001 - SlowDown, InternalError, connection resets
            delay = state.failed(e, retry)
            if delay is None:
                raise
            await asyncio.sleep(delay)
        else:
            state.answered()
            return result


def _endpoint_of(fs: Any) -> str | None:
    """The URL of the endpoint an s3fs filesystem talks to (its client's, once made)."""
    client = getattr(fs, "_s3", None)
    return getattr(getattr(client, "meta", None), "endpoint_url", None) or getattr(fs, "endpoint_url", None)
