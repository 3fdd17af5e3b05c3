"""m19: Spark is an optional extra (``ckptctl[spark]``): ``pip install -e .`` leaves pyspark (~500 MB)
out, so every command with ``--engine`` must work without it.

pyspark is hidden from a fresh process (``sys.modules['pyspark'] = None``: every import of it fails,
as where it was never installed). ``auto`` runs in-process (small inputs, as with pyspark); Spark
asked for by name is one line naming the extra, exit 2, before anything is read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support.cli_runner import in_one_process
from tests.support.fixture_cases import REPO, manifest


def without_pyspark(runs: list[list[str]]) -> list[dict]:
    """Each of ``runs`` (a command line) in turn, in one fresh process where pyspark cannot be
    imported (15 processes of ~1 CPU-s of imports each were most of this file's time)."""
    return in_one_process([(args, {}) for args in runs], hide=("pyspark",))


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
BY_NAME = (["--engine", "spark"], ["--master", "local[1]"])


@pytest.fixture(scope="module")
def spark_by_name(basic, tmp_path_factory) -> dict[str, list[dict]]:
    """Each command with Spark asked for by name (both ways), all in one process: the runs of each."""
    root, mapping = basic
    tmp = tmp_path_factory.mktemp("by-name")
    (tmp / "plan.json").write_text("{}")  # gc apply: refused before the plan is read
    commands = _commands(root, mapping, str(tmp))
    runs = without_pyspark([[*commands[name], *engine] for name in COMMANDS for engine in BY_NAME])
    return {name: runs[i * len(BY_NAME) : (i + 1) * len(BY_NAME)] for i, name in enumerate(COMMANDS)}


@pytest.mark.parametrize("name", COMMANDS)
def test_spark_by_name_without_pyspark_is_one_line_naming_the_extra(name, spark_by_name) -> None:
    for run in spark_by_name[name]:
        lines = run["stderr"].strip().splitlines()
        assert run["code"] == 2 and len(lines) == 1 and run["escaped"] is None, run
        assert "pip install 'ckptctl[spark]'" in lines[0] and "Traceback" not in run["stderr"], run


def test_auto_runs_in_process_without_pyspark(basic, tmp_path) -> None:
    """Every command with --engine, with auto (gc apply applies the plan gc plan wrote)."""
    root, mapping = basic
    commands = _commands(root, mapping, str(tmp_path))
    runs = without_pyspark([[*commands[name], "--engine", "auto", "--json"] for name in COMMANDS])
    for name, run in zip(COMMANDS, runs, strict=True):
        assert run["code"] in (0, 1) and run["escaped"] is None, (name, run)  # 1: problems found
        assert "pyspark" not in run["stderr"] and "Traceback" not in run["stderr"], (name, run["stderr"])
        json.loads(run["stdout"])


def test_auto_above_the_spark_threshold_runs_in_process_without_pyspark(monkeypatch) -> None:
    """Above AUTO_SPARK_TASKS auto would start Spark: without pyspark it runs in-process."""
    import ckptctl.engine as engine

    monkeypatch.setattr(engine, "spark_installed", lambda: False)
    assert engine.Engine.parse("auto").resolve(engine.AUTO_SPARK_TASKS * 10).kind == "local"
    monkeypatch.setattr(engine, "spark_installed", lambda: True)
    assert engine.Engine.parse("auto").resolve(engine.AUTO_SPARK_TASKS * 10).kind == "spark"
