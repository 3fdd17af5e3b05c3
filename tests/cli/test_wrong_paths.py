"""A path of the wrong kind (a plain file, an empty directory) is a one-line error naming it, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli_runner import DATA, cli, one_line_error
from tests.support.fixture_cases import REPO

# ---- gates and wrong kinds of path ----------------------------------------------------------


def test_check_fails_on_a_path_without_checkpoints(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    line = one_line_error(cli("check", str(tmp_path / "empty")))
    assert "no checkpoints under" in line and "empty" in line
    line = one_line_error(cli("check", str(REPO / "README.md")))
    assert "not a checkpoint directory" in line and "README.md" in line


@pytest.mark.parametrize("command", ["ls", "show", "refs", "verify", "plan-rescale", "diff"])
def test_a_plain_file_is_not_a_checkpoint_directory(command: str) -> None:
    args = {"plan-rescale": ["-p", "2"], "diff": [str(REPO / "README.md")], "verify": ["--engine", "local"]}
    result = cli(command, str(REPO / "README.md"), *args.get(command, []))
    line = one_line_error(result)
    assert "not a checkpoint directory" in line and "README.md" in line and "Errno" not in line


def test_refs_on_an_empty_directory_is_an_error(tmp_path: Path) -> None:
    line = one_line_error(cli("refs", str(tmp_path)))
    assert "not a checkpoint directory" in line and "no completed checkpoints" in line


@pytest.mark.parametrize(
    "args",
    [["verify", ""], ["ls", ""], ["check", ""], ["refs", ""], ["show", ""], ["states", ""], ["gc", "plan", ""],
     ["relocate", "", "x"], ["relocate", str(DATA / "2.2.0" / "basic"), ""], ["diff", "", ""]],
)  # fmt: skip
def test_an_empty_path_is_refused_as_gc_refuses_it(args: list[str]) -> None:
    """An unset ``$ROOT`` is ``''``: every command refuses it in one line (gc's rule), never the cwd."""
    line = one_line_error(cli(*args))
    assert "'' is empty or has blanks" in line


def test_relocate_refuses_a_plain_file_as_every_command_does(tmp_path: Path) -> None:
    """m13: the file exists; "no such checkpoint directory" was wrong."""
    for extra in ([], ["--all"]):
        line = one_line_error(cli("relocate", str(REPO / "README.md"), str(tmp_path / "dst"), *extra))
        assert "not a checkpoint directory" in line and "README.md" in line and "no such" not in line


def test_paimon_orphans_on_a_missing_table_says_no_such_directory(tmp_path: Path) -> None:
    """m13: a mistyped --table is no directory at all, not a directory without schema/."""
    checkpoints = next((REPO / "fixtures/paimon/flink/committed/checkpoints").iterdir())
    missing = tmp_path / "nonexistent"
    line = one_line_error(
        cli("paimon", "orphans", "--table", str(missing), "--checkpoints", str(checkpoints))
    )
    assert "no such directory" in line and str(missing) in line and "schema" not in line
    line = one_line_error(
        cli("paimon", "orphans", "--table", str(tmp_path), "--checkpoints", str(checkpoints))
    )
    assert "not a Paimon table directory" in line
