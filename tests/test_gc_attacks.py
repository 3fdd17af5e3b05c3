"""The attack catalogue of issue 9 (local storage): one test per row of the issue's table.

Every scenario is a private copy of a real Flink fixture. Hostile ``_metadata`` is never hand-made
bytes: a real file is decoded with ckptctl's reader, path fields of real handles are changed in the
typed model, and it is re-encoded with ckptctl's writer. Assertions are outcomes (a file still
exists after apply, a path is not a candidate, exit codes, refusal codes), never prose.
The S3 rows (2, 9, 10, 15) are in ``test_gc_attacks_s3.py``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ckptctl.metadata import read_metadata, write_metadata
from ckptctl.metadata.model import RelativeFileHandle
from tests.support.fixture_cases import REPO, manifest
from tests.support.gc_support import DAY, T0, Scenario, ckptctl, plan_json

OLD = ["--older-than", "1d", "--margin", "10m"]


# ---------------------------------------------------------------------------------------------
# helpers


def codes(plan: dict) -> set[str]:
    """The refusal codes of a plan (a prose refusal of the old format shows up as itself)."""
    return {r.get("code") if isinstance(r, dict) else f"<no code: {r}>" for r in plan.get("refusals", [])}


def candidates(plan: dict) -> set[str]:
    return {c["path"] for c in plan["candidates"]}


def protected(plan: dict) -> dict[str, str]:
    return {p["path"]: p["reason"] for p in plan["protected"]}


def snapshot(*dirs: Path) -> dict[str, str]:
    """Every regular file below ``dirs`` with the digest of its content."""
    out = {}
    for d in dirs:
        for p in sorted(d.rglob("*")):
            if p.is_file() and not p.is_symlink():
                out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def rewrite(obj, fn: Callable):
    """Rebuild a metadata model, replacing every handle ``fn`` returns a substitute for (non-None)."""
    if not isinstance(obj, tuple):
        return obj
    if hasattr(obj, "_fields"):
        new = fn(obj)
        if new is not None:
            return new
        return obj._make(rewrite(x, fn) for x in obj)
    return tuple(rewrite(x, fn) for x in obj)


def edit_metadata(meta: Path, fn: Callable) -> None:
    """Decode a real ``_metadata``, change handles in the typed model, write it back (mtime kept)."""
    st = meta.stat()
    md = read_metadata(meta.read_bytes(), str(meta))
    meta.write_bytes(write_metadata(rewrite(md, fn)))
    os.utime(meta, (st.st_atime, st.st_mtime))


def first_relative_handle(meta: Path) -> RelativeFileHandle:
    md = read_metadata(meta.read_bytes(), str(meta))
    found: list = []

    def look(h):
        if type(h) is RelativeFileHandle and not found:
            found.append(h)
        return None

    rewrite(md, look)
    assert found, f"{meta} has no relative handle"
    return found[0]


def plan_to_file(tmp_path: Path, *args: str, expect: int | None = 0, name: str = "plan.json") -> Path:
    plan_file = tmp_path / name
    ckptctl("gc", "plan", *args, "-o", str(plan_file), expect=expect)
    return plan_file


def apply(plan_file: Path, *extra: str, expect: int | None = 0):
    return ckptctl("gc", "apply", str(plan_file), "--yes", *extra, expect=expect)


def edit_plan(plan_file: Path, fn: Callable[[dict], None]) -> None:
    data = json.loads(plan_file.read_text())
    fn(data)
    plan_file.write_text(json.dumps(data))  # allow_nan: NaN/Infinity are written as JSON extensions


def set_key(data, key: str, value) -> int:
    """Set every ``key`` anywhere in a (nested) plan to ``value``; how many were set."""
    n = 0
    if isinstance(data, dict):
        for k in list(data):
            if k == key:
                data[k] = value
                n += 1
            else:
                n += set_key(data[k], key, value)
    elif isinstance(data, list):
        for x in data:
            n += set_key(x, key, value)
    return n


# ---------------------------------------------------------------------------------------------
# row 1: relative handles that leave their checkpoint directory

J1, J2 = "528f933aefa1a487b873051dd9e69125", "73df6542b9b39ec7f7446cce40df696a"  # 1.20.3 claim


@pytest.mark.parametrize(
    ("job", "chk", "relative", "target"),
    [
        (J1, "chk-8", "../shared/{name}", f"{J1}/shared/{{name}}"),
        (J2, "chk-13", f"../../{J1}/shared/{{name}}", f"{J1}/shared/{{name}}"),
        (J1, "chk-8", "../chk-10/{name}", f"{J1}/chk-10/{{name}}"),
    ],
    ids=["own-shared", "other-job-shared", "incomplete-chk-dir"],
)
def test_row01_relative_handle_leaving_its_checkpoint_dir_stays_live(
    tmp_path: Path, job: str, chk: str, relative: str, target: str
) -> None:
    """A relative handle ``../shared/x`` of chk-N is the live file <job>/shared/x (Flink Path
    semantics); also ``../../<other job>/shared/x`` and ``../chk-10/x`` (an incomplete checkpoint)."""
    sc = Scenario("1.20.3", "claim", tmp_path)
    meta = sc.checkpoints / job / chk / "_metadata"
    victim = first_relative_handle(meta)
    name = victim.relative_path
    hostile = relative.format(name=name)
    referenced = sc.checkpoints / target.format(name=name)
    referenced.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(meta.parent / name, referenced)  # the file the hostile path resolves to exists
    os.utime(referenced, (T0, T0))
    edit_metadata(meta, lambda h: h._replace(relative_path=hostile) if h == victim else None)

    args = (str(sc.checkpoints), *sc.rebase, *OLD, "--force")
    plan = plan_json(*args)
    assert not plan["blocked"] and not codes(plan)
    assert sc.uri(referenced) not in candidates(plan)
    assert sc.uri(referenced) not in {m["path"] for m in plan["missing"]}
    apply(plan_to_file(tmp_path, *args))
    assert referenced.exists(), f"the file {hostile} of {chk} resolves to was deleted"
    for uri in sc.referenced_by_flink():  # every other file Flink read in the fixture survives too
        assert Path(uri[5:]).exists(), uri


# ---------------------------------------------------------------------------------------------
# row 3: a renamed job directory with a --rebase naming the old basename


def add_job(sc: Scenario, version: str, scenario: str) -> tuple[Path, list[str]]:
    """Copy the (single) job of another fixture into ``sc``'s checkpoint root; its --rebase."""
    entry = next(
        e for e in manifest()["entries"] if e["flink_version"] == version and e["scenario"] == scenario
    )
    (job_id,) = entry["job_ids"]
    dst = sc.checkpoints / job_id
    shutil.copytree(REPO / entry["data_dir"] / "checkpoints" / job_id, dst)
    for p in dst.rglob("*"):
        if p.is_file():
            t = T0 + 3600 if p.name == "_metadata" else T0
            os.utime(p, (t, t))
    return dst, ["--rebase", f"{entry['original_root']}/checkpoints/{job_id}={dst}"]


