"""Where the per-file and per-handle work runs: in this process or on Spark executors.

One :class:`Engine` is made from ``--engine``/``--master`` when a command starts (a bad value is a
usage error there, never later) and handed to whatever runs tasks (``verify``, ``states --deep``,
``relocate``). ``auto``, the default, runs in-process below :data:`AUTO_SPARK_TASKS` tasks and on
Spark above it, or whenever ``--master`` names one: an embedded JVM takes ~5 s to start, more than
checking a few thousand files takes, and needs Java; a cluster is worth it for a bucket. Checks of
local files count for less (:data:`AUTO_LOCAL_FILES`): in-process, 100,000 take about a second.
The Spark and local runners themselves live in :mod:`ckptctl.verify` (imported lazily here).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ckptctl.errors import CkptError

ENGINES = ("auto", "local", "spark")
AUTO_SPARK_TASKS = 20_000  # files + RocksDB handles: above this, auto starts Spark
# except for checks of local files, which run in-process at ~100,000 a second (an S3 file's take
# milliseconds): one counts as AUTO_SPARK_TASKS / AUTO_LOCAL_FILES tasks, so auto starts a JVM
# for local files alone only from this many on
AUTO_LOCAL_FILES = 500_000
DEFAULT_MASTER = "local[*]"

Runner = Callable[[Any, Iterable[tuple]], Iterator[tuple]]


@dataclass(frozen=True)
class Engine:
    """``kind`` is ``auto``, ``local`` or ``spark``; ``master`` the ``--master`` given (or None)."""

    kind: str = "auto"
    master: str | None = None

    @classmethod
    def parse(cls, engine: str | Engine | None, master: str | None = None) -> Engine:
        if isinstance(engine, Engine):
            return engine
        kind = (engine or "auto").strip().lower()
        if kind not in ENGINES:
            raise CkptError(f"unknown --engine '{engine}'; use auto, local or spark")
        if kind == "local" and master:
            raise CkptError(f"--master {master} needs --engine spark (or auto); --engine local runs in-process")
        return cls(kind, master or None)

    def resolve(self, tasks: int, local_files: int = 0) -> Engine:
        """The engine that runs ``tasks`` tasks (``local_files`` of them checks of local files):
        ``local``, or ``spark`` with its master."""
        if self.kind == "local":
            return self
        cost = tasks - local_files + local_files * AUTO_SPARK_TASKS / AUTO_LOCAL_FILES
        if self.kind == "spark" or self.master or cost >= AUTO_SPARK_TASKS:
            return Engine("spark", self.master or DEFAULT_MASTER)
        return Engine("local", None)

    def run(
        self,
        options: Any,
        tasks: list[tuple],
        progress: Callable[[int], None] | None = None,
        *,
        runner: Runner | None = None,
        partition: Runner | None = None,
        on_spark: Callable[[str], None] | None = None,
    ) -> tuple[Engine, list[tuple]]:
        """Run ``tasks`` with ``runner`` (in-process) or ``partition`` (on executors); returns the
        engine that ran them and their records. ``on_spark(master)`` is called before a Spark run
        (the CLI shows a status line while the JVM starts)."""
        chosen = self.resolve(len(tasks))
        if chosen.kind == "local":
            from ckptctl.verify.local import run_local

            return chosen, run_local(options, tasks, progress, runner=runner)
        from ckptctl.verify.spark import run_spark

        if on_spark is not None:
            on_spark(chosen.master or DEFAULT_MASTER)
        return chosen, run_spark(options, tasks, chosen.master or DEFAULT_MASTER, progress, partition=partition)

    def describe(self) -> str:
        return self.kind + (f" on {self.master}" if self.master else "")
