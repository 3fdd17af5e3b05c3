"""``ckptctl history`` against Flink's own REST API, on the runs of fixtures/history/ (HistoryJob.java,
RocksDB incremental, 1 s checkpoints; poll.py recorded ``/jobs/:id/checkpoints`` and
``/jobs/:id/checkpoints/details/:cid`` while each ran).

The one term Flink's checkpoint statistics leave out is the operator coordinators' state (here the
sequence source's split enumerator, 16 bytes): the JobManager writes it into ``_metadata`` itself,
and the statistics sum what the subtasks acknowledge. Every comparison below is within 1 %, and the
difference is shown to be exactly that term, read from the same ``_metadata`` (``show --json``).

Git keeps no file times, so each copy gets the times the storage would show: each ``_metadata``
is dated when REST says its checkpoint completed (``latest_ack_timestamp``).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.support.cli_runner import cli, cli_json
from tests.support.fixture_cases import FIXTURES

HISTORY = FIXTURES / "history"
RUNS = sorted(p for p in HISTORY.glob("*/*") if (p / "rest" / "details").is_dir())
RETAINED = [p for p in RUNS if p.name in ("steady", "leak")]
LEAKS = [p for p in RUNS if p.name == "leak"]
LEDGERED = [p for p in RUNS if p.name == "retained1"]
# the runs --fail-if judges as they are on disk (filemerging: tests/history/test_files.py)
JUDGED = [p for p in RUNS if p.name in ("steady", "leak", "retained1")]


def _id(p: Path) -> str:
    return f"{p.parent.name}-{p.name}"


def rest_details(run: Path) -> dict[int, dict]:
    return {int(p.stem): json.loads(p.read_text()) for p in (run / "rest" / "details").glob("*.json")}


def vertex_id(run: Path, name: str) -> str:
    """The id of the job vertex whose chain starts with operator ``name``: the head operator's id."""
    job = json.loads((run / "rest" / "job.json").read_text())
    return next(v["id"] for v in job["vertices"] if v["name"].split(" -> ")[0] == name)


def copied(run: Path, tmp: Path, upto: int | None = None) -> Path:
    """The run's checkpoints in ``tmp`` (only chk-1..chk-``upto``: history as it was then), each
    ``_metadata`` dated when Flink completed it."""
    root = tmp / "checkpoints"
    shutil.copytree(run / "checkpoints", root)
    details = rest_details(run)
    for md in root.glob("*/chk-*/_metadata"):
        cid = int(md.parent.name[4:])
        if upto is not None and cid > upto:
            shutil.rmtree(md.parent)
        elif cid in details:
            t = details[cid]["latest_ack_timestamp"] / 1000
            os.utime(md, (t, t))
    return root


def history(root: Path, *args: str) -> dict:
    (job,) = cli_json("history", str(root), *args)["jobs"]
    return job


def coordinator_bytes(checkpoint_dir: Path) -> int:
    view = cli_json("show", str(checkpoint_dir))
    return sum(o["coordinator_state"]["state_size"] for o in view["operators"] if o["coordinator_state"])


def assert_like_rest(c: dict, rest: dict, coordinator: int) -> None:
    cid = c["checkpoint_id"]
    assert c["uploaded_bytes"] == pytest.approx(rest["checkpointed_size"], rel=0.01), cid
    assert c["full_bytes"] == pytest.approx(rest["state_size"], rel=0.01), cid
    # the whole difference is the coordinators' state, which the statistics do not count
    assert c["uploaded_bytes"] - coordinator == rest["checkpointed_size"], cid
    assert c["full_bytes"] - coordinator == rest["state_size"], cid


