"""Run real Flink (PyFlink local MiniCluster) from pytest: find or create a PyFlink venv, restore a checkpoint.

``flink_python(version)`` returns the interpreter of a venv with ``apache-flink==<version>``:

- ``FLINK_VENV_120`` (for 1.20.x) / ``FLINK_VENV_2`` (for 2.x) when set, as in fixtures/generate.sh;
- else ``${FLINK_VENV_ROOT:-~/.cache/ckptctl-flink}/<version>``, created on first use
  (``python -m venv`` + ``pip install apache-flink==<version>``, a few minutes, needs PyPI), under
  a file lock so that parallel sessions or xdist workers do not race.

Flink needs Java (11/17); without a working ``java -version`` the calling test is skipped.

``restore(version, scenario, path, **opts)`` runs fixtures/restore_job.py in that venv with a hard
timeout and returns its JSON report (``ok``, ``status``, ``error``, ``new_checkpoint``, ...).

``FlinkSessions`` does the same restores in one long-lived ``restore_job.py --serve`` process per
Flink version: the gateway JVM and the Table API load once (about 5 s of every one-shot restore
on a 2-core machine), while every restore is still a job of its own on a new MiniCluster with its
own configuration, reported on its own. ``restore_many(version, [(scenario, path, opts), ...])`` is
the short form for a batch. A session that hangs past a restore's timeout is killed (with its
JVM) and that restore reported as ``HARNESS_TIMEOUT``; the next restore starts a new session.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RESTORE_JOB = REPO / "fixtures" / "restore_job.py"
READY = ".ckptctl-flink-ready"  # written into a venv this module created, once pip succeeded


@contextlib.contextmanager
def file_lock(path: Path | str) -> Iterator[None]:
    """An exclusive advisory lock (flock) on ``path``, created if needed; blocks until free."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


@contextlib.contextmanager
def original_root_held(e: dict) -> Iterator[bool]:
    """The original root of the manifest entry ``e`` (where Flink wrote the fixture: the paths in
    its ``_metadata``), for one restoring test at a time across workers and runs. Yields whether
    the root was there when the lock was taken: on the machine that generated the fixtures it is,
    and the test puts it back as it was; elsewhere the test removes what it made there. On the way
    out the root's empty parents go (innermost first, up to the first that is not empty), so that
    no later test can pass only because the fixtures' original location happens to exist.

    Whether the root was there is decided under the lock, and the lock lies outside that tree. It
    was decided before the lock: a test of the same scenario that waited for another took the
    other's copy for the machine's own fixtures and installed a copy at its end. A run of the 25
    Flink tests left /tmp/ckptctl-fixture-gen with 172 files, and the next run restored from it."""
    root = Path(e["original_root"])
    locks = Path(tempfile.gettempdir()) / "ckptctl-test-locks"
    with file_lock(locks / f"{e['flink_version']}-{e['scenario']}.lock"):
        try:
            yield root.exists()
        finally:
            for d in root.parents:
                try:
                    d.rmdir()
                except OSError:
                    break


def require_java() -> str:
    """``java -version``'s first line, or skip the test."""
    java = shutil.which("java")
    if java is None:
        pytest.skip("Flink tests need Java 11+ on PATH (`java` not found)")
    try:
        p = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"Flink tests need a working Java: `java -version` failed: {e}")
    if p.returncode != 0:
        pytest.skip(
            f"Flink tests need a working Java: `java -version` exited {p.returncode}: {p.stderr.strip()}"
        )
    return (p.stderr or p.stdout).splitlines()[0] if (p.stderr or p.stdout) else "java"


def _explicit_venv(version: str) -> str | None:
    if version.startswith("1.20"):
        return os.environ.get("FLINK_VENV_120") or None
    if version.startswith("2."):
        return os.environ.get("FLINK_VENV_2") or None
    return None


def venv_root() -> Path:
    return Path(os.environ.get("FLINK_VENV_ROOT") or Path.home() / ".cache" / "ckptctl-flink")


def _has_pyflink(python: Path, version: str | None = None) -> bool:
    if not python.exists():
        return False
    code = "import pyflink.version as v; print(v.__version__)"
    try:
        p = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return p.returncode == 0 and (version is None or p.stdout.strip() == version)


def _base_python() -> str:
    """The interpreter that creates venvs: $PYTHON, else python3.11 (PyFlink's sweet spot), else python3."""
    for cand in (os.environ.get("PYTHON"), "python3.11", "python3"):
        if cand and shutil.which(cand):
            return shutil.which(cand)
    return sys.executable


