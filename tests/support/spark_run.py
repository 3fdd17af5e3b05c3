"""A ckptctl Spark command as a real process of its own, and what it leaves behind.

Every process of the run (ckptctl, the Spark JVM it starts, PySpark's Python workers) inherits the
run's ``TMPDIR``, a fresh directory per run: a process whose environment names it belongs to the
run, whoever its parent is now (a JVM that outlived ckptctl has ppid 1). Linux /proc only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ckptctl.engine.processes import exiting
from tests.support.fixture_cases import REPO


@dataclass
class Proc:
    pid: int
    cmdline: str


def is_dead(pid: int | str) -> bool:
    """Whether ``pid`` has ended: gone, or a zombie (not yet reaped by its parent, which
    ``os.kill(pid, 0)`` still answers for)."""
    return exiting(int(pid)) or not os.path.exists(f"/proc/{pid}")


def processes_of(tmp: Path) -> list[Proc]:
    """The live processes (not zombies) whose environment holds ``TMPDIR=<tmp>``."""
    marker = f"TMPDIR={tmp}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if exiting(int(entry)):  # a zombie; one already gone fails at its environ below
                continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                if marker not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except (OSError, IndexError):
            continue
        found.append(Proc(int(entry), cmdline))
    return found


def is_jvm(p: Proc) -> bool:
    return "java" in p.cmdline.split(" ", 1)[0]


def is_python_worker(p: Proc) -> bool:
    return "pyspark.daemon" in p.cmdline or "pyspark.worker" in p.cmdline


class SparkRun:
    """``ckptctl ARGS`` in a new session (its own process group, as a shell's foreground job) with
    a fresh ``TMPDIR``; stdout and stderr to files (a pipe left unread could block the command)."""

    def __init__(self, tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.tmp = tmp_path / "run-tmp"
        self.tmp.mkdir(parents=True)
        self.out, self.err = tmp_path / "stdout", tmp_path / "stderr"
        environ = {**os.environ, "TMPDIR": str(self.tmp), "PYTHONPATH": str(REPO),
                   "CKPTCTL_SPARK_LOG": str(tmp_path / "spark.log"), **(env or {})}  # fmt: skip
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "ckptctl", *args], stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                env=environ, cwd=REPO, start_new_session=True,
            )  # fmt: skip

    def wait_for(self, what: Callable[[list[Proc]], bool], timeout: float = 600) -> bool:
        """Whether ``what`` came to hold of the run's processes before the command ended (polled;
        ``timeout`` only guards against a hang)."""
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            if what(processes_of(self.tmp)):
                return self.proc.poll() is None
            time.sleep(0.05)
        return False

    def interrupt(self) -> None:
        """Ctrl-C as a terminal sends it: SIGINT to the foreground process group."""
        os.killpg(self.proc.pid, signal.SIGINT)

    def finish(self, timeout: float = 600) -> tuple[int, str, str]:
        code = self.proc.wait(timeout)
        return code, self.out.read_text(), self.err.read_text()

    def survivors(self, grace: float = 15) -> list[Proc]:
        """The run's processes still alive ``grace`` seconds after the command ended (a process
        killed with SIGKILL may take a moment to go on a loaded machine)."""
        deadline = time.monotonic() + grace
        while (left := processes_of(self.tmp)) and time.monotonic() < deadline:
            time.sleep(0.1)
        return left

    def kill_survivors(self) -> None:
        for p in processes_of(self.tmp):
            with contextlib.suppress(OSError):
                os.kill(p.pid, signal.SIGKILL)
