"""plan-rescale against what Flink itself did (fixtures/rescale: restores at other parallelisms,
recorded from Flink's INFO log), and the worked examples of every version family's rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ckptctl.cli import app
from ckptctl.errors import CkptError
from ckptctl.metadata.checkpoint import CheckpointMetadata
from ckptctl.metadata.handles import (
    FileHandle,
    IncrementalHandle,
    KeyGroupRange,
    LocalFile,
    RelativeFileHandle,
)
from ckptctl.metadata.operators import OperatorState, SubtaskState
from ckptctl.rescale import default_max_parallelism, family_of, key_group_range, plan_rescale
from tests.support.fixture_cases import REPO, data_rebase

runner = CliRunner()
GROUND_TRUTH = sorted((REPO / "fixtures" / "rescale").glob("*.json"))


def cli_json(*args: str) -> dict:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("truth_file", GROUND_TRUTH, ids=[p.stem for p in GROUND_TRUTH])
def test_matches_flinks_own_rescaled_restore(truth_file: Path) -> None:
    truth = json.loads(truth_file.read_text())
    assert truth["restore_ok"], "the recorded restore itself succeeded"
    version = ".".join(truth["flink_version"].split(".")[:2])
    plan = cli_json(
        "plan-rescale", str(REPO / truth["checkpoint"]), "-p", str(truth["new_parallelism"]),
        "--flink-version", version, "--json",
    )  # fmt: skip
    ops = {op["operator_id"]: op for op in plan["operators"]}
    assert truth["operators"], "the log named at least one keyed operator"
    for op_truth in truth["operators"]:
        op = ops[op_truth["operator_id"]]
        assert op["max_parallelism"] == truth["max_parallelism"]
        subtasks = {s["index"]: s for s in op["subtasks"]}
        assert len(subtasks) == truth["new_parallelism"]
        for st in op_truth["subtasks"]:
            mine = subtasks[st["index"]]
            assert mine["key_group_range"] == st["target_key_group_range"]
            # the handles Flink handed over, in Flink's order
            assert [h["key_group_range"] for h in mine["handles"]] == [
                h["key_group_range"] for h in st["handles"]
            ]
            ids = [h.get("state_handle_id") for h in st["handles"]]
            if all(ids):
                assert [h["state_handle_id"] for h in mine["handles"]] == ids
            # the handles Flink copied into the base through temporary instances, in Flink's order
            # (record_releases.py recordings: observed in the log)
            if "copied_handles" in st:
                assert [c["key_group_range"] for c in mine["copied"]] == [
                    c["key_group_range"] for c in st["copied_handles"]
                ]
            # the base instance Flink opened
            if st["base_handle"] is None:
                assert mine["base"] is None
            else:
                assert mine["base"]["key_group_range"] == st["base_handle"]["key_group_range"]
                if st["base_handle"].get("state_handle_id"):
                    assert mine["base"]["state_handle_id"] == st["base_handle"]["state_handle_id"]


# ---- key groups ---------------------------------------------------------------------------------


def test_key_group_ranges_worked_example() -> None:
    assert [key_group_range(128, 3, i) for i in range(3)] == [(0, 42), (43, 85), (86, 127)]
    assert [key_group_range(128, 2, i) for i in range(2)] == [(0, 63), (64, 127)]
    for maxp in (128, 256, 1000, 32768):
        for p in (1, 2, 3, 7, 64, 127):
            ranges = [key_group_range(maxp, p, i) for i in range(p)]
            assert ranges[0][0] == 0 and ranges[-1][1] == maxp - 1
            assert all(b[0] == a[1] + 1 for a, b in zip(ranges, ranges[1:], strict=False))
            sizes = {e - s + 1 for s, e in ranges}
            assert max(sizes) - min(sizes) <= 1


def test_default_max_parallelism() -> None:
    assert default_max_parallelism(1) == 128
    assert default_max_parallelism(100) == 256  # 150 rounded up to a power of two
    assert default_max_parallelism(30000) == 32768


# ---- base handle rules by version family ----------------------------------------------------------


def checkpoint(parallelism: int, max_parallelism: int = 128, version: int = 4) -> CheckpointMetadata:
    subtasks = []
    for i in range(parallelism):
        s, e = key_group_range(max_parallelism, parallelism, i)
        handle = IncrementalHandle(
            11, 1, f"backend-{i}", KeyGroupRange(s, e - s + 1), 1, RelativeFileHandle(f"meta-{i}", 100),
            (LocalFile("000001.sst", FileHandle(f"file:/ck/shared/sst-{i}", 1000 * (i + 1))),), (), f"handle-{i}",
        )  # fmt: skip
        subtasks.append(SubtaskState(i, False, managed_keyed=handle))
    op = OperatorState("ab" * 16, parallelism, max_parallelism, None, tuple(subtasks))
    return CheckpointMetadata(version, 1, (), (op,), b"", None)


def subtasks(plan: dict) -> list[dict]:
    return plan["operators"][0]["subtasks"]


def test_flink_1_15_scale_out_has_no_base_below_three_quarters() -> None:
    plan = plan_rescale(checkpoint(1), 2, flink_version="1.15")
    for s in subtasks(plan):  # one handle each, fraction 0.5 < 0.75: empty DB, full copy
        assert s["base"] is None and s["mode"] == "empty" and len(s["copied"]) == 1
    plan = plan_rescale(checkpoint(2), 3, flink_version="1.14")
    assert [s["base"] for s in subtasks(plan)] == [None, None, None]


def test_flink_1_15_scale_in_takes_the_contained_handle() -> None:
    plan = plan_rescale(checkpoint(3), 2, flink_version="1.15")
    first = subtasks(plan)[0]
    assert [h["key_group_range"] for h in first["handles"]] == [[0, 42], [43, 85]]
    assert first["base"]["key_group_range"] == [0, 42]  # overlap 43, fraction 1.0 -> score 43
    assert first["copied"][0]["copy_range"] == [43, 63]


def test_flink_1_16_plus_prefers_larger_overlap_then_fraction() -> None:
    for version in ("1.16", "1.18", "1.20", "2.1"):
        plan = plan_rescale(checkpoint(2), 3, flink_version=version)
        s = subtasks(plan)
        assert s[1]["base"]["key_group_range"] == [64, 127], version  # overlap 22 beats 21
        assert s[1]["clip"] == [[86, 127]] and s[1]["copied"][0]["copy_range"] == [43, 63]
        assert s[0]["base"]["key_group_range"] == [0, 63] and s[0]["clip"] == [[43, 63]]


def test_threshold_below_everything_still_chooses_the_first_handle() -> None:
    plan = plan_rescale(checkpoint(2), 3, flink_version="1.17", overlap_threshold=0.5)
    s = subtasks(plan)[1]
    assert not any(h["above_threshold"] for h in s["handles"])
    assert s["base"]["key_group_range"] == [0, 63]


def test_tie_goes_to_the_first_handle() -> None:
    plan = plan_rescale(checkpoint(2), 1, flink_version="1.20")
    s = subtasks(plan)[0]
    assert s["base"]["key_group_range"] == [0, 63] and s["copied"][0]["copy_range"] == [64, 127]


def test_unchanged_parallelism_keeps_incremental_history() -> None:
    plan = plan_rescale(checkpoint(2), 2, flink_version="1.20")
    assert all(s["mode"] == "direct" and s["incremental_history_kept"] for s in subtasks(plan))
    assert plan["merging_subtasks"] == 0


def test_ingest_db_imports_everything_and_clips_the_union() -> None:
    plan = plan_rescale(checkpoint(2, version=6), 3, ingest_db=True)
    s = subtasks(plan)[1]
    assert s["mode"] == "ingest" and s["base"] is None and s["copied"] == []
    assert s["clip"] == [[0, 42], [86, 127]]
    with pytest.raises(CkptError, match="ingest-DB"):
        plan_rescale(checkpoint(2), 3, flink_version="1.20", ingest_db=True)


def test_download_bytes_and_critical_path() -> None:
    plan = plan_rescale(checkpoint(2), 3, flink_version="1.20")
    s = subtasks(plan)
    assert s[1]["download_bytes"] == (100 + 1000) + (100 + 2000)  # both handles, whole
    assert plan["critical_subtask"] == 1 and plan["max_subtask_bytes"] == s[1]["download_bytes"]


def test_version_inference() -> None:
    assert plan_rescale(checkpoint(2, version=3), 3)["flink_family"] == "1.15"
    assert plan_rescale(checkpoint(2, version=6), 3)["flink_family"] == "2.x"
    assert family_of("1.17.2") == "1.16-1.18"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"parallelism": 200}, "exceeds the max parallelism 128"),
        ({"parallelism": 3, "max_parallelism": 256}, "max parallelism 128"),
        ({"parallelism": 3, "operator": "nope"}, "no operator 'nope'"),
        ({"parallelism": 0}, "at least 1"),
    ],
)
def test_errors(kwargs: dict, message: str) -> None:
    with pytest.raises(CkptError, match=message):
        plan_rescale(checkpoint(2), **kwargs)


def test_cli_sweep_recommends_no_merge_parallelisms() -> None:
    case = json.loads(GROUND_TRUTH[0].read_text())
    result = cli_json("plan-rescale", str(REPO / case["checkpoint"]), "-p", "1..8", "--json")
    assert [r["parallelism"] for r in result["rows"]] == list(range(1, 9))
    assert 2 in result["no_merge"] and 3 not in result["no_merge"]
    bad = runner.invoke(app, ["plan-rescale", str(REPO / case["checkpoint"]), "-p", "500"])
    assert bad.exit_code == 2 and "exceeds the max parallelism" in bad.stderr


def test_operator_state_redistribution() -> None:
    """SPLIT_DISTRIBUTE elements are dealt out in chunks, UNION goes everywhere, BROADCAST i mod oldP."""
    from ckptctl.metadata.handles import ByteStreamHandle
    from ckptctl.metadata.operators import NamedOperatorState, OperatorStreamHandle
    from ckptctl.rescale import operator_state_plan

    subtasks = []
    for i in range(2):
        # each old subtask: 3 list elements of 10 bytes, one union element of 5, a broadcast copy of 7
        states = (
            NamedOperatorState("list", 0, (0, 10, 20)),
            NamedOperatorState("union", 1, (30,)),
            NamedOperatorState("bcast", 2, (35,)),
        )
        subtasks.append(
            SubtaskState(
                i, False, managed_operator=OperatorStreamHandle(states, ByteStreamHandle("x", b"z" * 42))
            )
        )
    op = OperatorState("cd" * 16, 2, 128, None, tuple(subtasks))
    plan = operator_state_plan(op, 4)[0]
    modes = {s["name"]: (s["mode"], s["elements"], s["bytes"]) for s in plan["states"]}
    assert modes == {
        "list": ("SPLIT_DISTRIBUTE", 6, 60),
        "union": ("UNION", 2, 10),
        "bcast": ("BROADCAST", 2, 14),
    }
    # 6 list elements over 4 subtasks: 2, 2, 1, 1 elements; plus both union elements; plus one broadcast copy
    assert sorted(plan["bytes_per_subtask"]) == sorted([20 + 10 + 7, 20 + 10 + 7, 10 + 10 + 7, 10 + 10 + 7])
    assert sum(plan["bytes_per_subtask"]) == 60 + 4 * 10 + 4 * 7


def test_data_aware_plan_uses_the_measured_histogram(tmp_path: Path) -> None:
    """verify --deep measures bytes per key group in the real RocksDB instances; plan-rescale
    --data-aware must account every measured byte to exactly one new subtask."""
    import pyarrow.parquet as pq

    # a 1.20 checkpoint: the copy range asserted below is the 1.18+ rule (1.14/1.15 open no base at p 2 -> 3)
    case = next(
        t for t in map(json.loads, (p.read_text() for p in GROUND_TRUTH)) if t["flink_version"] == "1.20.3"
    )
    checkpoint = str(REPO / case["checkpoint"])
    histogram = tmp_path / "h.parquet"
    result = runner.invoke(
        app, ["verify", checkpoint, "--deep", "--engine", "local", "--histogram", str(histogram), "--json",
              *data_rebase(REPO / "fixtures" / "data")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    hist = pq.read_table(histogram).to_pylist()
    assert hist
    plan = cli_json("plan-rescale", checkpoint, "-p", "3", "--data-aware", str(histogram), "--json")
    assert plan["data_aware"]
    for op in plan["operators"]:
        if not op["keyed"]:
            continue
        rows = [h for h in hist if h["operator_id"] == op["operator_id"]]

        def measured(lo: int, hi: int, rows=rows) -> int:
            return sum(h["bytes"] for h in rows if lo <= h["key_group"] <= hi)

        assert sum(s["data"]["keep_bytes"] for s in op["subtasks"]) == sum(h["bytes"] for h in rows) > 0
        for s in op["subtasks"]:
            assert s["data"]["keep_bytes"] == measured(*s["key_group_range"])
            assert s["data"]["clip_bytes"] == sum(measured(a, b) for a, b in s["clip"])
            assert s["data"]["copy_bytes"] == sum(measured(*c["copy_range"]) for c in s["copied"])
        assert op["subtasks"][1]["data"]["copy_bytes"] == measured(43, 63) > 0
    other = tmp_path / "other.parquet"
    pq.write_table(pq.read_table(histogram).slice(0, 0), other)
    bad = runner.invoke(app, ["plan-rescale", checkpoint, "-p", "3", "--data-aware", str(other)])
    assert bad.exit_code == 2 and "no rows for this checkpoint" in bad.stderr


def test_the_sweep_marks_the_parallelism_the_checkpoint_was_taken_at() -> None:
    case = json.loads(sorted(GROUND_TRUTH)[0].read_text())
    result = runner.invoke(app, ["plan-rescale", str(REPO / case["checkpoint"]), "-p", "1..4", "--json",
                                 *data_rebase(REPO / "fixtures" / "data")])  # fmt: skip
    assert result.exit_code == 0, result.output
    sweep = json.loads(result.stdout)
    assert sweep["current"] == case["old_parallelism"]
    assert [r["parallelism"] for r in sweep["rows"] if r["current"]] == [case["old_parallelism"]]
