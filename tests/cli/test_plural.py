"""c7: one plural rule (``ckptctl.words.plural``) for the counts people read: "1 checkpoint",
"deleted: 1 file", never "1 checkpoints"; and no document of the repository cites a file by an
absolute path outside it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from ckptctl.words import plural
from tests.support.fixture_cases import REPO
from tests.support.gc_support import Scenario, ckptctl


def test_plural() -> None:
    assert plural(1, "file") == "1 file" and plural(0, "file") == "0 files" and plural(2, "file") == "2 files"
    assert plural(39049, "file") == "39,049 files" and plural(1, "copy", "copies") == "1 copy"
    assert plural(3, "copy", "copies") == "3 copies"


def test_one_checkpoint_and_one_file_read_singular(tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    chk = sorted(sc.checkpoints.glob("*/chk-*"))[-1]
    text = ckptctl("verify", str(chk), *sc.rebase, "--engine", "local", env={"COLUMNS": "200"}).stdout
    assert "1 checkpoint," in text and "1 checkpoints" not in text, text
    sc.plant(f"checkpoints/{sc.jobs()[0].name}/shared/orphan", size=100)
    plan_file = tmp_path / "plan.json"
    ckptctl("gc", "plan", str(chk.parent), *sc.rebase, "--older-than", "1d", "--margin", "10m", "--force",
            "--keep-last", "3", "-o", str(plan_file))  # fmt: skip
    import json

    n = len(json.loads(plan_file.read_text())["candidates"])
    applied = ckptctl("gc", "apply", str(plan_file), "--yes").stdout
    assert f"deleted: {plural(n, 'file')}," in applied, applied
    moved = ckptctl("relocate", str(chk), str(tmp_path / "dst"), *sc.rebase).stdout
    assert "1 checkpoint," in moved and "checkpoint(s)" not in moved, moved
    assert not re.search(r"\b1 (files|checkpoints)\b", text + applied + moved)


def test_no_document_cites_a_file_by_an_absolute_path_outside_the_repository() -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "*.md"], cwd=REPO, capture_output=True, text=True, check=True
    )
    cited = []
    for name in tracked.stdout.split():
        text = (REPO / name).read_text(errors="replace")
        cited += [f"{name}: {m}" for m in re.findall(r"`(/(?:work|home|root|Users)/[^`\s]+)`", text)]
    assert not cited, cited
