"""The export formats agree with each other and with json.loads on every fixture and odd strings."""

from __future__ import annotations

import io
import json

import pytest

from ckptctl import export
from ckptctl.refs import COLUMNS, GROUP_KEY, load_checkpoint, reference_groups, reference_rows
from ckptctl.storage import Storage
from tests.fixture_cases import cases

CASES = cases()


@pytest.mark.parametrize("case", CASES[::3], ids=[c.id for c in CASES[::3]])
def test_grouped_ndjson_equals_row_ndjson(case) -> None:
    ck = load_checkpoint(Storage(), str(case.checkpoint_dir))
    a, b = io.StringIO(), io.BytesIO()
    export.write_ndjson(COLUMNS, reference_rows(ck), a)
    export.write_ndjson_groups(COLUMNS, reference_groups(ck), b, GROUP_KEY)
    assert a.getvalue().encode() == b.getvalue()
    rows = [json.loads(line) for line in b.getvalue().splitlines()]
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
    export.write_ndjson(COLUMNS, rows, out)
    assert [tuple(json.loads(line).values()) for line in out.getvalue().splitlines()] == rows
    out = io.StringIO()
    export.write_json(COLUMNS, rows, out)
    assert [tuple(r.values()) for r in json.loads(out.getvalue())] == rows
