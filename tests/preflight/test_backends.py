"""The backend rules of preflight (ckptctl/preflight/backends.py) through the command line, on the
upgrade pairs real Flink labelled (fixtures/upgrades: changelog and ForSt pairs): what the user tells
(``--target-changelog``, ``--claim``, ``--target-backend``) and what preflight says when NEW's
snapshot does not tell it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli_runner import cli, one_line_error
from tests.support.fixture_cases import FIXTURES

DATA = FIXTURES / "upgrades" / "data"


def _dirs(pair: str, side: str) -> Path:
    return next((DATA / pair / side).rglob("_metadata")).parent


def preflight(pair: str, *args: str, new: str | None = None, expect: int) -> dict:
    result = cli(
        "preflight", str(_dirs(pair, "old")), "--against", str(_dirs(new or pair, "new")), *args, "--json"
    )
    assert result.exit_code == expect, result.output
    return json.loads(result.stdout)


def _checks(doc: dict, outcome: str) -> set[str]:
    return {f["check"] for f in doc["findings"] if f["outcome"] == outcome}


def test_changelog_on_in_new_fails_a_no_claim_restore():
    """2.3.0 and 1.20.3: a RocksDB checkpoint restored by a job with changelog on failed its first
    checkpoint ("does not support enforcing a full snapshot ... NO_CLAIM")."""
    for release in ("2.3.0", "1.20.3"):
        pair = f"{release}/checkpoint_to_changelog_on"
        rocksdb = ("--target-backend", "rocksdb")  # a checkpoint's incremental handles: RocksDB or ForSt
        doc = preflight(pair, *rocksdb, "--target-changelog", "on", expect=1)
        assert doc["verdict"] == "fails"
        bad = [f for f in doc["findings"] if f["check"] == "changelog"]
        assert bad and bad[0]["operator_id"] and "NO_CLAIM" in bad[0]["flink_error"]
        assert (
            preflight(pair, *rocksdb, "--target-changelog", "on", "--claim", expect=0)["verdict"]
            == "restores"
        )
        off = preflight(pair, *rocksdb, "--target-changelog", "off", expect=0)
        assert off["verdict"] == "restores" and "changelog" not in _checks(off, "incompatible")


def _dstl_rebase(pair: str) -> tuple[str, str]:
    """``--rebase`` to the copy of the DSTL files a changelog checkpoint names by absolute path
    (preflight reads them for the states that live only in the change log)."""
    entry = next(
        p for p in json.loads((DATA.parent / "manifest.json").read_text())["pairs"] if p["id"] == pair
    )
    return "--rebase", f"{entry['old_original_root']}={DATA / pair / 'old'}"


def test_a_changelog_snapshot_is_unknown_until_the_new_jobs_changelog_is_told():
    pair = "2.3.0/changelog_checkpoint_to_changelog_off"
    moved = _dstl_rebase(pair)
    doc = preflight(pair, *moved, expect=1)
    assert doc["verdict"] == "unknown" and "changelog" in _checks(doc, "unknown")
    assert preflight(pair, *moved, "--target-changelog", "off", expect=0)["verdict"] == "restores"
    assert preflight(pair, *moved, "--target-changelog", "on", expect=1)["verdict"] == "fails"


def test_a_changelog_only_operator_holds_state():
    """Its state is all in changes, none materialized: still state, which a renamed uid leaves
    unmapped (Flink: 'Cannot map checkpoint/savepoint state')."""
    doc = preflight("2.3.0/changelog_checkpoint_to_changelog_off", "--target-changelog", "off",
                    new="2.3.0/uid_renamed", expect=1)  # fmt: skip
    unmapped = [f for f in doc["findings"] if f["check"] == "mapping" and f["outcome"] == "incompatible"]
    assert [f["uid"] for f in unmapped] == ["stateful"]


def test_forst_reads_no_canonical_savepoint():
    """2.3.0: a canonical savepoint restored into ForSt failed (UnsupportedOperationException: Not
    support restoring yet for ForStStateBackend); a canonical staging savepoint of NEW tells its job
    is not ForSt's (ForSt writes none), so a canonical OLD restores there."""
    pair = "2.3.0/backend_switch_canonical_savepoint"
    doc = preflight(pair, "--target-backend", "forst", expect=1)
    assert any(f["flink_error"].startswith("java.lang.UnsupportedOperationException: Not support restoring yet")
               for f in doc["findings"] if f["outcome"] == "incompatible")  # fmt: skip
    assert preflight(pair, expect=0)["verdict"] == "restores"


def test_incremental_handles_restore_into_rocksdb_and_forst_not_the_heap():
    pair = "2.3.0/forst_checkpoint_to_rocksdb"
    for backend, verdict in (("rocksdb", "restores"), ("forst", "restores"), ("hashmap", "fails")):
        doc = preflight(pair, "--target-backend", backend, expect=0 if verdict == "restores" else 1)
        assert doc["verdict"] == verdict, backend


def test_a_bad_changelog_value_is_one_line():
    pair = "2.3.0/checkpoint_to_changelog_on"
    result = cli(
        "preflight",
        str(_dirs(pair, "old")),
        "--against",
        str(_dirs(pair, "new")),
        "--target-changelog",
        "yes",
    )
    assert "--target-changelog 'yes'" in one_line_error(result)
