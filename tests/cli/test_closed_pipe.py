"""A reader that leaves early (``ckptctl ls ROOT | head -1``) is a closed pipe: every command exits
141 (128 + SIGPIPE, what the shell reports for any Unix tool whose reader left), never 1 ("problems
found" under ``set -o pipefail``) nor 0 (a cut gate would pass), and prints no traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.cli_runner import _MAIN, DATA
from tests.support.fixture_cases import REPO

BASIC = str(DATA / "2.2.0" / "basic")


@pytest.mark.parametrize(
    "args",
    [["ls", str(DATA)], ["ls", str(DATA), "--json"], ["verify", str(DATA / "2.2.0")], ["check", BASIC],
     ["refs", BASIC], ["refs", BASIC, "--format", "csv"], ["gc", "plan", BASIC, "--json"]],
)  # fmt: skip
def test_a_reader_that_leaves_early_gives_141(args: list[str]) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _MAIN, *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=REPO,
        env={**os.environ, "COLUMNS": "100"},
    )  # fmt: skip
    proc.stdout.close()  # the reader leaves before the first byte (`| head -0`): every write is EPIPE
    _, err = proc.communicate(timeout=120)
    stderr = err.decode()
    assert proc.returncode == 141, stderr
    assert "Traceback" not in stderr and "Exception ignored" not in stderr and "error:" not in stderr, stderr
