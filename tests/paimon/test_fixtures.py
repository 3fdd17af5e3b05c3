"""Invariants of the committed Paimon fixtures (fixtures/paimon/), checked without a JVM.

The expected JSON was written by Java (fixtures/paimon/PaimonFixtureTool.java: Flink's and Paimon's own
readers); these tests hold it against the files themselves, read with ckptctl's metadata reader and a few
lines of byte decoding, and check that each scenario shows the outcome it was generated for.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from ckptctl.metadata import read_metadata
from ckptctl.metadata.handles import ByteStreamHandle, FileHandle, RelativeFileHandle
from ckptctl.metadata.operators import OperatorStreamHandle

REPO = Path(__file__).resolve().parents[2]
PAIMON = REPO / "fixtures" / "paimon"
MANIFEST = json.loads((PAIMON / "manifest.json").read_text())
ENTRIES = {e["scenario"]: e for e in MANIFEST["entries"]}
TABLE = Path("warehouse/default.db/events")
COMMITTER_UID = "Global Committer_events_ckptctl"
WRITER_UID = "Writer_events_ckptctl"


def expected(scenario: str) -> dict:
    return json.loads((REPO / ENTRIES[scenario]["expected"]).read_text())


def checkpoint_root(scenario: str) -> Path:
    """The moved copy of the job's checkpoint dir (pending_cleaned's checkpoints are pending's)."""
    exp = expected(scenario)
    for e in MANIFEST["entries"]:
        if exp["checkpoint_dir"].startswith(e["original_root"] + "/"):
            return REPO / e["data_dir"] / Path(exp["checkpoint_dir"]).relative_to(e["original_root"])
    raise AssertionError(f"{exp['checkpoint_dir']} is under no original_root of the manifest")


def table_dir(scenario: str) -> Path:
    return REPO / ENTRIES[scenario]["data_dir"] / TABLE


def stream_bytes(handle, chk_dir: Path) -> bytes:
    d = handle.delegate
    if isinstance(d, ByteStreamHandle):
        return d.data
    if isinstance(d, RelativeFileHandle):
        return (chk_dir / d.relative_path).read_bytes()
    assert isinstance(d, FileHandle), type(d)
    raise AssertionError(f"an absolute file handle in a Paimon fixture: {d.path}")


def flink_string(buf: bytes, pos: int) -> str:
    """Flink StringValue.writeString: varint(length + 1), then each char as a 7-bit varint."""

    def varint(p: int) -> tuple[int, int]:
        value = shift = 0
        while True:
            b = buf[p]
            p += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value, p
            shift += 7

    n, pos = varint(pos)
    chars = []
    for _ in range(n - 1):
        c, pos = varint(pos)
        chars.append(chr(c))
    return "".join(chars)


SCENARIOS = sorted(ENTRIES)