def test_row03_renamed_job_dir_with_wrong_rebase_blocks_on_missing_live_files(tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    (renamed_from,) = sc.jobs()
    healthy, healthy_rebase = add_job(sc, "1.20.3", "basic")
    healthy2, healthy2_rebase = add_job(sc, "1.20.3", "unaligned")
    renamed = renamed_from.with_name(renamed_from.name[::-1])  # still a 32-hex job id
    renamed_from.rename(renamed)
    # the operator maps the written root onto this root: every path keeps the OLD job basename
    args = [str(sc.checkpoints), *sc.rebase, *healthy_rebase, *healthy2_rebase, *OLD]
    retained = {sc.uri(m.parent) for m in renamed.glob("chk-*/_metadata")}

    # preconditions of the story: the job's shared files are most of the job, but the
    # healthy jobs keep the global share under the default 50 % cap
    job_files = [p for p in renamed.rglob("*") if p.is_file()]
    shared = [p for p in job_files if "shared" in p.relative_to(renamed).parts]
    total = [p for p in sc.checkpoints.rglob("*") if p.is_file()]
    assert len(shared) / len(job_files) > 0.5 and len(shared) / len(total) < 0.5

    plan = plan_json(*args, expect=1)
    assert plan["blocked"] and "missing-live-files" in codes(plan)
    assert {c for m in plan["missing"] for c in m["checkpoints"]} == retained
    before = snapshot(sc.root)
    apply(plan_to_file(tmp_path, *args, expect=1), expect=1)
    assert snapshot(sc.root) == before, "a blocked plan deletes nothing"

    # accepting the loss of every such checkpoint lifts that refusal, but the per-job cap still
    # fires: this job still has retained checkpoints and would lose most of its files
    accept = [a for uri in sorted(retained) for a in ("--accept-lost", uri[5:])]
    plan = plan_json(*args, *accept, expect=1)
    assert "missing-live-files" not in codes(plan) and "delete-fraction" in codes(plan)
    assert snapshot(sc.root) == before


# ---------------------------------------------------------------------------------------------
# row 4: overlapping scopes


@pytest.mark.parametrize(
    "layout", ["changelog-dir-is-root", "changelog-dir-contains-savepoints", "savepoints-contain-root"]
)
def test_row04_overlapping_scopes_block(tmp_path: Path, layout: str) -> None:
    sc = Scenario("2.2.0", "savepoints", tmp_path)
    savepoints = sc.root / "savepoints"
    assert any(savepoints.rglob("_metadata"))
    root = str(sc.checkpoints)
    extra = {
        "changelog-dir-is-root": ["--changelog-dir", root],
        "changelog-dir-contains-savepoints": [
            "--savepoints",
            str(savepoints),
            "--changelog-dir",
            str(sc.root),
        ],
        "savepoints-contain-root": ["--savepoints", str(sc.root)],
    }[layout]
    args = [root, *extra, *sc.rebase, *OLD, "--force"]
    before = snapshot(sc.root)
    plan = plan_json(*args, expect=1)
    assert plan["blocked"] and "overlapping-scopes" in codes(plan)
    result = apply(plan_to_file(tmp_path, *args, expect=1), expect=None)
    assert result.exit_code != 0
    assert snapshot(sc.root) == before, "_metadata, SSTs and savepoints all stay"


@pytest.mark.parametrize("where", ["contains-root", "inside-savepoints", "inside-changelog-dir"])
def test_row04_trash_overlapping_a_scope_moves_nothing(tmp_path: Path, where: str) -> None:
    """--trash inside any scope (root, --savepoints, --changelog-dir) or containing one."""
    sc = Scenario("2.2.0", "savepoints", tmp_path)
    orphan = sc.plant(f"checkpoints/{sc.jobs()[0].name}/shared/orphan")
    changelog = sc.plant("dstl/young-changelog-file", mtime=time.time() - 60).parent
    args = [
        str(sc.checkpoints),
        "--savepoints",
        str(sc.root / "savepoints"),
        "--changelog-dir",
        str(changelog),
    ]
    plan_file = plan_to_file(tmp_path, *args, *sc.rebase, *OLD, "--force")
    trash = {
        "contains-root": sc.root,
        "inside-savepoints": sc.root / "savepoints" / "trash",
        "inside-changelog-dir": changelog / "trash",
    }[where]
    before = snapshot(sc.root)
    result = apply(plan_file, "--trash", str(trash), expect=None)
    assert result.exit_code in (1, 2)
    assert orphan.exists() and snapshot(sc.root) == before


# ---------------------------------------------------------------------------------------------
# row 5: shared/ swapped for a symlink to an outside directory while apply runs


def test_row05_symlink_swapped_in_during_apply_never_deletes_outside(tmp_path: Path) -> None:
    from ckptctl.gc import apply_plan, revalidate
    from ckptctl.storage import Storage

    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0]
    orphans = [sc.plant(f"checkpoints/{job.name}/shared/orphan-{i:02d}") for i in range(20)]
    storage = Storage()
    plan_data = json.loads(
        plan_to_file(tmp_path, str(sc.checkpoints), *sc.rebase, *OLD, "--force").read_text()
    )
    assert {sc.uri(o) for o in orphans} <= candidates(plan_data)

    outside = tmp_path / "outside"
    outside.mkdir()
    for o in orphans:
        (outside / o.name).write_bytes(b"not ours " + o.name.encode())
    outside_before = snapshot(outside)
    swapped = []

    def swap(_n: int) -> None:
        if not swapped:
            (job / "shared").rename(job / "shared.moved-away")
            (job / "shared").symlink_to(outside, target_is_directory=True)
            swapped.append(True)

    fresh, go, skipped = revalidate(storage, plan_data)
    assert len(go) >= len(orphans)
    result = apply_plan(storage, fresh, go, skipped, manifest=None, batch_size=1, on_batch=swap)
    assert swapped
    assert snapshot(outside) == outside_before, "files outside the root were deleted through the link"
    via_link = {sc.uri(job / "shared" / o.name) for o in orphans}
    deleted = {d.path for d in result.deleted}
    assert len(deleted & via_link) <= 1, "only the batch before the swap may be deleted"


