"""A Spark run leaves nothing in the temp dir: its scratch directories are its own and removed.

Spark (embedded ``local[*]``) writes ``blockmgr-*``, ``spark-*`` and native libraries into
``spark.local.dir`` and ``java.io.tmpdir`` (which ignores TMPDIR) and removes them in JVM shutdown
hooks that run after the Python process is gone, or never if the JVM is killed. ckptctl gives
each session a ``spark.local.dir`` under :func:`tempfile.mkdtemp` (TMPDIR) and the JVM a
``java.io.tmpdir`` there too, and removes both when the session stops and at exit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.fixture_cases import FIXTURES, REPO, data_rebase

LEFTOVERS = ("spark-", "blockmgr-", "pyspark-", "liblz4-java", "ckptctl-spark-local-", "ckptctl-spark-jvm-")


def small_checkpoint() -> str:
    (chk,) = sorted((FIXTURES / "data" / "2.2.0" / "basic").rglob("chk-9"))
    return str(chk)


def leftovers(tmp: Path) -> list[str]:
    return sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*") if p.name.startswith(LEFTOVERS))


@pytest.fixture(scope="module")
def spark_process(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """One ckptctl process with its own temp dir and JVM (the JVM start, ~9 CPU-s, is most of a
    test's cost; the two tests below had one each): a session of its own (``local[1]``, a job,
    stopped), then ``ckptctl verify --json --engine spark`` (a second session of the same JVM) as
    ``python -m ckptctl`` runs it (:func:`ckptctl.cli.main`), whose exit is the process's. Its
    result and its temp dir, as the process left it at exit."""
    base = tmp_path_factory.mktemp("spark-process")
    tmp = base / "tmp"
    tmp.mkdir()
    env = {
        **{k: v for k, v in os.environ.items() if k != "CKPTCTL_SPARK_LOG"},
        "TMPDIR": str(tmp),
        "PYTHONPATH": str(REPO),
    }
    args = ["verify", "--json", "--engine", "spark", small_checkpoint(), *data_rebase(FIXTURES / "data")]
    script = (
        "import sys\n"
        "from ckptctl.cli import main\n"
        "from ckptctl.engine.spark import spark_session, stop_spark\n"
        "s = spark_session('local[1]')\n"
        "assert s.sparkContext.parallelize(range(100), 4).map(lambda x: x * 2).sum() == 9900\n"
        "stop_spark()\n"
        "sys.argv = ['ckptctl', *sys.argv[1:]]\n"
        "main()\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, *args], env=env, capture_output=True, text=True, timeout=300
    )
    return proc, tmp


def test_a_spark_verify_process_leaves_nothing_in_the_temp_dir(spark_process) -> None:
    proc, tmp = spark_process
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["ok"] and report["engine"] == "spark" and report["master"] == "local[*]"
    assert report["checked"]["files"] > 0
    # checked the moment the process has exited: the JVM's own shutdown hooks may still be running.
    # Its log too (the JVM's output, in TMPDIR unless CKPTCTL_SPARK_LOG says where): kept only when a
    # line named it (test below). One log per user stayed behind after every Spark command.
    assert os.listdir(tmp) == [], (leftovers(tmp), os.listdir(tmp))


def test_a_spark_session_scratch_dir_is_under_tmpdir_and_removed_at_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ckptctl.checkpoint.loading import load_checkpoint
    from ckptctl.engine import spark
    from ckptctl.engine.spark import spark_session, stop_spark
    from ckptctl.storage import Storage
    from ckptctl.verify import verify

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    storage = Storage()
    ck = load_checkpoint(storage, "file:" + small_checkpoint())
    stop_spark()  # a session of an earlier test was made under another temp dir
    try:
        result = verify(storage, [ck], engine="spark", master="local[*]")
        assert result.engine == "spark" and result.counts["files"] > 0
        local_dir = spark_session("local[*]").sparkContext.getConf().get("spark.local.dir")
        assert local_dir and Path(local_dir).parent == tmp
        assert any(p.name.startswith("blockmgr-") for p in Path(local_dir).iterdir())  # Spark writes there
    finally:
        stop_spark()
    assert not Path(local_dir).exists()
    # the JVM's java.io.tmpdir lives as long as the JVM (this test process): removed at its exit,
    # which the first test checks
    jvm = spark._JVM_DIR
    assert [p for p in leftovers(tmp) if not (jvm and str(tmp / p).startswith(jvm))] == []


def test_a_session_that_fails_to_start_removes_its_scratch_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyspark.sql import SparkSession

    from ckptctl.engine import spark
    from ckptctl.engine.spark import EngineError, spark_session, stop_spark

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)
    stop_spark()

    def refuse(self):
        assert any(p.name.startswith("ckptctl-spark-local-") for p in tmp.iterdir())
        raise RuntimeError("no executors today")

    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", refuse)
    with pytest.raises(EngineError, match="no executors today"):
        spark_session("local[1]")
    jvm = spark._JVM_DIR
    assert [p for p in leftovers(tmp) if not (jvm and str(tmp / p).startswith(jvm))] == []


def test_a_process_with_several_sessions_leaves_nothing(spark_process) -> None:
    """Spark keeps the first session's local root for the JVM's lifetime and re-creates it when a
    later session of the same JVM writes there: the directory removed at the first stop came back
    (empty) after a second session. At exit every one is removed once the JVM has gone (the
    process of :func:`spark_process` had two)."""
    proc, tmp = spark_process
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert os.listdir(tmp) == [], leftovers(tmp)


def test_a_spark_command_that_fails_keeps_the_log_its_line_names(tmp_path: Path) -> None:
    """The JVM's output goes to a log of the ckptctl process (one file per user was truncated by
    every JVM start: two Spark commands at once wrote over each other's, and a JVM's end was read
    from the other's output). A line that names the log leaves it in place, and nothing else."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {
        **{k: v for k, v in os.environ.items() if k != "CKPTCTL_SPARK_LOG"},
        "TMPDIR": str(tmp),
        "PYTHONPATH": str(REPO),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "ckptctl", "verify", "--engine", "spark", "--master", "local[x]", small_checkpoint()],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-2000:]
    named = Path(lines[0].rsplit("(Spark log: ", 1)[1].removesuffix(")"))
    assert os.listdir(tmp) == [named.name] and named.parent == tmp, os.listdir(tmp)
    assert named.name.startswith("ckptctl-spark-") and named.name.split("-")[-1][:-4].isdigit(), named.name
    assert "Could not parse Master URL: 'local[x]'" in named.read_text(errors="replace")
