"""The gates (``check``, ``verify``) tell Flink's truth (issue 19 row 8, issue 22 rows 6 and 7).

Flink opens the paths its ``_metadata`` names. A disaster-recovery copy of a root whose primary
location is gone names the primary: the gate must fail, say where Flink will read, and offer the
copy's check only as a what-if (``--rebase``). A root with one unreadable ``_metadata`` is checked
checkpoint by checkpoint: the unreadable one is broken, the rest are judged.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support.gc_support import Scenario, ckptctl


def run_json(*args: str, expect: int | None = 0) -> dict:
    result = ckptctl(*args, "--json", expect=expect)
    return json.loads(result.stdout)


@pytest.fixture
def primary_and_dr(tmp_path: Path) -> tuple[Path, Path]:
    """A root whose _metadata name its own location (written there by `relocate`), and a byte
    copy of it elsewhere (the DR copy): every absolute path in the copy names the primary."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    primary = tmp_path / "primary"
    ckptctl("relocate", str(sc.checkpoints), str(primary), "--all", "--apply", *sc.rebase)
    dr = tmp_path / "dr"
    shutil.copytree(primary, dr)
    return primary, dr


@pytest.mark.parametrize("gate", ["check", "verify"])
def test_a_dr_copy_passes_only_while_flink_can_read_the_primary(primary_and_dr, gate: str) -> None:
    primary, dr = primary_and_dr
    args = [gate, str(dr)] + (["--engine", "local"] if gate == "verify" else [])
    # the primary is there: Flink restores the copy by reading the primary's files; the gate says so
    alive = ckptctl(*args)
    assert "written at another location" in alive.stderr
    shutil.rmtree(primary)
    report = run_json(*args, expect=1)
    assert not report["ok"]
    missing = [p for p in report["problems"] if p["check"] == "exists"]
    assert missing and all(p["path"].startswith(f"file:{primary}/") for p in missing)
    assert all(
        p["moved_to"].startswith(f"file:{dr}/") and "written at another location" in p["detail"]
        for p in missing
    )
    assert [m["rebase"] for m in report["moved"]] == [[f"file:{primary}=file:{dr}"]]
    assert report["moved"][0]["missing_files"] == len(missing) and "relocate" in report["moved"][0]["advice"]
    # the copy itself, as a what-if named in the output
    what_if = ckptctl(*args, "--rebase", f"{primary}={dr}")
    assert "what-if" in what_if.stderr
    assert run_json(*args, "--rebase", f"{primary}={dr}")["what_if"] == [f"file:{primary}=file:{dr}"]


@pytest.mark.parametrize("gate", ["check", "verify"])
def test_a_moved_copy_gives_the_hint_once_and_one_line_per_checkpoint(primary_and_dr, gate: str) -> None:
    """Review m1: the mapping hint was repeated for every file and in every checkpoint's row (838
    lines for 3 checkpoints at 80 columns): it is said once, each checkpoint gets one count."""
    primary, dr = primary_and_dr
    shutil.rmtree(primary)
    args = [gate, str(dr)] + (["--engine", "local"] if gate == "verify" else [])
    report = run_json(*args, expect=1)
    missing = [p["path"] for p in report["problems"] if p.get("moved_to")]
    assert len(missing) > 10
    result = ckptctl(*args, expect=1, env={"COLUMNS": "80"})
    text = result.stdout + result.stderr
    assert text.count("relocate") == 2 and text.count("what-if") == 1, (
        text
    )  # one hint (it names relocate twice)
    assert not [p for p in missing if p.rsplit("/", 1)[1] in text]  # each file: --json, not the text
    assert f"{len(missing)} files not found where Flink will" in text
    assert len(text.splitlines()) < 3 * len(report["checkpoints"]) + 30, text


def test_verify_judges_each_checkpoint_and_names_the_broken_one_first(tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    metas = sorted(sc.checkpoints.rglob("chk-*/_metadata"))
    assert len(metas) >= 3
    truncated = metas[1]
    truncated.write_bytes(truncated.read_bytes()[:100])
    report = run_json("verify", "--engine", "local", str(sc.checkpoints), *sc.rebase, expect=1)
    verdicts = report["verdicts"]
    assert verdicts[0]["checkpoint"] == f"file:{truncated.parent}" and not verdicts[0]["ok"]
    assert "unreadable _metadata" in verdicts[0]["why"]
    assert [v["ok"] for v in verdicts[1:]] == [True] * (len(metas) - 1)
    assert report["checked"]["checkpoints"] == len(metas) - 1  # the others were checked
    text = ckptctl("verify", "--engine", "local", str(sc.checkpoints), *sc.rebase, expect=1).stdout
    assert "broken" in text and truncated.parent.name in text and f"1 of {len(metas)} checkpoints" in text


def test_verify_names_a_checkpoint_with_a_missing_file(tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    newest = max(sc.checkpoints.rglob("chk-*/_metadata"), key=lambda p: int(p.parent.name[4:])).parent
    own = next(p for p in newest.iterdir() if p.name != "_metadata")
    own.unlink()
    report = run_json("verify", "--engine", "local", str(sc.checkpoints), *sc.rebase, expect=1)
    broken = [v for v in report["verdicts"] if not v["ok"]]
    assert [v["checkpoint"] for v in broken] == [f"file:{newest}"] and "exists" in broken[0]["why"]
    assert report["verdicts"][0] == broken[0]


def test_refs_of_a_root_with_an_unreadable_metadata_lists_the_rest_and_exits_1(tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    metas = sorted(sc.checkpoints.rglob("chk-*/_metadata"))
    metas[0].write_bytes(b"\x00\x01")
    result = ckptctl("refs", str(sc.checkpoints), "--format", "json", *sc.rebase, expect=1)
    rows = json.loads(result.stdout)
    assert {r["checkpoint"] for r in rows} == {f"file:{m.parent}" for m in metas[1:]}
    assert metas[0].parent.name in result.stderr and "Traceback" not in result.stderr


def test_check_does_not_count_an_unreadable_checkpoints_files_as_orphans(tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    meta = sorted(sc.checkpoints.rglob("chk-*/_metadata"))[-1]
    meta.write_bytes(meta.read_bytes()[:100])
    report = run_json("check", str(sc.checkpoints), *sc.rebase, "--max-orphan-bytes", "1GiB", expect=1)
    o = report["orphans"]
    assert o["files"] == 0 and not o["ok"] and "unreadable _metadata" in o["error"]


def test_check_stats_a_symlinked_file_instead_of_trusting_the_links_size(tmp_path: Path) -> None:
    """A listing gives a symlink's own size; check used it for a referenced SST replaced by a link
    to a copy elsewhere, and called a sound checkpoint corrupt (and a dangling link present)."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0]
    target = next(
        p for p in sorted((job / "shared").iterdir()) if "file:" + str(p) in sc.referenced_by_flink()
    )
    moved = tmp_path / "elsewhere" / target.name
    moved.parent.mkdir()
    shutil.copy2(target, moved)
    target.unlink()
    target.symlink_to(moved)
    assert run_json("check", str(sc.checkpoints), *sc.rebase)["ok"]
    moved.unlink()  # now dangling
    report = run_json("check", str(sc.checkpoints), *sc.rebase, expect=1)
    assert any(p["check"] == "exists" and p["path"] == f"file:{target}" for p in report["problems"])
