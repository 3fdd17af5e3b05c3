"""ckptctl's reader agrees with Flink's on seeded mutations of every fixture (no JVM needed).

fixtures/differential/expectations.json holds, per case, a committed fixture ``_metadata``, a seed,
the recipe of edits tests/support/differential.py derived from it (byte flips, int overwrites,
truncations, splices, string edits aimed at the CheckpointProperties trailer, paths,
parallelism, key-group ranges, sizes, offsets, subtask indexes) and the verdict that
``Checkpoints.loadCheckpointMetadata`` of the release that wrote the fixture gave on the mutated
bytes (recorded by fixtures/differential/record.py with fixtures/dumper/MetadataVerdict.java).
The mutated bytes are rebuilt here; ckptctl must reject what Flink rejects (a MetadataFormatError
naming file and offset) and accept what Flink accepts with the same content. bench/differential.py
runs the same comparison live on tens of thousands of cases.
"""

from __future__ import annotations

import collections
import json

import pytest

from tests.support import differential as d

EXPECTED = json.loads(d.EXPECTATIONS.read_text())
CASES = EXPECTED["cases"]


def test_sample_covers_every_fixture_and_both_verdicts() -> None:
    # every fixture committed when the sample was recorded (fixtures added later join the sample
    # when fixtures/differential/record.py is run again)
    recorded = {c["fixture"] for c in CASES}
    assert recorded <= set(d.fixture_files()) and len(recorded) >= 49
    verdicts = collections.Counter(c["flink"]["verdict"] for c in CASES)
    assert len(CASES) >= 300 and verdicts["accept"] >= 100 and verdicts["reject"] >= 100
    # the rejections Flink's own checks raise, beyond truncation: trailer, paths, numbers
    exceptions = {c["flink"].get("exception") for c in CASES}
    assert {"java.io.InvalidClassException", "java.lang.IllegalArgumentException",
            "java.lang.IndexOutOfBoundsException"} <= exceptions  # fmt: skip


def test_recipes_come_from_their_seeds() -> None:
    originals = {f: d.fixture_bytes(f) for f in {c["fixture"] for c in CASES}}
    for c in CASES[:60]:
        assert d.mutate(originals[c["fixture"]], c["seed"]) == c["recipe"], c["seed"]


@pytest.mark.parametrize("release", d.RELEASES)
def test_ckptctl_agrees_with_flink(release: str) -> None:
    originals = {f: d.fixture_bytes(f) for f in {c["fixture"] for c in CASES} if d.release_of(f) == release}
    disagreements = []
    n = 0
    for c in CASES:
        if d.release_of(c["fixture"]) != release:
            continue
        n += 1
        data = d.apply_recipe(originals[c["fixture"]], c["recipe"])
        mine = d.ckptctl_verdict(data, "case/_metadata")
        flink = c["flink"]
        if not d.agree(flink, mine):
            disagreements.append({"case": c["seed"], "recipe": c["recipe"], "flink": flink, "ckptctl": mine})
        elif mine["verdict"] == "reject":
            # the one-line error names the file and a byte offset inside it
            assert "\n" not in mine["error"] and mine["error"].startswith("case/_metadata: byte ")
            assert 0 <= mine["offset"] <= len(data)
    assert n > 100
    assert not disagreements, json.dumps(disagreements[:5], indent=1)


PATHS = json.loads(d.PATHS.read_text())["paths"]


@pytest.mark.parametrize("release", d.RELEASES)
def test_path_rules_agree_with_flink(release: str) -> None:
    """flinkpath against Flink's Path on edited path strings: accepted with the same
    ``Path.toString()``, or rejected, as an absolute path and as a relative handle's path."""
    assert len(PATHS) >= 1000
    bad = [(row["s"], row[release], d.ckptctl_path_verdict(row["s"])) for row in PATHS
           if not d.path_agree(tuple(row[release]), d.ckptctl_path_verdict(row["s"]))]  # fmt: skip
    assert {tuple(row[release])[0][:3] for row in PATHS} == {"ok:", "err"}
    assert not bad, bad[:10]


PINNED = json.loads(d.PINNED.read_text())


@pytest.mark.parametrize("case", PINNED, ids=[c["note"][:40] for c in PINNED])
def test_pinned_disagreements_stay_fixed(case: dict) -> None:
    # mutations a live run once found ckptctl disagreeing with Flink on (recipe and cause in the note)
    data = d.apply_recipe(d.fixture_bytes(case["fixture"]), case["recipe"])
    mine = d.ckptctl_verdict(data, "case/_metadata")
    assert d.agree(case["flink"], mine), (case["note"], case["flink"], mine)


def test_a_repeated_local_name_in_v3_keeps_both_files_referenced() -> None:
    # Flink 1.14/1.15 keep the later of two entries with one local name (a HashMap), which is what
    # ckptctl reports as Flink's reading; 1.17+ restoring the same V3 file fetch both, so gc must
    # still see both files as referenced
    from ckptctl.checkpoint.loading import written_absolute_paths
    from ckptctl.metadata import read_metadata

    case = next(c for c in PINNED if "repeated local file name" in c["note"])
    original = read_metadata(d.fixture_bytes(case["fixture"]))
    mutated = read_metadata(d.apply_recipe(d.fixture_bytes(case["fixture"]), case["recipe"]))
    assert d.content(mutated)["refs"] == d.content(original)["refs"] - 1 == case["flink"]["refs"]
    assert set(written_absolute_paths(mutated)) == set(written_absolute_paths(original))


def test_backend_identifiers_become_the_uuids_flink_makes() -> None:
    # fixtures/differential/uuids.json: edited identifiers and the UUID Flink 2.3 on Java 17 made of
    # each (UUID.fromString, else nameUUIDFromBytes): the strict form, the lenient one, the fallback
    from ckptctl.metadata.javauuid import flink_backend_uuid

    rows = json.loads(d.UUIDS.read_text())["uuids"]
    canonical = sum(r["s"].lower() == r["uuid"] for r in rows)
    assert len(rows) >= 1000 and 100 < canonical < len(rows) - 100  # both paths are exercised
    wrong = [
        (r["s"], r["uuid"], flink_backend_uuid(r["s"]))
        for r in rows
        if flink_backend_uuid(r["s"]) != r["uuid"]
    ]
    assert not wrong, wrong[:5]
