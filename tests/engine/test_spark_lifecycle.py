"""The embedded Spark JVM on a machine it shares (issue 48): a heap sized from the memory that is
free, a JVM that died (of memory, or killed) named in one line, and a dead session replaced by a
new one instead of failing every later Spark command of the process."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.cli_runner import DATA, cli
from tests.support.fixture_cases import data_rebase
from tests.support.spark_run import SparkRun, is_dead, is_jvm, is_python_worker

BASIC = DATA / "2.2.0" / "basic"
GiB = 1 << 30


def fake_machine(tmp_path: Path, available_kb: int, cgroup: str, limits: dict[str, tuple[str, str]]) -> tuple:
    """A /proc with ``MemAvailable`` and a cgroup line, and a cgroup tree with limit and usage files."""
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "meminfo").write_text(
        f"MemTotal:       65536000 kB\nMemFree:  100 kB\nMemAvailable:   {available_kb} kB\n"
    )
    (proc / "self" / "cgroup").write_text(cgroup)
    root = tmp_path / "cgroup"
    for rel, (name_value, used_value) in limits.items():
        d = root / rel
        d.mkdir(parents=True, exist_ok=True)
        limit_name, used_name = (
            ("memory.limit_in_bytes", "memory.usage_in_bytes")
            if rel.startswith("memory")
            else ("memory.max", "memory.current")
        )
        (d / limit_name).write_text(name_value + "\n")
        (d / used_name).write_text(used_value + "\n")
    return str(proc), str(root)


def test_available_memory_is_the_free_memory_or_the_cgroups_room_if_less(tmp_path: Path) -> None:
    from ckptctl.engine.machine import available_memory

    # no cgroup limit (v2 "max"): MemAvailable
    proc, root = fake_machine(tmp_path / "a", 8 << 20, "0::/ci.slice/job\n", {"ci.slice/job": ("max", "123")})
    assert available_memory(proc, root) == 8 * GiB
    # a v2 limit on the parent slice only: its room (limit less usage), lower than MemAvailable
    proc, root = fake_machine(tmp_path / "b", 8 << 20, "0::/ci.slice/job\n",
                              {"ci.slice/job": ("max", "0"), "ci.slice": (str(3 * GiB), str(GiB))})  # fmt: skip
    assert available_memory(proc, root) == 2 * GiB
    # v1 (a container's memory controller), "no limit" written as 2^63 rounded to a page, then a limit
    v1 = "4:memory:/docker/abc\n3:cpu:/docker/abc\n"
    proc, root = fake_machine(
        tmp_path / "c", 8 << 20, v1, {"memory/docker/abc": ("9223372036854771712", "5")}
    )
    assert available_memory(proc, root) == 8 * GiB
    proc, root = fake_machine(
        tmp_path / "d", 8 << 20, v1, {"memory/docker/abc": (str(4 * GiB), str(3 * GiB))}
    )
    assert available_memory(proc, root) == GiB
    # a limit above what the machine has free does not raise it
    proc, root = fake_machine(tmp_path / "e", 1 << 20, "0::/\n", {".": (str(64 * GiB), "0")})
    assert available_memory(proc, root) == GiB
    # nothing readable: unknown
    assert available_memory(str(tmp_path / "none"), str(tmp_path / "none")) == 0


def test_the_heap_is_a_quarter_of_the_free_memory_not_of_the_total(monkeypatch) -> None:
    """A quarter of the total (6 GB on 24 GB) per JVM, on a machine whose memory other work held,
    drew the kernel's OOM killer (two test workers beside Flink's MiniClusters)."""
    from ckptctl.engine import machine
    from ckptctl.engine.spark_startup import driver_memory

    monkeypatch.setattr(machine, "machine_memory", lambda: 24 * GiB)
    monkeypatch.setattr(machine, "available_memory", lambda: 6 * GiB)
    assert driver_memory() == "1536m"
    monkeypatch.setattr(machine, "available_memory", lambda: 2 * GiB)
    assert driver_memory() == "1024m"  # never below spark-submit's own default
    monkeypatch.setattr(machine, "available_memory", lambda: 200 * GiB)
    assert driver_memory() == "8192m"
    monkeypatch.setattr(machine, "available_memory", lambda: 0)  # unknown: the total
    assert driver_memory() == "6144m"


def test_the_suites_spark_heap_fits_two_workers_beside_flink() -> None:
    """Each test worker's JVM gets the suite's heap (tests/support/jvm.py), not the product's
    sizing: the suite's inputs are small, the machine is shared."""
    from ckptctl.engine.spark import spark_session

    heap = spark_session("local[*]").sparkContext._jvm.java.lang.Runtime.getRuntime().maxMemory()
    assert heap <= 2 * GiB, heap


def jvm_pid(spark) -> int:
    return spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()


