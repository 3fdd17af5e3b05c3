"""FLINK-39964: checkpoints real Flink wrote unrestorable after a CLAIM restore from a NATIVE savepoint.

The ``claim_native`` fixtures (fixtures/generate.sh) hold, for 1.20.3 and 2.2.0, the retained
checkpoints of a job restored in CLAIM mode from a NATIVE savepoint. Flink's own reading
(fixtures/expected) says which of their shared files are relative handles: those are the files
Flink resolves under ``chk-N/`` and cannot find. Everything here is derived from that reading and
from the files Flink left on disk, never hard-coded.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from ckptctl.checkpoint.rebase import Rebase
from ckptctl.metadata import read_metadata
from ckptctl.metadata.handles import FileHandle, RelativeFileHandle
from ckptctl.metadata.transform import map_file_handles
from tests.support.fixture_cases import REPO, manifest
from tests.support.gc_support import DAY, Scenario, ckptctl

VERSIONS = ["1.20.3", "2.2.0"]
SCENARIO = "claim_native"


def entry(version: str) -> dict:
    return next(
        e for e in manifest()["entries"] if e["flink_version"] == version and e["scenario"] == SCENARIO
    )


def broken_refs(version: str) -> dict[str, list[dict]]:
    """Flink's reading: checkpoint dir (relative to the scenario root) -> its FLINK-39964 references
    (shared files of a *checkpoint* recorded as RelativeFileStateHandles)."""
    e = entry(version)
    out: dict[str, list[dict]] = {}
    for exp in sorted((REPO / e["expected_dir"]).rglob("*.json")):
        rel = exp.relative_to(REPO / e["expected_dir"]).with_suffix("").as_posix()
        if not rel.startswith("checkpoints/"):
            continue
        refs = [
            r for r in json.loads(exp.read_text())["references"]
            if r["role"] == "shared" and r["handle_type"] == "RelativeFileStateHandle"
        ]  # fmt: skip
        if refs:
            out[rel] = refs
    return out


def savepoint_file(root: Path, name: str, size: int) -> Path:
    """The file Flink's savepoint wrote under that name (with that size), found on disk."""
    hits = [p for p in (root / "savepoints").rglob(name) if p.stat().st_size == size]
    assert len(hits) == 1, (name, size, hits)
    return hits[0]


@pytest.fixture(params=VERSIONS)
def scenario(request, tmp_path: Path) -> Scenario:
    return Scenario(request.param, SCENARIO, tmp_path)


def the_broken(sc: Scenario) -> tuple[Path, list[dict]]:
    broken = broken_refs(sc.entry["flink_version"])
    assert broken, "the fixture must hold at least one FLINK-39964 checkpoint"
    rel, refs = sorted(broken.items())[0]
    return sc.root / rel, refs


def run_json(*args: str, expect: int = 0) -> dict:
    return json.loads(ckptctl(*args, "--json", expect=expect).stdout)


# ---------------------------------------------------------------------------------------------
# the fixture is what the issue describes


@pytest.mark.parametrize("version", VERSIONS)
def test_fixture_has_the_flink_39964_shape(version: str) -> None:
    """A NATIVE savepoint, a CLAIM restore from it, and retained checkpoints that name the
    savepoint's SSTs by relative name only; the files are in the savepoint directory, not in chk-N."""
    e = entry(version)
    root = REPO / e["data_dir"]
    assert [s["format"] for j in e["jobs"] for s in j.get("savepoints", [])] == ["NATIVE"]
    assert e["jobs"][1]["config"]["execution.state-recovery.claim-mode"] == "CLAIM"
    broken = broken_refs(version)
    assert broken
    for rel, refs in broken.items():
        for r in refs:
            assert not (root / rel / r["relative_path"]).exists()
            savepoint_file(root, r["relative_path"], r["size"])


# ---------------------------------------------------------------------------------------------
# diagnosis: verify and check


