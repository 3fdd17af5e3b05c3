"""The class archive of the suite's Spark JVMs (tests/support/class_archive.py): its key and its writer.

Each ckptctl Spark command of the suite that runs as a process of its own (the Ctrl-C, lifecycle,
temp-dir and error tests, the CLI's own runs) starts a JVM, and each test worker starts one: the JVM
loads and verifies some 15,000 classes of Spark, Scala and Hadoop before its first job. A start and
two tiny jobs took 19.7 CPU-s of the JVM and 20.1 s; from the archive 9.0-9.5 CPU-s and 10.6 s.

Keyed on the Java and Spark's jars; written by a session that runs ckptctl's own gc plan, verify and
states on Spark over a bundled fixture in the writer's process and then lets its JVM exit normally
(a dynamic archive is written at a JVM's normal exit only). The suite's Spark JVMs are told of it
through ``SPARK_SUBMIT_OPTS`` (tests/conftest.py).
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

from tests.support import class_archive, jvm
from tests.support.fixture_cases import REPO


def archive_path() -> Path | None:
    """Where this machine's archive for this Java and this Spark is (or would be); None when there
    is no Java or no PySpark to key it on."""
    try:
        from pyspark.find_spark_home import _find_spark_home

        spark_home = os.path.realpath(os.environ.get("SPARK_HOME") or _find_spark_home())
    except (Exception, SystemExit):  # noqa: BLE001 - no Spark: the suite's own tests say so
        return None
    return class_archive.archive_path(
        "spark", sorted(glob.glob(os.path.join(spark_home, "jars", "*"))), spark_home
    )


def archives() -> list[tuple[Path, class_archive.Session]]:
    path = archive_path()
    return [] if path is None else [(path, _session)]


def _session(dump: str) -> int:
    """gc plan, verify and states on Spark over a bundled fixture in this process; then the JVM is
    let go and waited for (it writes the archive as it exits): its exit code."""
    import tempfile

    from typer.testing import CliRunner

    from ckptctl.cli import app
    from ckptctl.engine import spark

    os.environ["SPARK_SUBMIT_OPTS"] = " ".join([*jvm.SHORT_LIVED, dump])  # the suite's, not the caller's
    root = REPO / "fixtures" / "data" / "2.2.0" / "basic"
    rebase = f"file:/tmp/ckptctl-fixture-gen=file:{REPO / 'fixtures' / 'data'}"
    runner = CliRunner()
    with tempfile.TemporaryDirectory() as tmp:
        for args in (
            ["gc", "plan", str(root), "--engine", "spark", "--rebase", rebase, "-o", f"{tmp}/plan.json"],
            ["verify", str(root), "--engine", "spark", "--rebase", rebase],
            ["states", str(root), "--engine", "spark", "--rebase", rebase],
        ):
            runner.invoke(app, args)
    spark.stop_spark()
    proc = spark._JVM_PROC
    spark._end_gateway(grace=600)
    return proc.returncode if proc is not None and proc.returncode is not None else 1
