"""``check``'s table: the orphan limit in words, and a corrupt ``_metadata`` named once, relative to the root."""

from __future__ import annotations

from pathlib import Path

from tests.support.cli_runner import DATA, cli
from tests.support.fixture_cases import written_root

# ---- check output ---------------------------------------------------------------------------


def test_check_output_wording_and_a_corrupt_metadata_named_once(tmp_path: Path, monkeypatch) -> None:
    import shutil

    root = tmp_path / "root"
    shutil.copytree(DATA / "2.2.0" / "basic", root)
    here = ["--rebase", f"{written_root()}/2.2.0/basic={root}"]
    ok = cli("check", str(root), *here, env={"COLUMNS": "120"})
    assert ok.exit_code == 0, ok.output
    assert "limit no limit" not in ok.stdout and "ok (0 B)" in ok.stdout
    limited = cli("check", str(root), "--max-orphan-bytes", "1GiB", *here, env={"COLUMNS": "120"})
    assert limited.exit_code == 0 and "of 1.0 GiB allowed" in limited.stdout
    victim = sorted(root.rglob("chk-*/_metadata"))[0]
    victim.write_bytes(victim.read_bytes()[:100])
    monkeypatch.chdir(tmp_path)
    bad = cli("check", "root", *here, env={"COLUMNS": "200"})
    assert bad.exit_code == 1
    rel = victim.relative_to(root).as_posix()
    assert bad.stdout.count(rel) == 1, bad.stdout
    assert str(root) not in bad.stdout