def verify_on_spark() -> dict:
    result = cli("verify", str(BASIC), "--engine", "spark", "--json", *data_rebase(DATA))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def wait_gone(pid: int) -> None:
    """Until ``pid`` is dead: gone, or a zombie. A JVM this process started and killed stays a
    zombie until ckptctl's next Spark use reaps it, and ``os.kill(pid, 0)`` answers for a zombie:
    the wait ran out its 60 s in silence at every run."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if is_dead(pid):
            return
        time.sleep(0.005)
    raise AssertionError(f"process {pid} still runs 60 s after it was ended")


def test_a_killed_spark_jvm_is_replaced_by_a_new_one_on_the_next_command() -> None:
    """The kernel's OOM killer took a test worker's Spark JVM, and every later Spark test of that
    worker failed (``Connection refused``): the process kept the dead session. The next Spark use
    starts a new JVM and a new session, also when it comes while the killed JVM's threads are
    still going (its main thread a zombie, the process not yet reapable)."""
    from ckptctl.engine.spark import spark_session

    dead = jvm_pid(spark_session("local[*]"))
    os.kill(dead, signal.SIGKILL)
    wait_gone(dead)  # its main thread is a zombie; the process is reaped only once every thread has gone
    assert jvm_pid(spark_session("local[*]")) != dead  # asked for at once: not handed the dying JVM
    report = verify_on_spark()
    assert report["ok"] and report["engine"] == "spark"


def test_a_jvm_that_ran_out_of_memory_is_named_and_replaced() -> None:
    """A task that needs more than the heap: Spark's local executor ends the JVM (exit code 52).
    What Python sees is a dropped connection; the line says the JVM ran out of memory and how to
    give it more. The next Spark use starts a new JVM."""
    from ckptctl.engine.spark import spark_failure, spark_session

    spark = spark_session("local[*]")
    heap = spark.sparkContext._jvm.java.lang.Runtime.getRuntime().maxMemory()
    longs = min(2**31 - 64, 2 * heap // 8)  # one array of twice the heap
    with pytest.raises(Exception) as e:
        spark.range(1).selectExpr(f"size(array_repeat(id, {longs}))").collect()
    line = spark_failure(e.value)
    assert line and line.startswith("the Spark JVM ran out of memory") and "SPARK_DRIVER_MEMORY" in line, line
    assert "\n" not in line
    report = verify_on_spark()
    assert report["ok"] and report["engine"] == "spark"


def test_a_jvm_named_out_of_memory_is_not_handed_out_again_while_it_still_answers() -> None:
    """After an OutOfMemoryError the JVM runs its shutdown hooks before it exits (code 52) and still
    answers meanwhile: on a loaded machine the next command was given that dying JVM and failed on
    it with the same line (test above, in a full run under load). Once ckptctl has said the JVM ran
    out of memory, the next session is a new JVM, however long the old one takes to go."""
    from ckptctl.engine.spark import spark_failure, spark_session

    old = jvm_pid(spark_session("local[*]"))
    line = spark_failure(RuntimeError("An error occurred: java.lang.OutOfMemoryError: Java heap space"))
    assert line and line.startswith("the Spark JVM ran out of memory"), line
    new = jvm_pid(spark_session("local[*]"))
    assert new != old
    wait_gone(old)
    with pytest.raises(ProcessLookupError):  # the old one was ended, not left running beside the new one
        os.kill(old, 0)
    report = verify_on_spark()
    assert report["ok"] and report["engine"] == "spark"


class _SlowHook:
    """A shutdown hook of Hadoop's ShutdownHookManager (Spark's hooks run there, in the JVM's
    ``shutdown-hook-0`` thread): a Java Runnable whose ``run`` py4j calls back in this Python, where
    it sleeps, so that the JVM stays in its hooks for as long as a busy machine kept it there."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def run(self) -> None:
        time.sleep(self.seconds)

    class Java:
        implements = ["java.lang.Runnable"]


def exit_slowly(spark, code: int, seconds: float) -> int:
    """``System.exit(code)`` of the session's JVM (what Spark's local executor does on an
    OutOfMemoryError in a task: 52) with a hook that holds it in its shutdown for ``seconds``;
    returns the JVM's pid once it runs its hooks (it still answers then)."""
    import threading

    from ckptctl.engine.processes import running_shutdown_hooks

    jvm, pid = spark.sparkContext._jvm, jvm_pid(spark)
    hook = jvm.java.lang.Thread(_SlowHook(seconds))  # a Java object (Hadoop keeps its hooks in a set)
    jvm.org.apache.hadoop.util.ShutdownHookManager.get().addShutdownHook(hook, 1_000)

    def exit_jvm() -> None:
        with contextlib.suppress(Exception):  # the call's connection goes with the JVM
            jvm.java.lang.System.exit(code)

    threading.Thread(target=exit_jvm, daemon=True).start()
    deadline = time.monotonic() + 60
    while not running_shutdown_hooks(pid):
        assert time.monotonic() < deadline, "the JVM did not begin to exit"
        time.sleep(0.01)
    return pid


