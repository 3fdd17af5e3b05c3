"""``gc apply`` re-run after a completed apply (review m16): "already gone (done)" is told apart
from "referenced again" in the text and in the JSON (``skipped[].code``)."""

from __future__ import annotations

import json
from pathlib import Path

from ckptctl.gc.revalidation import GONE, GUARDED, LIVE, why_dropped
from ckptctl.storage import Storage, StorageOptions
from tests.support.gc_support import Scenario, ckptctl

OLD = ["--older-than", "1d", "--margin", "10m"]


def test_a_rerun_after_a_completed_apply_says_already_gone(tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0].name
    orphans = [sc.plant(f"checkpoints/{job}/shared/orphan-{i}", size=100 + i) for i in range(3)]
    plan_file = tmp_path / "plan.json"
    ckptctl("gc", "plan", str(sc.checkpoints), *sc.rebase, *OLD, "--force", "-o", str(plan_file))
    n = len(json.loads(plan_file.read_text())["candidates"])
    first = ckptctl("gc", "apply", str(plan_file), "--yes")
    assert not any(p.exists() for p in orphans), first.output
    again = json.loads(ckptctl("gc", "apply", str(plan_file), "--yes", "--json").stdout)
    assert again["deleted_files"] == 0 and len(again["skipped"]) == n
    assert {f"file:{p}" for p in orphans} <= {s["path"] for s in again["skipped"]}
    assert {s["code"] for s in again["skipped"]} == {GONE}
    text = ckptctl("gc", "apply", str(plan_file), "--yes").stdout
    assert f"already gone (done): {n}" in text and "referenced again" not in text, text


def test_a_file_still_there_is_held_and_a_guarded_one_says_why(tmp_path: Path) -> None:
    there, guarded = tmp_path / "there", tmp_path / "young"
    there.write_bytes(b"x")
    guarded.write_bytes(b"y")
    storage = Storage(StorageOptions.from_env(None))
    paths = [f"file:{there}", f"file:{guarded}", f"file:{tmp_path / 'gone'}"]
    out = why_dropped(storage, paths, {f"file:{guarded}": "too young"})
    assert [s["code"] for s in out] == [LIVE, GUARDED, GONE]
    assert "too young" in out[1]["reason"]


def test_the_manifest_is_named_as_help_and_readme_say(tmp_path: Path) -> None:
    """m18: help said PLAN.manifest.jsonl; the file written is plan.json.manifest.jsonl."""
    from tests.support.fixture_cases import REPO

    sc = Scenario("2.2.0", "basic", tmp_path)
    sc.plant(f"checkpoints/{sc.jobs()[0].name}/shared/orphan", size=100)
    plan_file = tmp_path / "plan.json"
    ckptctl("gc", "plan", str(sc.checkpoints), *sc.rebase, *OLD, "--force", "-o", str(plan_file))
    ckptctl("gc", "apply", str(plan_file), "--yes")
    written = [p.name for p in tmp_path.iterdir() if "manifest" in p.name]
    assert written == ["plan.json.manifest.jsonl"]
    helped = " ".join(ckptctl("gc", "apply", "--help", env={"COLUMNS": "300"}).stdout.split())
    assert "plan.json.manifest.jsonl" in helped and "PLAN.manifest" not in helped
    docs = (REPO / "docs" / "gc.md").read_text() + (REPO / "docs" / "spark.md").read_text()
    assert "plan.json.manifest.jsonl" in docs and "PLAN.manifest" not in docs
