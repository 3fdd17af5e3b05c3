"""``states --deep`` on HashMap (heap) backend snapshots, against the ``states_hashmap`` fixtures:
fixtures/states/StatesJob.java on the heap backend (its key counts in the manifest's
``declared_states``), and its RocksDB twin (the ``states`` scenario of the same release: the same
keys, states, TTL and timers), whose numbers the heap ones must equal.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.states.test_states import after_phase2, by_name, entry, operator, states_json, ttl_threshold
from tests.support.fixture_cases import manifest
from tests.support.gc_support import Scenario, ckptctl

# every heap run of StatesJob (plain and Snappy-compressed snapshots) and the releases with a RocksDB twin
HEAP = sorted(
    (e["flink_version"], e["scenario"])
    for e in manifest()["entries"]
    if e["scenario"].startswith("states_hashmap")
)
TWINS = sorted(
    (v, sc)
    for v, sc in HEAP
    if any(e["flink_version"] == v and e["scenario"] == "states" for e in manifest()["entries"])
)


def deep(d: Path, job: dict, *extra: str, expect: int = 0) -> dict:
    now = job["phases"]["phase2_end_ms"] + 1000
    args = ["--deep", "--engine", "local", "--now", str(now), "--ttl", f"{ttl_threshold(job, now)}ms", *extra]
    return states_json(str(d), *args, expect=expect)


def heap_checkpoints(e: dict) -> list[Path]:
    return [d for d in after_phase2(e) if "chk-" in str(d)]


@pytest.mark.parametrize(("version", "scenario"), HEAP)
def test_heap_counts_match_what_the_job_wrote_with_ttl_ages_and_timers(version: str, scenario: str) -> None:
    e = entry(version, scenario)
    job = e["jobs"][0]
    assert job["config"]["state.backend.type"] == "hashmap"
    declared = {d["name"]: d for d in job["declared_states"] if d["operator"] == "stateful"}
    now = job["phases"]["phase2_end_ms"] + 1000
    threshold = ttl_threshold(job, now)
    chks = heap_checkpoints(e)
    assert chks
    for d in chks:
        report = deep(d, job)
        assert report["deep"]["problems"] == [] and report["deep"]["not_scanned"] == [], d
        states = by_name(operator(report, job["operators"]["stateful"]))
        for name, want in declared.items():
            u = states[name]["usage"]
            assert u is not None, (d, name)
            assert u["entries"] == want["entries"], (d, name, u["entries"])
            assert sum(kg["entries"] for kg in u["key_groups"].values()) == want["entries"]
            assert u["bytes"] > 0 and all(0 <= int(kg) <= 127 for kg in u["key_groups"])
            if not want["ttl"]:
                assert u["expired_elements"] is None and u["ttl_elements_decoded"] == 0
                continue
            # every TTL element is read on the heap, variable-length ones too (the string serializer)
            assert u["read_with"] == ["heap"]
            assert u["ttl_elements_decoded"] == want["elements"], (d, name)
            assert u["ttl_entries_not_decodable"] == 0
            assert u["expired_elements"] == want["aged_elements"], (d, name)  # exactly phase 1
            assert sum(b["elements"] for b in u["age_histogram"]) == want["elements"]
            assert u["oldest_age_ms"] >= threshold > u["newest_age_ms"] >= 0


@pytest.mark.parametrize(("version", "scenario"), TWINS)
def test_heap_and_rocksdb_twins_agree_per_state_and_key_group(version: str, scenario: str) -> None:
    """The same job on both backends: entries per key group, TTL elements and what expired agree."""
    heap_e, rocks_e = entry(version, scenario), entry(version, "states")
    heap_job, rocks_job = heap_e["jobs"][0], rocks_e["jobs"][0]
    heap = by_name(operator(deep(heap_checkpoints(heap_e)[-1], heap_job), heap_job["operators"]["stateful"]))
    rocks_chk = [d for d in after_phase2(rocks_e) if "chk-" in str(d)][-1]
    rocks = by_name(operator(deep(rocks_chk, rocks_job), rocks_job["operators"]["stateful"]))
    compared = 0
    for d in rocks_job["declared_states"]:
        if d["operator"] != "stateful":
            continue
        h, r = heap[d["name"]]["usage"], rocks[d["name"]]["usage"]
        assert {k: v["entries"] for k, v in h["key_groups"].items()} == {
            k: v["entries"] for k, v in r["key_groups"].items()
        }, d["name"]
        assert h["entries"] == r["entries"]
        if d["ttl"] and d["ttl_decodable"]:  # RocksDB reads fixed-length TTL elements only
            for k in ("ttl_elements_decoded", "expired_elements"):
                assert h[k] == r[k], (d["name"], k)
        compared += 1
    assert compared == len([d for d in rocks_job["declared_states"] if d["operator"] == "stateful"])


def _last_key_group(chk: Path) -> tuple[Path, int, int]:
    """A heap key-group file of the "stateful" operator, its last key group and that group's offset
    (from the checkpoint's own _metadata)."""
    from ckptctl.checkpoint.loading import load_checkpoint
    from ckptctl.metadata.handles import KeyGroupsHandle
    from ckptctl.storage import Storage, StorageOptions

    ck = load_checkpoint(Storage(StorageOptions()), str(chk))
    best = None
    for op in ck.metadata.operators:
        for s in op.subtasks or ():
            h = s.managed_keyed
            big = type(h) is KeyGroupsHandle and h.delegate is not None and h.state_size > 1024
            if big and (best is None or h.state_size > best.state_size):
                best = h
    assert best is not None
    name = getattr(best.delegate, "relative_path", None) or best.delegate.path
    return chk / Path(name).name, best.key_groups.end, best.offsets[-1]


@pytest.mark.parametrize(("version", "scenario"), HEAP)
def test_a_damaged_heap_snapshot_is_one_line_with_its_file_and_offset(
    version: str, scenario: str, tmp_path: Path
) -> None:
    import struct

    from tests.support.fixture_cases import REPO

    sc = Scenario(version, scenario, tmp_path)
    job = sc.entry["jobs"][0]
    chk = sc.root / heap_checkpoints(sc.entry)[-1].relative_to(REPO / sc.entry["data_dir"])
    victim, kg, off = _last_key_group(chk)
    data = victim.read_bytes()
    assert struct.unpack_from(">i", data, off)[0] == kg  # the key group starts with its id
    # the first state's count of the last key group (after the id and a short state id) set to
    # 0x7fffffff: more entries than the file can hold, refused before any is read; then the file
    # cut short inside the last key group
    huge = data[: off + 6] + struct.pack(">i", 0x7FFFFFFF) + data[off + 10 :]
    cases = [("truncated", data[: len(data) - 3], None)]
    if "snappy" not in scenario:  # a compressed key group's count is inside a Snappy chunk
        cases.append(("count", huge, off + 6))
    for label, damaged, at in cases:
        victim.write_bytes(damaged)
        report = deep(chk, job, *sc.rebase, expect=1)
        problems = report["deep"]["problems"]
        assert len(problems) == 1, (label, problems)
        line = problems[0]
        assert str(victim) in line and "byte" in line and "\n" not in line, (label, line)
        if at is not None:
            assert f"byte {at}" in line, (label, line)
        out = ckptctl("states", str(chk), "--deep", "--engine", "local", *sc.rebase, expect=1)
        assert "Traceback" not in out.stdout + out.stderr
    victim.write_bytes(data)
    assert deep(chk, job, *sc.rebase)["deep"]["problems"] == []


def test_a_serializer_it_cannot_read_is_named_and_the_states_before_it_still_counted(monkeypatch) -> None:
    """Heap entries carry no length: a state whose serializer is unknown (here: StringSerializer made
    unknown) stops its key group; it is named with its snapshot class, the states written before it
    in each key group are counted as usual, the ones after it are said to be skipped."""
    from ckptctl.states import heap

    e = entry("1.20.3", "states_hashmap")
    job = e["jobs"][0]
    d = heap_checkpoints(e)[-1]
    full = by_name(operator(deep(d, job), job["operators"]["stateful"]))
    monkeypatch.setattr(heap, "STRINGS", set())
    report = deep(d, job)
    assert report["deep"]["problems"] == []
    notes = report["deep"]["not_scanned"]
    strings = {"plain-value", "plain-map", "ttl-list-str"}  # the states with a string in them
    stopped = {n.split("'")[1] for n in notes if "StringSerializer" in n}
    assert stopped and stopped <= strings, notes
    states = by_name(operator(report, job["operators"]["stateful"]))
    named = {n.split("'")[1] for n in notes}
    assert strings <= named  # stopped at, or written after such a state in some key group
    counted = [s for s in states if s not in named and states[s]["usage"] is not None]
    assert counted  # the states before the first unreadable one in each key group
    for s in counted:
        assert states[s]["usage"]["entries"] == full[s]["usage"]["entries"], s
    for s in named:
        assert states[s]["usage"] is None, s


def test_the_2_3_heap_fixture_decodes_value_list_and_map_state_alike() -> None:
    """Issue 22 row 9 made heap snapshots "not decodable" rather than corrupt; now they are read. The
    datastream_hashmap fixture (ReleaseJob, 2.3.0): every checkpoint decodes without a problem or a
    skipped state; its value and list state hold one entry per key alike."""
    from tests.support.fixture_cases import FIXTURES, data_rebase, manifest

    e = next(x for x in manifest()["entries"] if x["scenario"] == "datastream_hashmap")
    chks = [c for c in e["checkpoints"] if c["has_metadata"] and c["kind"] == "checkpoint"]
    assert chks
    decoded = 0
    for c in chks:
        result = ckptctl("states", str(FIXTURES.parent / e["data_dir"] / c["dir"]), "--deep", "--engine", "local",
                         "--json", *data_rebase(FIXTURES / "data"))  # fmt: skip
        report = json.loads(result.stdout)
        assert report["deep"]["problems"] == [] and report["deep"]["not_scanned"] == []
        for op in report["operators"]:
            counts = {s["kind"]: s["usage"]["entries"] for s in op["states"] if s.get("usage")}
            if {"VALUE", "LIST", "MAP"} <= set(counts):
                assert counts["VALUE"] == counts["LIST"] > 0
                decoded += 1
    assert decoded
