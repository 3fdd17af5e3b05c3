"""The export formats agree with each other and with json.loads on every fixture and odd strings."""

from __future__ import annotations

import io
import json

import pytest

from ckptctl import export
from ckptctl.checkpoint.loading import load_checkpoint
from ckptctl.checkpoint.refs import COLUMNS, GROUP_KEY, reference_groups, reference_rows
from ckptctl.storage import Storage
from tests.support.fixture_cases import cases

CASES = cases()


@pytest.mark.parametrize("case", CASES[::3], ids=[c.id for c in CASES[::3]])
def test_grouped_ndjson_is_the_reference_map(case) -> None:
    ck = load_checkpoint(Storage(), str(case.checkpoint_dir))
    b = io.BytesIO()
    export.write_ndjson_groups(COLUMNS, reference_groups(ck), b, GROUP_KEY)
    rows = [json.loads(line) for line in b.getvalue().splitlines()]
    assert all(list(r) == list(COLUMNS) for r in rows)
    assert [tuple(r[c] for c in COLUMNS) for r in rows] == [tuple(r) for r in reference_rows(ck)]


def test_odd_strings_round_trip_through_every_writer() -> None:
    shared = (
        "file:/a b/100%",
        "j",
        1,
        "checkpoint",
        "ab" * 16,
        'na"me\\',
        0,
        "managed_keyed",
        "shared",
        0,
        127,
    )
    files = [
        ("FileStateHandle", "000001.sst", "file:/x/%d%s", "file:/x/%d%s", 0, 5),
        ("FileStateHandle", None, "file:/é/\n", "file:/é/\n", 7, 9),
    ]
    rows = [(*shared[:GROUP_KEY], *f, *shared[GROUP_KEY:]) for f in files]
    out = io.BytesIO()
    export.write_ndjson_groups(COLUMNS, [(shared, files)], out, GROUP_KEY)
    assert [tuple(json.loads(line).values()) for line in out.getvalue().splitlines()] == rows
    out = io.StringIO()
    export.write_json(COLUMNS, rows, out)
    assert [tuple(r.values()) for r in json.loads(out.getvalue())] == rows


def test_diff_matches_flinks_references() -> None:
    """diff A B: added/removed/reused files, computed independently from Flink's own dumps."""
    from typer.testing import CliRunner

    from ckptctl.cli import app

    by_job: dict = {}
    for c in CASES:
        if c.checkpoint_dir.name.startswith("chk-"):
            by_job.setdefault(c.checkpoint_dir.parent, []).append(c)
    pairs = [
        sorted(cs, key=lambda c: int(c.checkpoint_dir.name[4:]))[:2] for cs in by_job.values() if len(cs) >= 2
    ]
    assert len(pairs) >= 6
    for a, b in pairs[:6]:
        result = CliRunner().invoke(app, ["diff", str(a.checkpoint_dir), str(b.checkpoint_dir), "--json"])
        assert result.exit_code == 0, result.output
        view = json.loads(result.stdout)

        def files(case) -> dict[str, int]:
            out: dict[str, int] = {}
            for r in case.expected()["references"]:
                p = case.to_current(r["path"])
                out[p] = max(out.get(p, 0), r["offset"] + r["size"])
            return out

        fa, fb = files(a), files(b)
        assert {f["path"] for f in view["added"]} == set(fb) - set(fa)
        assert {f["path"] for f in view["removed"]} == set(fa) - set(fb)
        assert {f["path"] for f in view["reused"]} == set(fa) & set(fb)
        assert view["added_bytes"] == sum(fb[p] for p in set(fb) - set(fa))


def test_csv_and_parquet_hold_the_same_rows(tmp_path) -> None:
    import csv

    import pyarrow.parquet as pq
    from typer.testing import CliRunner

    from ckptctl.cli import app

    case = next(c for c in CASES if c.scenario == "filemerging")
    runner = CliRunner()
    rows = json.loads(runner.invoke(app, ["refs", str(case.checkpoint_dir), "--format", "json"]).stdout)
    assert rows
    out = tmp_path / "refs.parquet"
    assert (
        runner.invoke(
            app, ["refs", str(case.checkpoint_dir), "--format", "parquet", "-o", str(out)]
        ).exit_code
        == 0
    )
    table = pq.read_table(out)
    assert table.column_names == list(COLUMNS) and table.to_pylist() == rows
    result = runner.invoke(app, ["refs", str(case.checkpoint_dir), "--format", "csv"])
    parsed = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [r["path"] for r in parsed] == [r["path"] for r in rows]
    assert [int(r["offset"]) for r in parsed] == [r["offset"] for r in rows]
    assert runner.invoke(app, ["refs", str(case.checkpoint_dir), "--format", "parquet"]).exit_code == 2