def test_verify_names_the_real_location_and_the_fix(scenario: Scenario) -> None:
    chk, refs = the_broken(scenario)
    for target in (str(scenario.root), str(chk)):  # a root, and the checkpoint on its own
        report = run_json("verify", "--engine", "local", target, *scenario.rebase, expect=1)
        by_path = {p["path"]: p for p in report["problems"]}
        for r in refs:
            p = by_path[f"file:{chk}/{r['relative_path']}"]
            assert p["check"] == "exists" and p["issue"] == "FLINK-39964"
            assert p["found"] == "file:" + str(savepoint_file(scenario.root, r["relative_path"], r["size"]))
            assert "CLAIM" in p["detail"] and "NATIVE" in p["detail"] and "ckptctl repair" in p["detail"]
        rep = {x["checkpoint"]: x for x in report["repairable"]}
        assert rep[f"file:{chk}"]["handles"] == rep[f"file:{chk}"]["found"] == len(refs)
        # every problem is a FLINK-39964 file (or a savepoint file Flink deleted after the CLAIM)
        assert all(p.get("issue") == "FLINK-39964" or "/savepoints/" in p["path"] for p in report["problems"])
    # on the console the repair command is given once per checkpoint, not on every file's row
    text = ckptctl("verify", "--engine", "local", str(chk), *scenario.rebase, expect=1,
                   env={"COLUMNS": "400"}).stdout  # fmt: skip
    folded = "".join(text.replace("│", "").split())  # table cells fold on a narrow terminal
    assert folded.count("ckptctlrepair") == 1, text


def test_check_diagnoses_and_a_moved_savepoint_needs_savepoints(scenario: Scenario, tmp_path: Path) -> None:
    chk, refs = the_broken(scenario)
    report = run_json("check", str(scenario.checkpoints), *scenario.rebase, expect=1)
    mine = [p for p in report["problems"] if p.get("issue") == "FLINK-39964"]
    assert {p["path"] for p in mine} == {f"file:{chk}/{r['relative_path']}" for r in refs}
    assert all(p["found"] and p["repair"].startswith("ckptctl repair ") for p in mine)
    # the savepoint moved far away: not found without --savepoints, found with it
    moved = tmp_path / "elsewhere" / "sp"
    shutil.move(str(scenario.root / "savepoints"), moved)
    report = run_json("check", str(scenario.checkpoints), *scenario.rebase, expect=1)
    mine = [p for p in report["problems"] if p.get("issue") == "FLINK-39964"]
    assert len(mine) == len(refs) and all(p["found"] is None and "--savepoints" in p["detail"] for p in mine)
    report = run_json(
        "check", str(scenario.checkpoints), "--savepoints", str(moved), *scenario.rebase, expect=1
    )
    mine = [p for p in report["problems"] if p.get("issue") == "FLINK-39964"]
    assert all(p["found"].startswith(f"file:{moved}/") for p in mine) and len(mine) == len(refs)


# ---------------------------------------------------------------------------------------------
# ls and diff: inherited files are not the checkpoint's uploads


def test_ls_and_diff_do_not_count_savepoint_files_as_uploaded(scenario: Scenario) -> None:
    chk, refs = the_broken(scenario)
    names = {r["relative_path"] for r in refs}
    rows = {r["path"]: r for r in run_json("ls", str(scenario.root), *scenario.rebase)}
    row = rows[f"file:{chk}"]
    assert row["inherited_files"] == len(names)
    assert row["inherited_bytes"] == sum({r["relative_path"]: r["size"] for r in refs}.values())
    flink = json.loads(
        (REPO / scenario.entry["expected_dir"] / chk.relative_to(scenario.root))
        .with_suffix(".json")
        .read_text()
    )
    own = {r["path"] for r in flink["references"]} - {r["path"] for r in refs}
    assert row["files"] == len(own)
    # diff from the broken checkpoint to the next one of its job: those files are neither added,
    # removed nor reused by either (they are the savepoint's)
    later = sorted(
        (p for p in chk.parent.iterdir() if p.name.startswith("chk-") and (p / "_metadata").exists()),
        key=lambda p: int(p.name[4:]),
    )
    nxt = next(p for p in later if int(p.name[4:]) > int(chk.name[4:]))
    view = run_json("diff", str(chk), str(nxt), *scenario.rebase)
    listed = {f["path"].rsplit("/", 1)[1] for k in ("added", "removed", "reused") for f in view[k]}
    assert not listed & names
    assert view["a"]["inherited"]["files"] == len(names) and view["b"]["inherited"]["files"] == 0


