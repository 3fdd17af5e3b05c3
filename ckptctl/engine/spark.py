"""The Spark engine: one SparkSession per process (the JVM it starts, interrupts, deaths and the
clean-up at exit) and the tasks spread over executors (``mapPartitions`` of the caller's task
function). What is checked and chosen before the JVM starts is :mod:`ckptctl.engine.spark_startup`;
the Arrow batches tasks hand back, :mod:`ckptctl.engine.arrow`.

Executors get the storage settings as the picklable :class:`ckptctl.storage.StorageOptions` bound
into the task function (a ``functools.partial``), never as environment variables. The one
environment change is ``PYSPARK_PYTHON``/``PYSPARK_DRIVER_PYTHON`` before the first session:
PySpark reads the Python its executors run from the driver's ``os.environ``
(``SparkContext.pythonExec``), and it must be this interpreter (same ckptctl, same rocksdict).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ckptctl.engine.processes import (
    descendants,
    die_with_parent_call,
    exiting,
    process_group,
    running_shutdown_hooks,
)
from ckptctl.engine.spark_startup import (
    driver_memory,
    java_problem,
    jvm_collector,
    spark_log_path,
    unreachable_master,
)
from ckptctl.errors import CkptError


class EngineError(CkptError):
    """The work could not run on Spark (no pyspark or Java, no master, a failed job): exit 2."""


_SPARK_LOCK = threading.Lock()
_SPARK: Any = None
_LOCAL_DIR: str | None = None  # the session's spark.local.dir: blockmgr-*, spark-*/userFiles-*, pyspark-*
_JVM_DIR: str | None = None  # the JVM's java.io.tmpdir (spark-submit's spark-*, native libraries)
# Every spark.local.dir this process made: Spark caches the first session's local root for the
# JVM's lifetime and re-creates it when a later session of the same JVM puts files there, so a
# directory removed at stop can come back; they all go once the JVM has exited.
_ALL_LOCAL_DIRS: list[str] = []
# The gateway JVM this process started (the Popen of spark-submit, which execs java: its pid is the
# JVM's), in a process group of its own; None until one is started or when it was not started here.
_JVM_PROC: Any = None
# the JVM spark_failure named as dead or out of memory: never handed out again, even while it still
# answers (its shutdown hooks run first; on a loaded machine the next command's session was that
# dying JVM, and the command failed on it with the same line)
_DOOMED: Any = None
_HEAP: str | None = None  # the heap it was given (-Xmx): for the line that says it ran out
_INTERRUPTED = False  # Ctrl-C while a session ran: at exit the JVM is killed, not asked to stop
_LOG_NAMED = False  # a line named this process's Spark log: it is kept at exit


def running(master: str) -> bool:
    """Whether this process has a live session on ``master`` (:func:`spark_session` returns it at once)."""
    with _SPARK_LOCK:
        return _live(master)


def _live(master: str) -> bool:
    return (
        _SPARK is not None
        and _jvm_alive()
        and _SPARK.sparkContext._jsc is not None
        and _SPARK.sparkContext.master == master
    )


def _jvm_alive() -> bool:
    """Whether the JVM this process started is still running and was not named as dying nor is
    on its way out: a zombie, or running its shutdown hooks (one started elsewhere is taken to be
    alive)."""
    return _JVM_PROC is None or (
        _JVM_PROC.poll() is None
        and _JVM_PROC is not _DOOMED
        and not exiting(_JVM_PROC.pid)
        and not running_shutdown_hooks(_JVM_PROC.pid)
    )


def spark_session(master: str) -> Any:
    """One SparkSession per process and master (re-created when the master changes).

    What can be checked before a JVM starts is checked first, in a second: a usable Java
    (Spark needs Java 17+) and, for ``spark://`` masters, that a master answers on its port. The
    JVM's own output (Spark and Hadoop warnings, stack traces) goes to :func:`spark_log_path`, not
    to the user's terminal; errors name that file.
    """
    global _SPARK, _LOCAL_DIR
    with _SPARK_LOCK:
        if _live(master):
            _release_earlier_plans()
            return _SPARK
        if not _jvm_alive():  # killed (the OOM killer) or out of memory: a new JVM, a new session
            _forget_dead_jvm()
        if _SPARK is not None:
            _stop_locked()
        # executors must run the driver's Python (same ckptctl, same rocksdict)
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
        try:
            from pyspark import SparkContext
            from pyspark.sql import SparkSession
        except ImportError:
            from ckptctl.engine.extra import no_spark

            raise EngineError(no_spark().message) from None
        log = spark_log_path()
        if SparkContext._gateway is None:
            problem = java_problem()
            if problem:
                raise EngineError(f"the Spark engine needs Java 17+ ({problem}); or use --engine local")
        unreachable = unreachable_master(master)
        if unreachable:
            raise EngineError(unreachable)
        # Spark's scratch space in directories of this run, removed when it stops (and at exit): the
        # JVM's own clean-up runs in its shutdown hooks after this process has gone, and a JVM that
        # is killed (a CI job's process group, a container) leaves them in the shared temp dir
        _LOCAL_DIR = tempfile.mkdtemp(prefix="ckptctl-spark-local-")
        _ALL_LOCAL_DIRS.append(_LOCAL_DIR)
        builder = (
            SparkSession.builder.master(master)
            .config("spark.local.dir", _LOCAL_DIR)
            .appName("ckptctl verify")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.pyspark.python", sys.executable)
            .config("spark.pyspark.driver.python", sys.executable)
            .config("spark.python.worker.reuse", "true")
            # PySpark imported from this Python's own install, with its bytecode: not compiled from
            # Spark's pyspark.zip by every worker (ckptctl.engine.spark_daemon)
            .config("spark.python.daemon.module", "ckptctl.engine.spark_daemon")
            # a persisted join keeps spark.sql.shuffle.partitions (200) partitions unless adaptive
            # execution may coalesce it: every later job over it ran 200 tasks, a partitioned write
            # made 200 files per directory
            .config("spark.sql.optimizer.canChangeCachedPlanOutputPartitioning", "true")
            # a partitioned write (gc plan's lists by list and job) keeps a writer open per
            # directory instead of sorting each task's rows by directory first
            .config("spark.sql.maxConcurrentOutputFileWriters", "64")
            # gc plan keeps its 10^7 rows per URI serialized (PySpark's storage levels are the
            # serialized ones), read again by the totals and the written lists: with Java's
            # serialization each row went through writeExternal/readObject (sampled: the largest
            # share of the executors' stacks after the shuffle); Kryo took a 10^7-row plan from
            # 178.7-186.8 s to 147.7-158.9 s (bench/bucket_bench.py, two runs each, turn about)
            .config("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
            # PySpark's DataFrame debugging wraps every DataFrame and functions call in py4j calls that
            # tell the JVM the Python call site (getActiveSession, conf.get, set, clear: ~5 round
            # trips and a walk of the Python stack each), for the "== DataFrame ==" context of
            # analysis errors, which ckptctl never shows (its errors are one line of its own). A
            # small gc plan made ~4,500 py4j calls, 1,300 of them these
            .config("spark.python.sql.dataFrameDebugging.enabled", "false")
        )
        if _loopback_master(master):
            builder = builder.config("spark.driver.host", "127.0.0.1").config(
                "spark.driver.bindAddress", "127.0.0.1"
            )
        quiet_py4j()
        try:
            if SparkContext._gateway is None:
                _launch_gateway(log)
            before = signal.getsignal(signal.SIGINT) if _main_thread() else None
            _SPARK = builder.getOrCreate()
            if before is not None and signal.getsignal(signal.SIGINT) is not before:
                # PySpark's handler asks the JVM to cancel its jobs: not on the way out
                signal.signal(signal.SIGINT, _interrupt_handler(before))
            _quiet_accumulator_server(_SPARK.sparkContext)
            _remember_classes(_SPARK.sparkContext._jvm)
            _SPARK.sparkContext.setLogLevel("ERROR")
        except BaseException as e:
            _stop_locked()
            if not isinstance(e, Exception):
                _kill_jvm()  # KeyboardInterrupt while the JVM starts: it goes now, not at exit
                raise
            raise EngineError(
                jvm_death()
                or f"cannot start Spark with master {master}: {_short(e)} (Spark log: {log_named(log)})"
            ) from None
        return _SPARK


# py4j proxies (DataFrames', columns', plans' JVM objects) outstanding above which a reused
# session's process collects its garbage first; doubled while live ones keep it above
_PROXIES_COLLECTED_ABOVE = 10_000
_proxies_limit = _PROXIES_COLLECTED_ABOVE


def _release_earlier_plans() -> None:
    """Let the JVM free what the earlier commands of this process (a test worker, a notebook) held.

    Each DataFrame and column of a command holds a JVM object through a py4j proxy, and the JVM
    object holds the whole analysed and optimised query (~13 MB a gc plan). The JVM lets it go when
    the proxy is collected, and a proxy a method was called on is in a reference cycle (py4j caches
    the method on it, pointing back): only Python's cyclic collector frees it. That collector
    scans the oldest objects rarely in a process with many of them, and a long-lived process kept
    the proxies of every plan: 72 warm gc plans filled a 1.5 GB driver heap, each next one cost
    more (13 -> 34 JVM CPU-s per six) and the 120th failed ("Not enough memory to build and
    broadcast"). py4j counts its outstanding proxies (one finalizer each), so the collection runs
    only when they pile up, not at every command: one command leaves a few hundred (a small gc plan
    ~670; the count grows with the plan's DataFrame calls, not its rows), and its own process,
    which asks for the session more than once, does not get there."""
    global _proxies_limit
    from py4j.finalizer import ThreadSafeFinalizer

    if len(ThreadSafeFinalizer.finalizers) <= _proxies_limit:
        return
    gc.collect()
    _proxies_limit = max(_PROXIES_COLLECTED_ABOVE, 2 * len(ThreadSafeFinalizer.finalizers))


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _interrupt_handler(before: Any) -> Any:
    """SIGINT while a session is up: remember it (the JVM is then killed at exit, not stopped: a
    stop waits on the jobs it cancels) and do what was done before PySpark's handler (Python's:
    KeyboardInterrupt). PySpark's own sent the JVM a cancel from inside the handler, in the middle
    of whatever py4j call the main thread was making."""

    def handler(signum: int, frame: Any) -> None:
        global _INTERRUPTED
        _INTERRUPTED = True
        if callable(before):
            before(signum, frame)
        elif before == signal.SIG_DFL:
            raise KeyboardInterrupt

    return handler


class _QuietPy4J(logging.Handler):
    """py4j reports a KeyboardInterrupt during a call, and a JVM that went away, with
    ``logging.exception`` on the root logger, which (nothing configured) made Python's
    ``basicConfig`` print ``ERROR:root:...`` and a traceback on the user's terminal, 2-4 of them
    per Ctrl-C. ckptctl says what happened in one line itself. Everything else is handed on as
    Python does when nothing is configured (its last-resort handler: warnings and above, on stderr)."""

    def emit(self, record: logging.LogRecord) -> None:
        if "py4j" in record.pathname.replace("\\", "/").split("/") or record.name.startswith("py4j"):
            return
        if record.levelno >= logging.lastResort.level:
            logging.lastResort.handle(record)


# the JVM classes PySpark looks up by name on every column function, ``select`` and ``parallelize``
_LOOKED_UP = ("org.apache.spark.sql.functions", "functions", "PythonUtils", "PythonRDD", "SerDeUtil")


def _remember_classes(jvm: Any) -> None:
    """The classes of :data:`_LOOKED_UP` and their static methods looked up once per JVM instead of
    at each call. py4j asks the JVM for a class at every ``jvm.functions`` and for a method at every
    ``functions.col``: ~600 of a small gc plan's ~1,850 py4j calls, and a short name (``functions``,
    ``PythonUtils``) is first tried as a full name and then in each imported package before its
    own, each miss a search of every jar on the class path (5 % of the JVM's samples). The same
    handles (a name and the gateway's client, no state) go to the same JVM methods. A new JVM has
    a new view (the cache goes with the old one); a py4j without these internals keeps looking up."""
    try:
        from py4j.java_gateway import JavaClass, JavaMember
    except ImportError:
        return

    class Remembered(JavaClass):
        def __getattr__(self, name: str) -> Any:
            member = super().__getattr__(name)
            if isinstance(member, JavaMember):  # a static method (a field's value is asked each time)
                self.__dict__[name] = member
            return member

    for name in _LOOKED_UP:
        with contextlib.suppress(Exception):
            found = getattr(jvm, name)
            if isinstance(found, JavaClass) and not isinstance(found, Remembered):
                jvm.__dict__[name] = Remembered(found._fqn, found._gateway_client)


def _quiet_accumulator_server(sc: Any) -> None:
    """PySpark's accumulator server (a thread of this process) prints a traceback on stderr when the
    JVM's connection to it drops (``EOFError``: the JVM died): the death is said in one line."""
    server = getattr(sc, "_accumulatorServer", None)
    if server is not None:
        server.handle_error = lambda request, client_address: None


def quiet_py4j() -> None:
    """Keep py4j's logging off the terminal (see :class:`_QuietPy4J`); once per process."""
    root = logging.getLogger()
    if not any(isinstance(h, _QuietPy4J) for h in root.handlers):
        root.addHandler(_QuietPy4J())


def _launch_gateway(log: str) -> None:
    """Start the JVM with its stdout and stderr in ``log`` (truncated: one run per file) and its
    ``java.io.tmpdir`` in a directory of this process, removed at exit (:func:`stop_spark`)."""
    global _JVM_DIR, _HEAP
    from pyspark import SparkContext, java_gateway
    from pyspark.java_gateway import launch_gateway

    if _JVM_DIR is None:
        _JVM_DIR = tempfile.mkdtemp(prefix="ckptctl-spark-jvm-")
    # spark-class adds SPARK_SUBMIT_OPTS to the JVM's options (the user's own come last and win);
    # launch_gateway passes the JVM a copy of os.environ, so it is set there while it starts
    before = os.environ.get("SPARK_SUBMIT_OPTS")
    os.environ["SPARK_SUBMIT_OPTS"] = " ".join(
        [f"-Djava.io.tmpdir={_JVM_DIR}", *jvm_collector(os.environ), before or ""]
    ).strip()
    from pyspark import SparkConf

    conf = SparkConf(loadDefaults=False)
    _HEAP = os.environ.get("SPARK_DRIVER_MEMORY")  # spark-submit reads the user's own itself
    if not _HEAP:
        _HEAP = driver_memory()
        conf.set("spark.driver.memory", _HEAP)
    java_gateway.Popen = _jvm_popen  # the module's name for it, while this launch runs
    try:
        with open(log, "wb") as f:
            gateway = launch_gateway(conf=conf, popen_kwargs={"stdout": f, "stderr": f})
    except BaseException:
        _kill_jvm()
        raise
    finally:
        java_gateway.Popen = subprocess.Popen
        if before is None:
            del os.environ["SPARK_SUBMIT_OPTS"]
        else:
            os.environ["SPARK_SUBMIT_OPTS"] = before
    SparkContext._ensure_initialized(gateway=gateway)


def _jvm_popen(command: list[str], **kwargs: Any) -> subprocess.Popen:
    """PySpark's launch of the gateway JVM, made to go with this process: in a process group of
    its own (Ctrl-C reaches ckptctl only, which decides; the JVM and its Python workers can be
    killed together), killed by the kernel if this process dies first (Linux: a SIGKILL of
    ckptctl, a closed terminal), and remembered at once, so an interrupt during the start can end
    it too. PySpark's own launch relied on the JVM reading its stdin's end, and once in seven
    interrupted runs the JVM outlived ckptctl (ppid 1, its scratch directory left behind)."""
    global _JVM_PROC
    theirs = kwargs.pop("preexec_fn", None)
    parent = os.getpid()
    # the kernel sends it when the forking THREAD ends: only the main thread lives as long as ckptctl
    die_with_parent = die_with_parent_call() if _main_thread() else None

    def preexec() -> None:
        if theirs is not None:
            theirs()  # PySpark's: the JVM ignores SIGINT
        if die_with_parent is not None:
            die_with_parent()
            if os.getppid() != parent:  # the parent died before the request: go now
                os._exit(1)

    _JVM_PROC = subprocess.Popen(command, preexec_fn=preexec, start_new_session=True, **kwargs)
    return _JVM_PROC


def jvm_death() -> str | None:
    """One line for a JVM of this process that died while it was used, or ``None`` while it runs.

    Spark's local executor ends the JVM with exit code 52 on an ``OutOfMemoryError`` in a task;
    the kernel's OOM killer ends it with SIGKILL, and then all Python sees is a dropped py4j
    connection ("Answer from Java side is empty", "Connection refused")."""
    proc = _JVM_PROC
    if proc is None or proc.poll() is None:
        return None
    code, log = proc.returncode, spark_log_path()
    if code == 52 or _log_says_out_of_memory(log):
        return out_of_memory_line(log)
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        likely = ": likely the kernel's OOM killer" if -code == signal.SIGKILL else ""
        return (
            f"the Spark JVM died (killed by signal {-code}, {name}{likely}); its heap was {_HEAP}: free "
            f"memory or set SPARK_DRIVER_MEMORY lower, or use --engine local (Spark log: {log_named(log)})"
        )
    return f"the Spark JVM exited with code {code} while in use (Spark log: {log_named(log)})"


def log_named(log: str | None = None) -> str:
    """This process's Spark log (``log``, or :func:`spark_log_path`) as a line names it: a log a
    line has named is kept at exit, any other this process wrote is removed then."""
    global _LOG_NAMED
    _LOG_NAMED = True
    return log or spark_log_path()


def out_of_memory_line(log: str | None = None) -> str:
    return (
        f"the Spark JVM ran out of memory (heap {_HEAP or 'unknown'}): set SPARK_DRIVER_MEMORY higher "
        f"(e.g. 4g), or use --engine local (Spark log: {log_named(log)})"
    )


def spark_failure(e: BaseException, wait: float = 30.0) -> str | None:
    """One line for an error that is the JVM's death or its running out of memory, else ``None``
    (the CLI asks, for any error of a command that used Spark). py4j sees the connection go before
    the JVM has finished exiting (its shutdown hooks run first): up to ``wait`` seconds are given to
    it, to say how it ended. Not after a Ctrl-C: the call was dropped because of it, and the JVM
    (in a process group of its own, never sent the SIGINT) does not end by itself: it is killed at
    exit. Waiting for it held an interrupted command for the whole ``wait`` (1 in 8 interrupted
    ``states --engine spark`` runs: 30 s between the Ctrl-C and ``error: interrupted``)."""
    if _INTERRUPTED:
        return None
    text = f"{type(e).__name__}: {e}"
    proc = _JVM_PROC
    if proc is not None and proc.poll() is None:
        if _connection_lost(e, text) or _no_java_detail(e, text) or running_shutdown_hooks(proc.pid):
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=wait)
        elif _dropped(e, text) or _shut_down(text):
            # the gateway still answered, yet the connection went, or the JVM answered that its
            # SparkContext was shut down under the job: a JVM running its shutdown hooks (after an
            # OutOfMemoryError, exit 52) answers for a moment on a busy machine
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=min(wait, 10.0))
    global _DOOMED
    death = jvm_death()
    if death:
        return death
    if "java.lang.OutOfMemoryError" in text or "SparkOutOfMemoryError" in text:
        _DOOMED = proc  # going down (exit 52) or short of memory: the next session is a new JVM
        return out_of_memory_line()
    if proc is not None and proc.poll() is None and running_shutdown_hooks(proc.pid):
        _DOOMED = proc  # its hooks outlasted the wait: exiting all the same, never handed out again
        log = spark_log_path()
        return (
            f"the Spark JVM began to exit while the command used it (its shutdown hooks still ran "
            f"{wait:g} s later; Spark log: {log_named(log)})"
        )
    return None


