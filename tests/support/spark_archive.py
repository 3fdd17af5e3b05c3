"""A class-data-sharing archive of the suite's Spark JVMs: their start, half the CPU.

Each ckptctl Spark command of the suite that runs as a process of its own (the Ctrl-C, lifecycle,
temp-dir and error tests, the CLI's own runs) starts a JVM, and each test worker starts one: the JVM
loads and verifies some 15,000 classes of Spark, Scala and Hadoop before its first job. On the
2-core CI machine a start and two tiny jobs took 19.7 CPU-s of the JVM and 20.1 s; from an archive
of those classes (Java's AppCDS, a dynamic archive written at the exit of one representative
session) 9.0-9.5 CPU-s and 10.6 s. The archive changes where the JVM finds a class's parsed
form, never what the class does.

The archive is written once per (Java, PySpark, Spark home) into the user's cache, by a session
that runs ckptctl's own gc plan, verify and states on Spark over a bundled fixture and then exits
normally (a dynamic archive is written at a JVM's normal exit only). A JVM whose archive is
missing, or does not match its class path, runs without it (``-Xshare:auto``, the default; its
warning is turned off); a half-written archive crashes the JVM that maps it, so the archive is
written under another name and renamed into place only after its JVM exited 0.

Run as ``python -m tests.support.spark_archive PATH`` (what :func:`ensure` starts).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import subprocess
import sys
from pathlib import Path

from tests.support.fixture_cases import REPO

# the JVM's options that use an archive (a missing or mismatched one: no sharing, and no warning)
_QUIET = "-Xlog:cds=off,cds+dynamic=off"


def archive_path() -> Path | None:
    """Where this machine's archive for this Java and this Spark is (or would be); None when there
    is no Java or no PySpark to key it on."""
    try:
        from pyspark.find_spark_home import _find_spark_home

        spark_home = os.path.realpath(os.environ.get("SPARK_HOME") or _find_spark_home())
        java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else "java"
        version = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60).stderr
    except (Exception, SystemExit):  # noqa: BLE001 - no Spark, no Java: the suite's own tests say so
        return None
    jars = (
        sorted(os.listdir(os.path.join(spark_home, "jars")))
        if os.path.isdir(os.path.join(spark_home, "jars"))
        else []
    )
    key = hashlib.sha256("\n".join([spark_home, version, *jars]).encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "ckptctl-tests" / f"spark-{key}.jsa"


def use_options(path: Path) -> str:
    """The JVM options that map ``path`` when it is there."""
    return f"-XX:SharedArchiveFile={path} {_QUIET}"


def ensure(path: Path) -> subprocess.Popen | None:
    """Start writing the archive in the background unless it is there (or being written by another
    run): the process, to be waited on or killed at the run's end (:func:`finish`)."""
    if path.exists():
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_SUBMIT_OPTS",)}
    env["SPARK_SUBMIT_OPTS"] = "-XX:TieredStopAtLevel=1"
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.spark_archive", str(path)], cwd=REPO, env=env,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip


def finish(writer: subprocess.Popen | None) -> None:
    """The run is over: a writer still at work is stopped (its half-written file is never renamed
    into place; a later run starts again)."""
    if writer is None or writer.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(writer.pid, 9)
    writer.wait()


def _write(path: Path) -> int:
    """One representative session, its classes archived at its JVM's exit."""
    lock = path.with_suffix(".lock")
    with open(lock, "w") as held:
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 0  # another run writes it
        if path.exists():
            return 0
        partial = path.with_suffix(f".{os.getpid()}.partial")
        os.environ["SPARK_SUBMIT_OPTS"] += f" -XX:ArchiveClassesAtExit={partial}"
        try:
            code = _session()
            if code == 0 and partial.exists() and partial.stat().st_size > 1 << 20:
                os.replace(partial, path)
            return code
        finally:
            partial.unlink(missing_ok=True)


def _session() -> int:
    """gc plan, verify and states on Spark over a bundled fixture in this process; then the JVM is
    let go and waited for (it writes the archive as it exits): its exit code."""
    import tempfile

    from typer.testing import CliRunner

    from ckptctl.cli import app
    from ckptctl.engine import spark

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


if __name__ == "__main__":
    sys.exit(_write(Path(sys.argv[1])))