# ---------------------------------------------------------------------------------------------
# repair


def test_dry_run_shows_every_rewritten_handle_and_writes_nothing(scenario: Scenario, tmp_path: Path) -> None:
    chk, refs = the_broken(scenario)
    before = {p: p.stat().st_mtime_ns for p in scenario.root.rglob("*")}
    view = run_json("repair", str(chk), "--dry-run", *scenario.rebase)
    assert view["rewritten_handles"] == len(refs) and not view["unresolved"]
    got = sorted(
        (w["operator_id"], w["subtask"], w["local_name"], w["relative_path"], w["to"]["path"])
        for w in view["rewrites"]
    )
    want = sorted(
        (r["operator_id"], r["subtask"], r["local_name"], r["relative_path"],
         "file:" + str(savepoint_file(scenario.root, r["relative_path"], r["size"])))
        for r in refs
    )  # fmt: skip
    assert got == want
    assert {p: p.stat().st_mtime_ns for p in scenario.root.rglob("*")} == before
    text = ckptctl("repair", str(chk), "--dry-run", *scenario.rebase).stdout
    assert text.count("RelativeFileStateHandle") == len(refs) and "nothing written" in text


def test_repair_copy_changes_exactly_those_handles(scenario: Scenario, tmp_path: Path) -> None:
    chk, refs = the_broken(scenario)
    dest = tmp_path / "repaired"
    ckptctl("repair", str(chk), "-o", str(dest), *scenario.rebase)
    old = read_metadata((chk / "_metadata").read_bytes())
    new = read_metadata((dest / "_metadata").read_bytes())
    # model equal but for the rewritten handles: map them back and compare the whole model
    rewritten = []

    here, written = f"file:{scenario.root}", f"file:{scenario.original}"

    def back(h, where):
        if type(h) is FileHandle and "/savepoints/" in h.path:
            rewritten.append((where.operator_id, where.subtask, where.local_name))
            return RelativeFileHandle(h.path.rsplit("/", 1)[1], h.size)
        if type(h) is FileHandle and h.path.startswith(here + "/"):  # the moved root, mapped back
            return h._replace(path=written + h.path[len(here) :])
        return h

    assert map_file_handles(new, back) == old
    assert sorted(rewritten) == sorted((r["operator_id"], r["subtask"], r["local_name"]) for r in refs)
    # the checkpoint's own files are copied byte for byte; the source is untouched
    own = sorted(p.name for p in chk.iterdir() if p.name != "_metadata")
    assert sorted(p.name for p in dest.iterdir() if p.name != "_metadata") == own
    assert all((dest / n).read_bytes() == (chk / n).read_bytes() for n in own)
    assert read_metadata((chk / "_metadata").read_bytes()) == old
    # the copy is sound; a re-run is a no-op; a different checkpoint there is refused
    assert run_json("verify", "--engine", "local", str(dest), *scenario.rebase)["ok"]
    ckptctl("repair", str(chk), "-o", str(dest), *scenario.rebase)
    other = tmp_path / "other"
    other.mkdir()
    (other / "_metadata").write_bytes((chk / "_metadata").read_bytes())
    err = ckptctl("repair", str(chk), "-o", str(other), *scenario.rebase, expect=2).stderr
    assert "different _metadata" in err and "Traceback" not in err
    err = ckptctl("repair", str(chk), "-o", str(chk / "sub"), *scenario.rebase, expect=2).stderr
    assert "outside the checkpoint directory" in err
    # the same through a symlink (a red-team helper: only the strings were compared)
    (chk / "fixed").mkdir()
    (tmp_path / "fixlink").symlink_to(chk / "fixed", target_is_directory=True)
    err = ckptctl("repair", str(chk), "-o", str(tmp_path / "fixlink"), *scenario.rebase, expect=2).stderr
    assert "outside the checkpoint directory" in err and not any((chk / "fixed").iterdir())


def absolute_paths(md) -> list[str]:
    seen: list[str] = []

    def note(h, where):
        if type(h) is FileHandle:
            seen.append(h.path)
        return h

    map_file_handles(md, note)
    return seen


