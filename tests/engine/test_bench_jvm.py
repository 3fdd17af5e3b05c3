"""The benches measure the product's JVMs, not the suite's.

The suite runs every JVM it starts with C1 only (tests/support/jvm.py); the benches import the
suite's helpers (a free port, the fixture cases). When tests/conftest.py handed the options on at
import, every bench JVM ran C1 too: a 10^7-row gc plan on Spark took 138-187 s instead of 93-111 s,
and the cause hid for two sessions as "some variable set at process start"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support import jvm

REPO = Path(__file__).resolve().parents[2]
NAMES = ("SPARK_SUBMIT_OPTS", "SPARK_DAEMON_JAVA_OPTS", "FLINK_ENV_JAVA_OPTS")


def test_the_suite_hands_its_jvm_options_to_the_jvms_it_starts() -> None:
    for name in NAMES:
        assert set(jvm.SHORT_LIVED) <= set(os.environ.get(name, "").split()), name
    for name in ("SPARK_DAEMON_JAVA_OPTS", "FLINK_ENV_JAVA_OPTS"):
        assert set(jvm.LONG_LIVED) <= set(os.environ.get(name, "").split()), name


def test_the_suites_spark_sessions_collect_as_ckptctl_chooses() -> None:
    """The suite leaves the collector of its Spark sessions to ckptctl (the parallel one)."""
    from ckptctl.engine.spark import spark_session

    jvm = spark_session("local[*]").sparkContext._jvm
    names = [b.getName() for b in jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()]
    assert "PS Scavenge" in names, names


def test_importing_what_the_benches_import_changes_no_jvm_option() -> None:
    env = {k: v for k, v in os.environ.items() if k not in NAMES}
    code = (
        "import os, json, bench.bucket_bench, bench.gc_bench, tests.conftest, tests.support.fixture_cases\n"
        f"print(json.dumps({{n: os.environ.get(n) for n in {NAMES!r}}}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == dict.fromkeys(NAMES)