def _no_java_detail(e: BaseException, text: str) -> bool:
    """A Java error py4j could not describe (no Java class in its text): the JVM was going down as
    py4j asked it for the exception (an OutOfMemoryError ends the local executor's JVM with code
    52 a moment later), so its end is waited for, to say how it ended."""
    return type(e).__name__ == "Py4JJavaError" and "java." not in text and "org.apache." not in text


def _connection_lost(e: BaseException, text: str) -> bool:
    """py4j's word for a JVM whose end of the connection went away (or a ckptctl error quoting it),
    or a refused or reset connection while the JVM's gateway no longer answers: the socket closes
    as the kernel tears a killed process down, a moment before the process can be waited for."""
    protocol = sys.modules.get("py4j.protocol")
    if protocol is not None and isinstance(e, protocol.Py4JNetworkError):
        return True
    if "Answer from Java side is empty" in text or "Py4JNetworkError" in text:
        return True
    return _dropped(e, text) and not _gateway_answers()


def _shut_down(text: str) -> bool:
    """The JVM's own answer when its shutdown hooks stopped the SparkContext under a running job
    (``Job 0 cancelled because SparkContext was shut down``): what the call sees of a local executor
    that ran out of memory when the JVM answers it before the connection drops."""
    return "because SparkContext was shut down" in text


