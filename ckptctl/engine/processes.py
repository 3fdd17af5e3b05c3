"""The processes around the Spark JVM, read from the operating system: a child that dies with its
parent (Linux), the processes below one, the group each belongs to.

Apart from :mod:`ckptctl.engine.spark` (the session and the JVM's life) because none of it holds
state: what :mod:`ckptctl.engine.spark` needs to start the JVM bound to ckptctl and to kill it
with the Python workers it started.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from typing import Any


def die_with_parent_call() -> Callable[[], Any] | None:
    """``prctl(PR_SET_PDEATHSIG, SIGKILL)`` ready to call in the child (looked up before the fork), or
    None off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return lambda: prctl(1, signal.SIGKILL, 0, 0, 0)  # 1: PR_SET_PDEATHSIG


def descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (Linux /proc; none elsewhere)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def exiting(pid: int) -> bool:
    """Whether ``pid`` is on its way out though not yet waitable (Linux /proc; False elsewhere).

    A SIGKILLed JVM's main thread is a zombie within milliseconds, but the process can be reaped
    (``Popen.poll``) only once its last thread has gone: 150 ms on an idle machine, seconds on a busy
    one. A session asked for in between was handed the dying JVM, and the command failed on it."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except (OSError, IndexError):
        return False


# the thread in which Hadoop's ShutdownHookManager (which Spark registers its hooks with) runs them:
# it is made when the JVM begins to exit, never before
SHUTDOWN_HOOK_THREAD = b"shutdown-hook-0"


def running_shutdown_hooks(pid: int) -> bool:
    """Whether the JVM ``pid`` is running Spark's shutdown hooks, i.e. is exiting though it still
    runs and answers (Linux /proc; False elsewhere).

    Spark's local executor ends the JVM on an OutOfMemoryError in a task (exit code 52); its hooks
    then stop the SparkContext and remove its directories, seconds on a busy machine. Seen from
    Python the command's call may fail with an error that names none of it before the connection
    drops, and a session asked for meanwhile was handed the exiting JVM: the next command failed
    with "Connection refused" (a full test run, twice in the same worker)."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm", "rb") as f:
                if f.read().strip() == SHUTDOWN_HOOK_THREAD:
                    return True
        except OSError:
            continue
    return False


def process_group(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None
