"""``preflight`` over S3 (moto on 127.0.0.1): the same verdict as on local disk, and one GET per
``_metadata`` (no HEAD, no listing to find it)."""

from __future__ import annotations

import json

from tests.preflight.test_preflight import OTHER_JOB, STATES
from tests.support.cli_runner import DATA
from tests.support.faulty_proxy import FaultyProxy, Rule, is_list
from tests.support.gc_support import ckptctl


def test_preflight_over_s3_reads_each_metadata_once(s3_server, s3_fixtures: str) -> None:
    snapshot = f"{s3_fixtures}/{STATES.relative_to(DATA).as_posix()}"
    new = f"{s3_fixtures}/{OTHER_JOB.relative_to(DATA).as_posix()}"
    metadata_gets = Rule(lambda m, p: m == "GET" and p.split("?")[0].endswith("/_metadata"))
    lists, heads = Rule(lambda _m, p: is_list(p)), Rule(lambda m, _p: m == "HEAD")
    with FaultyProxy(s3_server.endpoint, fault_rate=0.0, rules=[metadata_gets, lists, heads]) as proxy:
        result = ckptctl(
            "preflight", snapshot, "--against", new, "--json", "--s3-endpoint", proxy.endpoint, expect=1
        )
    doc = json.loads(result.stdout)
    local = json.loads(
        ckptctl("preflight", str(STATES), "--against", str(OTHER_JOB), "--json", expect=1).stdout
    )
    assert doc["verdict"] == local["verdict"] == "fails"
    assert [(f["operator_id"], f["check"], f["outcome"]) for f in doc["findings"]] == [
        (f["operator_id"], f["check"], f["outcome"]) for f in local["findings"]
    ]
    assert metadata_gets.seen == 2  # one per _metadata
    assert lists.seen == 0 and heads.seen == 0