def test_the_scenarios_are_all_there():
    assert set(SCENARIOS) == {"committed", "pending", "pending_cleaned", "expired", "rewind"}
    for e in MANIFEST["entries"]:
        assert (REPO / e["data_dir"] / TABLE / "schema" / "schema-0").is_file()
        assert (REPO / e["expected"]).is_file()
        assert e["original_root"].startswith("/tmp/ckptctl-paimon-gen/")


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_checkpoints_hold_paimon_sink_state(scenario):
    exp = expected(scenario)
    root = checkpoint_root(scenario)
    assert [c["dir"] for c in exp["checkpoints"]] == ENTRIES[scenario]["checkpoints"]
    assert len(exp["checkpoints"]) >= 3
    ids = exp["operator_ids"]
    for c in exp["checkpoints"]:
        chk = root / c["dir"]
        md = read_metadata((chk / "_metadata").read_bytes(), str(chk / "_metadata"))
        assert md.checkpoint_id == c["checkpoint_id"]
        ops = {op.operator_id: op for op in md.operators}
        assert {op["operator_id"] for op in c["operators"]} == set(ops)
        committer, writer = ops[ids[COMMITTER_UID]], ops[ids[WRITER_UID]]
        assert (committer.parallelism, committer.max_parallelism, writer.parallelism) == (1, 1, 2)
        java_ops = {op["uid"]: op for op in c["operators"]}
        for uid, op in ((COMMITTER_UID, committer), (WRITER_UID, writer)):
            java_subtasks = java_ops[uid]["subtasks"]
            assert [s.index for s in op.subtasks] == [s["subtask"] for s in java_subtasks]
            for sub, java_sub in zip(op.subtasks, java_subtasks, strict=True):
                handle = sub.managed_operator
                assert isinstance(handle, OperatorStreamHandle)
                (java_handle,) = java_sub["managed_operator_state"]
                states = {s.name: s for s in handle.states}
                assert set(states) == set(java_handle["states"])
                data = stream_bytes(handle, chk)
                for name, s in states.items():
                    assert s.mode_name == java_handle["states"][name]["distribution_mode"]
                    assert list(s.offsets) == java_handle["states"][name]["offsets"]
                user = states["commit_user_state"]
                assert user.mode_name == "UNION"
                assert [flink_string(data, o) for o in user.offsets] == [c["commit_user"]]
                if uid == WRITER_UID:
                    assert set(states) == {"commit_user_state"}
                    continue
                raw = states["streaming_committer_raw_states"]
                assert raw.mode_name == "SPLIT_DISTRIBUTE"
                assert len(raw.offsets) == len(c["committables"])
                for off, committable in zip(raw.offsets, c["committables"], strict=True):
                    # BytePrimitiveArraySerializer length, then SimpleVersionedSerialization's version and
                    # length, then ManifestCommittable v3's identifier
                    n, version, length, identifier = struct.unpack_from(">iiiq", data, off)
                    wire = committable["wire"]
                    assert (n, version, length) == (
                        wire["element_length"],
                        wire["simple_versioned_version"],
                        n - 8,
                    )
                    assert version == exp["manifest_committable_serializer_version"]
                    assert identifier == committable["identifier"] == wire["identifier"]
                    assert (
                        wire["commit_message_serializer_version"] == exp["commit_message_serializer_version"]
                    )
                    assert wire["commit_message_count"] == len(committable["commit_messages"])
        # CommitterOperator: chk-N holds committable N plus every earlier uncommitted one, in order
        identifiers = [x["identifier"] for x in c["committables"]]
        assert identifiers == sorted(identifiers) and identifiers[-1] == c["checkpoint_id"]
        assert all(x["committed_in_snapshot"] is None for x in c["committables"][:-1])


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_table_side_matches_the_snapshot_files(scenario):
    exp = expected(scenario)
    table = table_dir(scenario)
    snaps = exp["table"]["snapshots"]
    assert snaps
    on_disk = sorted(p.name for p in (table / "snapshot").glob("snapshot-*"))
    assert on_disk == sorted(f"snapshot-{s['id']}" for s in snaps)
    for s in snaps:
        js = json.loads((table / "snapshot" / f"snapshot-{s['id']}").read_text())
        assert (js["commitUser"], js["commitIdentifier"], js["commitKind"], js["timeMillis"]) == (
            s["commit_user"], s["commit_identifier"], s["commit_kind"], s["time_millis"])  # fmt: skip
        assert (table / "manifest" / js["baseManifestList"]).is_file()
    files = sorted(str(p.relative_to(table)) for p in table.glob("*=*/bucket-*/*"))
    assert files == exp["table"]["data_files_on_disk"]
    latest = snaps[-1]
    assert set(latest["data_files"]) <= set(files)
    assert latest["total_record_count"] == exp["table"]["rows"]["total"]
    # nothing absolute in the table: Paimon keeps file names relative to the table dir
    for p in table.rglob("*"):
        if p.is_file() and p.suffix != ".avro":
            assert b"/tmp/" not in p.read_bytes(), p


def committable_files(committable: dict) -> list[str]:
    return [f"{m['partition']}/bucket-{m['bucket']}/{f['file_name']}"
            for m in committable["commit_messages"] for f in m["new_files"]]  # fmt: skip


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_committables_against_the_table(scenario):
    exp = expected(scenario)
    snaps = {s["id"]: s for s in exp["table"]["snapshots"]}
    live = set(exp["table"]["snapshots"][-1]["data_files"])
    users = {s["commit_user"] for s in snaps.values()}
    for c in exp["checkpoints"]:
        for x in c["committables"]:
            files = committable_files(x)
            assert files and all(m["bucket"] == 0 for m in x["commit_messages"])  # bucket -1: unaware
            if x["committed_in_snapshot"] is not None:
                s = snaps[x["committed_in_snapshot"]]
                assert (s["commit_user"], s["commit_identifier"]) == (c["commit_user"], x["identifier"])
                assert set(files) <= set(s["data_files"])
            elif (
                c["commit_user"] in users
            ):  # a live snapshot of the user: an uncommitted one is not in the table
                assert not set(files) & live
            else:  # hazard A (expired): no snapshot of the user is left, but the files it committed are live
                assert set(files) <= live