def _dropped(e: BaseException, text: str) -> bool:
    """A refused or reset connection to the JVM's gateway."""
    return (
        isinstance(e, ConnectionError) or "ConnectionRefusedError" in text or "ConnectionResetError" in text
    )


def _gateway_answers() -> bool:
    try:
        from pyspark import SparkContext

        params = SparkContext._gateway.gateway_parameters
        with socket.create_connection((params.address, params.port), timeout=2):
            return True
    except Exception:  # noqa: BLE001 - no gateway, or it refuses: it does not answer
        return False


def _log_says_out_of_memory(log: str) -> bool:
    """The JVM's output (its last 64 KiB) names an OutOfMemoryError."""
    try:
        with open(log, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - (64 << 10)))
            return b"java.lang.OutOfMemoryError" in f.read()
    except OSError:
        return False


def _kill_jvm() -> None:
    """Kill the JVM this process started, and the Python workers it started (their own process
    groups: PySpark's daemon makes one), at once: no shutdown hooks, whose clean-up of scratch this
    process does itself. Waits until the JVM is gone."""
    global _JVM_PROC
    proc = _JVM_PROC
    if proc is None or proc.poll() is not None:
        return  # already reaped: its pid (and group) may be another's now
    groups = {proc.pid} | {
        g for g in (process_group(p) for p in descendants(proc.pid)) if g and g != os.getpgid(0)
    }
    for group in groups:
        with contextlib.suppress(OSError):
            os.killpg(group, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):  # SIGKILL is not refused
        proc.wait(timeout=30)


