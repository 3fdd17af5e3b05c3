"""The class archive of the suite's PyFlink gateway JVMs (tests/support/class_archive.py), per Flink release.

Every real-Flink restore of the suite runs in a PyFlink gateway JVM (tests/support/flink_harness.py:
one restore session per Flink release and test worker), and so does the live ForSt job of
tests/gc/test_forst.py: each loads Flink's runtime, its Table planner and Pekko before the first
restore. A 2.2 gateway restoring one savepoint took 19.9 CPU-s and 69 s; from the archive 14.3
CPU-s and 45 s (the machine at a load of 15); the restores after the first, in a JVM that has its
classes, are unchanged.

Keyed per release on the PyFlink venv's jars (its lib/ and the flink-python jar: the gateway's class
path); written for each release whose venv is there (never creates one) and that has a savepoint
fixture, by restoring a copy of that release's CANONICAL savepoint (fixtures/data/<release>/
savepoints) with fixtures/restore_job.py, which lets its JVM exit normally and reports how it
exited. The JVMs are told of it by :func:`options` (flink_harness.flink_env), only once it is there.
"""

from __future__ import annotations

import functools
import glob
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.support import class_archive, jvm
from tests.support.fixture_cases import REPO, manifest


def _site(python: Path) -> Path | None:
    """The pyflink package of a venv's interpreter, found without running it."""
    found = sorted(glob.glob(str(python.parent.parent / "lib" / "python3*" / "site-packages" / "pyflink")))
    return Path(found[-1]) if found else None


def archive_path(python: Path) -> Path | None:
    """The archive of the gateway JVM that ``python`` (a PyFlink venv's) starts; None without one."""
    site = _site(python)
    if site is None:
        return None
    jars = sorted(
        [*glob.glob(str(site / "lib" / "*.jar")), *glob.glob(str(site / "opt" / "flink-python*.jar"))]
    )
    return class_archive.archive_path("flink", jars) if jars else None


_FOUND: dict[Path, Path] = {}  # venv python -> its archive, once it is there


def options(python: Path) -> str:
    """The JVM options that map the archive of ``python``'s gateway JVM, when it is there ("" else:
    a JVM told of a missing archive would run without the JDK's own). While it is not there, looked
    for at every call (the background writer may have finished since)."""
    path = _FOUND.get(python) or archive_path(python)
    options = class_archive.options_once_there(path)
    if options:
        _FOUND[python] = path
    return options


def _savepoint(version: str) -> Path | None:
    """The bundled CANONICAL savepoint of ``version``'s savepoints fixture (self-contained)."""
    for e in manifest()["entries"]:
        if e["flink_version"] == version and e["scenario"] == "savepoints":
            for job in e.get("jobs", []):
                for s in job.get("savepoints", []):
                    if s["format"] == "CANONICAL":
                        rel = Path(s["path"].removeprefix("file:")).relative_to(e["original_root"])
                        return REPO / e["data_dir"] / rel
    return None


def archives() -> list[tuple[Path, class_archive.Session]]:
    from tests.support.flink_harness import installed_python

    out = []
    for version in sorted({e["flink_version"] for e in manifest()["entries"]}):
        python, savepoint = installed_python(version), _savepoint(version)
        path = archive_path(python) if python is not None and savepoint is not None else None
        if path is not None:
            out.append((path, functools.partial(_session, version, python, savepoint)))
    return out


def _session(version: str, python: Path, savepoint: Path, dump: str) -> int:
    """One restore of a copy of ``savepoint`` in a gateway JVM that writes the archive as it exits:
    0 when the restore succeeded and the JVM exited 0."""
    from tests.support.flink_harness import RESTORE_JOB, flink_env

    env = flink_env(None)
    # the suite's options, but verifying (jvm.FLINK does not): a JVM refuses an archive written
    # with less verification than its own, and one written verifying serves both
    env["FLINK_ENV_JAVA_OPTS"] = " ".join([*jvm.LONG_LIVED, dump])
    with tempfile.TemporaryDirectory(prefix="ckptctl-archive-") as tmp:
        copy = Path(tmp) / "savepoint"
        shutil.copytree(savepoint, copy)
        p = subprocess.run(
            [
                str(python),
                str(RESTORE_JOB),
                "--scenario",
                "savepoints",
                "--restore",
                str(copy),
                "--timeout",
                "300",
                "--flink-version",
                version,
            ],
            env=env,
            capture_output=True,
            text=True,
        )  # fmt: skip  (no timeout: the run's end stops the writer, this JVM with it)
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("{"):
            report = json.loads(line)
            return 0 if report.get("ok") and report.get("jvm_exit") == 0 else 1
    return 1
