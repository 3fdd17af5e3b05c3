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


def test_a_checkpoint_of_incremental_handles_costs_one_get_per_metadata(s3_server) -> None:
    """A RocksDB retained checkpoint (shared SSTs, private files, inline headers) against NEW's
    staging savepoint, both on S3: preflight reads the two ``_metadata`` and nothing else -- no file
    a handle names, no listing, no HEAD -- and says what it says on local disk."""
    from tests.support.fixture_cases import FIXTURES

    pair = FIXTURES / "upgrades" / "data" / "2.3.0" / "backend_switch_checkpoint"
    s3_server.create_bucket("upgrades")
    s3_server.put_many(
        {f"upgrades/{p.relative_to(pair).as_posix()}": p.read_bytes() for p in pair.rglob("*") if p.is_file()}
    )
    chk = next((pair / "old").glob("*/chk-*")).relative_to(pair).as_posix()
    new = next((pair / "new").glob("*/_metadata")).parent.relative_to(pair).as_posix()
    gets = Rule(lambda m, _p: m == "GET")
    metadata_gets = Rule(lambda m, p: m == "GET" and p.split("?")[0].endswith("/_metadata"))
    lists, heads = Rule(lambda _m, p: is_list(p)), Rule(lambda m, _p: m == "HEAD")
    args = ("--target-flink", "2.3.0", "--target-backend", "hashmap", "--json")
    with FaultyProxy(s3_server.endpoint, fault_rate=0.0, rules=[gets, metadata_gets, lists, heads]) as proxy:
        result = ckptctl(
            "preflight", f"s3://upgrades/{chk}", "--against", f"s3://upgrades/{new}", *args,
            "--s3-endpoint", proxy.endpoint, expect=1,
        )  # fmt: skip
    local = ckptctl("preflight", str(pair / chk), "--against", str(pair / new), *args, expect=1)
    doc, want = json.loads(result.stdout), json.loads(local.stdout)
    assert doc["verdict"] == want["verdict"] == "fails"
    assert [(f["operator_id"], f["check"], f["outcome"]) for f in doc["findings"]] == [
        (f["operator_id"], f["check"], f["outcome"]) for f in want["findings"]
    ]
    assert metadata_gets.seen == 2 and gets.seen == 2
    assert lists.seen == 0 and heads.seen == 0


def test_a_changelog_only_checkpoint_costs_one_get_per_dstl_file(s3_server) -> None:
    """A changelog checkpoint with nothing materialized: its states' serializer snapshots are in
    the DSTL files (outside the checkpoint directory, named by absolute path: ``--rebase``), so
    preflight reads each referenced DSTL file once, with one ranged GET, besides the two
    ``_metadata``; it says what it says on local disk."""
    from tests.preflight.test_upgrades import PAIRS, UPGRADES

    pair = next(p for p in PAIRS if p["id"] == "1.20.3/changelog_checkpoint_to_changelog_off")
    case = UPGRADES / "data" / "1.20.3" / "changelog_checkpoint_to_changelog_off"
    s3_server.create_bucket("changelog")
    s3_server.put_many(
        {
            f"changelog/{p.relative_to(case).as_posix()}": p.read_bytes()
            for p in case.rglob("*")
            if p.is_file()
        }
    )
    dstl_files = [p for p in (case / "old").rglob("*") if p.is_file() and "/dstl/" in p.as_posix()]
    assert dstl_files
    old, new = (UPGRADES / pair["old"]).relative_to(case), (UPGRADES / pair["new"]).relative_to(case)
    gets = Rule(lambda m, _p: m == "GET")
    dstl_gets = Rule(lambda m, p: m == "GET" and "/dstl/" in p)
    lists, heads = Rule(lambda _m, p: is_list(p)), Rule(lambda m, _p: m == "HEAD")
    args = ("--target-flink", "1.20.3", "--target-backend", "rocksdb", "--target-changelog", "off", "--json")
    with FaultyProxy(s3_server.endpoint, fault_rate=0.0, rules=[gets, dstl_gets, lists, heads]) as proxy:
        result = ckptctl(
            "preflight", f"s3://changelog/{old.as_posix()}", "--against", f"s3://changelog/{new.as_posix()}", *args,
            "--rebase", f"{pair['old_original_root']}=s3://changelog/old", "--s3-endpoint", proxy.endpoint,
        )  # fmt: skip
    local = ckptctl(
        "preflight", str(case / old), "--against", str(case / new), *args,
        "--rebase", f"{pair['old_original_root']}={case / 'old'}",
    )  # fmt: skip
    doc, want = json.loads(result.stdout), json.loads(local.stdout)
    assert doc["verdict"] == want["verdict"] == "restores"
    assert [(f["operator_id"], f["state"], f["check"], f["outcome"]) for f in doc["findings"]] == [
        (f["operator_id"], f["state"], f["check"], f["outcome"]) for f in want["findings"]
    ]
    assert ("v", "value-serializer", "as-is") in {
        (f["state"], f["check"], f["outcome"]) for f in doc["findings"]
    }
    assert dstl_gets.seen == len(dstl_files) and gets.seen == 2 + len(dstl_files)
    assert lists.seen == 0 and heads.seen == 0
