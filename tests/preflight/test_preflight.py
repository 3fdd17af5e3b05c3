"""``ckptctl preflight`` on real snapshots: a snapshot against itself restores; against another
job's snapshot the operators with state are missing and Flink's refusal is named; ``-n`` drops
them and says how many bytes; max parallelism changes; the serializer rules on snapshots real
Flink wrote."""

from __future__ import annotations

import json

import pytest

from ckptctl.checkpoint.rebase import Rebase
from ckptctl.checkpoint.targets import one_checkpoint
from ckptctl.preflight import serializers as ser
from ckptctl.preflight.check import default_max_parallelism
from ckptctl.states.catalog import catalog
from ckptctl.storage import Storage, StorageOptions
from tests.support.cli_runner import DATA, cli

STATES = DATA / "2.2.0/states/savepoints/savepoint-d79be6-9582803d2d8f"  # DataStream: keyed + operator state
SQL_CHK = (
    DATA / "1.20.3/basic/checkpoints/d178cffb578b056896a311818643e963/chk-9"
)  # SQL job, RocksDB incremental
OTHER_JOB = DATA / "2.2.0/basic/checkpoints/567bd59a21b856058d9e2ce07240d0f1/chk-7"  # a SQL job on 2.2.0
MAXPAR256 = (
    DATA / "1.20.3/maxpar256/checkpoints/0ebbb579aba636b0dc24f301b9658b1a/chk-10"
)  # the same job, max p 256


def preflight(*args: str, expect: int):
    result = cli("preflight", *map(str, args), "--json")
    assert result.exit_code == expect, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize(
    "snapshot", [STATES, SQL_CHK, MAXPAR256], ids=["savepoint", "checkpoint", "maxpar256"]
)
def test_a_snapshot_against_itself_restores(snapshot):
    doc = preflight(snapshot, "--against", snapshot, expect=0)
    assert doc["verdict"] == "restores"
    checks = {(f["check"], f["outcome"]) for f in doc["findings"]}
    assert ("key-serializer", "as-is") in checks and ("value-serializer", "as-is") in checks
    assert all(f["outcome"] == "as-is" for f in doc["findings"])


def test_every_state_of_the_snapshot_is_compared_keyed_and_operator_state():
    doc = preflight(STATES, "--against", STATES, expect=0)
    compared = {f["state"] for f in doc["findings"] if f["check"] == "value-serializer"}
    # the keyed states, the timers and the operator list/union states (their serializer snapshots
    # are read from the operator state streams' heads)
    assert {
        "plain-value",
        "ttl-map",
        "ttl-list",
        "_timer_state/event_user-timers",
        "op-list",
        "op-union",
    } <= compared


def test_another_jobs_snapshot_fails_naming_each_operator_with_state():
    doc = preflight(STATES, "--against", OTHER_JOB, expect=1)
    assert doc["verdict"] == "fails"
    failed = {f["uid"]: f for f in doc["findings"] if f["outcome"] == "incompatible"}
    assert set(failed) == {"stateful", "opstate"}  # the stateless ones (print, drop) are skipped
    f = failed["stateful"]
    assert f["check"] == "mapping" and f["operator_id"] == "2bf2326fd66dcbd2442fd50df173e152"
    assert f["flink_error"].startswith(
        "java.lang.IllegalStateException: Failed to rollback to checkpoint/savepoint"
    )
    assert (
        "Cannot map checkpoint/savepoint state for operator 2bf2326fd66dcbd2442fd50df173e152 to the new program, "
        "because the operator is not available in the new program. If you want to allow to skip this, you can set "
        "the --allowNonRestoredState option on the CLI."
    ) in f["flink_error"]
    new_ones = [o for o in doc["operators"] if not o["in_snapshot"]]
    assert new_ones and all(o["in_new"] for o in new_ones)


def test_allow_non_restored_state_drops_and_counts_the_bytes(tmp_path):
    junit = tmp_path / "preflight.xml"
    doc = preflight(STATES, "--against", OTHER_JOB, "-n", "--junit", junit, expect=0)
    assert doc["verdict"] == "restores"
    dropped = [f for f in doc["findings"] if f["outcome"] == "dropped"]
    assert {f["uid"] for f in dropped} == {"stateful", "opstate"}
    assert doc["dropped_bytes"] == sum(f["bytes"] for f in dropped) > 400_000
    assert 'failures="0"' in junit.read_text() and "<failure" not in junit.read_text()


def test_junit_names_the_refusal(tmp_path):
    junit = tmp_path / "preflight.xml"
    preflight(STATES, "--against", OTHER_JOB, "--junit", junit, expect=1)
    text = junit.read_text()
    assert text.count("<failure") == 2 and "Cannot map checkpoint/savepoint state" in text


