"""m10: wrong credentials read the same for every command, with a hint: verify/check said
"cannot stat: Forbidden" (a HEAD has no body) where ls/gc gave AWS's message. moto with its
credential check on (``INITIAL_NO_AUTH_ACTION_COUNT=0``), on loopback, stopped by its pid."""

from __future__ import annotations

import os
import subprocess
import time
import urllib.request
from collections.abc import Iterator

import pytest

from tests.conftest import free_port
from tests.support.cli_runner import cli, one_line_error
from tests.support.moto_server import S3_SERVER


@pytest.fixture(scope="module")
def checking_endpoint() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [*S3_SERVER, "-H", "127.0.0.1", "-p", str(port)],
        env={**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "0"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(endpoint + "/moto-api/", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail("moto_server did not start")
                time.sleep(0.2)
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.parametrize("command", [["ls"], ["verify"], ["check"], ["gc", "plan"]])
def test_wrong_credentials_say_access_denied_and_what_to_check(checking_endpoint, command) -> None:
    env = {"AWS_ACCESS_KEY_ID": "wrong", "AWS_SECRET_ACCESS_KEY": "wrong"}
    line = one_line_error(cli(*command, "s3://flink/ck", "--s3-endpoint", checking_endpoint, env=env))
    assert "access denied" in line and "AWS_ACCESS_KEY_ID" in line, line