def test_committed_every_retained_checkpoint_is_in_the_table():
    exp = expected("committed")
    assert all(x["committed_in_snapshot"] for c in exp["checkpoints"] for x in c["committables"])
    assert exp["restores"] == {}


def uncommitted(exp: dict) -> list[dict]:
    return [x for x in exp["checkpoints"][-1]["committables"] if x["committed_in_snapshot"] is None]


def test_pending_restore_recommits_the_lost_checkpoints():
    exp = expected("pending")
    lost = uncommitted(exp)
    assert len(lost) >= 2 and exp["run"]["lose_from"] == lost[0]["identifier"]
    table = table_dir("pending")
    assert all((table / f).is_file() for x in lost for f in committable_files(x))
    (r,) = exp["restores"].values()
    assert r["succeeded"] and r["restored_from"].endswith("/" + exp["checkpoints"][-1]["dir"])
    by = r["snapshots_committed_by_restore"]
    assert [s["commit_identifier"] for s in by] == [x["identifier"] for x in lost]
    assert {s["commit_user"] for s in by} == {exp["checkpoints"][-1]["commit_user"]}
    assert r["committer_attempts"][0]["committed"] == len(lost)
    assert r["committer_attempts"][0]["intentional_failure"]
    assert r["committer_attempts"][1]["committed"] == 0  # after the restart: already committed, filtered
    assert r["rows_after"]["duplicate_rows"] == 0


def test_pending_cleaned_restore_fails_on_the_deleted_files():
    exp, pending = expected("pending_cleaned"), expected("pending")
    assert exp["checkpoints"] == pending["checkpoints"]
    lost_files = sorted(f for x in uncommitted(exp) for f in committable_files(x))
    assert sorted(exp["generation"]["deleted"]) == lost_files
    table = table_dir("pending_cleaned")
    assert not any((table / f).exists() for f in lost_files)
    assert set(exp["table"]["data_files_on_disk"]) == set(pending["table"]["data_files_on_disk"]) - set(
        lost_files
    )
    (r,) = exp["restores"].values()
    assert not r["succeeded"]
    assert r["exception"].startswith("Cannot recover from this checkpoint because some files in the snapshot "
                                     "that need to be resubmitted have been deleted")  # fmt: skip
    assert all(f.split("/")[-1] in r["exception"] for f in lost_files)
    assert r["snapshots_committed_by_restore"] == r["snapshots_committed_after_restore"] == []
    assert r["rows_after"] == r["rows_before"]


def test_expired_no_snapshot_of_the_commit_user_survives():
    exp = expected("expired")
    user = exp["checkpoints"][-1]["commit_user"]
    other = exp["generation"]["commit_user"]
    assert {s["commit_user"] for s in exp["table"]["snapshots"]} == {other}
    assert all(x["committed_in_snapshot"] is None for c in exp["checkpoints"] for x in c["committables"])
    (r,) = exp["restores"].values()
    first = r["committer_attempts"][0]
    # nothing of the user is left to filter against: the whole checkpoint is committed again
    assert first["restored_identifiers"] == [x["identifier"] for x in exp["checkpoints"][-1]["committables"]]
    assert first["commit_user"] == user
    if r["succeeded"]:
        assert [s["commit_identifier"] for s in r["snapshots_committed_by_restore"]] == first[
            "restored_identifiers"
        ]
    else:  # Paimon 1.0 refuses to add files the table already holds
        assert "conflicts" in r["exception"] and user in r["exception"]
        assert r["rows_after"] == r["rows_before"]


def test_rewind_duplicates_rows_and_recommits_nothing():
    exp = expected("rewind")
    (r,) = exp["restores"].values()
    oldest = exp["checkpoints"][0]
    assert r["restored_from"].endswith("/" + oldest["dir"])
    assert r["succeeded"] and r["snapshots_committed_by_restore"] == []
    assert r["committer_attempts"][0]["committed"] == 0
    again = [s["commit_identifier"] for s in r["snapshots_committed_after_restore"]]
    committed = {s["commit_identifier"] for s in exp["table"]["snapshots"]}
    assert again and set(again) <= committed and min(again) == oldest["checkpoint_id"] + 1
    before, after = r["rows_before"], r["rows_after"]
    assert before["duplicate_rows"] == 0 and after["duplicate_rows"] > 0
    assert after["distinct_ids"] >= before["distinct_ids"] and after["min_id"] == before["min_id"]
    assert after["total"] - after["distinct_ids"] == after["duplicate_rows"]
