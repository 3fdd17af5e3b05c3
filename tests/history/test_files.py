"""``history --states`` on fixtures/history/2.3.0/filemerging: HistoryJob's leak written with file
merging on (``execution.checkpointing.file-merging.enabled``, SSTs as segments of shared physical
files), num-retained = 3, every file kept, a ledger run while the job ran.

The oracles: Flink's REST API for every checkpoint's figures (through the ledger: only three are on
disk), the job's own key spaces for the entries per state (``counter`` and ``recent`` key by
``floorMod(v, 500)``: 500 keys each, whatever the records), the leak the job planted (``session``,
keyed by each record once leaking, no TTL), and the physical files on disk for file merging's
space amplification, against the segments ``refs`` lists (another reader of the same handles)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from ckptctl.history.files import MAX_SPACE_AMPLIFICATION, amplification_named
from tests.history.test_rest_oracle import (
    HISTORY,
    assert_like_rest,
    coordinator_bytes,
    copied,
    rest_details,
    vertex_id,
)
from tests.support.cli_runner import cli, cli_json

RUN = HISTORY / "2.3.0" / "filemerging"


def _history(tmp_path: Path, *args: str) -> dict:
    ledger = tmp_path / "ledger"
    if not ledger.exists():
        shutil.copytree(RUN / "ledger", ledger)
    root = tmp_path / "checkpoints" if (tmp_path / "checkpoints").exists() else copied(RUN, tmp_path)
    doc = cli_json("history", str(root), "--ledger", str(ledger), *args)
    assert doc["ledger_added"] == 0  # every checkpoint was ledgered while the job ran
    (job,) = doc["jobs"]
    return job


def _op(job: dict, name: str) -> dict:
    return next(o for o in job["operators"] if o["name"] == name)


def test_file_merging_run_matches_rest_through_its_ledger(tmp_path: Path) -> None:
    """Segments of physical files count by their own size (not their file's): every checkpoint
    within 1 % of Flink's statistics, the difference exactly the coordinators' state."""
    assert json.loads((RUN / "job.json").read_text())["file_merging"] is True
    details = rest_details(RUN)
    job = _history(tmp_path)
    cks = {c["checkpoint_id"]: c for c in job["checkpoints"]}
    assert len(details) >= 26 and set(details) <= set(cks)
    newest = max(RUN.glob("checkpoints/*/chk-*"), key=lambda p: int(p.name[4:]))
    coordinator = coordinator_bytes(newest)
    for cid, rest in details.items():
        assert_like_rest(cks[cid], rest, coordinator)


def test_states_counts_the_entries_of_each_state(tmp_path: Path) -> None:
    job = _history(tmp_path, "--states")
    assert job["states_checkpoint_id"] == max(int(p.name[4:]) for p in RUN.glob("checkpoints/*/chk-*"))
    states = {(o["name"], s["name"]): s for o in job["operators"] for s in o["states"] or ()}
    # the job's bounded key spaces: floorMod(v, 500) over every record
    assert states[("counter", "count")]["entries"] == 500
    assert states[("recent", "recent")]["entries"] == 500
    for key in (("counter", "count"), ("recent", "recent"), ("sessions", "session")):
        s = states[key]
        assert s["scope"] == "keyed" and s["ttl"] is False and s["bytes"] > 0, s
    assert states[("counter", "count")]["kind"] == "VALUE" and states[("recent", "recent")]["kind"] == "LIST"
    # the leak: 500 bounded keys before it, then a key per record
    assert states[("sessions", "session")]["entries"] > 500
    # operator state from its handles: 8 longs a subtask, parallelism 2
    assert (
        states[("opstate", "op-list")]["entries"] == 16
        and states[("opstate", "op-list")]["scope"] == "operator"
    )
    # the default stays metadata-only: nothing read, nothing named by state
    plain = _history(tmp_path)
    assert all(o["states"] is None for o in plain["operators"]) and plain["file_merging"] is None


def test_the_leaking_state_without_ttl_is_named(tmp_path: Path) -> None:
    info = json.loads((RUN / "job.json").read_text())
    leaking = vertex_id(RUN, info["leaking_operator"])
    job = _history(tmp_path, "--states")
    first = job["operators"][0]
    assert first["operator_id"] == leaking
    assert "keyed state without TTL grows: 'session'" in first["suspect"], first["suspect"]
    text = cli("history", str(tmp_path / "checkpoints"), "--ledger", str(tmp_path / "ledger"), "--states")
    assert text.exit_code == 0
    assert "sessions: keyed state without TTL grows: 'session'" in " ".join(text.stdout.split())
    # metadata alone cannot tell a state's TTL: the question, and how to answer it
    assert "--states names the states" in _history(tmp_path)["operators"][0]["suspect"]


def test_file_merging_space_amplification_is_physical_over_referenced(tmp_path: Path) -> None:
    job = _history(tmp_path, "--states")
    fm = job["file_merging"]
    root = tmp_path / "checkpoints"
    on_disk = sorted(root.glob("*/chk-*"), key=lambda p: int(p.name[4:]))
    assert fm["checkpoint_ids"] == [int(p.name[4:]) for p in on_disk]
    segments: dict[str, set[tuple[int, int]]] = {}
    for chk in on_disk:
        for line in cli("refs", str(chk), "--format", "ndjson").stdout.splitlines():
            r = json.loads(line)
            if r["handle_type"] == "SegmentFileStateHandle":
                segments.setdefault(r["path"], set()).add((r["offset"], r["size"]))
    assert segments, "file merging wrote no segment"
    physical = sum(os.path.getsize(p.removeprefix("file:")) for p in segments)
    referenced = sum(size for s in segments.values() for _offset, size in s)
    assert (fm["physical_files"], fm["physical_bytes"], fm["referenced_bytes"]) == (
        len(segments),
        physical,
        referenced,
    )
    assert fm["space_amplification"] == physical / referenced and physical > referenced
    assert fm["suspect"] is None  # within Flink's default limit of 2


def test_amplification_beyond_flinks_limit_is_named() -> None:
    assert amplification_named(1.99, 199, 100) is None
    named = amplification_named(MAX_SPACE_AMPLIFICATION * 1.5, 3 * 2**20, 2**20)
    assert named is not None and "3.00x" in named and "3.0 MiB" in named and "1.0 MiB" in named
