"""``refs`` writes the format its ``-o`` file names, and refuses flags that contradict each other."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli_runner import DATA, cli, cli_json, one_line_error

# ---- refs: the output format ----------------------------------------------------------------


def test_refs_output_format_from_the_file_extension(tmp_path: Path, monkeypatch) -> None:
    import pyarrow.parquet as pq

    checkpoint = str(DATA / "2.2.0" / "basic")
    expected = cli_json("refs", checkpoint)
    for ext in ("json", "ndjson", "csv", "parquet"):
        target = tmp_path / f"out.{ext}"
        result = cli("refs", checkpoint, "-o", str(target))
        assert result.exit_code == 0, result.output
        assert result.stdout == "" and target.exists()
        if ext == "json":
            assert json.loads(target.read_text()) == expected
        elif ext == "ndjson":
            assert [json.loads(line) for line in target.read_text().splitlines()] == expected
        elif ext == "csv":
            assert len(target.read_text().splitlines()) == len(expected) + 1
        else:
            assert pq.read_table(target).num_rows == len(expected)
    line = one_line_error(cli("refs", checkpoint, "-o", str(tmp_path / "out.txt")))
    assert "cannot tell the format" in line and not (tmp_path / "out.txt").exists()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--json", "-f", "csv"], ("--json", "--format csv", "conflict")),
        (["-f", "csv", "-o", "x.json"], ("--format csv", "x.json", "conflict")),
        (["--json", "-o", "x.csv"], ("--json", "x.csv", "conflict")),
    ],
)
def test_refs_conflicting_formats_are_refused(args: list[str], words: tuple[str, ...], tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = one_line_error(cli("refs", str(DATA / "2.2.0" / "basic"), *args))
    for w in words:
        assert w in line
    assert list(tmp_path.iterdir()) == []
