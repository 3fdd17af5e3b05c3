"""The Python daemon of ckptctl's Spark executors (``spark.python.daemon.module``): PySpark's own
(:func:`pyspark.daemon.manager`), started without Spark's copies of PySpark and py4j on its path.

Spark starts every executor's Python daemon with ``$SPARK_HOME/python/lib/pyspark.zip`` and the
py4j zip first on ``PYTHONPATH``. A zip of sources has no bytecode cache: each worker the daemon
forks compiled every PySpark module it imported from source, and re-read the zip's directory
(1,485 entries) when it put the task's files on its path. ckptctl's executors run the driver's
Python (``spark.pyspark.python``), which has the same PySpark installed, with its bytecode cache:
it is imported from there. The zips stay on the path, behind it, for a Python that has no PySpark
of its own.
"""

from __future__ import annotations

import os
import sys


def _spark_zips_last(path: list[str]) -> list[str]:
    """``path`` with the zips Spark puts first (``pyspark.zip``, ``py4j-*.zip`` under
    ``$SPARK_HOME/python/lib``) moved behind every other entry, in their order."""
    spark_lib = os.path.join(os.environ.get("SPARK_HOME", "\0"), "python", "lib")
    zips = [p for p in path if p.endswith(".zip") and os.path.dirname(p) == spark_lib]
    return [p for p in path if p not in zips] + zips


if __name__ == "__main__":
    sys.path[:] = _spark_zips_last(sys.path)
    from pyspark.daemon import manager

    manager()