# ---------------------------------------------------------------------------------------------
# row 6: --trash for two roots whose files share relative names


def test_row06_trash_keeps_root_qualified_paths_and_never_overwrites(tmp_path: Path) -> None:
    a = Scenario("2.2.0", "basic", tmp_path / "a")
    b = Scenario("1.20.3", "basic", tmp_path / "b")
    assert a.checkpoints.name == b.checkpoints.name
    dead = "ab" * 16  # the same relative names below both roots
    planted = {}
    for sc in (a, b):
        (sc.checkpoints / dead / "chk-3").mkdir(parents=True)  # Flink evidence: a dead job's checkpoint dir
        for i in range(7):
            p = sc.plant(f"checkpoints/{dead}/shared/orphan-{i}")
            planted[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    args = [str(a.checkpoints), str(b.checkpoints), *a.rebase, *b.rebase, *OLD, "--force", "--collect-dead-jobs"]
    plan = plan_json(*args)
    assert {"file:" + p for p in planted} <= candidates(plan)
    expected = {c["path"]: c for c in plan["candidates"]}
    contents = {p: hashlib.sha256(Path(p[5:]).read_bytes()).hexdigest() for p in expected}
    trash = tmp_path / "trash"
    apply(plan_to_file(tmp_path, *args), "--trash", str(trash))
    in_trash = snapshot(trash)
    assert len(in_trash) == len(expected)
    assert sorted(in_trash.values()) == sorted(contents.values())
    for path in expected:  # root-qualified: the trash path still says which root it came from
        root = a.checkpoints if path.startswith(a.uri(a.checkpoints) + "/") else b.checkpoints
        rel = path[len("file:" + str(root)) + 1 :]
        assert any(t.endswith("/" + rel) and str(root.parent.name) in t for t in in_trash), path

    # a second round with the same names and the same trash: nothing in the trash is overwritten
    for sc in (a, b):
        for i in range(7):
            sc.plant(f"checkpoints/{dead}/shared/orphan-{i}")
    round2 = snapshot(a.checkpoints / dead, b.checkpoints / dead)
    result = apply(plan_to_file(tmp_path, *args, name="plan2.json"), "--trash", str(trash), expect=None)
    after = snapshot(trash)
    assert set(in_trash.items()) <= set(after.items()), "a trash file was overwritten"
    left = snapshot(a.checkpoints / dead, b.checkpoints / dead)
    assert sorted([*after.values(), *left.values()]) == sorted([*in_trash.values(), *round2.values()])
    assert result.exit_code in (0, 1)


# ---------------------------------------------------------------------------------------------
# row 7: non-finite numbers in a plan file


@pytest.mark.parametrize(
    "edit",
    [{"older_than": math.nan, "margin": math.nan}, {"margin": math.nan}, {"older_than": math.inf}],
    ids=["nan-both", "margin-nan", "older-than-infinity"],
)
def test_row07_non_finite_numbers_in_plan_are_rejected(tmp_path: Path, edit: dict) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0].name
    sc.plant(f"checkpoints/{job}/shared/old-orphan")
    young = sc.plant(f"checkpoints/{job}/shared/one-minute-old", mtime=time.time() - 60)
    plan_file = plan_to_file(tmp_path, str(sc.checkpoints), *sc.rebase, *OLD, "--force")

    def poison(data: dict) -> None:
        for key, value in edit.items():
            assert set_key(data, key, value) >= 1, key

    edit_plan(plan_file, poison)
    before = snapshot(sc.root)
    result = apply(plan_file, expect=2)
    assert "not a valid plan" in result.stderr and "Traceback" not in result.stderr
    assert young.exists() and snapshot(sc.root) == before


