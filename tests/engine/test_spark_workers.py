"""The Python workers of ckptctl's Spark executors run this Python's own PySpark
(``ckptctl.engine.spark_daemon``), not the source zip Spark puts first on their path."""

from __future__ import annotations

import os

from ckptctl.engine.spark_daemon import _spark_zips_last


def test_executors_import_pyspark_from_this_pythons_install_not_from_sparks_zip() -> None:
    """A zip of sources has no bytecode cache: every worker compiled each PySpark module it
    imported. The task's PySpark is the driver's, file for file."""
    import pyspark

    from ckptctl.engine.spark import spark_session

    def where(_rows):
        import pyspark as theirs

        yield theirs.__file__

    spark = spark_session("local[*]")
    found = spark.sparkContext.parallelize(range(2), 2).mapPartitions(where).collect()
    assert found == [pyspark.__file__] * 2


def test_only_the_zips_of_spark_home_move_and_keep_their_order(monkeypatch) -> None:
    lib = os.path.join("/opt/spark", "python", "lib")
    monkeypatch.setenv("SPARK_HOME", "/opt/spark")
    path = ["/work", f"{lib}/pyspark.zip", f"{lib}/py4j-0.10.9.9-src.zip", "/usr/lib/python311.zip", "/site"]
    assert _spark_zips_last(path) == [
        "/work", "/usr/lib/python311.zip", "/site", f"{lib}/pyspark.zip", f"{lib}/py4j-0.10.9.9-src.zip"
    ]  # fmt: skip
    monkeypatch.delenv("SPARK_HOME")
    assert _spark_zips_last(path) == path


def test_workers_inherit_the_modules_their_tasks_run_frozen_out_of_each_collection() -> None:
    """PySpark's worker collects (``gc.collect()``) after every task: the modules the daemon
    imported before it forked are frozen, so that collection does not traverse them, and a task's
    worker did not import them itself."""
    from ckptctl.engine.spark import spark_session
    from ckptctl.engine.spark_daemon import PRELOADED

    def seen(_rows):
        import gc
        import sys

        yield gc.get_freeze_count(), sorted(n for n in PRELOADED if n in sys.modules)

    spark = spark_session("local[*]")
    for frozen, modules in spark.sparkContext.parallelize(range(2), 2).mapPartitions(seen).collect():
        assert frozen > 20_000, frozen  # the modules' objects (~40,000)
        assert modules == sorted(PRELOADED)


def test_a_module_that_does_not_import_is_named_and_the_rest_still_freeze() -> None:
    import gc

    from ckptctl.engine.spark_daemon import preload

    before = gc.get_freeze_count()
    try:
        assert preload(("json", "ckptctl.no_such_module")) == ["ckptctl.no_such_module"]
        assert gc.get_freeze_count() > before
    finally:
        gc.unfreeze()
