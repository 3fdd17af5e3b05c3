"""Class-data-sharing archives of the suite's JVMs: a JVM's start for a third to half of its CPU.

A JVM the suite starts loads, parses and verifies thousands of classes before its first job: some
15,000 of Spark, Scala and Hadoop for each Spark JVM, some 10,000 of Flink's runtime, Table planner
and Pekko for each PyFlink gateway (a restore session, the live ForSt job). From an archive of those
classes (Java's AppCDS: a dynamic archive written at the normal exit of one representative JVM) it
maps their parsed form instead. On the 2-core CI machine a Spark JVM's start and two tiny jobs took
19.7 CPU-s and 20.1 s, from its archive 9.3 CPU-s and 10.6 s; a Flink 2.2 gateway restoring one
savepoint 19.9 -> 14.3 CPU-s (load 15). The archive changes where the JVM finds a class's parsed
form, never what the class does.

Each kind of JVM has a module that says what its archive is keyed on and how a representative JVM
of that kind is run (tests/support/spark_archive.py, tests/support/flink_archive.py). Its archive is
written once per machine and key (the Java, the class path's jars with their sizes and times: a jar
rewritten in place would leave the JVM refusing a stale archive forever) into the user's cache, by
one background process (:func:`ensure`) that the run's first process starts when one is missing;
JVMs started before their archive is there run without it. A JVM whose archive does not match its
class path runs without it (``-Xshare:auto``, the default; its warning is turned off). A
half-written archive crashes the JVM that maps it: it is written under another name and renamed
into place only after its JVM exited 0.

Run as ``python -m tests.support.class_archive`` (what :func:`ensure` starts).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from tests.support.fixture_cases import REPO

# the JVM's options that use an archive (a mismatched one: no sharing, and no warning)
_QUIET = "-Xlog:cds=off,cds+dynamic=off"
# an archive smaller than this is no archive of a framework's classes (a dump that went wrong)
_LEAST = 1 << 20

# An archive's writer: given the option that makes its JVM write the archive at exit, it runs one
# representative JVM of its kind with it and returns that JVM's exit code.
Session = Callable[[str], int]


@functools.cache
def java_version() -> str | None:
    """``java -version`` of the JVMs the suite starts (``$JAVA_HOME``'s, else the one on PATH)."""
    java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else "java"
    try:
        p = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stderr if p.returncode == 0 else None


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ckptctl-tests"


def archive_path(kind: str, jars: Iterable[str | os.PathLike], *extra: str) -> Path | None:
    """Where this machine's archive of ``kind`` for these jars (and ``extra``: what else decides
    its class path) is, or would be; None without a Java to key it on."""
    version = java_version()
    if version is None:
        return None
    parts = [kind, version, *extra]
    for jar in jars:
        try:
            st = os.stat(jar)
        except OSError:
            parts.append(f"{jar} -")
        else:
            parts.append(f"{os.path.realpath(jar)} {st.st_size} {st.st_mtime_ns}")
    return cache_dir() / f"{kind}-{hashlib.sha256(chr(10).join(parts).encode()).hexdigest()[:16]}.jsa"


def use_options(path: Path) -> str:
    """The JVM options that map ``path`` when it is there and matches the JVM's class path. (A JVM
    told of an archive that is not there runs without any, the JDK's own included: where a JVM is
    started when its archive may not be there yet, add these only if it is.)"""
    return f"-XX:SharedArchiveFile={path} {_QUIET}"


def options_once_there(path: Path | None) -> str:
    """:func:`use_options` of ``path`` if the archive is there, else "": asked at each JVM's start,
    as the background writer may have finished since the run began."""
    return use_options(path) if path is not None and path.exists() else ""


def wanted() -> list[tuple[Path, Session]]:
    """Every kind's archives: (path, writer) of each."""
    from tests.support import flink_archive, spark_archive

    return [*spark_archive.archives(), *flink_archive.archives()]


def ensure() -> subprocess.Popen | None:
    """Start writing the missing archives in the background (one after another, in one process;
    one already being written by another run is left to it): the process, to be waited on or
    killed at the run's end (:func:`finish`); None when none is missing."""
    if all(path.exists() for path, _ in wanted()):
        return None
    cache_dir().mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.class_archive"], cwd=REPO, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip


def finish(writer: subprocess.Popen | None) -> None:
    """The run is over: a writer still at work is stopped, with the JVM it runs (its half-written
    file is never renamed into place; a later run starts again)."""
    if writer is None or writer.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(writer.pid, 9)
    writer.wait()


def write(path: Path, session: Session) -> int:
    """``session``'s JVM, its classes archived at its exit into ``path`` (renamed into place only
    when it exited 0): its exit code; 0 when another process holds the archive's lock (it writes it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as held:
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 0
        if path.exists():
            return 0
        for stale in path.parent.glob(f"{path.stem}.*.partial"):  # of a writer killed mid-dump
            stale.unlink(missing_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.partial")
        try:
            code = session(f"-XX:ArchiveClassesAtExit={partial}")
            if code == 0 and partial.exists() and partial.stat().st_size > _LEAST:
                os.replace(partial, path)
                _prune(path)
            return code
        finally:
            partial.unlink(missing_ok=True)


def _prune(newest: Path, keep: int = 3) -> None:
    """Each kind keeps its ``keep`` newest archives (each ~100-170 MB): a checkout or venv at a new
    place (a fresh clone per run) keys a new one, and the old ones would pile up in the cache."""
    kind = newest.stem.rsplit("-", 1)[0]
    same = sorted(newest.parent.glob(f"{kind}-*.jsa"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in same[keep:]:
        old.unlink(missing_ok=True)
        old.with_suffix(".lock").unlink(missing_ok=True)


def main() -> int:
    worst = 0
    for path, session in wanted():
        if not path.exists():
            worst = worst or write(path, session)
    return worst


if __name__ == "__main__":
    sys.exit(main())
