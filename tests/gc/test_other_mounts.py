"""Other mounts below a root fail closed (issue 45 row 2).

A second mount of the storage a root is on, below the root, with a device of its own (overlayfs
here; a second FUSE mount of a bucket, an NFS export mounted again behave the same) names every
file of the root a second time: live under one name, "unreferenced" under the other. gc kept
nothing of the kind apart: it recorded the mount, warned, and deleted the live files under their
other name. Now a mount's files are kept (``other-mount``) unless the mount is named as a ROOT, and
a checkpoint found below a mount inside a job's ``shared/`` or ``taskowned/`` refuses the plan.
Real mounts (this sandbox and CI run as root): overlayfs, whose lower layer is a job's own
directory or the whole root, and tmpfs for a volume of its own. Bind mounts (same device) stay
aliases: tests/gc/test_discovery.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ckptctl.checkpoint.rebase import Rebase
from ckptctl.gc import GcOptions
from ckptctl.storage import Storage
from tests.gc.test_spark_plan import assert_same_plan
from tests.support.fixed_clock import fixed_clock
from tests.support.fixture_cases import REPO, manifest
from tests.support.gc_plans import OLD, apply, candidates, codes, plan_to_file, protected, snapshot
from tests.support.gc_support import DAY, T0, Scenario, ckptctl, plan_json


@contextlib.contextmanager
def mounted(target: Path, *args: str) -> Iterator[None]:
    """``mount <args> <target>`` for the test, unmounted in the end; skipped where mounting is not
    permitted (not root, no overlayfs in the kernel)."""
    target.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", *args, str(target)], capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"mounting is not permitted here: {done.stderr.strip()}")
    try:
        yield
    finally:
        if subprocess.run(["umount", str(target)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(target)], check=False)


def overlay(tmp_path: Path, lower: Path, target: Path) -> contextlib.AbstractContextManager[None]:
    """``lower`` seen again at ``target``, on a device of its own, with other inode numbers for
    its directories: what a second FUSE mount of a bucket gives."""
    upper, work = tmp_path / "overlay-upper", tmp_path / "overlay-work"
    upper.mkdir()
    work.mkdir()
    return mounted(
        target, "-t", "overlay", "overlay", "-o", f"lowerdir={lower},upperdir={upper},workdir={work}"
    )


def files_below(d: Path) -> set[str]:
    return {"file:" + str(p) for p in d.rglob("*") if p.is_file()}


def test_an_overlay_of_a_job_inside_its_shared_dir_refuses_and_deletes_nothing(tmp_path: Path) -> None:
    """The red-team attack: ``<job>/shared/mirror`` is the job's own directory again. The default
    plan made every mirrored file of the job a candidate (its three retained checkpoints broken
    after apply); the checkpoints found below the mount now refuse the plan, and the mirrored
    files are kept as other-mount."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    (job,) = sc.jobs()
    mirror = job / "shared" / "mirror"
    mirror.mkdir()
    with overlay(tmp_path, job, mirror):
        assert (mirror / "shared").is_dir() and os.stat(mirror).st_dev != os.stat(job).st_dev
        before = snapshot(sc.checkpoints)  # under both names
        plan = plan_json(str(sc.checkpoints), *sc.rebase, *OLD, expect=1)
        assert "other-mount" in codes(plan), plan["refusals"]
        assert not {c for c in candidates(plan) if c.startswith(sc.uri(mirror) + "/")}
        # all but what the checkpoints found there reference themselves (their _metadata, relative names)
        kept = {p for p, r in protected(plan).items() if r == "other-mount"}
        assert kept == {p for p in protected(plan) if p.startswith(sc.uri(mirror) + "/")}
        assert len(kept) > len(files_below(mirror)) / 2
        assert plan["discovery"]["mounts"] == [sc.uri(mirror)]
        # and the one-step gc refuses too: nothing deleted under either name
        result = ckptctl("gc", str(sc.checkpoints), "--apply", "--yes", *sc.rebase, *OLD, expect=None)
        assert result.exit_code != 0
        assert snapshot(sc.checkpoints) == before


