"""The Python daemon of ckptctl's Spark executors (``spark.python.daemon.module``): PySpark's own
(:func:`pyspark.daemon.manager`), started without Spark's copies of PySpark and py4j on its path.

Spark starts every executor's Python daemon with ``$SPARK_HOME/python/lib/pyspark.zip`` and the
py4j zip first on ``PYTHONPATH``. A zip of sources has no bytecode cache: each worker the daemon
forks compiled every PySpark module it imported from source, and re-read the zip's directory
(1,485 entries) when it put the task's files on its path. ckptctl's executors run the driver's
Python (``spark.pyspark.python``), which has the same PySpark installed, with its bytecode cache:
it is imported from there. Spark also puts the jar of its core on the path (where PySpark's
sources once were): a zip of some 7,000 entries that each worker read (58 ms) when its first task
invalidated the import caches. When this Python's own PySpark is the one imported, Spark's copies
leave the path; for a Python that has none of its own, they stay on it, behind everything else.

The daemon also imports, before it forks any worker, the modules ckptctl's tasks run, and freezes
its objects out of the collector's reach (:func:`gc.freeze`, the recipe for servers that fork).
PySpark's worker runs ``gc.collect()`` after every task: a full collection of every object the
worker holds, which were the modules it had imported (~35,000-65,000 objects, 20-50 ms a task, the
largest share of the workers' CPU in a small plan, more than its tasks' own work). Frozen ones are
not traversed, and a worker no longer imports them itself.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys

# The modules ckptctl's tasks import (the task code of gc, apply, verify, states and relocate, and
# the filesystem layer they read through). None starts a thread when imported: a thread does not
# survive fork(). pyarrow does (jemalloc's background thread), and s3fs is for S3 roots only: the
# workers import those themselves.
PRELOADED = (
    "pyspark.worker",
    "ckptctl.engine.spark",
    "ckptctl.gc.spark.executors",
    "ckptctl.gc.spark.classify",
    "ckptctl.gc.spark.delete",
    "ckptctl.verify.checks",
    "fsspec.implementations.local",
    "ckptctl.storage.store",
)


def _spark_copies(path: list[str]) -> list[str]:
    """The entries of ``path`` that are Spark's copies of Python code: the zips under
    ``$SPARK_HOME/python/lib`` (``pyspark.zip``, ``py4j-*.zip``) and jars (Spark's core), in order."""
    spark_lib = os.path.join(os.environ.get("SPARK_HOME", "\0"), "python", "lib")
    return [p for p in path if (p.endswith(".zip") and os.path.dirname(p) == spark_lib) or p.endswith(".jar")]


def _spark_zips_last(path: list[str]) -> list[str]:
    """``path`` with Spark's copies (:func:`_spark_copies`) moved behind every other entry, in their order."""
    copies = _spark_copies(path)
    return [p for p in path if p not in copies] + copies


def _without_spark_copies(path: list[str], pyspark_file: str) -> list[str]:
    """``path`` without Spark's copies when PySpark was imported from elsewhere (``pyspark_file``,
    its ``__init__``): this Python's own PySpark and py4j are used, the copies are never read."""
    copies = _spark_copies(path)
    if any(pyspark_file.startswith(c + os.sep) for c in copies):
        return path
    return [p for p in path if p not in copies]


def _drop_spark_copies(pyspark_file: str) -> None:
    """:func:`_without_spark_copies` applied to ``sys.path``; the importers cached for what left it
    (the jar's, and its ``org/`` directory's) go too: ``importlib.invalidate_caches()`` re-reads
    every zip importer it holds."""
    kept = _without_spark_copies(sys.path, pyspark_file)
    gone = [p for p in sys.path if p not in kept]
    sys.path[:] = kept
    for entry in [
        k for k in sys.path_importer_cache if any(k == g or k.startswith(g + os.sep) for g in gone)
    ]:
        del sys.path_importer_cache[entry]


def preload(names: tuple[str, ...] = PRELOADED) -> list[str]:
    """Import ``names`` and freeze every object there is (the daemon's, inherited by each worker it
    forks, never traversed by a worker's collections); the names that did not import (a worker
    imports those again, and a task that needs one reports its error there)."""
    failed = []
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the daemon must start whatever a module does
            failed.append(name)
    gc.freeze()
    return failed


if __name__ == "__main__":
    sys.path[:] = _spark_zips_last(sys.path)
    import pyspark
    from pyspark.daemon import manager

    _drop_spark_copies(pyspark.__file__)
    preload()
    manager()
