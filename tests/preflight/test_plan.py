"""NEW as a SQL compiled plan (``COMPILE PLAN`` JSON), on the SQL pairs of fixtures/upgrades/ (real
Flink SQL jobs, each pair labelled by a real restore; generate_sql.py): a plan names its operators'
uids (``<node id>_<transformation>``), so a snapshot operator no uid reaches fails as Flink fails;
its state TTL shows TTL switched on; it has no serializer snapshots, so it never says ``restores``."""

from __future__ import annotations

import json

from tests.preflight.test_preflight import preflight
from tests.preflight.test_upgrades import UPGRADES
from tests.support.cli_runner import cli


def _pair(pid: str) -> dict:
    return next(p for p in json.loads((UPGRADES / "manifest.json").read_text())["pairs"] if p["id"] == pid)


def _run(pid: str, plan=None, tmp_path=None, expect=1):
    pair = _pair(pid)
    path = UPGRADES / pair["new_plan"]
    if plan is not None:
        doc = json.loads(path.read_text())
        plan(doc)
        path = tmp_path / "plan.json"
        path.write_text(json.dumps(doc))
    return pair, preflight(UPGRADES / pair["old"], "--against", path, "--target-flink", pair["new_flink"],
                           expect=expect)  # fmt: skip


def _aggregate(doc):
    return next(n for n in doc["nodes"] if n["type"].startswith("stream-exec-group-aggregate"))


def test_the_same_plan_maps_every_operator_and_is_unknown_for_its_serializers():
    pair, doc = _run("1.20.3/sql_plan_control")
    assert pair["label"]["outcome"] == "restored"
    assert doc["verdict"] == "unknown"
    assert not [f for f in doc["findings"] if f["outcome"] == "incompatible"]
    mapped = {r["operator_id"] for r in doc["operators"] if r["in_snapshot"] and r["in_new"]}
    assert mapped == {r["operator_id"] for r in doc["operators"] if r["in_snapshot"]}
    assert any("compiled plan" in a and "serializer" in a for a in doc["assumptions"])


def test_a_plan_whose_node_ids_shifted_fails_as_flink_did():
    pair, doc = _run("1.20.3/sql_plan_filter_added")
    assert pair["label"]["outcome"] == "failed"
    assert doc["verdict"] == "fails"
    bad = [f for f in doc["findings"] if f["outcome"] == "incompatible"]
    assert {f["check"] for f in bad} == {"mapping"}
    assert all("Cannot map checkpoint/savepoint state for operator" in f["flink_error"] for f in bad)


def test_a_plan_against_a_snapshot_of_the_plain_query_fails():
    """PLAN_ONLY: the plain query's operators have hashed ids, the plan's uids give others."""
    pair, doc = _run("1.20.3/sql_to_compiled_plan")
    assert pair["label"]["outcome"] == "failed"
    assert doc["verdict"] == "fails"


def test_ttl_switched_on_in_the_plan_fails_on_1_20(tmp_path):
    def ttl_on(doc):
        for st in _aggregate(doc)["state"]:
            st["ttl"] = "3600000 ms"

    _, doc = _run("1.20.3/sql_plan_control", ttl_on, tmp_path)
    assert doc["verdict"] == "fails"
    assert {f["check"] for f in doc["findings"] if f["outcome"] == "incompatible"} == {"ttl"}


def test_an_exec_node_of_unknown_type_makes_an_unreached_operator_unknown_not_failed(tmp_path):
    def unknown_type(doc):
        node = _aggregate(doc)
        node["id"], node["type"] = 99, "stream-exec-something-new_1"

    _, doc = _run("1.20.3/sql_plan_control", unknown_type, tmp_path)
    assert doc["verdict"] == "unknown"
    assert ("mapping", "unknown") in {(f["check"], f["outcome"]) for f in doc["findings"]}


def test_a_malformed_plan_is_one_line(tmp_path):
    pair = _pair("1.20.3/sql_plan_control")
    doc = json.loads((UPGRADES / pair["new_plan"]).read_text())
    doc["nodes"][0].pop("id")
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    result = cli("preflight", str(UPGRADES / pair["old"]), "--against", str(path))
    assert result.exit_code == 2, result.output
    assert "plan.json" in result.stderr and "nodes[0]" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
