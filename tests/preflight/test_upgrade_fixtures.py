"""The committed upgrade pairs (fixtures/upgrades/manifest.json) are whole and consistently labelled.

The pairs are what `ckptctl preflight` is judged against, so a missing snapshot file, a pair without
its label, a release short of a change class or a release whose pairs all agree (nothing to tell
apart) would make that judgement meaningless. Each snapshot is read with ckptctl's own reader, and
every file its handles name must be in the copy (absolute paths through the pair's *_original_root).
"""

import json
import re
from collections import defaultdict
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from ckptctl.metadata import read_metadata
from ckptctl.metadata.handles import FileHandle, RelativeFileHandle
from ckptctl.metadata.walk import file_handles

UPGRADES = Path(__file__).resolve().parents[2] / "fixtures" / "upgrades"
RELEASES = ("1.20.3", "2.1.3", "2.3.0")
# Every change class of issue 46 the DataStream jobs produce (fixtures/upgrades/README.md); the 1.x -> 2.x
# pairs exist only for the 2.x releases.
CASES = (
    "control",
    "uid_renamed",
    "uidless_op_added_before",
    "uidless_op_added_after",
    "stateful_op_removed",
    "stateful_op_removed_allow_non_restored",
    "max_parallelism_changed",
    "max_parallelism_adopted",
    "parallelism_above_max_parallelism",
    "state_kind_changed",
    "value_int_to_long",
    "pojo_field_added",
    "pojo_field_removed",
    "pojo_field_type_changed",
    "row_field_added",
    "mapstate_key_int_to_long_rocksdb",
    "mapstate_key_int_to_long_hashmap",
    "mapstate_key_pojo_field_added_rocksdb",
    "mapstate_key_pojo_field_added_hashmap",
    "ttl_enabled_rocksdb",
    "ttl_enabled_hashmap",
    "ttl_disabled_rocksdb",
    "ttl_disabled_hashmap",
    "key_type_changed",
    "backend_switch_native_savepoint",
    "backend_switch_checkpoint",
    "backend_switch_canonical_savepoint",
    "pojo_field_added_hashmap",
    "pojo_field_removed_hashmap",
    "backend_switch_hashmap_checkpoint_to_rocksdb",
    "rescale_within_max_parallelism",
    "kryo_unchanged",
)
CROSS_CASES = ("kryo_from_1_20", "pojo_from_1_20")
# the backends beyond RocksDB/HashMap on every release: the changelog backend, RocksDB full checkpoints
BACKEND_CASES = (
    "changelog_checkpoint_control",
    "changelog_checkpoint_to_changelog_off",
    "changelog_checkpoint_to_hashmap",
    "changelog_hashmap_checkpoint_to_changelog_off",
    "changelog_materialized_checkpoint_to_changelog_off",
    "changelog_materialized_checkpoint_to_hashmap",
    "checkpoint_to_changelog_on",
    "rocksdb_full_checkpoint_to_hashmap",
    "rocksdb_full_checkpoint_to_rocksdb",
)
# ForSt, a 2.x backend
FORST_CASES = (
    "forst_checkpoint_control",
    "forst_native_savepoint_control",
    "forst_native_savepoint_to_rocksdb",
    "forst_native_savepoint_to_hashmap",
    "forst_checkpoint_to_rocksdb",
    "forst_checkpoint_to_hashmap",
    "forst_from_rocksdb_native_savepoint",
    "forst_from_rocksdb_checkpoint",
    "forst_from_rocksdb_canonical_savepoint",
    "forst_from_hashmap_checkpoint",
)
KINDS = {"savepoint-canonical", "savepoint-native", "checkpoint"}
BACKENDS = {"rocksdb", "hashmap", "forst"}
JAVA_CLASS = re.compile(r"^[A-Za-z_][\w$]*(\.[\w$]+)*$")  # UpgradeJob$ReadBackMismatch has no package


def _pairs() -> list[dict]:
    return json.loads((UPGRADES / "manifest.json").read_text())["pairs"]


def _expected(release: str) -> tuple[str, ...]:
    return CASES + BACKEND_CASES + (CROSS_CASES + FORST_CASES if release.startswith("2.") else ())


