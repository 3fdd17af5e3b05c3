"""The command line run in-process (Typer's runner) or as a fresh process, and its one-line errors."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from ckptctl.cli import app
from tests.support.fixture_cases import FIXTURES, REPO

runner = CliRunner()


DATA = FIXTURES / "data"


def cli(*args: str, env: dict[str, str] | None = None):
    return runner.invoke(app, list(args), env=env)


def cli_json(*args: str):
    result = cli(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def one_line_error(result, code: int = 2) -> str:
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def run_ckptctl(*args: str, env: dict[str, str] | None = None, timeout: float = 120):
    """The installed command in a fresh process (timing includes imports, as a user sees it)."""
    import os
    import subprocess
    import sys
    import time

    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", _MAIN, *args],
        capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}, cwd=REPO,
    )  # fmt: skip
    return proc, time.monotonic() - started


_MAIN = "import sys; from ckptctl.cli import main; sys.argv[0] = 'ckptctl'; main()"


def run_ckptctl_counting_connections(*args: str, env: dict[str, str] | None = None, timeout: float = 120):
    """:func:`run_ckptctl`, and the addresses the process tried to connect to (every TCP connect,
    blocking or asyncio's): how often a command tried an endpoint is what says it gave up at once,
    where its time on a loaded machine says little (imports alone took 10x longer under load)."""
    import os
    import subprocess
    import sys
    import tempfile

    fd, record = tempfile.mkstemp(prefix="ckptctl-connects-")
    os.close(fd)
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _COUNTING_MAIN, record, *args], capture_output=True, text=True,
            timeout=timeout, env={**os.environ, **(env or {})}, cwd=REPO,
        )  # fmt: skip
        with open(record, encoding="utf-8") as f:
            tried = [line for line in f.read().splitlines() if line]
    finally:
        os.unlink(record)
    return proc, tried


_COUNTING_MAIN = """
import atexit, socket, sys
record, tried = sys.argv.pop(1), []
real = socket.socket.connect
def connect(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6):
        tried.append("%s:%s" % address[:2])
    return real(self, address)
socket.socket.connect = connect
atexit.register(lambda: open(record, "w").write("\\n".join(tried)))
from ckptctl.cli import main
sys.argv[0] = "ckptctl"
main()
"""
