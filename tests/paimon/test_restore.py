"""``ckptctl paimon`` held against a real Flink restore, performed in this test run.

tests/paimon/test_forecasts.py compares the forecasts with the restore outcomes recorded when the fixtures were
generated; this test restores again, on every run: fixtures/paimon/PaimonSinkJob.java (compiled here) on
real Flink 1.20.3 with Paimon's own classes (the bridge jar of PyPI paimon-python-ali, as
fixtures/paimon/generate.sh gets it) restores `pending`'s newest checkpoint onto copies of the `pending`
and `pending_cleaned` tables, both in one JVM, one after the other.

- `pending`: ckptctl says safe and that 5 and 6 are committed again; the restore succeeds and the table
  gains snapshots with commit identifiers 5 and 6 of the checkpoint's commit user.
- `pending_cleaned`: ckptctl flags B (files missing); the restore fails with Paimon's "Cannot recover from
  this checkpoint" naming exactly the files ckptctl listed as missing.

Needs Java 17 (javac too) and, on a cold cache, PyPI (apache-flink-libraries, paimon-python-ali).
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ckptctl.cli import app, gc_alias
from ckptctl.paimon.table import PaimonTable
from tests.support import jvm
from tests.support.differential import cache_root, flink_lib
from tests.support.flink_harness import file_lock, require_java
from tests.support.java_build import compiled

pytestmark = pytest.mark.flink

REPO = Path(__file__).resolve().parents[2]
PAIMON = REPO / "fixtures" / "paimon"
JOB = PAIMON / "PaimonSinkJob.java"
ENTRIES = {e["scenario"]: e for e in json.loads((PAIMON / "manifest.json").read_text())["entries"]}
TABLE = Path("warehouse/default.db/events")
JVM_TIMEOUT = 240  # s; both restores usually take ~15 s
CANNOT_RECOVER = "Cannot recover from this checkpoint"


def paimon_jar() -> Path:
    """The bridge jar out of PyPI's paimon-python-ali wheel, cached (generate.sh's paimon_jar)."""
    d = cache_root() / "paimon"
    jar = d / "paimon-python-java-bridge.jar"
    with file_lock(d / ".bridge.lock"):
        if not (jar.is_file() and jar.stat().st_size > 0):
            with tempfile.TemporaryDirectory(dir=d) as tmp:
                subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp,
                                "paimon-python-ali==0.1.1"], check=True)  # fmt: skip
                (whl,) = glob.glob(f"{tmp}/paimon_python_ali-*.whl")
                with zipfile.ZipFile(whl) as z:
                    part = Path(tmp) / "bridge.jar"
                    part.write_bytes(
                        z.read("paimon_python_java/java_dependencies/paimon-python-java-bridge.jar")
                    )
                os.replace(part, jar)
    return jar


def compiled_job(classpath: str) -> Path:
    """PaimonSinkJob.java compiled once per machine (tests/support/java_build.py)."""
    require_java()
    if shutil.which("javac") is None:
        pytest.skip("the Paimon restore test needs javac (a JDK 17) on PATH")
    return compiled(JOB, classpath)


def forecast(chk: Path, table: Path) -> dict:
    res = CliRunner().invoke(app, gc_alias(["--json", "paimon", "status", str(chk), "--table", str(table)]))
    assert res.exit_code in (0, 1), res.output
    doc = json.loads(res.stdout)
    assert res.exit_code == (0 if doc["ok"] else 1)
    return doc


def run_jvm(classpath: str, runs: list[list[str]], log: Path) -> None:
    """PaimonSinkJob with several runs (``--`` between them) in one JVM; ended by its PID at the latest
    after JVM_TIMEOUT, never left behind."""
    log4j = log.with_suffix(".log4j.properties")
    log4j.write_text("\n".join([
        "rootLogger.level = WARN", "rootLogger.appenderRef.f.ref = f", "appender.f.type = File",
        "appender.f.name = f", f"appender.f.fileName = {log.with_suffix('.flink.log')}",
        "appender.f.layout.type = PatternLayout", "appender.f.layout.pattern = %d{HH:mm:ss,SSS} %-5p %t %c - %m%n",
    ]) + "\n")  # fmt: skip
    args = [a for i, r in enumerate(runs) for a in ([] if i == 0 else ["--"]) + r]
    # its MiniClusters unpack Flink's RPC jar and make their working dirs in the JVM's temp dir:
    # the test's, not /tmp (each run left a minicluster_* directory there, at times the 21 MB jar)
    scratch = f"-Djava.io.tmpdir={log.parent}"
    with open(log, "w") as out:
        proc = subprocess.Popen(["java", *jvm.SHORT_LIVED, scratch, f"-Dlog4j.configurationFile={log4j}", "-cp", classpath, "PaimonSinkJob", *args],
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        try:
            rc = proc.wait(timeout=JVM_TIMEOUT)
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    assert rc == 0, (
        f"PaimonSinkJob {'timed out' if rc is None else f'exited {rc}'}:\n{log.read_text()[-4000:]}"
    )


def attempts(outcome: Path) -> list[dict]:
    return [json.loads(line) for line in outcome.read_text().splitlines() if line.strip()]


def test_real_restores_do_what_ckptctl_forecasts(tmp_path: Path) -> None:
    require_java()
    classpath_libs = f"{flink_lib('1.20.3')}/*:{paimon_jar()}"
    # Flink's jars before the bridge jar (README)
    classpath = f"{compiled_job(classpath_libs)}:{classpath_libs}"

    # copies: fixtures/ is never written
    pending = tmp_path / "pending"
    shutil.copytree(REPO / ENTRIES["pending"]["data_dir"], pending, copy_function=shutil.copy)  # times of now
    cleaned = tmp_path / "pending_cleaned" / "events"
    shutil.copytree(REPO / ENTRIES["pending_cleaned"]["data_dir"] / TABLE, cleaned, copy_function=shutil.copy)
    (job_dir,) = (pending / "checkpoints").iterdir()
    chk = max(job_dir.glob("chk-*"), key=lambda p: int(p.name[4:]))
    tables = {"pending": pending / TABLE, "pending_cleaned": cleaned}

    # what ckptctl says, before any restore
    said = {name: forecast(chk, t) for name, t in tables.items()}
    safe, flagged = said["pending"], said["pending_cleaned"]
    (fs,) = safe["checkpoints"]
    user = fs["commit_user"]
    assert safe["ok"] and fs["safe"]
    assert fs["recommitted"] == [5, 6]
    assert not [h for h in fs["hazards"] if h["severe"]]
    (ff,) = flagged["checkpoints"]
    assert not flagged["ok"] and not ff["safe"] and ff["commit_user"] == user
    assert [h["code"] for h in ff["hazards"] if h["severe"]] == ["B"]
    missing = {
        (c["identifier"], f["name"])
        for c in ff["committables"]
        for f in c["files"]
        if f["state"] == "missing"
    }
    assert missing and {i for i, _ in missing} == {5, 6}
    missing_names = {n for _, n in missing}
    # every missing file by where Paimon looks for it (partition/bucket-N/file), in the hazard too
    missing_paths = {f["path"] for c in ff["committables"] for f in c["files"] if f["state"] == "missing"}
    assert {h["code"]: set(h["files"]) for h in ff["hazards"]}["B"] == missing_paths
    before = {name: {s.id for s in PaimonTable(str(t)).snapshots()} for name, t in tables.items()}

    # the real restores: one JVM, the failing one first (it ends at once)
    runs, outcomes = [], {}
    for name in ("pending_cleaned", "pending"):
        r = tmp_path / "runs" / name
        r.mkdir(parents=True)
        outcomes[name] = r / "outcome.jsonl"
        runs.append([f"table={tables[name]}", f"checkpoints={r / 'checkpoints'}", f"info={r / 'info.json'}",
                     f"restore={chk}", f"outcome={outcomes[name]}", "new-commits=1"])  # fmt: skip
    run_jvm(classpath, runs, tmp_path / "runs" / "jvm.log")

    # safe: the restore commits 5 and 6 of the checkpoint's commit user, then the job goes on
    ok = attempts(outcomes["pending"])
    assert ok[0]["succeeded"] and ok[0]["restored_identifiers"] == [5, 6] and ok[0]["committed"] == 2, ok
    assert ok[0]["commit_user"] == user and ok[0]["intentional_failure"]
    assert ok[1]["succeeded"] and ok[1]["committed"] == 0, ok
    table = PaimonTable(str(tables["pending"]))
    new = [s for s in table.snapshots() if s.id not in before["pending"]]
    by_user = [s.commit_identifier for s in new if s.commit_user == user]
    assert by_user[:2] == [5, 6] and by_user.count(5) == by_user.count(6) == 1, by_user
    assert table.is_committed(user, 5) and table.is_committed(user, 6)
    assert 7 in by_user  # after the intentional failure and the restart, checkpoints commit as usual
    info = json.loads((tmp_path / "runs" / "pending" / "info.json").read_text())
    assert info["restored_from"] == str(chk) and info["stopped_because"] == "committed identifier >= 7"

    # flagged B: the restore fails, naming exactly the files ckptctl listed as missing, and commits nothing
    failed = attempts(outcomes["pending_cleaned"])
    assert failed and all(not a["succeeded"] for a in failed), failed
    for a in failed:
        assert a["commit_user"] == user and a["restored_identifiers"] == [5, 6]
        assert a["exception"].startswith(CANNOT_RECOVER), a["exception"]
        named = set(re.findall(r"data-[0-9a-f-]+-\d+\.avro", a["exception"]))
        assert named == missing_names
        paths = set(re.findall(re.escape(str(cleaned)) + r"/([^\s,]+\.avro)", a["exception"]))
        assert paths == missing_paths, (paths, missing_paths)
        assert str(cleaned) in a["exception"]  # the copy, not the fixture
    assert {s.id for s in PaimonTable(str(cleaned)).snapshots()} == before["pending_cleaned"]
    info = json.loads((tmp_path / "runs" / "pending_cleaned" / "info.json").read_text())
    assert info["restored_from"] == str(chk)
