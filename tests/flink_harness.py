"""Run real Flink (PyFlink local MiniCluster) from pytest: find or create a PyFlink venv, restore a checkpoint.

``flink_python(version)`` returns the interpreter of a venv with ``apache-flink==<version>``:

- ``FLINK_VENV_120`` (for 1.20.x) / ``FLINK_VENV_2`` (for 2.x) when set, as in fixtures/generate.sh;
- else ``${FLINK_VENV_ROOT:-~/.cache/ckptctl-flink}/<version>``, created on first use
  (``python -m venv`` + ``pip install apache-flink==<version>``, a few minutes, needs PyPI), under
  a file lock so that parallel sessions or xdist workers do not race.

Flink needs Java (11/17); without a working ``java -version`` the calling test is skipped.

``restore(version, scenario, path, **opts)`` runs fixtures/restore_job.py in that venv with a hard
timeout and returns its JSON report (``ok``, ``status``, ``error``, ``new_checkpoint``, ...).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
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


def restore(version: str, scenario: str, path: str | os.PathLike, **opts) -> dict:
    """Run fixtures/restore_job.py (see there) and return its JSON report.

    opts: parallelism, checkpoint_dir, timeout (seconds to wait for a new checkpoint, default 90),
    log_out, claim_mode, checkpoint_interval, conf (list of KEY=VALUE), keep_running.
    The process gets ``timeout + 120`` seconds in total and is killed (with its JVM) after that.
    """
    python = flink_python(version)
    timeout = float(opts.pop("timeout", 90))
    cmd = [str(python), str(RESTORE_JOB), "--scenario", scenario, "--restore", str(path),
           "--timeout", str(timeout), "--flink-version", version]  # fmt: skip
    for conf in opts.pop("conf", []) or []:
        cmd += ["--conf", conf]
    for key, value in opts.items():
        if value is not None:
            cmd += ["--" + key.replace("_", "-"), str(value)]
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # the venv's own packages only
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
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
