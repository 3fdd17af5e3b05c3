"""``preflight`` on every pair of ``fixtures/upgrades/`` (OLD snapshot, NEW staging savepoint),
each labelled by a real restore of NEW's job from OLD (fixtures/upgrades/generate.py).

Targets (issue 46): no false "restores" (a pair Flink refused that preflight passes), agreement
on every pair preflight decides, "unknown" on at most 10 % of the pairs. The pairs are read from
``fixtures/upgrades`` of the repository, or from ``$CKPTCTL_UPGRADES`` (a directory holding a
``manifest.json``) while they are written elsewhere.

preflight is told what a user deploying NEW knows and NEW's snapshot may not: the release the
new job runs on (``--target-flink``), its state backend (``--target-backend``) and, where the pair
records it, whether it runs the changelog backend (``--target-changelog``); never the label.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ckptctl.checkpoint.rebase import Rebase
from ckptctl.checkpoint.targets import one_checkpoint
from ckptctl.preflight import run_preflight
from ckptctl.storage import Storage, StorageOptions
from tests.support.fixture_cases import FIXTURES

UPGRADES = Path(os.environ.get("CKPTCTL_UPGRADES") or FIXTURES / "upgrades")
AGREES = {"restores": "restored", "restores-with-migration": "restored", "fails": "failed"}


def _pairs() -> list[dict]:
    # the pairs are committed: a missing manifest is a failure, never a skip
    return json.loads((UPGRADES / "manifest.json").read_text())["pairs"]


def moved(pair: dict, side: str) -> Rebase:
    """Where the absolute paths a side's metadata names are now (``--rebase``): the files outside
    the snapshot's directory (a changelog checkpoint's DSTL files) were copied with it into
    ``data/<flink>/<case>/<side>``."""
    original = pair.get(f"{side}_original_root")
    if not original:
        return Rebase()
    return Rebase.of([(original, str(UPGRADES.joinpath(*Path(pair[side]).parts[:4])))])


def verdict_of_pair(pair: dict) -> dict:
    storage = Storage(StorageOptions.from_env(None))
    old = one_checkpoint(storage, str(UPGRADES / pair["old"]), moved(pair, "old"))
    new = one_checkpoint(storage, str(UPGRADES / pair["new"]), moved(pair, "new"))
    report = run_preflight(
        storage, old, new, target_flink=pair["new_flink"], new_backend=pair.get("new_backend"),
        new_changelog=pair.get("new_changelog"), allow_non_restored_state=bool(pair.get("allow_non_restored")),
    )  # fmt: skip
    return report.to_json()


PAIRS = _pairs()


@pytest.fixture(scope="module")
def verdicts() -> dict[str, dict]:
    return {p["id"]: verdict_of_pair(p) for p in PAIRS}


def test_no_false_restores_and_agreement_on_every_decided_pair(verdicts):
    false_restores, disagreements, unknown = [], [], []
    for pair in PAIRS:
        doc = verdicts[pair["id"]]
        label = pair["label"]["outcome"]
        verdict = doc["verdict"]
        if verdict == "unknown":
            unknown.append(pair["id"])
        elif verdict.startswith("restores") and label == "failed":
            false_restores.append(
                f"{pair['id']}: {verdict}, Flink: {pair['label'].get('root_cause_message')}"
            )
        elif AGREES[verdict] != label:
            disagreements.append(f"{pair['id']}: {verdict}, label {label}")
    assert not false_restores
    assert not disagreements
    assert len(unknown) * 10 <= len(PAIRS), unknown


def test_every_fails_names_operator_state_and_flinks_message(verdicts):
    for pair in PAIRS:
        doc = verdicts[pair["id"]]
        if doc["verdict"] != "fails":
            continue
        bad = [f for f in doc["findings"] if f["outcome"] == "incompatible"]
        assert bad, pair["id"]
        for f in bad:
            assert f["flink_error"], (pair["id"], f)
            assert f["operator_id"] or f["check"] == "metadata-version", (pair["id"], f)
            if f["check"] not in ("mapping", "parallelism", "max-parallelism", "backend", "changelog", "metadata-version",
                                  "key-serializer"):  # fmt: skip
                assert f["state"], (pair["id"], f)


def test_state_names_are_read_as_registered(verdicts):
    """UpgradeJob's keyed state is named 'v': its header follows a timer snapshot ending in the
    version bytes 00 03, which read as a name length would make the name '\\x00\\x01v'."""
    names = {f["state"] for doc in verdicts.values() for f in doc["findings"] if f["state"]}
    assert "v" in names
    assert not [n for n in names if "\x00" in n or not n.isprintable()]


def test_a_refusal_names_the_exception_flink_threw(verdicts):
    """On each pair Flink refused and preflight fails: one finding names Flink's root cause, its
    class and the opening of its message (up to the first value that varies: a path, a
    serializer's identity hash)."""
    import re

    for pair in PAIRS:
        label, doc = pair["label"], verdicts[pair["id"]]
        if label["outcome"] != "failed" or doc["verdict"] != "fails":
            continue
        opening = re.split(r"[(@]|file:|/tmp/|\d", label["root_cause_message"] or "", maxsplit=1)[0][:60]
        errors = [f["flink_error"] for f in doc["findings"] if f["outcome"] == "incompatible"]
        want = f"{label['root_cause_class']}: {opening}"
        assert any(e.startswith(want) for e in errors), (pair["id"], want, errors)


PLAN_PAIRS = [p for p in PAIRS if p.get("new_plan")]


def test_a_compiled_plan_as_new_never_restores_and_agrees_where_it_decides():
    """The SQL pairs whose NEW ran from a compiled plan, judged again with that plan as NEW: a plan
    has no serializer snapshots, so it never says "restores"; what it decides (an operator no uid of
    the plan reaches, TTL switched on) is what Flink did; a refusal for an unmapped operator is always
    decided (the plan tells every id)."""
    from ckptctl.preflight.new import read_document

    assert len({p["new_flink"] for p in PLAN_PAIRS}) >= 2, "SQL plan pairs on two releases"
    storage = Storage(StorageOptions.from_env(None))
    wrong, decided = [], 0
    for pair in PLAN_PAIRS:
        old = one_checkpoint(storage, str(UPGRADES / pair["old"]), Rebase())
        path = UPGRADES / pair["new_plan"]
        new = read_document(path.read_bytes(), str(path))
        verdict = run_preflight(storage, old, new, target_flink=pair["new_flink"],
                                new_backend=pair.get("new_backend")).verdict  # fmt: skip
        label = pair["label"]
        unmapped = "Cannot map checkpoint/savepoint state" in (label.get("root_cause_message") or "")
        if verdict.startswith("restores") or (verdict != "unknown" and AGREES[verdict] != label["outcome"]):
            wrong.append(f"{pair['id']}: {verdict}, label {label['outcome']}")
        elif unmapped and verdict != "fails":
            wrong.append(f"{pair['id']}: {verdict}, Flink could not map an operator")
        decided += verdict != "unknown"
    assert not wrong
    assert decided, "no plan pair decided"