# ---------------------------------------------------------------------------------------------
# row 8: future mtimes on _metadata and live files


@pytest.mark.parametrize("which", ["newest-metadata", "live-file"])
def test_row08_future_mtime_on_metadata_or_live_file_blocks(tmp_path: Path, which: str) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0]
    # an in-flight checkpoint: written after the newest _metadata (T0 + 1h), older than --older-than
    inflight = [sc.plant(f"checkpoints/{job.name}/chk-1000/{n}", mtime=T0 + 2 * 3600) for n in "ab"]
    if which == "newest-metadata":
        target = max(job.glob("chk-*/_metadata"), key=lambda m: int(m.parent.name[4:]))
    else:
        target = Path(sorted(sc.referenced_by_flink())[0][5:])
        assert target.name != "_metadata"
    future = time.time() + 2 * DAY
    os.utime(target, (future, future))
    args = [str(sc.checkpoints), *sc.rebase, *OLD, "--force"]
    plan = plan_json(*args, expect=1)
    assert plan["blocked"] and "future-mtime" in codes(plan)
    assert not {sc.uri(p) for p in inflight} & candidates(plan)
    before = snapshot(sc.root)
    apply(plan_to_file(tmp_path, *args, expect=1), expect=1)
    assert snapshot(sc.root) == before


