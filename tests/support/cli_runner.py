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
