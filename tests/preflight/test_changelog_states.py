"""A changelog checkpoint with nothing materialized: its keyed states' serializer snapshots are
only in the DSTL files' metadata records, and preflight must judge NEW against them.

Real bytes only: OLD is the changelog-only retained checkpoint of a ``changelog_`` pair (value
state ``v`` of LongSerializer), NEW the staging savepoint of the ``value_int_to_long`` pair's OLD
job (the same operator, ``v`` of IntSerializer): Flink's restore replays the log, registers ``v``
from its metadata record and refuses the IntSerializer (LongSerializer → IntSerializer is
incompatible), as it refuses it from a savepoint (the ``value_int_to_long`` labels).
"""

from __future__ import annotations

import pytest

from ckptctl.checkpoint.rebase import Rebase
from ckptctl.checkpoint.targets import one_checkpoint
from ckptctl.preflight import run_preflight
from ckptctl.storage import Storage, StorageOptions
from tests.preflight.test_upgrades import PAIRS, UPGRADES, moved, verdict_of_pair

BY_ID = {p["id"]: p for p in PAIRS}
RELEASES = sorted(
    {p["new_flink"] for p in PAIRS if p["id"].endswith("/changelog_checkpoint_to_changelog_off")}
)


def _changelog_old_against_int_value(release: str) -> dict:
    old = BY_ID[f"{release}/changelog_checkpoint_to_changelog_off"]
    int_value = BY_ID[f"{release}/value_int_to_long"]
    pair = {**old, "new": int_value["old"], "new_original_root": int_value["old_original_root"]}
    return verdict_of_pair(pair)


def test_there_are_changelog_only_pairs_on_1_20_and_2_x():
    assert "1.20.3" in RELEASES and any(r.startswith("2.") for r in RELEASES), RELEASES


@pytest.mark.parametrize("release", RELEASES)
def test_a_changed_value_serializer_of_a_state_only_in_the_change_log_is_refused(release):
    doc = _changelog_old_against_int_value(release)
    assert doc["verdict"] == "fails", doc["findings"]
    value = [f for f in doc["findings"] if f["state"] == "v" and f["check"] == "value-serializer"]
    assert [f["outcome"] for f in value] == ["incompatible"], value
    assert "LongSerializer → IntSerializer" in value[0]["detail"]
    assert value[0]["flink_error"].startswith("org.apache.flink.util.StateMigrationException")


@pytest.mark.parametrize("release", RELEASES)
def test_the_same_serializer_read_from_the_change_log_restores(release):
    """The pair Flink restored: ``v`` is read from the log and found unchanged (not assumed)."""
    doc = verdict_of_pair(BY_ID[f"{release}/changelog_checkpoint_to_changelog_off"])
    assert doc["verdict"] == "restores"
    value = [f for f in doc["findings"] if f["state"] == "v" and f["check"] == "value-serializer"]
    assert [f["outcome"] for f in value] == ["as-is"], doc["findings"]


def test_a_change_log_that_cannot_be_read_is_unknown_never_restores(tmp_path):
    """The DSTL files not where the metadata says (a checkpoint copied without them): the states'
    serializers are not known, so preflight cannot say the job restores."""
    pair = BY_ID["1.20.3/changelog_checkpoint_to_changelog_off"]
    storage = Storage(StorageOptions.from_env(None))
    nowhere = Rebase.of([(pair["old_original_root"], str(tmp_path))])
    old = one_checkpoint(storage, str(UPGRADES / pair["old"]), nowhere)
    new = one_checkpoint(storage, str(UPGRADES / pair["new"]), moved(pair, "new"))
    doc = run_preflight(
        storage,
        old,
        new,
        target_flink=pair["new_flink"],
        new_backend=pair["new_backend"],
        new_changelog=False,
    ).to_json()
    assert doc["verdict"] == "unknown"
    why = [f for f in doc["findings"] if f["outcome"] == "unknown"]
    assert why and all("change log" in f["detail"] for f in why), why