# ---------------------------------------------------------------------------------------------
# row 11: --keep-last deletes a checkpoint as a unit


def test_row11_expired_checkpoint_with_protected_metadata_keeps_all_its_files(tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0]
    chks = sorted(job.glob("chk-*/_metadata"), key=lambda m: int(m.parent.name[4:]))
    assert len(chks) >= 3
    young_meta = chks[-2]  # expired by --keep-last 1, but its _metadata is too young to delete
    young = time.time() - 60
    os.utime(young_meta, (young, young))
    gone_meta = chks[0]  # expired, and its _metadata predates the newest one by more than --margin
    os.utime(gone_meta, (T0 + 600, T0 + 600))
    exp = json.loads(
        (REPO / sc.entry["expected_dir"] / young_meta.parent.relative_to(sc.root))
        .with_suffix(".json")
        .read_text()
    )
    its_files = {
        "file:" + str(sc.root) + r["path"].removeprefix("file:")[len(sc.original) :]
        for r in exp["references"]
    }
    assert its_files
    args = [str(sc.checkpoints), *sc.rebase, *OLD, "--keep-last", "1", "--force"]
    plan = plan_json(*args)
    assert not its_files & candidates(plan), "an expired checkpoint whose _metadata stays keeps its files"
    assert sc.uri(young_meta) not in candidates(plan)
    # the other expired checkpoint goes as a unit, _metadata included
    assert sc.uri(gone_meta) in candidates(plan)
    apply(plan_to_file(tmp_path, *args))
    for uri in its_files:
        assert Path(uri[5:]).exists(), uri
    assert not gone_meta.exists()
    ckptctl("check", str(sc.checkpoints), *sc.rebase)  # every remaining _metadata resolves


# ---------------------------------------------------------------------------------------------
# row 12: files outside the Flink directory grammar


def test_row12_non_flink_files_are_never_candidates(tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0].name
    outsiders = [
        sc.plant("checkpoints/team/shared/report.csv"),
        sc.plant("checkpoints/docs/chk-1/notes.txt"),
        sc.plant(f"checkpoints/{job}/notes/shared/x"),
        sc.plant(f"checkpoints/{job.upper()}/shared/x"),  # not a (lowercase) job id
    ]
    orphan = sc.plant(f"checkpoints/{job}/shared/real-orphan")
    args = [str(sc.checkpoints), *sc.rebase, *OLD, "--force"]
    plan = plan_json(*args)
    kept = protected(plan)
    for p in outsiders:
        assert sc.uri(p) not in candidates(plan)
        assert kept.get(sc.uri(p)) == "not-flink-file", p
    assert sc.uri(orphan) in candidates(plan)
    apply(plan_to_file(tmp_path, *args))
    assert all(p.exists() for p in outsiders) and not orphan.exists()