def test_an_overlay_of_a_shared_dir_inside_it_keeps_its_files_and_collects_the_rest(tmp_path: Path) -> None:
    """``<job>/shared/mirror`` is the job's shared/ again: no checkpoint below the mount, so the plan
    goes on (nothing but the roots says which name is the real one), but every mirrored file was a
    candidate. Now the mirror's files are kept, the genuine orphan is collected, and apply leaves
    every file a checkpoint references, under both names."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    (job,) = sc.jobs()
    orphan = sc.plant(f"checkpoints/{job.name}/shared/orphan")
    mirror = job / "shared" / "mirror"
    with overlay(tmp_path, job / "shared", mirror):
        plan_file = plan_to_file(tmp_path, str(sc.checkpoints), *sc.rebase, *OLD)
        plan = json.loads(plan_file.read_text())
        assert not plan["blocked"], plan["refusals"]
        assert not {c for c in candidates(plan) if c.startswith(sc.uri(mirror) + "/")}, (
            "mirrored files collected"
        )
        assert sc.uri(orphan) in candidates(plan)
        kept = {p for p, r in protected(plan).items() if r == "other-mount"}
        assert kept == files_below(mirror) and len(kept) > 60
        assert any("other mounts" in w for w in plan["warnings"])
        apply(plan_file)
        assert not orphan.exists()
        live = {u for u in sc.referenced_by_flink() if "/shared/" in u}
        assert live and all(Path(u[5:]).exists() for u in live)
        shared = sc.uri(job / "shared")
        assert all(Path(str(mirror) + u[len(shared) :]).exists() for u in live)


def volume_with_a_job(sc: Scenario, volume: Path) -> tuple[Path, list[str], Path]:
    """A job of another fixture copied into ``volume`` (a mount of its own below the root), an
    orphan planted in its shared/: (its directory, its --rebase, the orphan)."""
    entry = next(
        e for e in manifest()["entries"] if (e["flink_version"], e["scenario"]) == ("1.20.3", "basic")
    )
    (job_id,) = entry["job_ids"]
    job = volume / job_id
    shutil.copytree(REPO / entry["data_dir"] / "checkpoints" / job_id, job)
    for p in job.rglob("*"):
        if p.is_file():
            t = T0 + 3600 if p.name == "_metadata" else T0
            os.utime(p, (t, t))
    orphan = job / "shared" / "orphan"
    orphan.write_bytes(b"x" * 100)
    os.utime(orphan, (T0 - 3600, T0 - 3600))
    return job, ["--rebase", f"{entry['original_root']}/checkpoints/{job_id}={job}"], orphan


def test_a_volume_of_its_own_is_collected_only_when_named_as_a_root(tmp_path: Path) -> None:
    """A tmpfs below the root holding a job: device numbers cannot tell it from a second mount of
    the root's storage, so its files are kept until the mount is named as a ROOT; --keep-last
    would expire checkpoints whose files are kept there: refused."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    volume = sc.checkpoints / "volume"
    with mounted(volume, "-t", "tmpfs", "tmpfs"):
        job, rebase, orphan = volume_with_a_job(sc, volume)
        args = [*sc.rebase, *rebase, *OLD, "--force"]
        alone = plan_json(str(sc.checkpoints), *args)
        assert protected(alone)[sc.uri(orphan)] == "other-mount"
        assert not {c for c in candidates(alone) if c.startswith(sc.uri(volume) + "/")}
        named = plan_json(str(sc.checkpoints), str(volume), *args)
        assert not named["blocked"] and sc.uri(orphan) in candidates(named)
        expiring = plan_json(str(sc.checkpoints), *args, "--keep-last", "1", expect=1)
        assert "other-mount" in codes(expiring)
        assert plan_json(str(sc.checkpoints), str(volume), *args, "--keep-last", "1")["expired"]


# ---------------------------------------------------------------------------------------------
# both planners


def options_of(
    sc: Scenario, *roots: Path, rebase: tuple[tuple[str, str], ...] = (), **overrides
) -> GcOptions:
    return GcOptions(tuple(str(r) for r in roots), older_than=DAY, margin=600.0,
                     rebase=Rebase.of([(sc.original, str(sc.root)), *rebase]), **overrides)  # fmt: skip


def test_spark_plan_of_other_mounts_equals_local_plan(spark, tmp_path: Path, monkeypatch) -> None:
    """Both planners keep a mount's files, refuse checkpoints below one in a job's shared/, and
    classify a mount named as a ROOT: the same plans."""
    fixed_clock(monkeypatch)
    sc = Scenario("2.2.0", "basic", tmp_path)
    (job,) = sc.jobs()
    sc.plant(f"checkpoints/{job.name}/shared/orphan")
    volume = sc.checkpoints / "volume"
    with (
        overlay(tmp_path, job / "shared", job / "shared" / "mirror"),
        mounted(volume, "-t", "tmpfs", "tmpfs"),
    ):
        vjob, rebase, orphan = volume_with_a_job(sc, volume)
        mapping = tuple(rebase[1].split("=", 1))
        plan = assert_same_plan(Storage(), options_of(sc, sc.checkpoints, rebase=(mapping,)))
        assert not plan["refusals"] and protected(plan)[sc.uri(orphan)] == "other-mount"
        assert plan["protected_by_reason"]["other-mount"] > 60
        plan = assert_same_plan(Storage(), options_of(sc, sc.checkpoints, volume, rebase=(mapping,)))
        assert sc.uri(orphan) in candidates(plan)
    (tmp_path / "again").mkdir()
    with overlay(tmp_path / "again", job, job / "shared" / "mirror"):
        plan = assert_same_plan(Storage(), options_of(sc, sc.checkpoints, force=True))
        assert "other-mount" in codes(plan)
