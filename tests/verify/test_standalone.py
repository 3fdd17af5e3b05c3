"""``verify --master spark://…``: a real Spark standalone master and worker on 127.0.0.1.

Both are started from the PySpark installation (``bin/spark-class``); the executor is a separate
JVM launched by the worker, whose Python workers must run the driver's interpreter.

Runs in any order: there is one SparkContext per process, so the fixture stops whatever session
the tests before it left (the ``local[2]`` one of the other Spark tests) and stops its own when
done; the next Spark test gets a fresh ``local[2]`` from ``spark_session``, which re-creates a
stopped session. (Checked by running this file first, before tests/verify/test_verify.py and tests/verify/test_s3.py.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import free_port
from tests.support import class_archive, spark_archive
from tests.support.gc_support import Scenario, ckptctl, shared_ssts


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _start(args: list[str], log: Path, env: dict) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen(
            [str(_spark_home() / "bin" / "spark-class"), *args], stdout=out, stderr=subprocess.STDOUT, env=env,
            start_new_session=True,
        )  # fmt: skip


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def _wait_for(log: Path, text: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{log.name}: '{text}' not seen:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.3)


@pytest.fixture
def standalone(tmp_path: Path):
    from ckptctl.engine.spark import stop_spark

    stop_spark()  # one SparkContext per process: whatever session an earlier test left goes
    port = free_port()
    env = dict(os.environ, SPARK_HOME=str(_spark_home()), PYSPARK_PYTHON=sys.executable,
               SPARK_WORKER_DIR=str(tmp_path / "work"), SPARK_LOCAL_IP="127.0.0.1")  # fmt: skip
    # the master and the worker map the suite's Spark class archive as the suite's driver JVMs do
    # (same jars, same class path): they loaded and verified their Spark classes anew at each run
    archive = class_archive.options_once_there(spark_archive.archive_path())
    if archive:
        env["SPARK_DAEMON_JAVA_OPTS"] = f"{env['SPARK_DAEMON_JAVA_OPTS']} {archive}"
    master_log, worker_log = tmp_path / "master.log", tmp_path / "worker.log"
    master = _start(
        ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port), "--webui-port", "0"],
        master_log, env,
    )  # fmt: skip
    worker = None
    try:
        _wait_for(master_log, "I have been elected leader", master)
        url = f"spark://127.0.0.1:{port}"
        worker = _start(
            ["org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--webui-port", "0",
             "--cores", "1", "--memory", "1g"],
            worker_log, env,
        )  # fmt: skip
        _wait_for(master_log, "Registering worker", master)
        yield url, tmp_path / "work"
    finally:
        stop_spark()  # leave no session bound to this cluster: later tests start their own
        if worker is not None:
            _stop(worker)
        _stop(master)


def test_verify_on_a_standalone_cluster(standalone, tmp_path: Path) -> None:
    from ckptctl.engine import spark as spark_engine

    url, work_dir = standalone
    sc = Scenario("1.20.3", "basic", tmp_path / "data")
    victim = shared_ssts(sc)[3]
    victim.unlink()
    r = ckptctl("verify", "--json", "--master", url, "--deep", str(sc.checkpoints), *sc.rebase, expect=1)
    report = json.loads(r.stdout)
    assert report["engine"] == "spark" and report["master"] == url
    assert {(p["path"], p["check"]) for p in report["problems"] if p["check"] == "exists"} == {
        (sc.uri(victim), "exists")
    }
    assert report["checked"]["key_groups"] > 0
    # the work ran in an executor the worker launched, not in the driver
    spark_context = spark_engine._SPARK.sparkContext
    assert spark_context.master == url
    assert spark_context._jsc.sc().getExecutorIds().size() == 1  # the worker's one executor
    executor_logs = list(work_dir.glob("app-*/*/stderr"))
    assert executor_logs, "the worker launched no executor"
