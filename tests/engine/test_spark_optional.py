"""m19: Spark is an optional extra (``ckptctl[spark]``): ``pip install -e .`` leaves pyspark (~500 MB)
out, so every command with ``--engine`` must work without it.

pyspark is hidden from a fresh process (``sys.modules['pyspark'] = None``: every import of it fails,
as where it was never installed). ``auto`` runs in-process (small inputs, as with pyspark); Spark
asked for by name is one line naming the extra, exit 2, before anything is read."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.fixture_cases import REPO, manifest

NO_PYSPARK = (
    "import sys; sys.modules['pyspark'] = None; from ckptctl.cli import main; sys.argv[0] = 'ckptctl'; main()"
)


def without_pyspark(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", NO_PYSPARK, *args], capture_output=True, text=True, timeout=300, cwd=REPO
    )


@pytest.fixture(scope="module")
def basic(tmp_path_factory) -> tuple[str, str]:
    """A copy of a real Flink root (gc apply deletes its orphans) and the mapping to read it."""
    entry = next(
        e for e in manifest()["entries"] if e["flink_version"] == "2.2.0" and e["scenario"] == "basic"
    )
    copy = tmp_path_factory.mktemp("no-pyspark") / "basic"
    shutil.copytree(REPO / entry["data_dir"], copy)
    return str(copy), f"{entry['original_root']}={copy}"


def _commands(root: str, mapping: str, tmp: str) -> dict[str, list[str]]:
    done = [p for p in Path(root).glob("checkpoints/*/chk-*") if (p / "_metadata").exists()]
    newest = max(done, key=lambda p: int(p.name[4:]))
    return {
        "verify": ["verify", root, "--rebase", mapping],
        "states": ["states", str(newest), "--deep", "--rebase", mapping],
        "relocate": ["relocate", str(newest), f"{tmp}/relocated", "--apply", "--rebase", mapping],
        "gc plan": ["gc", "plan", root, "--rebase", mapping, "-o", f"{tmp}/plan.json"],
        "gc apply": ["gc", "apply", f"{tmp}/plan.json", "--yes"],
    }


COMMANDS = ["verify", "states", "relocate", "gc plan", "gc apply"]


@pytest.mark.parametrize("name", COMMANDS)
def test_spark_by_name_without_pyspark_is_one_line_naming_the_extra(name, basic, tmp_path) -> None:
    root, mapping = basic
    args = _commands(root, mapping, str(tmp_path))[name]
    if name == "gc apply":
        (tmp_path / "plan.json").write_text("{}")  # refused before the plan is read
    for engine in (["--engine", "spark"], ["--master", "local[1]"]):
        proc = without_pyspark(*args, *engine)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1, proc.stderr
        assert "pip install 'ckptctl[spark]'" in lines[0] and "Traceback" not in proc.stderr, proc.stderr


def test_auto_runs_in_process_without_pyspark(basic, tmp_path) -> None:
    """Every command with --engine, with auto (gc apply applies the plan gc plan wrote)."""
    root, mapping = basic
    commands = _commands(root, mapping, str(tmp_path))
    for name in COMMANDS:
        proc = without_pyspark(*commands[name], "--engine", "auto", "--json")
        assert proc.returncode in (0, 1), (name, proc.stderr)  # 1: problems found (verify, gc refusals)
        assert "pyspark" not in proc.stderr and "Traceback" not in proc.stderr, (name, proc.stderr)
        json.loads(proc.stdout)


def test_auto_above_the_spark_threshold_runs_in_process_without_pyspark(monkeypatch) -> None:
    """Above AUTO_SPARK_TASKS auto would start Spark: without pyspark it runs in-process."""
    import ckptctl.engine as engine

    monkeypatch.setattr(engine, "spark_installed", lambda: False)
    assert engine.Engine.parse("auto").resolve(engine.AUTO_SPARK_TASKS * 10).kind == "local"
    monkeypatch.setattr(engine, "spark_installed", lambda: True)
    assert engine.Engine.parse("auto").resolve(engine.AUTO_SPARK_TASKS * 10).kind == "spark"
