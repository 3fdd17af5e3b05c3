"""``ckptctl history`` on the committed fixtures: the measure (uploaded bytes from the files against
Flink's own checkpointed size), the ledger (idempotent, keeping what num-retained = 1 deletes, on S3
too), growth, ``--fail-if`` and its JUnit, the JSON contract. The REST-oracle runs of
fixtures/history/ are tests/history/test_rest_oracle.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ckptctl.history.growth import growth, least_squares
from ckptctl.history.rules import parse_rule
from tests.support.cli_runner import DATA, cli, cli_json, one_line_error

BASIC = DATA / "1.20.3" / "basic" / "checkpoints"


def _job_dir(root: Path) -> Path:
    return next(p for p in root.iterdir() if p.is_dir() and len(p.name) == 32)


@pytest.fixture
def basic(tmp_path: Path) -> Path:
    root = tmp_path / "checkpoints"
    shutil.copytree(BASIC, root)
    return root


def test_uploaded_bytes_from_files_equal_flinks_checkpointed_size(basic: Path) -> None:
    """Where the previous checkpoint is Flink's base, the files a checkpoint added plus its inline
    bytes are exactly what Flink counted as checkpointed (getCheckpointedSize of every handle)."""
    doc = cli_json("history", str(basic))
    (job,) = doc["jobs"]
    cks = job["checkpoints"]
    assert [c["checkpoint_id"] for c in cks] == [7, 8, 9]
    assert cks[0]["base_checkpoint_id"] is None and cks[0]["reused_bytes"] == 0  # nothing before it known
    for c in cks[1:]:
        assert c["base_checkpoint_id"] == c["checkpoint_id"] - 1
        assert c["uploaded_bytes"] == c["checkpointed_bytes"], c
        assert c["reused_bytes"] > 0
        assert (
            c["full_bytes"] == c["uploaded_bytes"] + c["reused_bytes"]
        )  # RocksDB incremental: full = new + reused
    ls = {r["checkpoint_id"]: r for r in cli_json("ls", str(basic))}
    for c in cks:  # the one computation of full bytes: ls's
        assert c["full_bytes"] == ls[c["checkpoint_id"]]["state_size"]


def test_operators_carry_series_slope_rank_and_budget(basic: Path) -> None:
    doc = cli_json("history", str(basic), "--budget", "1MiB")
    (job,) = doc["jobs"]
    ops = job["operators"]
    assert sorted(o["rank"] for o in ops) == list(range(1, len(ops) + 1))
    ranked = sorted(ops, key=lambda o: o["rank"])
    holding = [any(s["full_bytes"] for s in o["series"]) for o in ranked]
    assert holding == sorted(holding, reverse=True)  # operators without state last
    slopes = [o["slope_bytes_per_checkpoint"] for o, h in zip(ranked, holding, strict=True) if h]
    assert slopes == sorted(slopes, reverse=True)
    for o in ops:
        assert [s["checkpoint_id"] for s in o["series"]] == [7, 8, 9]
        assert o["full_bytes"] == o["series"][-1]["full_bytes"]
        assert "days_to_budget" in o and "slope_bytes_per_day" in o
    keyed = [o for o in ops if "keyed" in o["state_kinds"]]
    assert keyed and all(o["subtasks"] == 2 and o["skew"] >= 1 for o in keyed)
    assert sum(o["full_bytes"] for o in ops) == job["checkpoints"][-1]["full_bytes"]


def test_operator_filter_takes_id_uid_or_name(basic: Path) -> None:
    ops = cli_json("history", str(basic))["jobs"][0]["operators"]
    target = next(o for o in ops if "keyed" in o["state_kinds"])
    for key in (target["operator_id"], target["name"], target["uid"]):
        if key:
            (only,) = cli_json("history", str(basic), "--operator", key)["jobs"][0]["operators"]
            assert only["operator_id"] == target["operator_id"]


def test_ledger_update_twice_adds_nothing(basic: Path, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    first = cli_json("history", str(basic), "--ledger", str(ledger))
    parts = sorted(ledger.iterdir())
    assert first["ledger_added"] == 3 and len(parts) == 1
    again = cli_json("history", str(basic), "--ledger", str(ledger))
    assert again["ledger_added"] == 0
    assert sorted(ledger.iterdir()) == parts
    assert again["jobs"] == first["jobs"] or _same_jobs(again, first)


def _same_jobs(a: dict, b: dict) -> bool:
    strip = lambda d: json.dumps([{**j, "checkpoints": j["checkpoints"]} for j in d["jobs"]], sort_keys=True)  # noqa: E731
    return strip(a) == strip(b)


def test_ledger_keeps_what_num_retained_one_deletes(basic: Path, tmp_path: Path) -> None:
    """Flink's files, one checkpoint on disk at a time (as num-retained = 1 leaves them): the ledger
    updated between them holds all three, with the same figures as when all were on disk."""
    whole = cli_json("history", str(basic))["jobs"][0]
    live = tmp_path / "live" / "checkpoints"
    job = _job_dir(basic)
    ledger = tmp_path / "ledger"
    for n in (7, 8, 9):
        if live.exists():
            shutil.rmtree(live)
        shutil.copytree(
            basic,
            live,
            ignore=lambda d, names, n=n: [x for x in names if x.startswith("chk-") and x != f"chk-{n}"],
        )
        assert len(list((live / job.name).glob("chk-*"))) == 1
        cli_json("history", str(live), "--ledger", str(ledger))
    shutil.rmtree(live / job.name / "chk-9")  # nothing on disk: the ledger alone answers
    got = cli_json("history", str(live), "--ledger", str(ledger))["jobs"][0]
    keys = (
        "checkpoint_id",
        "full_bytes",
        "uploaded_bytes",
        "reused_bytes",
        "checkpointed_bytes",
        "base_checkpoint_id",
    )
    assert [{k: c[k] for k in keys} for c in got["checkpoints"]] == [
        {k: c[k] for k in keys} for c in whole["checkpoints"]
    ]


def test_ledger_on_s3(basic: Path, s3_server, tmp_path: Path) -> None:
    s3_server.create_bucket("ledger-bucket")
    args = (
        "history",
        str(basic),
        "--ledger",
        "s3://ledger-bucket/h/ledger",
        "--s3-endpoint",
        s3_server.endpoint,
    )
    assert cli_json(*args)["ledger_added"] == 3
    again = cli_json(*args)
    assert again["ledger_added"] == 0
    assert [c["checkpoint_id"] for c in again["jobs"][0]["checkpoints"]] == [7, 8, 9]
    keys = s3_server.client().list_objects_v2(Bucket="ledger-bucket", Prefix="h/ledger/")["Contents"]
    assert len(keys) == 1 and keys[0]["Key"].endswith(".parquet")


def test_fail_if_names_the_rule_and_operator_and_writes_junit(basic: Path, tmp_path: Path) -> None:
    junit = tmp_path / "history.xml"
    res = cli("history", str(basic), "--fail-if", "operator full > 100KiB", "--fail-if", "uploaded > 10GiB",
              "--junit", str(junit))  # fmt: skip
    assert res.exit_code == 1, res.output
    assert "broken operator full > 100KiB: operator" in res.stdout
    xml = junit.read_text()
    assert (
        'failures="1"' in xml and 'name="operator full &gt; 100KiB"' in xml and "uploaded &gt; 10GiB" in xml
    )
    assert cli("history", str(basic), "--fail-if", "full > 10GiB").exit_code == 0


@pytest.mark.parametrize("rule", ["growth > 20", "full > 20%", "speed > 1GiB", "growth > x%/d", "full >"])
def test_bad_rules_are_one_line(rule: str, basic: Path) -> None:
    assert "--fail-if" in one_line_error(cli("history", str(basic), "--fail-if", rule))


def test_rule_grammar() -> None:
    r = parse_rule("growth > 20%/d")
    assert (r.scope, r.metric, r.op, r.limit, r.unit, r.per) == (
        "operator",
        "growth",
        ">",
        20.0,
        "percent",
        86400,
    )
    r = parse_rule("job growth >= 1GiB/12h")
    assert (r.scope, r.unit, r.limit, r.per) == ("job", "bytes", float(1 << 30), 43200)
    r = parse_rule("uploaded > 2GiB")
    assert (r.scope, r.limit) == ("job", float(2 << 30))
    assert parse_rule("growth > 5%/chk").per is None


def test_growth_is_least_squares_not_first_and_last() -> None:
    # steady growth of 10 a step with one compaction dip at the end: first-to-last says 0
    sizes = [100, 110, 120, 130, 140, 150, 160, 100]
    g = growth([float(i * 86400) for i in range(len(sizes))], sizes)
    assert g.bytes_per_day == pytest.approx(least_squares(list(range(8)), sizes))
    assert g.bytes_per_day > 0 and g.bytes_per_checkpoint == pytest.approx(g.bytes_per_day)
    assert g.days_to(160, 1000) == pytest.approx(840 / g.bytes_per_day)
    assert g.days_to(2000, 1000) == 0.0
    same_time = growth([5.0] * 8, sizes)  # a copied tree: every _metadata has the copy's time
    assert same_time.bytes_per_day is None and same_time.bytes_per_checkpoint == g.bytes_per_checkpoint


def test_since_keeps_the_window(basic: Path) -> None:
    import os

    job = _job_dir(basic)
    for n, t in ((7, 1_000_000), (8, 1_000_000 + 86400), (9, 1_000_000 + 2 * 86400)):
        os.utime(job / f"chk-{n}" / "_metadata", (t, t))
    doc = cli_json("history", str(basic), "--since", "1d")
    assert [c["checkpoint_id"] for c in doc["jobs"][0]["checkpoints"]] == [8, 9]
    doc = cli_json("history", str(basic), "--since", "1970-01-12T13:46:40Z")  # 1,000,000 s
    assert [c["checkpoint_id"] for c in doc["jobs"][0]["checkpoints"]] == [7, 8, 9]
    assert doc["jobs"][0]["operators"][0]["slope_bytes_per_day"] is not None


def test_terminal_view_has_a_sparkline_per_operator(basic: Path) -> None:
    res = cli("history", str(basic))
    assert res.exit_code == 0, res.output
    ops = cli_json("history", str(basic))["jobs"][0]["operators"]
    rows = [line for line in res.stdout.splitlines() if any(ch in line for ch in "▁▂▃▄▅▆▇█") and "│" in line]
    assert len(rows) == len(ops)


def test_wrong_root_is_one_line(tmp_path: Path) -> None:
    assert "no checkpoints" in one_line_error(cli("history", str(tmp_path)))


def test_many_updates_are_compacted_without_losing_a_row(basic: Path, tmp_path: Path) -> None:
    """A cron appending every few minutes writes a part per update: beyond a bound they are merged
    into one, written before the old ones go; the history reads the same."""
    from ckptctl.history.ledger import Ledger, arrow_schema, update_ledger
    from ckptctl.storage import Storage, StorageOptions

    storage = Storage(StorageOptions.from_env(None))
    ledger = tmp_path / "ledger"
    live = tmp_path / "live" / "checkpoints"
    job = _job_dir(basic)
    for n in (7, 8, 9):
        if live.exists():
            shutil.rmtree(live)
        shutil.copytree(
            basic,
            live,
            ignore=lambda d, names, n=n: [x for x in names if x.startswith("chk-") and x != f"chk-{n}"],
        )
        update_ledger(storage, str(live), str(ledger))
    assert len(list(ledger.iterdir())) == 3
    before = Ledger.open(storage, str(ledger)).read()
    led = Ledger.open(storage, str(ledger))
    led.compact(max_parts=2)
    (part,) = ledger.iterdir()
    after = Ledger.open(storage, str(ledger)).read()

    def rows(t):
        return sorted(map(repr, t.cast(arrow_schema()).to_pylist()))

    assert rows(after) == rows(before) and after.num_rows == before.num_rows > 0
    assert job.name in set(after["job_id"].to_pylist())


def test_check_ledger_records_the_history_too(basic: Path, tmp_path: Path) -> None:
    """``check --ledger`` (the gate a CI runs often) appends what ``history --ledger`` would."""
    ledger = tmp_path / "ledger"
    res = cli("check", str(basic), "--ledger", str(ledger))
    assert res.exit_code in (0, 1), res.output  # the gate's own verdict, whatever it is
    doc = cli_json("history", str(basic), "--ledger", str(ledger))
    assert doc["ledger_added"] == 0
    assert [c["checkpoint_id"] for c in doc["jobs"][0]["checkpoints"]] == [7, 8, 9]