def test_a_jvm_running_its_shutdown_hooks_is_named_and_never_handed_out() -> None:
    """Spark's local executor ends the JVM on an OutOfMemoryError (exit 52); its shutdown hooks
    take seconds on a busy machine, and meanwhile the JVM answers. A full run saw both halves fail:
    the command's call failed with an error that named nothing ckptctl knows (no line, a traceback's
    worth of py4j instead), and the next test was handed the exiting JVM and failed on it with
    "Connection refused". A JVM in its shutdown hooks is now waited for whatever the error, and
    never handed out again: the next session is a new JVM."""
    from ckptctl.engine.spark import spark_failure, spark_session

    exit_slowly(spark_session("local[*]"), 52, 3)
    line = spark_failure(RuntimeError("an error that names no JVM, connection or memory"))
    assert line and line.startswith("the Spark JVM ran out of memory") and "\n" not in line, line
    old = exit_slowly(spark_session("local[*]"), 52, 30)
    new = jvm_pid(spark_session("local[*]"))  # asked for while the old one runs its hooks
    assert new != old
    wait_gone(old)  # ended, not left beside the new one
    report = verify_on_spark()
    assert report["ok"] and report["engine"] == "spark"


def test_a_jvm_killed_mid_command_is_one_line_naming_the_oom_killer(tmp_path: Path) -> None:
    """``kill -9`` of the JVM while the command's job runs (what the kernel's OOM killer does):
    one line that says so, exit 2, no traceback, nothing left behind. The job on a fixture takes
    about a second: a kill that came after it ended is tried again (three tries at most)."""
    chk = sorted(BASIC.rglob("chk-*"))[-1]
    for attempt in range(3):
        run = SparkRun(
            tmp_path / str(attempt), "verify", str(chk), "--deep", "--engine", "spark", *data_rebase(DATA)
        )
        try:
            assert run.wait_for(lambda ps: any(is_python_worker(p) for p in ps)), run.finish()
            for jvm in [p for p in run.survivors(grace=0) if is_jvm(p)]:
                os.kill(jvm.pid, signal.SIGKILL)
            code, _out, err = run.finish()
            if code == 0:
                continue  # the job had ended: the kill came too late
            lines = err.strip().splitlines()
            assert code == 2 and len(lines) == 1, err
            said = "error: the Spark JVM died (killed by signal 9, SIGKILL: likely the kernel's OOM killer)"
            assert lines[0].startswith(said) and "SPARK_DRIVER_MEMORY" in lines[0], lines[0]
            assert run.survivors() == [] and os.listdir(run.tmp) == []
            return
        finally:
            run.kill_survivors()
    pytest.fail("the job ended before the JVM was killed, three times")


# Run in a process of its own: the counts are of one JVM and one Python that nothing else touched
# (in a test worker the proxies of earlier tests come and go meanwhile), and no test after it
# meets what it did to that Python's collector.
_PROXIES_PILE_UP = """
import gc, json, time
from py4j.finalizer import ThreadSafeFinalizer
from ckptctl.engine import spark as engine

spark = engine.spark_session("local[*]")
# the JVM objects py4j holds for Python, asked through one proxy (a call that made a new one
# each time would add to what it counts)
bindings = spark.sparkContext._gateway.java_gateway_server.getGateway().getBindings()
gc.disable()  # no collection of Python's own: only the session's may free them
gc.collect()
engine._proxies_limit = len(ThreadSafeFinalizer.finalizers) + 300
for _ in range(500):
    jlist = spark.sparkContext._jvm.java.util.ArrayList()
    jlist.size()  # a method called: its proxy is now in a cycle
del jlist
piled, held = len(ThreadSafeFinalizer.finalizers), bindings.size()
reused = engine.spark_session("local[*]") is spark
left = len(ThreadSafeFinalizer.finalizers)
deadline = time.monotonic() + 60  # py4j tells the JVM as each proxy goes, from a thread of its own
while bindings.size() > held - 490 and time.monotonic() < deadline:
    time.sleep(0.1)
print(json.dumps({"piled": piled, "held": held, "reused": reused, "left": left, "jvm_after": bindings.size()}))
"""


def test_a_reused_session_lets_the_jvm_free_what_earlier_commands_held() -> None:
    """A process that runs command after command on one session (a test worker, a notebook) held
    every earlier command's JVM objects: each DataFrame, column and plan is a py4j proxy, and one a
    method was called on is in a reference cycle, freed only by Python's cyclic collector, which
    scans old objects rarely. 72 warm gc plans filled a 1.5 GB heap and the 120th failed. When
    proxies pile up, the next command's session collects them, and the JVM lets their objects go."""
    from tests.support.fixture_cases import REPO

    proc = subprocess.run(
        [sys.executable, "-c", _PROXIES_PILE_UP], capture_output=True, text=True, timeout=300, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["piled"] >= 500 and seen["held"] >= 500, seen  # garbage, and the JVM keeps its objects
    assert seen["reused"], seen
    assert seen["left"] <= seen["piled"] - 495, seen  # collected when the session was asked for again
    assert seen["jvm_after"] <= seen["held"] - 490, seen  # and the JVM let their objects go