def _forget_dead_jvm() -> None:
    """PySpark's handles of a JVM that died (the gateway, the context, the session) dropped, so the
    next session starts a new JVM instead of failing on the old one's closed port for the rest of
    the process (a test worker's every later Spark test failed that way)."""
    global _SPARK, _JVM_PROC, _DOOMED
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    _kill_jvm()  # its Python workers, if the JVM alone was killed
    gateway = SparkContext._gateway
    if gateway is not None:
        with contextlib.suppress(Exception):  # its JVM is gone
            gateway.shutdown()
    SparkContext._gateway = None
    SparkContext._jvm = None
    SparkContext._active_spark_context = None
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None
    _SPARK = None
    _JVM_PROC = None
    _DOOMED = None


def _short(e: BaseException, limit: int = 200) -> str:
    """The first meaningful line of a (py4j, multi-kilobyte) exception, cut to ``limit`` characters."""
    text = " ".join(str(e).strip().splitlines()[:1]) or type(e).__name__
    text = f"{type(e).__name__}: {text}" if type(e).__name__ not in text else text
    return text if len(text) <= limit else text[: limit - 1] + "…"


def stop_spark() -> None:
    """Stop the session (if any) and remove its scratch directory."""
    with _SPARK_LOCK:
        _stop_locked()


