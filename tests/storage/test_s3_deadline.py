"""m5: CKPTCTL_S3_DEADLINE bounds a whole command against an endpoint that never answers.

A listening socket that accepts every connection and never replies. Each command used to take the
deadline plus 12-15 s (never under about 22 s at DEADLINE=2..10): botocore sent each request twice
(its ``max_attempts`` counts retries), each waiting the 5 s read timeout whatever the deadline, and
each storage call had its own deadline, so a call that gave up was followed by the next (``show``:
a GET, then a HEAD of the same ``_metadata``; ``ls``: the listing with a delimiter, then without).

The clock starts at the first request the endpoint receives: the imports before it take seconds on
a loaded machine and no deadline of the endpoint's can bound them. The bound, deadline + 5 s, is
several times what the command overruns by on an idle machine (under a second: the last read
timeout and the interpreter's exit)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from tests.support.cli_runner import run_ckptctl

# short: the test waits it out four times; still under the product's read timeout (5 s), which the
# deadline must cut, and the commands' old overrun (deadline + 12-15 s) still far past the bound
DEADLINE = 1.0
SLACK = 5.0


@dataclass
class Mute:
    url: str
    arrived: list[float] = field(default_factory=list)  # time.monotonic() of each connection


@pytest.fixture
def mute_endpoint() -> Iterator[Mute]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    server.settimeout(0.2)
    mute = Mute(f"http://127.0.0.1:{server.getsockname()[1]}")
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn = server.accept()[0]
            except OSError:
                continue
            mute.arrived.append(time.monotonic())
            held.append(conn)  # open, never answered

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield mute
    stop.set()
    thread.join(5)
    for conn in held:
        conn.close()
    server.close()


@pytest.mark.parametrize("command", [["ls"], ["show"], ["verify", "--engine", "local"], ["gc", "plan"]])
def test_the_deadline_bounds_the_whole_command(command: list[str], mute_endpoint: Mute) -> None:
    # the product's read timeout (5 s, longer than this deadline), not the suite's
    env = {"CKPTCTL_S3_DEADLINE": str(DEADLINE), "CKPTCTL_S3_READ_TIMEOUT": ""}
    proc, _ = run_ckptctl(*command, "s3://flink/ck", "--s3-endpoint", mute_endpoint.url, env=env, timeout=180)
    ended = time.monotonic()
    assert mute_endpoint.arrived, "no request reached the endpoint"
    took = ended - mute_endpoint.arrived[0]
    assert took <= DEADLINE + SLACK, f"{took:.1f} s from the first request to the exit"
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and mute_endpoint.url in lines[0] and "did not answer in time" in lines[0], (
        proc.stderr
    )


def test_a_worker_without_the_variable_keeps_the_deadline_the_command_was_given(
    mute_endpoint: Mute, monkeypatch
) -> None:
    """A Spark executor on a cluster rebuilds its storage from the options the driver sent it
    (Storage.shared), in an environment of its own: the deadline the user gave the command travels
    with them. It waited out the 20 s default, whatever the user had set."""
    from ckptctl.errors import StoreUnanswered
    from ckptctl.storage import Storage, StorageOptions

    monkeypatch.setenv("CKPTCTL_S3_DEADLINE", str(DEADLINE))
    monkeypatch.setenv("CKPTCTL_S3_READ_TIMEOUT", "")  # the product's (5 s), which the deadline must cut
    options = StorageOptions.from_env(mute_endpoint.url)
    monkeypatch.delenv("CKPTCTL_S3_DEADLINE")  # the worker's environment: not the driver's
    with pytest.raises(StoreUnanswered) as unanswered:
        Storage.shared(options).stat("s3://flink/ck/_metadata")
    ended = time.monotonic()
    assert mute_endpoint.arrived, "no request reached the endpoint"
    took = ended - mute_endpoint.arrived[0]
    assert took <= DEADLINE + SLACK, f"{took:.1f} s from the first request to the end"
    assert f"nothing for {DEADLINE:g} s" in str(unanswered.value), unanswered.value
