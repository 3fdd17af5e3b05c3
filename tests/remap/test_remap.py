"""``ckptctl remap`` on snapshots real Flink wrote: state (coordinator state included) moves to the new
ids, the result is what preflight passes against NEW's staging savepoint, and -- for the pairs of
``fixtures/upgrades/remap/`` -- the very bytes a real restore of NEW's job accepted without
``--allowNonRestoredState`` (fixtures/upgrades/remap/generate.py). Refusals are one line, exit 2,
and nothing is written; SNAPSHOT is never touched."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from ckptctl.checkpoint.rebase import Rebase
from ckptctl.checkpoint.targets import one_checkpoint
from ckptctl.metadata import read_metadata
from ckptctl.preflight import run_preflight
from ckptctl.preflight.uidhash import operator_id_of_uid
from ckptctl.storage import Storage, StorageOptions
from tests.support.cli_runner import cli, one_line_error
from tests.support.fixture_cases import FIXTURES

UPGRADES = FIXTURES / "upgrades"
REMAPPED = UPGRADES / "remap"


def _pair(case: str, flink: str = "2.3.0") -> tuple[Path, Path]:
    [old] = (UPGRADES / "data" / flink / case / "old").iterdir()
    [new] = (UPGRADES / "data" / flink / case / "new").iterdir()
    return old, new


def _md(d: Path):
    return read_metadata((d / "_metadata").read_bytes(), path=str(d))


def _verdict(old: Path, new: Path, flink: str = "2.3.0") -> str:
    storage = Storage(StorageOptions.from_env(None))
    report = run_preflight(
        storage, one_checkpoint(storage, str(old), Rebase()), one_checkpoint(storage, str(new), Rebase()),
        target_flink=flink,
    )  # fmt: skip
    return report.to_json()["verdict"]


def _tree(d: Path) -> dict[str, str]:
    return {
        str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(d.rglob("*"))
        if p.is_file()
    }


def remap(*args: str):
    return cli("remap", *args)


def test_a_renamed_uid_restores_after_remap(tmp_path: Path) -> None:
    """The labelled pair uid_renamed (Flink refused it) passes preflight once the state moved, and the
    moved operator holds exactly the bytes the old id held."""
    old, new = _pair("uid_renamed")
    assert _verdict(old, new) == "fails"
    before = _tree(old)
    dest = tmp_path / "remapped"
    r = remap(str(old), "-o", str(dest), "--uid", "stateful=stateful-v2", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["metadata_sha256"] == hashlib.sha256((dest / "_metadata").read_bytes()).hexdigest()
    assert _verdict(dest, new) == "restores"
    assert _tree(old) == before  # SNAPSHOT untouched
    was = {op.operator_id: op for op in _md(old).operators}
    now = {op.operator_id: op for op in _md(dest).operators}
    moved = now[operator_id_of_uid("stateful-v2")]
    assert moved.uid == "stateful-v2"
    assert moved.subtasks == was[operator_id_of_uid("stateful")].subtasks
    assert operator_id_of_uid("stateful") not in now
    assert set(now) - {moved.operator_id} == set(was) - {operator_id_of_uid("stateful")}


def test_coordinator_state_moves_with_the_operator(tmp_path: Path) -> None:
    """The source's enumerator state (coordinator state) moves with its split state, not left behind
    (FLINK-40837: changeOperatorIdentifier drops it, and the source starts again)."""
    old, _new = _pair("control")
    src = {op.operator_id: op for op in _md(old).operators}[operator_id_of_uid("src")]
    assert src.coordinator_state is not None and src.coordinator_state.state_size > 0
    dest = tmp_path / "r"
    r = remap(str(old), "-o", str(dest), "--uid", f"{src.operator_id}=src-v2")  # by id, to a uid
    assert r.exit_code == 0, r.output
    now = {op.operator_id: op for op in _md(dest).operators}
    moved = now[operator_id_of_uid("src-v2")]
    assert moved.coordinator_state == src.coordinator_state
    assert moved.subtasks == src.subtasks
    assert src.operator_id not in now


def test_the_same_input_gives_the_same_bytes_wherever_it_is_written(tmp_path: Path) -> None:
    old, _ = _pair("uid_renamed")
    for d in ("a", "b/c"):
        assert remap(str(old), "-o", str(tmp_path / d), "--uid", "stateful=stateful-v2").exit_code == 0
    assert (tmp_path / "a" / "_metadata").read_bytes() == (tmp_path / "b" / "c" / "_metadata").read_bytes()
    again = remap(str(old), "-o", str(tmp_path / "a"), "--uid", "stateful=stateful-v2")
    assert again.exit_code == 0, again.output  # the same _metadata there: a finished earlier run


def test_drop_is_an_explicit_allow_non_restored_state(tmp_path: Path) -> None:
    """stateful_op_removed: Flink refused it without -n; with the removed operator's state dropped by
    remap, preflight passes it without -n, and the drop is reported."""
    old, new = _pair("stateful_op_removed")
    assert _verdict(old, new) == "fails"
    dest = tmp_path / "r"
    r = remap(str(old), "-o", str(dest), "--drop", "second", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert [d["uid"] for d in out["dropped"]] == ["second"]
    assert out["dropped"][0]["subtasks_with_keyed_state"] == 2
    assert operator_id_of_uid("second") not in {op.operator_id for op in _md(dest).operators}
    assert _verdict(dest, new) == "restores"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--uid", "nope=stateful-v2"], "is not an operator of the snapshot"),
        (["--uid", "stateful=src"], "already holds state in the snapshot"),
        (["--uid", "stateful=x", "--uid", "throttle=x"], "two operators onto one"),
        (["--uid", "stateful=a", "--drop", "stateful"], "named twice"),
        (["--drop", "00000000000000000000000000000000"], "is not an operator of the snapshot"),
        (["--uid", "a=b=c"], "expected OLD=NEW"),
        ([], "nothing to do"),
    ],
)
def test_refusals_are_one_line_and_write_nothing(tmp_path: Path, args: list[str], says: str) -> None:
    old, _ = _pair("uid_renamed")
    dest = tmp_path / "r"
    line = one_line_error(remap(str(old), "-o", str(dest), *args))
    assert says in line
    assert not dest.exists()


def test_a_new_id_holding_state_may_be_freed_by_moving_it_away(tmp_path: Path) -> None:
    """A swap: each target holds state, but that state leaves too."""
    old, _ = _pair("uid_renamed")
    r = remap(str(old), "-o", str(tmp_path / "r"), "--uid", "stateful=src", "--uid", "src=stateful")
    assert r.exit_code == 0, r.output
    was = {op.operator_id: op for op in _md(old).operators}
    now = {op.operator_id: op for op in _md(tmp_path / "r").operators}
    assert now[operator_id_of_uid("src")].subtasks == was[operator_id_of_uid("stateful")].subtasks
    assert (
        now[operator_id_of_uid("stateful")].coordinator_state
        == was[operator_id_of_uid("src")].coordinator_state
    )


def test_by_name_proposes_and_refuses_without_a_person(tmp_path: Path) -> None:
    old, new = _pair("uid_renamed")
    for extra in ([], ["--yes"]):
        r = remap(str(old), "-o", str(tmp_path / "r"), "--by-name", "--against", str(new), *extra)
        assert r.exit_code == 2, r.output
        assert "--uid stateful=stateful-v2" in r.stdout
        assert "refusing to remap by name" in r.stderr
        assert not (tmp_path / "r").exists()


def _remap_pairs() -> list[dict]:
    m = REMAPPED / "manifest.json"
    return json.loads(m.read_text())["pairs"] if m.is_file() else []


@pytest.mark.skipif(not _remap_pairs(), reason="no remapped pairs in fixtures/upgrades/remap")
@pytest.mark.parametrize("pair", _remap_pairs(), ids=lambda p: p["id"])
def test_remap_reproduces_the_bytes_a_real_restore_accepted(tmp_path: Path, pair: dict) -> None:
    """The label: NEW's job restored from the remapped snapshot in real Flink without -n, every key read
    back (and, for the source, no record emitted twice). ckptctl writes those same bytes today, and
    preflight passes them."""
    assert pair["label"]["outcome"] == "restored", pair["label"]
    old, new = REMAPPED / pair["old"], REMAPPED / pair["new"]
    assert _verdict(old, new, pair["flink"]) == "fails"
    dest = tmp_path / "r"
    r = remap(str(old), "-o", str(dest), *pair["remap_args"])
    assert r.exit_code == 0, r.output
    assert hashlib.sha256((dest / "_metadata").read_bytes()).hexdigest() == pair["remapped_metadata_sha256"]
    assert _tree(dest) == _tree(REMAPPED / pair["remapped"])  # the relative files copied as well
    assert _verdict(dest, new, pair["flink"]) == "restores"
    control = pair.get("control_without_remap")
    if control is not None:  # the check that no record came twice can fail: it did without the remap
        assert control["label"]["outcome"] == "failed"
        assert control["label"]["root_cause_class"] == "UpgradeJob$ReEmitted"


FILE_SOURCE = [p for p in _remap_pairs() if p["case"] == "file_src_renamed"]


@pytest.mark.skipif(not FILE_SOURCE, reason="no file_src_renamed pairs in fixtures/upgrades/remap")
@pytest.mark.parametrize("pair", FILE_SOURCE, ids=lambda p: p["id"])
def test_a_file_sources_enumerator_state_is_what_keeps_it_from_reading_again(pair: dict) -> None:
    """FLINK-40837 as real Flink shows it: the remapped snapshot without the source's coordinator state
    (what changeOperatorIdentifier leaves) makes the continuous FileSource read files again; remap's own
    snapshot, coordinator state moved byte for byte, restored with every record read once."""
    src_old, src_new = operator_id_of_uid("src"), operator_id_of_uid("src-v2")
    was = {op.operator_id: op for op in _md(REMAPPED / pair["old"]).operators}[src_old]
    now = {op.operator_id: op for op in _md(REMAPPED / pair["remapped"]).operators}[src_new]
    assert was.coordinator_state is not None and now.coordinator_state == was.coordinator_state
    assert pair["label"]["outcome"] == "restored"
    dropped = pair["control_coordinator_state_dropped"]["label"]
    assert (dropped["outcome"], dropped["root_cause_class"]) == ("failed", "UpgradeJob$ReEmitted")


def test_by_name_applies_the_proposal_a_person_accepts(tmp_path: Path, monkeypatch) -> None:
    """At a terminal, a yes to the proposal writes what the same pairs given as --uid write."""
    from ckptctl.cli.terminal import Terminal

    asked = []
    monkeypatch.setattr(Terminal, "confirm", lambda self, q, no_terminal: asked.append(q) or True)
    old, new = _pair("uid_renamed")
    r = remap(str(old), "-o", str(tmp_path / "a"), "--by-name", "--against", str(new))
    assert r.exit_code == 0, r.output
    assert asked == ["move the state of 1 operator(s) as proposed?"]
    assert remap(str(old), "-o", str(tmp_path / "b"), "--uid", "stateful=stateful-v2").exit_code == 0
    assert (tmp_path / "a" / "_metadata").read_bytes() == (tmp_path / "b" / "_metadata").read_bytes()


@pytest.mark.skipif(not _remap_pairs(), reason="no remapped pairs in fixtures/upgrades/remap")
def test_on_s3_the_same_bytes_and_the_relative_files_copied(s3_server) -> None:
    """A savepoint on S3 remapped to another S3 prefix: the _metadata a real restore accepted, and the
    savepoint's relative files next to it."""
    pair = next(p for p in _remap_pairs() if p["case"] == "src_renamed")
    old = REMAPPED / pair["old"]
    s3_server.create_bucket("remap")
    fs = s3_server.filesystem()
    for f in old.iterdir():
        fs.pipe_file(f"remap/sp/{f.name}", f.read_bytes())
    r = remap(
        "s3://remap/sp", "-o", "s3://remap/out", *pair["remap_args"], "--s3-endpoint", s3_server.endpoint
    )
    assert r.exit_code == 0, r.output
    assert hashlib.sha256(fs.cat_file("remap/out/_metadata")).hexdigest() == pair["remapped_metadata_sha256"]
    copied = {p.rsplit("/", 1)[1] for p in fs.find("remap/out")} - {"_metadata"}
    assert copied and copied == set(_tree(REMAPPED / pair["remapped"])) - {"_metadata"}