# ---------------------------------------------------------------------------------------------
# row 13: malformed and blocked plans


@pytest.mark.parametrize(
    "damage", ["no-candidates", "candidates-object", "candidates-entry-string", "format-unknown"]
)
def test_row13_malformed_plan_exits_2(tmp_path: Path, damage: str) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    sc.plant(f"checkpoints/{sc.jobs()[0].name}/shared/orphan")
    plan_file = plan_to_file(tmp_path, str(sc.checkpoints), *sc.rebase, *OLD, "--force")

    def damage_it(data: dict) -> None:
        if damage == "no-candidates":
            del data["candidates"]
        elif damage == "candidates-object":
            data["candidates"] = {c["path"]: c for c in data["candidates"]}
        elif damage == "candidates-entry-string":
            data["candidates"] = [c["path"] for c in data["candidates"]]
        else:
            data["format"] = 99

    edit_plan(plan_file, damage_it)
    before = snapshot(sc.root)
    result = apply(plan_file, expect=2)
    assert "not a valid plan" in result.stderr and "Traceback" not in result.stderr
    assert snapshot(sc.root) == before


def test_row13_blocked_plan_is_never_applied(tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0].name
    orphans = [sc.plant(f"checkpoints/{job}/shared/orphan-{i}") for i in range(3)]
    skewed = sc.plant(f"checkpoints/{job}/shared/from-the-future", mtime=time.time() + 30 * DAY)
    plan_file = plan_to_file(tmp_path, str(sc.checkpoints), *sc.rebase, *OLD, "--force", expect=1)
    assert json.loads(plan_file.read_text())["blocked"] is True
    os.utime(skewed, (T0, T0))  # the condition clears; the plan stays blocked
    before = snapshot(sc.root)
    apply(plan_file, expect=1)
    assert all(o.exists() for o in orphans) and snapshot(sc.root) == before


# ---------------------------------------------------------------------------------------------
# row 14: a stray _metadata inside shared/


def test_row14_stray_metadata_in_shared_is_just_a_file(tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0]
    stray = job / "shared" / "_metadata"
    shutil.copy2(next(job.glob("chk-*/_metadata")), stray)
    os.utime(stray, (T0 - 3600, T0 - 3600))
    args = [str(sc.checkpoints), *sc.rebase, *OLD, "--force"]
    plan = plan_json(*args)
    assert not plan["blocked"] and not codes(plan)
    # Flink never writes a _metadata into shared/: not a Flink file, so kept and said why
    assert sc.uri(stray) not in candidates(plan)
    assert protected(plan).get(sc.uri(stray)) == "not-flink-file"
    apply(plan_to_file(tmp_path, *args))
    assert stray.exists()
    for uri in sc.referenced_by_flink():
        assert Path(uri[5:]).exists(), uri


# ---------------------------------------------------------------------------------------------
# row 16: a plan whose roots are not a list of strings


@pytest.mark.parametrize("roots", ["ck", ["{root}", 5], [["{root}"]], None])
def test_row16_plan_roots_must_be_a_list_of_strings(tmp_path: Path, monkeypatch, roots) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    sc.plant(f"checkpoints/{sc.jobs()[0].name}/shared/orphan")
    plan_file = plan_to_file(tmp_path, str(sc.checkpoints), *sc.rebase, *OLD, "--force")
    # a string would be iterated character by character: run where those characters name nothing
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    value = json.loads(json.dumps(roots).replace("{root}", str(sc.checkpoints)))
    edit_plan(plan_file, lambda data: set_key(data, "roots", value))
    before = snapshot(sc.root)
    result = apply(plan_file, expect=2)
    assert "not a valid plan" in result.stderr and "Traceback" not in result.stderr
    assert snapshot(sc.root) == before


