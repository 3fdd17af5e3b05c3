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


def in_one_process(
    runs: list[tuple[list[str], dict[str, str]]], hide: tuple[str, ...] = (), timeout: float = 300
):
    """Each of ``runs`` (a command line and the environment it adds) in turn, in ONE fresh process,
    through the app as :func:`cli` runs it: for tests whose point needs a process that has not done
    something yet (started a JVM, imported pyspark: ``hide`` lists modules whose import fails there),
    not a process per command (~1 CPU-s of imports each). Per run, a dict: its exit ``code``,
    ``stdout``, ``stderr`` and ``escaped``, an exception that escaped the command (a process would
    have printed its traceback) or None."""
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", _IN_ONE_PROCESS, json.dumps([hide, runs])], capture_output=True, text=True,
        timeout=timeout, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


_IN_ONE_PROCESS = """
import json, sys
hide, runs = json.loads(sys.argv[1])
for name in hide:
    sys.modules[name] = None
from typer.testing import CliRunner
from ckptctl.cli import app, gc_alias
runner = CliRunner()
out = []
for args, env in runs:
    r = runner.invoke(app, gc_alias(args), env=env)
    escaped = None if r.exception is None or isinstance(r.exception, SystemExit) else repr(r.exception)
    out.append({"code": r.exit_code, "stdout": r.stdout, "stderr": r.stderr, "escaped": escaped})
print(json.dumps(out))
"""