def test_max_parallelism_set_explicitly_in_new_fails():
    """NEW's 256 is not the default for parallelism 2 (128): it was set explicitly; Flink refuses 128."""
    doc = preflight(SQL_CHK, "--against", MAXPAR256, expect=1)
    bad = [f for f in doc["findings"] if f["outcome"] == "incompatible"]
    assert bad and {f["check"] for f in bad} == {"max-parallelism"}
    assert (
        "Cannot map operator" in bad[0]["flink_error"]
        and "with max parallelism 128 to new program with max parallelism 256" in bad[0]["flink_error"]
    )


def test_max_parallelism_equal_to_the_default_is_unknown_never_restores():
    """NEW's 128 is the default for p=2: set explicitly (refused) or adopted (restores): unknown, exit 1."""
    doc = preflight(MAXPAR256, "--against", SQL_CHK, expect=1)
    assert doc["verdict"] == "unknown"
    assert any("cannot tell whether it was set explicitly" in a for a in doc["assumptions"])


def test_an_older_release_cannot_read_newer_metadata():
    """NEW written by 1.20 (metadata V4): no 1.15 - 1.20 release reads the 2.2 snapshot's V6."""
    doc = preflight(STATES, "--against", SQL_CHK, "-n", expect=1)
    bad = [f for f in doc["findings"] if f["outcome"] == "incompatible"]
    assert [f["check"] for f in bad] == ["metadata-version"] and bad[0]["operator_id"] is None
    assert (
        bad[0]["flink_error"]
        == "java.lang.IllegalArgumentException: Unrecognized checkpoint version number: 6"
    )


def test_a_bad_target_release_is_one_line():
    result = cli("preflight", str(STATES), "--against", str(STATES), "--target-flink", "two")
    assert result.exit_code == 2 and "--target-flink" in result.stderr


@pytest.mark.parametrize(
    "p, expected", [(1, 128), (2, 128), (85, 128), (86, 256), (100, 256), (30000, 32768)]
)
def test_default_max_parallelism(p, expected):
    assert default_max_parallelism(p) == expected


# ---------------------------------------------------------------------------------------------
# serializer rules on the snapshots of the 2.2.0 states fixture (written by Flink)


@pytest.fixture(scope="module")
def snaps() -> dict[str, ser.Snap]:
    storage = Storage(StorageOptions.from_env(None))
    ck = one_checkpoint(storage, str(STATES), Rebase())
    out = {}
    for oc in catalog(storage, ck, operator_serializers=True):
        if oc.key_serializer is not None:
            k = oc.key_serializer
            out["key"] = ser.Snap(k.snapshot_class, k.version, k.body)
        for st in oc.states.values():
            v = st.serializers["VALUE_SERIALIZER"]
            out[st.name] = ser.Snap(v.snapshot_class, v.version, v.body)
    return out


def test_same_snapshot_is_as_is(snaps):
    for name, s in snaps.items():
        assert ser.resolve(s, s).outcome == "as-is", name


def test_simple_type_change_is_incompatible(snaps):
    # Long key vs String value: two simple types
    assert ser.resolve(snaps["key"], snaps["plain-value"]).outcome == "incompatible"


def test_composite_nested_change_is_incompatible(snaps):
    # ListSerializer<Long> vs ListSerializer<Ttl<Long, String>>; MapSerializer<String, Long> vs <Int, Ttl>
    assert ser.resolve(snaps["plain-list"], snaps["ttl-list-str"]).outcome == "incompatible"
    assert ser.resolve(snaps["plain-map"], snaps["ttl-map"]).outcome == "incompatible"


def test_ttl_unwraps_to_the_users_serializer(snaps):
    inner = ser.ttl_unwrapped(snaps["ttl-value"])
    assert inner is not None and inner.cls.endswith("LongSerializer$LongSerializerSnapshot")
    assert ser.ttl_unwrapped(snaps["plain-value"]) is None


def test_custom_snapshot_class_is_unknown_naming_it(snaps):
    custom = ser.Snap("com.example.MySerializerSnapshot", 1, b"\x00\x01")
    c = ser.resolve(custom, custom)
    assert c.outcome == "unknown" and c.blocking == "com.example.MySerializerSnapshot"
    # a composite whose nested snapshot is a custom class: unreadable past it, unknown, not as-is
    s = snaps["plain-list"]
    nested = s.body.replace(b"org.apache.flink.api.common.typeutils.base.LongSerializer$LongSerializerSnapshot",
                            b"org.apache.flink.api.common.typeutils.base.LongSerializer$LongSerializerSnapshoX")  # fmt: skip
    c = ser.resolve(s, ser.Snap(s.cls, s.version, nested))
    assert c.outcome in ("unknown", "incompatible") and c.outcome != "as-is"