# ---------------------------------------------------------------------------------------------
# row 17: the old job of a CLAIM restore whose new job writes to another root


@pytest.mark.parametrize("version", ["1.20.3", "2.2.0"])
def test_row17_claim_old_job_alone_is_listed_dead_and_both_roots_keep_borrowed_files(
    tmp_path: Path, version: str
) -> None:
    """Job 2 was restored from job 1 in CLAIM mode and its checkpoints borrow job 1's SSTs.
    Job 2 now lives in another root. Job 1 keeps none of its own checkpoints (as with
    num-retained 1: its last one was claimed and later subsumed by job 2)."""
    sc = Scenario(version, "claim", tmp_path)
    job1_id, job2_id = sc.entry["job_ids"]
    assert sc.entry["jobs"][1]["restored_from"].startswith(f"{sc.original}/checkpoints/{job1_id}/")
    job1 = sc.checkpoints / job1_id
    new_root = tmp_path / "new-root"
    new_root.mkdir()
    job2 = new_root / job2_id
    (sc.checkpoints / job2_id).rename(job2)
    for m in job1.glob("chk-*/_metadata"):
        shutil.rmtree(m.parent)
    assert not list(job1.glob("chk-*/_metadata"))
    healthy, healthy_rebase = add_job(sc, "1.20.3", "basic")  # the old root still has a live job
    job2_rebase = ["--rebase", f"{sc.original}/checkpoints/{job2_id}={job2}"]

    # what job 2's retained checkpoints reference, by Flink's own reading, where it is now
    job2_refs = set()
    for exp in (REPO / sc.entry["expected_dir"] / "checkpoints" / job2_id).glob("*.json"):
        for r in json.loads(exp.read_text())["references"]:
            p = r["path"].removeprefix("file:")
            own = f"{sc.original}/checkpoints/{job2_id}/"
            job2_refs.add(
                "file:"
                + (
                    str(job2) + "/" + p[len(own) :]
                    if p.startswith(own)
                    else str(sc.root) + p[len(sc.original) :]
                )
            )
    borrowed = {r for r in job2_refs if r.startswith(sc.uri(job1) + "/")}
    assert borrowed

    # the old root alone: job 1 has no retained checkpoint; its files are kept, even when dead
    # jobs are collected (nothing but its name says it is Flink's: its checkpoint dirs are gone)
    job1_files = [p for p in job1.rglob("*") if p.is_file()]
    for extra in ([], ["--collect-dead-jobs"]):
        old_alone = plan_json(str(sc.checkpoints), *sc.rebase, *healthy_rebase, *OLD, "--force", *extra)
        assert not {c for c in candidates(old_alone) if c.startswith(sc.uri(job1) + "/")}
        assert {sc.uri(p) for p in job1_files} <= set(protected(old_alone))
    # named as a ROOT, job 1 is collected: listed by name with its files and bytes, and the warning
    named = plan_json(str(job1), *sc.rebase, *OLD, "--force", expect=1)
    assert codes(named) == {"empty-live-set"}  # and alone it has nothing live: the plan blocks
    dead = {d["job"]: d for d in named["dead_jobs"]}
    assert set(dead) == {sc.uri(job1)} and dead[sc.uri(job1)]["collected"]
    assert dead[sc.uri(job1)]["files"] == len(job1_files)
    assert dead[sc.uri(job1)]["bytes"] == sum(p.stat().st_size for p in job1_files)
    assert any("claim" in w.lower() for w in named["warnings"])

    # both roots: nothing job 2 references is a candidate, and apply keeps all of it
    args = [str(sc.checkpoints), str(new_root), *job2_rebase, *sc.rebase, *healthy_rebase, *OLD, "--force"]
    both = plan_json(*args)
    assert not both["blocked"]
    assert not borrowed & candidates(both) and not job2_refs & candidates(both)
    apply(plan_to_file(tmp_path, *args))
    for uri in job2_refs:
        assert Path(uri[5:]).exists(), f"file borrowed by the CLAIM job deleted: {uri}"
