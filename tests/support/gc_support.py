"""Building GC scenarios from the real fixtures: a private copy, controlled mtimes, planted orphans.

Fixture file mtimes are meaningless after a git clone, so every test sets them explicitly:
all files at T0 (three days ago), each completed ``_metadata`` one hour later (the newest thing
of its job), planted orphans before T0.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from typer.testing import CliRunner

from ckptctl.cli import app, gc_alias
from tests.support.fixture_cases import FIXTURES, REPO, manifest

DAY = 86400.0
T0 = time.time() - 3 * DAY
# what stores and file systems report for a time they do not have: 0 (Alibaba OSS's access time,
# which defeated Amoro's age guard: apache/amoro#2924), 1 (Nix's store, FUSE mounts of object
# stores), FAT's and zip's 1980-01-01, and the last second before 2016 (no Flink file is older)
STAND_INS = {"zero": 0, "nix": 1, "fat": 315_532_800, "before-2016": 1_451_606_399}

runner = CliRunner()


class Scenario:
    """A private copy of one fixture scenario with the mtimes of a cancelled job three days ago."""

    def __init__(self, version: str, scenario: str, tmp: Path) -> None:
        entry = next(
            e for e in manifest()["entries"] if e["flink_version"] == version and e["scenario"] == scenario
        )
        self.entry = entry
        self.root = tmp / f"{version}-{scenario}"
        shutil.copytree(REPO / entry["data_dir"], self.root)
        self.original = entry["original_root"]
        for path in self.root.rglob("*"):
            if path.is_file():
                os.utime(path, (T0, T0))
        for meta in self.root.rglob("_metadata"):
            os.utime(meta, (T0 + 3600, T0 + 3600))

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def rebase(self) -> list[str]:
        return ["--rebase", f"{self.original}={self.root}"]

    def gc_options(self, **overrides):
        """GcOptions for planning this scenario in place (moved from its original root)."""
        from ckptctl.checkpoint.rebase import Rebase
        from ckptctl.gc import GcOptions

        settings = {
            "older_than": DAY,
            "margin": 600.0,
            "force": True,
            "rebase": Rebase.of([(self.original, str(self.root))]),
        }
        return GcOptions((str(self.checkpoints),), **{**settings, **overrides})

    def jobs(self) -> list[Path]:
        return sorted(p for p in self.checkpoints.iterdir() if p.is_dir())

    def plant(self, rel: str, mtime: float = T0 - 3600, size: int = 100) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(size))
        os.utime(path, (mtime, mtime))
        return path

    def referenced_by_flink(self) -> set[str]:
        """Every file Flink's own reader says a completed checkpoint references (as file: URIs here)."""
        out = set()
        for exp in (REPO / self.entry["expected_dir"]).rglob("*.json"):
            for r in json.loads(exp.read_text())["references"]:
                path = r["path"].removeprefix("file:")
                if path.startswith(self.original):
                    out.add("file:" + str(self.root) + path[len(self.original) :])
        return out

    def unreferenced_by_flink(self) -> set[str]:
        """Files of the scenario that no _metadata references (the fixture's genuine orphans)."""
        return {"file:" + str(self.root / rel) for rel in self.entry["unreferenced_files"]}

    def uri(self, path: Path) -> str:
        return "file:" + str(path)


def ckptctl(*args: str, expect: int | None = 0, env: dict[str, str] | None = None):
    result = runner.invoke(app, gc_alias(list(args)), env=env)
    if expect is not None:
        assert result.exit_code == expect, (
            f"exit {result.exit_code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
        )
    return result


def plan_json(*args: str, expect: int = 0) -> dict:
    return json.loads(ckptctl("gc", "plan", "--json", *args, expect=expect).stdout)


J1, J2 = (
    "528f933aefa1a487b873051dd9e69125",
    "73df6542b9b39ec7f7446cce40df696a",
)  # the 1.20.3 claim fixture's two jobs


def add_job(sc: Scenario, version: str, scenario: str) -> tuple[Path, list[str]]:
    """Copy the (single) job of another fixture into ``sc``'s checkpoint root; its --rebase."""
    entry = next(
        e for e in manifest()["entries"] if e["flink_version"] == version and e["scenario"] == scenario
    )
    (job_id,) = entry["job_ids"]
    dst = sc.checkpoints / job_id
    shutil.copytree(REPO / entry["data_dir"] / "checkpoints" / job_id, dst)
    for p in dst.rglob("*"):
        if p.is_file():
            t = T0 + 3600 if p.name == "_metadata" else T0
            os.utime(p, (t, t))
    return dst, ["--rebase", f"{entry['original_root']}/checkpoints/{job_id}={dst}"]


def shared_ssts(sc: Scenario) -> list[Path]:
    """The SSTs (local name ``*.sst``) real Flink's reading of the scenario references, in the copy."""
    e = sc.entry
    out = set()
    for exp in (REPO / e["expected_dir"]).rglob("*.json"):
        for r in json.loads(exp.read_text())["references"]:
            if (r.get("local_name") or "").endswith(".sst"):
                out.add(sc.root / r["path"].removeprefix("file:")[len(e["original_root"]) + 1 :])
    return sorted(out)


__all__ = ["Scenario", "ckptctl", "plan_json", "add_job", "T0", "DAY", "FIXTURES", "J1", "J2", "shared_ssts"]
