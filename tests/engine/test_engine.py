"""One engine per command, from --engine/--master (issue 22 row 8, issue 21's engine).

``auto`` (the default of verify and states) runs small inputs in-process (no JVM: no 5 s start-up,
no Java needed) and large ones, or any run with ``--master``, on Spark. A bad ``--engine`` is a
usage error (exit 2) before anything is read, for every command that takes one.
"""

from __future__ import annotations

import json

import pytest

from ckptctl.engine import AUTO_SPARK_TASKS, Engine
from ckptctl.errors import CkptError
from tests.support.fixture_cases import FIXTURES, data_rebase
from tests.support.gc_support import ckptctl

BASIC = FIXTURES / "data" / "2.2.0" / "basic"


def test_auto_resolves_by_size_and_master() -> None:
    assert Engine.parse("auto").resolve(10) == Engine("local")
    assert Engine.parse("auto").resolve(AUTO_SPARK_TASKS) == Engine("spark", "local[*]")
    assert Engine.parse("auto", "spark://h:7077").resolve(1) == Engine("spark", "spark://h:7077")
    assert Engine.parse("SPARK").resolve(1) == Engine("spark", "local[*]")
    assert Engine.parse("local").resolve(10**9) == Engine("local")
    with pytest.raises(CkptError, match="unknown --engine"):
        Engine.parse("mapreduce")
    with pytest.raises(CkptError, match="--master"):
        Engine.parse("local", "spark://h:7077")


@pytest.mark.parametrize(
    "args",
    [
        ["verify", str(BASIC)],
        ["states", str(next(BASIC.rglob("chk-*")))],
        ["relocate", str(BASIC / "checkpoints"), "/tmp/ckptctl-never-written", "--all"],
    ],
    ids=["verify", "states", "relocate"],
)
def test_a_bad_engine_is_a_usage_error_everywhere(args: list[str]) -> None:
    result = ckptctl(*args, "--engine", "bogus", expect=2)
    assert "unknown --engine 'bogus'" in result.stderr and "Traceback" not in result.stderr


def test_verify_defaults_to_in_process_for_a_small_root() -> None:
    report = json.loads(ckptctl("verify", str(BASIC), "--json", *data_rebase(FIXTURES / "data")).stdout)
    assert report["ok"] and report["engine"] == "local" and report["master"] is None


def test_the_embedded_jvm_collects_in_parallel_unless_the_users_options_choose(tmp_path) -> None:
    """On few cores G1's concurrent threads take CPU from ``local[*]``'s tasks (the JVM is the
    executor): the embedded JVM gets the parallel collector -- unless the user's JVM options
    choose one, as a second choice stops the JVM at its start (a real start below)."""
    from ckptctl.engine.spark_startup import jvm_collector

    assert jvm_collector({"SPARK_CONF_DIR": str(tmp_path)}) == ["-XX:+UseParallelGC"]
    for name in ("SPARK_SUBMIT_OPTS", "JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS"):
        assert jvm_collector({"SPARK_CONF_DIR": str(tmp_path), name: "-Xss4m -XX:+UseG1GC"}) == [], name
    assert jvm_collector(
        {"SPARK_CONF_DIR": str(tmp_path), "SPARK_SUBMIT_OPTS": "-XX:+UseStringDeduplication"}
    )
    (tmp_path / "spark-defaults.conf").write_text("spark.driver.extraJavaOptions -XX:+UseSerialGC\n")
    assert jvm_collector({"SPARK_CONF_DIR": str(tmp_path)}) == []


@pytest.mark.parametrize(
    ("user", "collector", "heap"), [("", "PS Scavenge", None), ("-XX:+UseG1GC", "G1 Young Generation", "1g")]
)
def test_the_embedded_jvm_starts_with_the_collector_and_heap_chosen(user, collector, heap) -> None:
    """The collector as above; the heap :func:`driver_memory` chose (a quarter of the free memory,
    1 to 8 GiB: spark-submit's default 1 GiB ran out while a gc plan joined 10^7 inventory rows
    with 2M live paths), or ``SPARK_DRIVER_MEMORY`` when the user sets it (the suite sets it for its
    own sessions: removed here, to start the JVM as a user's starts).

    Both are the JVM's start (``_launch_gateway``, which :func:`spark_session` calls before it makes
    its SparkContext), so the JVM is started and asked without a SparkContext: 3.9 instead of 12
    CPU-s of JVM a case. The suite's own JVM options (C1, the class archive) stay, the user's after."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "SPARK_SUBMIT_OPTS": f"{os.environ['SPARK_SUBMIT_OPTS']} {user}".strip()}
    env.pop("SPARK_DRIVER_MEMORY", None)
    if heap:
        env["SPARK_DRIVER_MEMORY"] = heap
    code = ("from pyspark import SparkContext\n"
            "from ckptctl.engine import spark\n"
            "from ckptctl.engine.spark_startup import driver_memory, spark_log_path\n"
            "asked = driver_memory()\n"
            "spark._launch_gateway(spark_log_path())\n"
            "jvm = SparkContext._jvm\n"
            "print([b.getName() for b in jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()])\n"
            "print(asked, jvm.java.lang.Runtime.getRuntime().maxMemory())\n"
            "spark._end_gateway()")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert collector in out.stdout, out.stdout
    asked, got = out.stdout.splitlines()[-1].split()
    want = (1 << 30) if heap else int(asked.removesuffix("m")) << 20
    assert heap or want >= 1 << 30
    assert 0.8 * want <= int(got) <= 1.05 * want, (
        asked,
        got,
    )  # -Xmx rounded to regions, less a survivor space
