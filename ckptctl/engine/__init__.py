"""Where the per-file and per-handle work runs: in this process or on Spark executors.

One :class:`Engine` is made from ``--engine``/``--master`` when a command starts (a bad value is a
usage error there, never later) and handed to whatever runs tasks (``verify``, ``states --deep``,
``relocate``). ``auto``, the default, runs in-process below :data:`AUTO_SPARK_TASKS` tasks and on
Spark above it (in-process all the same when pyspark, an optional extra, is not installed), or
whenever ``--master`` names one: an embedded JVM takes ~5 s to start, more than
checking a few thousand files takes, and needs Java; a cluster is worth it for a bucket. Checks of
local files count for less (:data:`AUTO_LOCAL_FILES`): in-process, 100,000 take about a second.

The runners: :mod:`~ckptctl.engine.local` (this thread, then a thread pool) and
:mod:`~ckptctl.engine.spark` (one SparkSession per process; beside it
:mod:`~ckptctl.engine.spark_startup`, what is checked and chosen before its JVM starts,
:mod:`~ckptctl.engine.processes`, the JVM's process tree, and :mod:`~ckptctl.engine.arrow`, the
Arrow batches its tasks hand back); all imported lazily, so choosing an engine costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

from ckptctl.engine.extra import no_spark, spark_installed
from ckptctl.errors import CkptError

ENGINES = ("auto", "local", "spark")
AUTO_SPARK_TASKS = 20_000  # files + RocksDB handles: above this, auto starts Spark
# except for checks of local files, which run in-process at ~100,000 a second (an S3 file's take
# milliseconds): one counts as AUTO_SPARK_TASKS / AUTO_LOCAL_FILES tasks, so auto starts a JVM
# for local files alone only from this many on
AUTO_LOCAL_FILES = 500_000
DEFAULT_MASTER = "local[*]"

# What runs a batch of tasks: a module-level function (or a functools.partial of one), so Spark
# pickles it by reference and executors import it; in-process it is called on chunks of the tasks.
TaskFn = Callable[[Iterable[Any]], Iterator[Any]]
# A status line while something slow happens (the CLI's spinner), as a context manager.
Status = Callable[[str], AbstractContextManager[Any]]


@dataclass(frozen=True)
class Engine:
    """``kind`` is ``auto``, ``local`` or ``spark``; ``master`` the ``--master`` given (or None).

    ``status``: shows a line while Spark starts (the CLI gives its spinner); not part of the
    engine's identity."""

    kind: str = "auto"
    master: str | None = None
    status: Status | None = field(default=None, compare=False, repr=False)

    @classmethod
    def parse(
        cls, engine: str | Engine | None, master: str | None = None, status: Status | None = None
    ) -> Engine:
        if isinstance(engine, Engine):
            return engine
        kind = (engine or "auto").strip().lower()
        if kind not in ENGINES:
            raise CkptError(f"unknown --engine '{engine}'; use auto, local or spark")
        if kind == "local" and master:
            raise CkptError(
                f"--master {master} needs --engine spark (or auto); --engine local runs in-process"
            )
        if (kind == "spark" or master) and not spark_installed():
            raise no_spark()  # said before anything is read
        return cls(kind, master or None, status)

    def resolve(self, tasks: int, local_files: int = 0) -> Engine:
        """The engine that runs ``tasks`` tasks (``local_files`` of them checks of local files):
        ``local``, or ``spark`` with its master."""
        if self.kind == "local":
            return self
        cost = tasks - local_files + local_files * AUTO_SPARK_TASKS / AUTO_LOCAL_FILES
        if self.kind == "spark" or self.master or (cost >= AUTO_SPARK_TASKS and spark_installed()):
            return replace(self, kind="spark", master=self.master or DEFAULT_MASTER)
        return replace(self, kind="local", master=None)

    def start(self) -> None:
        """Start Spark now, under the status line (a JVM takes seconds: not a progress bar stuck at
        0), if this engine runs on Spark and its session is not up yet. Callers that show a
        progress bar call it before the bar; :meth:`run` calls it anyway."""
        if self.kind != "spark":
            return
        from ckptctl.engine.spark import running, spark_session

        master = self.master or DEFAULT_MASTER
        if running(master):
            return
        with (self.status or nullcontext)(f"starting Spark ({master}) …"):
            spark_session(master)

    def run(
        self,
        tasks: list,
        fn: TaskFn,
        progress: Callable[[int], None] | None = None,
        *,
        in_thread_first: bool = False,
    ) -> tuple[Engine, list]:
        """Run ``tasks`` through ``fn`` (in-process over chunks, or ``mapPartitions`` on executors);
        returns the engine that ran them and the records ``fn`` yielded, in task order.

        ``in_thread_first``: the tasks mostly use CPU (checks of local files): in-process they run
        in this thread until they turn out to wait on storage (see :func:`~ckptctl.engine.local.run_local`)."""
        chosen = self.resolve(len(tasks))
        if chosen.kind == "local":
            from ckptctl.engine.local import run_local

            return chosen, run_local(tasks, fn, progress, in_thread_first=in_thread_first)
        from ckptctl.engine.spark import run_spark

        chosen.start()
        return chosen, run_spark(tasks, fn, chosen.master or DEFAULT_MASTER, progress)

    def describe(self) -> str:
        return self.kind + (f" on {self.master}" if self.master else "")
