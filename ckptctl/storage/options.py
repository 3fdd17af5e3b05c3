"""How to reach the stores: the picklable settings every worker rebuilds its storage from."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ckptctl.errors import StorageError
from ckptctl.storage.retry import DEADLINE_VARIABLE, S3_DEADLINE, env_seconds

S3_CONNECT_TIMEOUT = 3.0  # seconds
# An endpoint that accepts the connection and never answers must not hang a command: each read of a
# request's answer has a timeout, never longer than the deadline (CKPTCTL_S3_DEADLINE: the endpoint's
# silence that stops the command, ckptctl.storage.retry), which it can therefore overrun by one.
S3_READ_TIMEOUT = 5.0  # seconds, CKPTCTL_S3_READ_TIMEOUT


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
    # the endpoint's silence that stops the command (CKPTCTL_S3_DEADLINE) where the command started:
    # a worker that has no such variable of its own takes it (:meth:`carry_deadline`); None: not set
    deadline: float | None = None

    @classmethod
    def from_env(cls, s3_endpoint: str | None = None) -> StorageOptions:
        env = os.environ.get
        endpoint = (
            s3_endpoint or env("CKPTCTL_S3_ENDPOINT") or env("AWS_ENDPOINT_URL_S3") or env("AWS_ENDPOINT_URL")
        )
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
            read_timeout=env_seconds("CKPTCTL_S3_READ_TIMEOUT", S3_READ_TIMEOUT),
            deadline=env_seconds(DEADLINE_VARIABLE, S3_DEADLINE) if env(DEADLINE_VARIABLE) else None,
        )

    def carry_deadline(self) -> None:
        """In a worker rebuilding its storage from these options: the deadline the command was
        given, unless this process was given one of its own. Every reader of the deadline (each
        storage call's retries, the read timeout under it) reads the variable; a Spark executor on
        a cluster does not have the driver's environment, and waited out the 20 s default against
        an endpoint the user had given 5 s."""
        if self.deadline is not None:
            os.environ.setdefault(DEADLINE_VARIABLE, repr(self.deadline))

    def s3fs_kwargs(self) -> dict[str, Any]:
        # a closed or unreachable endpoint must fail in seconds: a bounded connect timeout and no
        # botocore retries on top of s3fs's own (a few quick ones) and ckptctl's back-off
        # (retrying), which retries throttling and 5xx but stops at once on an unreachable
        # endpoint or missing credentials (see s3_problem). botocore's own retry modes cannot do
        # that: they count a refused connection as transient and back off on it.
        # s3fs's own retries (of timeouts among others) are off too: ckptctl's deadline bounds them.
        # botocore keeps one retry ("total_max_attempts" counts requests): the reads and writes
        # that stream through s3fs's file objects (an inventory's data files, multipart uploads)
        # are not under ckptctl's retrying, and a single SlowDown or 500 must not fail them. An
        # unanswered request is then sent twice, so the read timeout is at most half the deadline:
        # the pair of them still ends by the deadline (review m5).
        read_timeout = min(self.read_timeout, env_seconds(DEADLINE_VARIABLE, S3_DEADLINE) / 2)
        kwargs: dict[str, Any] = {
            "config_kwargs": {
                "connect_timeout": self.connect_timeout, "read_timeout": read_timeout,
                "retries": {"total_max_attempts": 2},
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