def _stop_locked() -> None:
    global _SPARK, _LOCAL_DIR
    try:
        if _SPARK is not None:
            _SPARK.stop()
    except Exception:  # noqa: BLE001, S110 - a JVM that is gone already: nothing left to stop
        pass
    finally:
        _SPARK = None
        if _LOCAL_DIR is not None:
            shutil.rmtree(_LOCAL_DIR, ignore_errors=True)
            _LOCAL_DIR = None


@atexit.register
def _at_exit() -> None:
    """No JVM of this process left running, and every directory of its Spark removed, before it
    exits. After a Ctrl-C (or a JVM that died) the JVM is killed at once: a stop would wait on the
    jobs it cancels. Otherwise the session stops and the JVM is let go (its shutdown hooks run),
    killed if it has not exited after a while."""
    global _JVM_DIR, _SPARK, _LOCAL_DIR
    if _INTERRUPTED or not _jvm_alive():
        _kill_jvm()
        _SPARK = None
        if _LOCAL_DIR is not None:
            shutil.rmtree(_LOCAL_DIR, ignore_errors=True)
            _LOCAL_DIR = None
    else:
        stop_spark()
        _end_gateway()
    for d in _ALL_LOCAL_DIRS:  # Spark re-creates a later session's root: removed once the JVM is gone
        shutil.rmtree(d, ignore_errors=True)
    _ALL_LOCAL_DIRS.clear()
    if _JVM_DIR is not None:
        shutil.rmtree(_JVM_DIR, ignore_errors=True)
        _JVM_DIR = None
    if not _LOG_NAMED and not os.environ.get("CKPTCTL_SPARK_LOG"):  # a log the user asked for stays
        with contextlib.suppress(OSError):  # none was written (no JVM started here)
            os.remove(spark_log_path())