def create_venv(venv: Path, version: str) -> None:
    """``python -m venv`` + ``pip install apache-flink==version``; the READY marker last."""
    if venv.exists():
        shutil.rmtree(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    print(f"[flink_harness] creating {venv} with apache-flink=={version} (a few minutes)", file=sys.stderr)
    subprocess.run([_base_python(), "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True, timeout=900)
    subprocess.run([*pip, f"apache-flink=={version}"], check=True, timeout=3600)
    if not _has_pyflink(venv / "bin" / "python", version):
        raise RuntimeError(f"pip installed apache-flink=={version} into {venv} but pyflink does not import")
    (venv / READY).write_text(f"apache-flink=={version}\n")
    print(f"[flink_harness] {venv} ready in {time.monotonic() - t0:.0f}s", file=sys.stderr)


def installed_python(version: str) -> Path | None:
    """The python of a PyFlink ``version`` venv that is there (explicit env var, or cached and
    ready), without running it or creating one; None when there is none."""
    explicit = _explicit_venv(version)
    venv = Path(explicit) if explicit else venv_root() / version
    python = venv / "bin" / "python"
    return python if python.exists() and (explicit or (venv / READY).exists()) else None


def flink_python(version: str) -> Path:
    """The python of a PyFlink ``version`` venv (explicit env var, cached, or created now)."""
    require_java()
    explicit = _explicit_venv(version)
    if explicit:
        python = Path(explicit) / "bin" / "python"
        if not _has_pyflink(python):
            pytest.fail(f"{explicit} (from FLINK_VENV_*) has no importable pyflink")
        return python
    venv = venv_root() / version
    python = venv / "bin" / "python"
    if (venv / READY).exists() and _has_pyflink(python):
        return python
    with file_lock(venv_root() / f".{version}.lock"):
        # another process may have finished while we waited
        if (venv / READY).exists() and _has_pyflink(python):
            return python
        create_venv(venv, version)
    return python


def _restore_args(version: str, scenario: str, path: str | os.PathLike, opts: dict) -> tuple[list[str], float]:  # fmt: skip
    """restore_job.py's arguments for one restore, and its timeout (seconds)."""
    opts = dict(opts)
    timeout = float(opts.pop("timeout", 90))
    args = ["--scenario", scenario, "--restore", str(path), "--timeout", str(timeout),
            "--flink-version", version]  # fmt: skip
    for conf in opts.pop("conf", []) or []:
        args += ["--conf", conf]
    for key, value in opts.items():
        if value is not None:
            args += ["--" + key.replace("_", "-"), str(value)]
    return args, timeout


def flink_env(python: Path | None) -> dict:
    """The environment of a PyFlink venv's process: the venv's own packages only; in the suite
    (whose JVM options ``FLINK_ENV_JAVA_OPTS`` carries: tests/support/jvm.py) its gateway JVM maps
    the class archive of ``python``'s Flink jars once it is there (tests/support/flink_archive.py).
    Elsewhere (fixtures/ scripts) the variable stays unset: PyFlink's own options apply."""
    from tests.support import flink_archive

    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    archive = flink_archive.options(python) if python is not None and env.get("FLINK_ENV_JAVA_OPTS") else ""
    if archive:
        env["FLINK_ENV_JAVA_OPTS"] += " " + archive
    return env


def restore(version: str, scenario: str, path: str | os.PathLike, **opts) -> dict:
    """Run fixtures/restore_job.py (see there) in a process of its own and return its JSON report.

    opts: parallelism, checkpoint_dir, timeout (seconds to wait for a new checkpoint, default 90),
    log_out, claim_mode, checkpoint_interval, conf (list of KEY=VALUE), keep_running.
    The process gets ``timeout + 120`` seconds in total and is killed (with its JVM) after that.
    """
    python = flink_python(version)
    args, timeout = _restore_args(version, scenario, path, opts)
    cmd = [str(python), str(RESTORE_JOB), *args]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=flink_env(python), start_new_session=True
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=timeout + 120)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the python and the JVM it started
        out, err = proc.communicate()
        return {"ok": False, "status": "HARNESS_TIMEOUT", "restored_from": str(path), "error":
                f"restore_job.py did not finish within {timeout + 120:.0f}s", "stderr": (err or "")[-4000:]}  # fmt: skip
    finally:
        # the JVM is a child in the same session; make sure nothing outlives the call
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    for line in reversed((out or "").splitlines()):
        line = line.strip()
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                report = json.loads(line)
                report["exit_code"] = proc.returncode
                return report
    return {"ok": False, "status": "NO_REPORT", "restored_from": str(path), "exit_code": proc.returncode,
            "error": "restore_job.py printed no JSON report", "stderr": (err or "")[-4000:]}  # fmt: skip


REPORT = "@@ckptctl-restore-report "  # restore_job.py --serve: the prefix of a report line


class FlinkSession:
    """One ``restore_job.py --serve`` process (and its gateway JVM) for one Flink version."""

    def __init__(self, version: str) -> None:
        self.version = version
        self.python = flink_python(version)
        self._stderr = tempfile.TemporaryFile(mode="w+", prefix="ckptctl-restore-stderr-")  # noqa: SIM115 (closed by close())
        self.proc = subprocess.Popen(
            [str(self.python), str(RESTORE_JOB), "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._stderr, text=True, env=flink_env(self.python), start_new_session=True, bufsize=1,
        )  # fmt: skip
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()
        self.restores = 0

    def _read(self, stream) -> None:
        for line in stream:
            self._lines.put(line)
        self._lines.put(None)  # EOF: the process is gone

    def alive(self) -> bool:
        return self.proc.poll() is None

    def restore(self, scenario: str, path: str | os.PathLike, **opts) -> dict:
        """As ``restore()``, in this session's JVM; the session is killed if it hangs or dies."""
        args, timeout = _restore_args(self.version, scenario, path, opts)
        failed = {"ok": False, "restored_from": str(path), "session_restores": self.restores}
        try:
            self.proc.stdin.write(json.dumps(args) + "\n")
            self.proc.stdin.flush()
        except OSError as e:
            self.close(kill=True)
            return {**failed, "status": "NO_REPORT", "error": f"restore_job.py --serve is gone: {e}",
                    "stderr": self._stderr_tail()}  # fmt: skip
        deadline = time.monotonic() + timeout + 120
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.close(kill=True)
                return {**failed, "status": "HARNESS_TIMEOUT", "stderr": self._stderr_tail(),
                        "error": f"restore_job.py --serve did not report within {timeout + 120:.0f}s"}  # fmt: skip
            if line is None:
                self.close(kill=True)
                return {**failed, "status": "NO_REPORT", "exit_code": self.proc.returncode,
                        "error": "restore_job.py --serve exited without a report", "stderr": self._stderr_tail()}  # fmt: skip
            if line.startswith(REPORT):
                report = json.loads(line.removeprefix(REPORT))
                self.restores += 1
                report["session_restores"] = self.restores  # the how-manieth restore in this JVM
                return report

    def _stderr_tail(self) -> str:
        with contextlib.suppress(OSError, ValueError):
            self._stderr.seek(0)
            return self._stderr.read()[-4000:]
        return ""

    def close(self, kill: bool = False) -> None:
        """End the session: EOF on stdin lets it stop its JVM; whatever is left is killed."""
        if not kill and self.alive():
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=30)
        # the JVM is a child in the same process group; make sure nothing outlives the session
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                stream.close()
        with contextlib.suppress(OSError):
            self._stderr.close()


class FlinkSessions:
    """A ``FlinkSession`` per Flink version, started on first use; a context manager that closes
    them all (e.g. in a module-scoped fixture), so no JVM outlives the tests that used it."""

    def __init__(self) -> None:
        self._sessions: dict[str, FlinkSession] = {}

    def session(self, version: str) -> FlinkSession:
        s = self._sessions.get(version)
        if s is None or not s.alive():
            if s is not None:
                s.close(kill=True)
            s = self._sessions[version] = FlinkSession(version)
        return s

    def restore(self, version: str, scenario: str, path: str | os.PathLike, **opts) -> dict:
        """As ``restore()``: one restore, in the version's session."""
        return self.session(version).restore(scenario, path, **opts)

    def restore_many(self, version: str, requests) -> list[dict]:
        """``[(scenario, path, opts), ...]`` restored one after another: their reports, in order."""
        return [self.restore(version, scenario, path, **opts) for scenario, path, opts in requests]

    def close(self) -> None:
        for s in self._sessions.values():
            s.close()
        self._sessions.clear()

    def __enter__(self) -> FlinkSessions:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def restore_many(version: str, requests) -> list[dict]:
    """``[(scenario, path, opts), ...]`` restored one after another in one process (one JVM): their
    reports, in order; each restore is a job of its own (see ``FlinkSession``)."""
    with FlinkSessions() as sessions:
        return sessions.restore_many(version, requests)