@pytest.mark.parametrize("run", RETAINED, ids=_id)
def test_every_checkpoint_matches_rest(run: Path, tmp_path: Path) -> None:
    root = copied(run, tmp_path)
    details = rest_details(run)
    job = history(root)
    cks = {c["checkpoint_id"]: c for c in job["checkpoints"]}
    assert len(cks) >= 30 and set(details) <= set(cks)
    coordinator = {cid: coordinator_bytes(next(root.glob(f"*/chk-{cid}"))) for cid in (min(cks), max(cks))}
    assert len(set(coordinator.values())) == 1 and coordinator[min(cks)] > 0  # one fixed term, > 0
    for cid, rest in details.items():
        assert rest["status"] == "COMPLETED"
        assert_like_rest(cks[cid], rest, coordinator[min(cks)])
    failed = sorted(set(range(min(cks), max(cks) + 1)) - set(cks))
    assert job["missing_checkpoint_ids"] == failed


@pytest.mark.parametrize("run", LEAKS, ids=_id)
def test_leaking_operator_ranked_first_within_ten_checkpoints(run: Path, tmp_path: Path) -> None:
    info = json.loads((run / "job.json").read_text())
    leak_from = info["leak_from"]
    leaking = vertex_id(run, info["leaking_operator"])
    root = copied(run, tmp_path, upto=leak_from + 10)
    job = history(root)
    first = job["operators"][0]
    assert first["operator_id"] == leaking, [
        (o["display"], o["slope_bytes_per_day"]) for o in job["operators"]
    ]
    assert first["slope_bytes_per_day"] > 0 and "keyed" in first["state_kinds"]
    assert "without state TTL" in first["suspect"]


FAIL_IF = ("--fail-if", "growth > 1GiB/d", "--fail-if", "full > 1GiB", "--fail-if", "uploaded > 100MiB")


@pytest.mark.parametrize("run", JUDGED, ids=_id)
def test_fail_if_exits_1_exactly_on_the_leaking_run(run: Path, tmp_path: Path) -> None:
    root = copied(run, tmp_path)
    args = ["history", str(root), *FAIL_IF]
    if run.name == "retained1":
        shutil.copytree(run / "ledger", tmp_path / "ledger")
        args += ["--ledger", str(tmp_path / "ledger")]
    res = cli(*args, "--json")
    (job,) = json.loads(res.stdout)["jobs"]
    broken = [(v["rule"], v["operator_id"]) for v in job["verdicts"] if v["broken"]]
    if run.name == "leak":
        assert res.exit_code == 1
        leaking = vertex_id(run, json.loads((run / "job.json").read_text())["leaking_operator"])
        assert broken == [("growth > 1GiB/d", leaking)]
        text = cli(*args)
        assert (
            text.exit_code == 1
            and f"broken growth > 1GiB/d: operator {job['operators'][0]['display']}" in text.stdout
        )
    else:
        assert res.exit_code == 0 and broken == [], broken


@pytest.mark.parametrize("run", LEDGERED, ids=_id)
def test_ledger_holds_every_checkpoint_of_the_num_retained_1_run(run: Path, tmp_path: Path) -> None:
    details = rest_details(run)
    snapshots = sorted((run / "rest").glob("checkpoints-*.json"))
    last = json.loads(snapshots[-1].read_text())
    assert len(last["history"]) <= 10 < len(details)  # what REST itself still held at the end
    on_disk = list(run.glob("checkpoints/*/chk-*/_metadata"))
    assert len(on_disk) == 1  # num-retained = 1
    ledger = tmp_path / "ledger"
    shutil.copytree(run / "ledger", ledger)
    root = copied(run, tmp_path)
    doc = cli_json("history", str(root), "--ledger", str(ledger))
    assert doc["ledger_added"] == 0  # the last checkpoint was ledgered while the job ran
    (job,) = doc["jobs"]
    cks = {c["checkpoint_id"]: c for c in job["checkpoints"]}
    assert set(details) <= set(cks)
    coordinator = coordinator_bytes(on_disk[0].parent)
    for cid, rest in details.items():
        assert_like_rest(cks[cid], rest, coordinator)
    parts = sorted(ledger.iterdir())
    assert cli_json("history", str(root), "--ledger", str(ledger))["ledger_added"] == 0
    assert sorted(ledger.iterdir()) == parts
