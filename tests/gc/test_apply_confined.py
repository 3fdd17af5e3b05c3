"""Invariant 8: apply never leaves the roots: not through a symbolic link swapped in mid-run, not into
a trash inside or around a scope, and a trash never overwrites."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import pytest

from tests.support.gc_plans import OLD, apply, candidates, plan_to_file, snapshot
from tests.support.gc_support import T0, Scenario, plan_json


@pytest.mark.parametrize("where", ["contains-root", "inside-savepoints", "inside-changelog-dir"])
def test_trash_overlapping_a_scope_moves_nothing(tmp_path: Path, where: str) -> None:
    """--trash inside any scope (root, --savepoints, --changelog-dir) or containing one.

    Tracker: row04."""
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


@pytest.mark.parametrize("linked", ["trash", "root"])
def test_a_trash_inside_a_root_through_a_symlink_moves_nothing(tmp_path: Path, linked: str) -> None:
    """A red-team helper: the trash (or the root, through a linked mount point) named through a
    symlink so that the trash lands in the job's shared/; the string comparison let it through,
    and the next plan collected the trash as unreferenced-shared. Compared where it really is.

    Tracker: row04."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0]
    orphan = sc.plant(f"checkpoints/{job.name}/shared/orphan")
    root = sc.checkpoints
    if linked == "root":
        root = tmp_path / "mount"
        root.symlink_to(sc.checkpoints, target_is_directory=True)
        rebase = ["--rebase", f"{sc.original}/checkpoints={root}"]
        trash = job / "shared" / ".trash"
    else:
        rebase = list(sc.rebase)
        (tmp_path / "trash").symlink_to(job / "shared", target_is_directory=True)
        trash = tmp_path / "trash" / "kept"
    plan_file = plan_to_file(tmp_path, str(root), *rebase, *OLD, "--force")
    assert sc.uri(orphan).replace(str(sc.checkpoints), str(root)) in candidates(
        json.loads(plan_file.read_text())
    )
    before = snapshot(sc.root)
    result = apply(plan_file, "--trash", str(trash), expect=None)
    assert result.exit_code in (1, 2) and "overlapping scopes" in result.stderr
    assert orphan.exists() and snapshot(sc.root) == before


# ---------------------------------------------------------------------------------------------
# row 5: shared/ swapped for a symlink to an outside directory while apply runs


def test_symlink_swapped_in_during_apply_never_deletes_outside(tmp_path: Path) -> None:
    """Tracker: row05."""
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


def test_trash_keeps_root_qualified_paths_and_never_overwrites(tmp_path: Path) -> None:
    """Tracker: row06."""
    a = Scenario("2.2.0", "basic", tmp_path / "a")
    b = Scenario("1.20.3", "basic", tmp_path / "b")
    assert a.checkpoints.name == b.checkpoints.name
    dead = "ab" * 16  # the same relative names below both roots
    planted = {}
    for sc in (a, b):
        chk = sc.checkpoints / dead / "chk-3"
        chk.mkdir(parents=True)  # Flink evidence: a dead job's checkpoint dir
        os.utime(
            chk, (T0, T0)
        )  # after its orphans (T0 - 1h): one begun now would be a first checkpoint in flight
        for i in range(7):
            p = sc.plant(f"checkpoints/{dead}/shared/orphan-{i}")
            planted[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    args = [
        str(a.checkpoints),
        str(b.checkpoints),
        *a.rebase,
        *b.rebase,
        *OLD,
        "--force",
        "--collect-dead-jobs",
    ]
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