def test_every_case_is_present_for_every_release():
    by_release = defaultdict(set)
    for p in _pairs():
        by_release[p["new_flink"]].add(p["case"])
    missing = {r: sorted(set(_expected(r)) - by_release[r]) for r in RELEASES}
    assert missing == dict.fromkeys(RELEASES, [])


def test_each_release_has_a_failed_and_a_restored_pair():
    outcomes = defaultdict(set)
    for p in _pairs():
        outcomes[p["new_flink"]].add(p["label"]["outcome"])
    assert {r: outcomes[r] for r in RELEASES} == dict.fromkeys(RELEASES, {"failed", "restored"})


def test_ids_are_unique():
    ids = [p["id"] for p in _pairs()]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("pair", _pairs(), ids=lambda p: p["id"])
def test_pair_is_well_formed(pair):
    assert pair["id"] == f"{pair['new_flink']}/{pair['case']}"
    assert pair["description"].strip()
    assert pair["old_kind"] in KINDS
    assert {pair["old_backend"], pair["new_backend"]} <= BACKENDS
    assert isinstance(pair["allow_non_restored"], bool)
    assert pair["max_parallelism_explicit"] in (True, False, None)
    assert pair.get("new_kind", "savepoint-canonical") in KINDS
    assert pair.get("old_changelog", False) in (True, False) and pair.get("new_changelog", False) in (
        True,
        False,
    )
    if pair["case"] in CROSS_CASES:
        assert pair["old_flink"].startswith("1.") and pair["new_flink"].startswith("2.")
    else:
        assert pair["old_flink"] == pair["new_flink"]
    label = pair["label"]
    assert label["outcome"] in ("restored", "failed")
    assert label["detail"].strip()
    if label["outcome"] == "failed":
        assert JAVA_CLASS.match(label["root_cause_class"]), label["root_cause_class"]
        assert label["root_cause_message"].strip()
    else:
        assert label["root_cause_class"] is None and label["root_cause_message"] is None


def _local(uri: str) -> str:
    return unquote(urlparse(uri).path) if uri.startswith("file:") else uri


@pytest.mark.parametrize("pair", _pairs(), ids=lambda p: p["id"])
@pytest.mark.parametrize("side", ["old", "new"])
def test_snapshot_is_readable_and_whole(pair, side):
    """ckptctl reads the _metadata, and every file it references exists in the committed copy."""
    snap = UPGRADES / pair[side]
    assert snap.resolve().is_relative_to(UPGRADES / "data")
    md = read_metadata((snap / "_metadata").read_bytes(), path=str(snap / "_metadata"))
    assert md.operators
    original = Path(pair[f"{side}_original_root"])
    copy_root = UPGRADES.joinpath(*Path(pair[side]).parts[:4])  # data/<flink>/<case>/<side>
    for _scope, h in file_handles(md):
        if type(h) is RelativeFileHandle:
            f = snap / h.relative_path
        else:
            assert type(h) is FileHandle, type(h)
            f = copy_root / Path(_local(h.path)).relative_to(original)
        assert f.is_file() and f.stat().st_size >= h.size, f


def test_sql_pairs_cover_plans_ttl_and_uid_generation_on_1_20_and_2_x():
    """The SQL pairs (generate_sql.py): on 1.20.3 and a 2.x release, with and without compiled plans,
    and each plan recorded is COMPILE PLAN's JSON."""
    sql = [p for p in _pairs() if p["case"].startswith("sql_")]
    releases = {p["new_flink"] for p in sql}
    assert "1.20.3" in releases and any(r.startswith("2.") for r in releases), releases
    for release in releases:
        mine = [p for p in sql if p["new_flink"] == release]
        assert any(p.get("new_plan") for p in mine) and any(not p.get("new_plan") for p in mine), release
        assert {p["label"]["outcome"] for p in mine} == {"restored", "failed"}, release
    for p in sql:
        for side in ("old_plan", "new_plan"):
            if p.get(side):
                doc = json.loads((UPGRADES / p[side]).read_text())
                assert "flinkVersion" in doc and doc["nodes"], (p["id"], side)
