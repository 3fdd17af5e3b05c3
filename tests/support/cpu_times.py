"""A pytest plugin that writes each test's CPU seconds, for measuring the suite on a shared machine.

On a loaded machine a test's wall time says more about the other work than about the test (a load
of 28 on 2 cores stretched the suite's tests 4-10x); the CPU a test and every process it starts
(a CLI process, a Spark or Flink JVM, moto) burn is what it costs a 2-core CI machine. Not loaded by
the suite (no conftest import): pass it when measuring::

    CKPTCTL_CPU_TIMES=/tmp/cpu.tsv pytest -p tests.support.cpu_times -n 1 tests/engine

One line per test: node id, CPU seconds of the test process and its descendants (live ones read
from /proc, ended ones through the reaped children's times), CPU seconds of the test process
alone, wall seconds; setup and teardown included, so the first test to use a session fixture (a
JVM, moto) carries its start. A descendant that is re-parented out of the tree before it ends
(a daemon) takes its CPU with it: a negative figure says so. Linux only.
"""

from __future__ import annotations

import os
import time

_TICK = os.sysconf("SC_CLK_TCK")
_started: dict[str, tuple[float, float, float]] = {}


def _stats() -> dict[int, tuple[int, int]]:
    """pid -> (ppid, utime + stime + cutime + cstime in ticks) of every process."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                text = f.read()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()  # state, ppid, ... (after the command name)
        out[int(entry)] = int(fields[1]), sum(int(x) for x in fields[11:15])
    return out


def tree_cpu(root: int | None = None) -> float:
    """CPU seconds of ``root`` (this process) and every live descendant."""
    stats = _stats()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, [root or os.getpid()]
    while todo:
        pid = todo.pop()
        total += stats.get(pid, (0, 0))[1]
        todo.extend(children.get(pid, ()))
    return total / _TICK


def pytest_runtest_setup(item) -> None:
    _started[item.nodeid] = (tree_cpu(), time.process_time(), time.monotonic())


def pytest_runtest_logfinish(nodeid: str, location) -> None:
    out = os.environ.get("CKPTCTL_CPU_TIMES")
    if nodeid not in _started or not out:
        return
    tree0, own0, wall0 = _started.pop(nodeid)
    row = (tree_cpu() - tree0, time.process_time() - own0, time.monotonic() - wall0)
    with open(out, "a") as f:
        f.write(nodeid + "".join(f"\t{x:.2f}" for x in row) + "\n")
