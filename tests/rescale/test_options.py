"""plan-rescale's options: ``--data-aware`` with a histogram written by ``verify --deep``, and ``--flink-version``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli_runner import DATA, cli, cli_json, one_line_error
from tests.support.fixture_cases import data_rebase, rescale_checkpoint


@pytest.mark.parametrize("p", ["3", "2..4"])
def test_plan_rescale_missing_histogram_is_an_error(p: str, tmp_path: Path) -> None:
    line = one_line_error(
        cli("plan-rescale", rescale_checkpoint(), "-p", p, "--data-aware", str(tmp_path / "x"))
    )
    assert "no such file" in line and str(tmp_path / "x") in line


def test_plan_rescale_sweep_uses_the_histogram(tmp_path: Path) -> None:
    checkpoint = rescale_checkpoint()
    histogram = tmp_path / "h.parquet"
    result = cli("verify", checkpoint, "--deep", "--engine", "local", "--histogram", str(histogram), "--json",
                 *data_rebase(DATA))  # fmt: skip
    assert result.exit_code == 0, result.output
    sweep = cli_json("plan-rescale", checkpoint, "-p", "2..4", "--data-aware", str(histogram))
    assert sweep["data_aware"]
    for row in sweep["rows"]:
        single = cli_json(
            "plan-rescale", checkpoint, "-p", str(row["parallelism"]), "--data-aware", str(histogram)
        )
        totals = [op["data"] for op in single["operators"] if "data" in op]
        assert totals
        assert row["data"] == {
            k: sum(t[k] for t in totals) for k in ("keep_bytes", "clip_bytes", "copy_bytes")
        }
    assert any(r["data"]["copy_bytes"] > 0 for r in sweep["rows"])
    table = cli("plan-rescale", checkpoint, "-p", "2..4", "--data-aware", str(histogram))
    assert table.exit_code == 0 and "copied bytes" in table.stdout


@pytest.mark.parametrize("version", ["3.7", "1.21", "0.9"])
def test_plan_rescale_unknown_flink_version_is_refused(version: str) -> None:
    line = one_line_error(cli("plan-rescale", rescale_checkpoint(), "-p", "3", "--flink-version", version))
    assert f"unknown Flink version {version}" in line
    for family in ("1.15", "1.16-1.18", "1.19-1.20", "2.x"):
        assert family in line


@pytest.mark.parametrize("p", ["1..32768", "2..1000000", "1..4097"])
def test_a_sweep_too_wide_says_the_real_limit(p: str) -> None:
    """m7: '1..32768' is LOW..HIGH with 1 <= LOW <= HIGH; what it breaks is the sweep's width."""
    from ckptctl.cli.params import MAX_SWEEP

    line = one_line_error(cli("plan-rescale", rescale_checkpoint(), "-p", p))
    assert f"at most {MAX_SWEEP:,}" in line and "1 <= LOW" not in line


def test_a_sweep_of_max_sweep_parallelisms_is_taken() -> None:
    from ckptctl.cli.params import MAX_SWEEP, parse_parallelism

    assert len(parse_parallelism(f"1..{MAX_SWEEP}")) == MAX_SWEEP
