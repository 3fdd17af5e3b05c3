"""``verify`` on a root moved away from where Flink wrote it: one warning per inferred mapping, files named relative to it."""

from __future__ import annotations

from pathlib import Path

from tests.support.cli_runner import DATA, cli

# ---- moved roots, diff, --help ----------------------------------------------------------------


def test_verify_on_a_moved_root_warns_once_per_mapping(tmp_path: Path, monkeypatch) -> None:
    import shutil

    root = tmp_path / "moved"
    shutil.copytree(DATA / "2.2.0" / "savepoints", root)
    victim = next(root.glob("savepoints/savepoint-*/*-*-*-*-*"))
    victim.unlink()
    monkeypatch.chdir(tmp_path)
    result = cli("verify", "moved", "--engine", "local", env={"COLUMNS": "200"})
    assert result.exit_code == 1, result.output
    assert (result.stdout + result.stderr).count("--rebase") == 1, result.output  # the mapping, said once
    assert victim.relative_to(root).as_posix() in result.stdout
    single = cli("verify", str(victim.parent), "--engine", "local", env={"COLUMNS": "200"})
    assert single.exit_code == 1
    assert f"{victim.parent.name}/{victim.name}" in single.stdout  # not a bare UUID
