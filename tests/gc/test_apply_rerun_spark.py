"""Review m16 on Spark: ``gc apply --engine spark`` after an interrupted or a completed apply tells
"already gone (done)" apart from a file kept (guarded now, referenced again), in the words and JSON
``reason``/``code`` of the in-process apply. It said "skipped (no longer orphans or changed)" and
``"reason": "no longer a candidate (gone, referenced again, or guarded)"`` for all of them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ckptctl.gc.revalidation import GONE, GUARDED
from tests.support.gc_support import Scenario, ckptctl

OLD = ["--older-than", "1d", "--margin", "10m", "--force"]
MASTER = "local[*]"  # the session the other Spark tests use


def _skips(result: dict) -> dict[str, tuple[str, str]]:
    return {s["path"]: (s.get("code"), s["reason"]) for s in result["skipped"]}


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_an_interrupted_then_completed_apply_says_already_gone(engine, request, tmp_path: Path) -> None:
    if engine == "spark":
        request.getfixturevalue("spark")
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0].name
    orphans = [sc.plant(f"checkpoints/{job}/shared/orphan-{i}", size=100 + i) for i in range(4)]
    plan_file = tmp_path / "plan.json"
    ckptctl("gc", "plan", str(sc.checkpoints), *sc.rebase, *OLD, "--engine", engine,
            *(["--master", MASTER] if engine == "spark" else []), "-o", str(plan_file))  # fmt: skip
    n = json.loads(plan_file.read_text())["candidate_files"]
    assert 4 <= n <= 20  # the JSON's sample of skips holds them all
    # an apply interrupted after one delete; and a candidate written again since: too young now
    orphans[0].unlink()
    os.utime(orphans[1], None)
    first = json.loads(ckptctl("gc", "apply", str(plan_file), "--yes", "--json").stdout)
    assert first["deleted_files"] == n - 2, first
    skips = _skips(first)
    assert skips[sc.uri(orphans[0])] == (GONE, "already gone (done)")
    code, reason = skips[sc.uri(orphans[1])]
    assert code == GUARDED and reason.startswith("guarded now: "), reason
    assert "no longer a candidate" not in json.dumps(first)

    again = json.loads(ckptctl("gc", "apply", str(plan_file), "--yes", "--json").stdout)
    assert again["deleted_files"] == 0
    codes = [c for c, _r in _skips(again).values()]
    assert codes.count(GONE) == n - 1 and codes.count(GUARDED) == 1, again
    text = ckptctl("gc", "apply", str(plan_file), "--yes").stdout
    assert f"already gone (done): {n - 1}" in text and "guarded now (kept): 1" in text, text
    assert "skipped (no longer" not in text and "referenced again" not in text, text