@pytest.mark.parametrize("explicit", [True, False], ids=["rebase", "inferred"])
def test_repair_of_a_moved_checkpoint_names_every_file_where_it_is_now(
    scenario: Scenario, tmp_path: Path, explicit: bool
) -> None:
    """Issue 22 row 2: the rewritten handles and every other shared file under one mapping; a copy
    half here and half at the written location restores only where that location still exists."""
    chk, _refs = the_broken(scenario)
    assert not Path(scenario.original).exists()  # the fixtures were written elsewhere and moved
    dest = tmp_path / "repaired"
    view = run_json("repair", str(chk), "-o", str(dest), *(scenario.rebase if explicit else ()))
    assert view["rebased_handles"] > 0 and view["missing_files"] == []
    paths = absolute_paths(read_metadata((dest / "_metadata").read_bytes()))
    assert paths and not [p for p in paths if scenario.original in p]
    assert all(Path(p.removeprefix("file:")).is_file() for p in paths)
    # the checkpoint's own relative files sit in the copy: nothing it names is outside DEST or the root
    assert all(p.startswith(f"file:{scenario.root}/") for p in paths)


def test_repair_refuses_a_copy_that_would_name_missing_files(scenario: Scenario, tmp_path: Path) -> None:
    """A shared file the checkpoint names is gone (or the move is not one inference can see): the
    repair is refused in one line naming the file and --rebase, and nothing is written."""
    chk, _refs = the_broken(scenario)
    here = [
        Path(p.removeprefix("file:").replace(scenario.original, str(scenario.root), 1))
        for p in absolute_paths(read_metadata((chk / "_metadata").read_bytes()))
        if "/shared/" in p
    ]
    victim = sorted(here)[0]
    victim.unlink()
    dest = tmp_path / "repaired"
    result = ckptctl("repair", str(chk), "-o", str(dest), *scenario.rebase, expect=2)
    err = result.stderr.strip()
    assert "--rebase" in err and victim.name in err and "Traceback" not in err and len(err.splitlines()) == 1
    assert not dest.exists()
    ckptctl("repair", str(chk), "--in-place", *scenario.rebase, expect=2)
    assert not (chk / "_metadata.pre-repair").exists()


def test_repair_in_place_keeps_a_backup(scenario: Scenario, tmp_path: Path) -> None:
    chk, _refs = the_broken(scenario)
    original = (chk / "_metadata").read_bytes()
    ckptctl("repair", str(chk), "-o", str(tmp_path / "copy"), *scenario.rebase)
    ckptctl("repair", str(chk), "--in-place", *scenario.rebase)
    assert (chk / "_metadata.pre-repair").read_bytes() == original
    assert (chk / "_metadata").read_bytes() == (tmp_path / "copy" / "_metadata").read_bytes()
    report = run_json("verify", "--engine", "local", str(chk), *scenario.rebase)
    assert report["ok"], report["problems"][:3]
    # nothing left to repair
    assert "nothing to repair" in ckptctl("repair", str(chk), "--in-place", *scenario.rebase).stderr
    assert (chk / "_metadata.pre-repair").read_bytes() == original


def test_repair_without_the_savepoint_fails_in_one_line(scenario: Scenario) -> None:
    chk, refs = the_broken(scenario)
    shutil.rmtree(scenario.root / "savepoints")
    result = ckptctl("repair", str(chk), "--in-place", *scenario.rebase, expect=1)
    assert result.stdout.count("not found") == len(refs)
    assert not (chk / "_metadata.pre-repair").exists()


def gc_options(sc: Scenario):
    """Plan the whole scenario root (checkpoints/ and savepoints/), moved from where Flink wrote it."""
    from ckptctl.gc import GcOptions

    return GcOptions(
        (str(sc.root),),
        older_than=DAY,
        margin=600.0,
        force=True,
        rebase=Rebase.of([(sc.original, str(sc.root))]),
    )


# ---------------------------------------------------------------------------------------------
# gc and FLINK-39964 checkpoints


