"""The Python workers of ckptctl's Spark executors run this Python's own PySpark
(``ckptctl.engine.spark_daemon``), not the source zip Spark puts first on their path."""

from __future__ import annotations

import os

from ckptctl.engine.spark_daemon import _spark_zips_last, _without_spark_copies


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


def test_executors_read_no_copy_spark_put_on_their_path() -> None:
    """Spark's zips and its core's jar (~7,000 entries) are not on a worker's path, and no importer
    of one is cached: the first task's ``importlib.invalidate_caches()`` re-read each of them."""
    import zipimport

    from ckptctl.engine.spark import spark_session

    def zips(_rows):
        import sys

        cached = [k for k, v in sys.path_importer_cache.items() if isinstance(v, zipimport.zipimporter)]
        yield [p for p in sys.path if p.endswith((".zip", ".jar")) and "pyspark" in p], cached

    spark = spark_session("local[*]")
    assert spark.sparkContext.parallelize(range(2), 2).mapPartitions(zips).collect() == [([], [])] * 2


def test_only_the_zips_of_spark_home_move_and_keep_their_order(monkeypatch) -> None:
    lib = os.path.join("/opt/spark", "python", "lib")
    monkeypatch.setenv("SPARK_HOME", "/opt/spark")
    jar = "/opt/spark/jars/spark-core_2.13-4.3.0.jar"
    path = [
        "/work",
        f"{lib}/pyspark.zip",
        f"{lib}/py4j-0.10.9.9-src.zip",
        jar,
        "/usr/lib/python311.zip",
        "/site",
    ]
    assert _spark_zips_last(path) == [
        "/work", "/usr/lib/python311.zip", "/site", f"{lib}/pyspark.zip", f"{lib}/py4j-0.10.9.9-src.zip", jar
    ]  # fmt: skip
    # this Python's own PySpark was imported: the copies go; PySpark from Spark's zip: they stay
    assert _without_spark_copies(path, "/site/pyspark/__init__.py") == [
        "/work",
        "/usr/lib/python311.zip",
        "/site",
    ]
    assert _without_spark_copies(path, f"{lib}/pyspark.zip/pyspark/__init__.py") == path
    monkeypatch.delenv("SPARK_HOME")
    assert _spark_zips_last(path) == [p for p in path if p != jar] + [jar]


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