def _end_gateway(grace: float = 10.0) -> None:
    """Let this process's JVM exit (its shutdown hooks run) before its directories are removed;
    one that has not exited after ``grace`` seconds is killed."""
    try:
        from pyspark import SparkContext

        gateway = SparkContext._gateway
        if gateway is None:
            return
        proc = _JVM_PROC or getattr(gateway, "proc", None)
        gateway.shutdown()
        if proc is not None:
            if getattr(proc, "stdin", None) is not None:
                proc.stdin.close()  # PySpark's gateway JVM exits when its stdin closes
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                _kill_jvm()
        SparkContext._gateway = None
        SparkContext._jvm = None
    except Exception:  # noqa: BLE001 - at exit: whatever failed, the JVM goes
        _kill_jvm()


def _loopback_master(master: str) -> bool:
    return master.startswith("local") or "://127.0.0.1" in master or "://localhost" in master


def run_spark(
    tasks: list,
    fn: Callable[[Iterable[Any]], Iterator[Any]],
    master: str,
    progress: Callable[[int], None] | None = None,
) -> list:
    """The Spark engine: tasks are distributed with ``parallelize`` and run through ``fn`` (a
    module-level function or a partial of one: pickled by reference) in ``mapPartitions``."""
    if not tasks:
        return []
    spark = spark_session(master)
    sc = spark.sparkContext
    slots = max(sc.defaultParallelism, 1)
    partitions = max(1, min(len(tasks), max(slots * 4, len(tasks) // 5000)))
    # handle tasks come first in the list; deal tasks round-robin so each partition gets its share
    dealt = [tasks[i] for p in range(partitions) for i in range(p, len(tasks), partitions)]
    rdd = sc.parallelize(dealt, partitions).mapPartitions(fn)
    try:
        if progress is None:
            return rdd.collect()
        return _collect_with_progress(sc, rdd, partitions, len(tasks), progress)
    except Exception as e:  # noqa: BLE001 - Py4JJavaError with the executor's traceback
        raise EngineError(
            spark_failure(e) or f"Spark job failed: {_short(e)} (Spark log: {log_named()})"
        ) from None


def _collect_with_progress(sc, rdd, partitions: int, total: int, progress) -> list[tuple]:
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["rows"] = rdd.collect()
        except Exception as e:  # noqa: BLE001
            result["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    reported = 0
    tracker = sc.statusTracker()
    while thread.is_alive():
        thread.join(0.2)
        done = 0
        for stage in tracker.getActiveStageIds():
            info = tracker.getStageInfo(stage)
            if info is not None:
                done = max(done, info.numCompletedTasks)
        estimate = min(total, total * done // max(partitions, 1))
        if estimate > reported:
            progress(estimate - reported)
            reported = estimate
    if "error" in result:
        raise result["error"]
    if total > reported:
        progress(total - reported)
    return result["rows"]


def executor_error(e: BaseException) -> CkptError | None:
    """The :class:`CkptError` a task raised (the last one its traceback names), as one line on
    the driver; ``None`` when the task failed otherwise (a bug, the JVM). A task's error comes
    back as a PythonException whose first line names nothing; the gc planner and gc apply on
    executors both read it (here, below both: apply importing the planner made an import cycle)."""
    import re

    raised = re.findall(r"^ckptctl\.[\w.]*?(\w+): (.+)$", str(e), re.MULTILINE)
    if raised:
        return CkptError(raised[-1][1])
    if "Checkpoint block" in str(e) and "not found" in str(e):  # kept rows lost with their executor
        return CkptError("an executor holding the rows being planned was lost (its rows are not recomputed): "
                         "nothing was decided; plan again")  # fmt: skip
    return None