def test_gc_keeps_the_savepoint_files_a_broken_checkpoint_needs(scenario: Scenario) -> None:
    """While a FLINK-39964 checkpoint is retained, the savepoint files it really uses are live, even
    when the savepoint's own _metadata is gone; gc points at `ckptctl repair` instead of calling
    them missing (which would invite --accept-lost)."""
    from ckptctl.gc import build_plan
    from ckptctl.storage import Storage

    chk, refs = the_broken(scenario)
    for meta in (scenario.root / "savepoints").rglob("_metadata"):
        meta.unlink()
    plan = build_plan(Storage(), gc_options(scenario))
    needed = {"file:" + str(savepoint_file(scenario.root, r["relative_path"], r["size"])) for r in refs}
    assert not plan.missing, plan.missing[:3]
    assert not any(r["code"] == "missing-live-files" for r in plan.refusals), plan.refusals
    assert not needed & {c.path for c in plan.candidates}
    assert not needed & {p.path for p in plan.protected}  # live because referenced, not merely protected
    assert any("ckptctl repair" in w for w in plan.warnings)


def test_gc_keeps_the_savepoint_files_of_a_repaired_checkpoint(scenario: Scenario) -> None:
    """After an in-place repair the savepoint files are ordinary absolute references: live."""
    from ckptctl.gc import build_plan
    from ckptctl.storage import Storage

    chk, refs = the_broken(scenario)
    ckptctl("repair", str(chk), "--in-place", *scenario.rebase)
    for meta in (scenario.root / "savepoints").rglob("_metadata"):
        meta.unlink()
    plan = build_plan(Storage(), gc_options(scenario))
    needed = {"file:" + str(savepoint_file(scenario.root, r["relative_path"], r["size"])) for r in refs}
    assert not plan.missing and not plan.refusals, (plan.missing[:3], plan.refusals)
    assert not needed & {c.path for c in plan.candidates}


# ---------------------------------------------------------------------------------------------
# proof with real Flink


@pytest.mark.flink
@pytest.mark.parametrize("version", VERSIONS)
def test_flink_fails_on_the_broken_checkpoint_and_restores_the_repaired_copy(
    version: str, tmp_path: Path, flink_sessions
) -> None:
    restore = flink_sessions.restore
    sc = Scenario(version, SCENARIO, tmp_path)
    chk, refs = the_broken(sc)
    broken = restore(version, SCENARIO, chk, timeout=60, log_out=tmp_path / "broken.log")
    assert not broken["ok"], broken
    # the Flink log names the missing file (the report's error too, should the log be lost)
    log = (tmp_path / "broken.log").read_text(errors="replace") or json.dumps(broken)
    assert (
        "FileNotFoundException" in log
        and f"{chk}/{refs[0]['relative_path']}" in log
        or any(f"{chk}/{r['relative_path']}" in log for r in refs)
    )
    dest = tmp_path / "repaired" / chk.name
    ckptctl("repair", str(chk), "-o", str(dest), *sc.rebase)
    os.rename(chk, tmp_path / "broken-original")  # the repaired copy must not need the broken dir
    fixed = restore(version, SCENARIO, dest, timeout=60, log_out=tmp_path / "repaired.log")
    assert fixed["ok"] and fixed["new_checkpoint"], fixed


def test_two_different_savepoint_files_with_the_same_name_and_size_are_never_guessed(
    scenario: Scenario, tmp_path: Path
) -> None:
    """repair took the first of several same-name, same-size savepoint files (issue 19, also seen).
    Identical copies are fine to pick from; copies whose bytes differ make the repair refuse."""
    chk, refs = the_broken(scenario)
    original = savepoint_file(scenario.root, refs[0]["relative_path"], refs[0]["size"]).parent
    twin = original.parent / "savepoint-abcdef-0123456789ab"
    shutil.copytree(original, twin)
    view = run_json("repair", str(chk), "--dry-run", *scenario.rebase)
    assert view["rewritten_handles"] == len(refs) and not view["unresolved"]  # identical copies
    victim = twin / refs[0]["relative_path"]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))  # same name, same size, other bytes
    result = ckptctl("repair", str(chk), "-o", str(tmp_path / "out"), *scenario.rebase, expect=1)
    assert "ambiguous" in result.stdout and not (tmp_path / "out").exists()
