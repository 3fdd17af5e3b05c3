"""`ckptctl gc` against Flink's own restore: after GC, every retained checkpoint still restores.

For each case (Flink version, scenario) the fixture tree is copied back to its ORIGINAL root
(the absolute paths inside ``_metadata`` point there, so Flink can only restore from there), aged
(every file 3 days old, each ``_metadata`` an hour younger), and seeded with orphans. Then the real
CLI runs ``gc plan`` + ``gc apply``, and real Flink (PyFlink MiniCluster, see tests/support/flink_harness.py)
restores from every checkpoint that is left and must complete a new checkpoint.

A negative control deletes one live shared SST of the newest checkpoint and expects the restore
to fail, which proves that the harness can tell a broken checkpoint from a good one.

Needs Java and a PyFlink venv (created on first use, or FLINK_VENV_120 / FLINK_VENV_2).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.support.flink_harness import REPO, flink_python, original_root_held

pytestmark = pytest.mark.flink

MANIFEST = json.loads((REPO / "fixtures" / "manifest.json").read_text())
CASES = [("1.20.3", "claim"), ("2.2.0", "filemerging")]
DAY = 86400.0


def entry(version: str, scenario: str) -> dict:
    for e in MANIFEST["entries"]:
        if e["flink_version"] == version and e["scenario"] == scenario:
            return e
    raise LookupError(f"no manifest entry {version}/{scenario}")


def ckptctl(*args: str) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("ckptctl")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-c", "from ckptctl.cli import main; main()"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=300)


def referenced_files(e: dict) -> set[str]:
    """Every physical file (absolute, under original_root) that some expected dump references."""
    refs: set[str] = set()
    for ck in e["checkpoints"]:
        if not ck.get("expected"):
            continue
        dump = json.loads((REPO / ck["expected"]).read_text())
        refs.add(dump["metadata_file"].removeprefix("file:"))
        for r in dump["references"]:
            refs.add(r["path"].removeprefix("file:"))
    return refs


def all_files(root: Path) -> set[str]:
    return {str(p) for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def completed_dirs(root: Path) -> list[Path]:
    return sorted(
        (m.parent for m in root.rglob("_metadata")),
        key=lambda d: (d.stat().st_mtime, int(d.name.split("-")[1]) if d.name.startswith("chk-") else 0),
    )


def install_copy(e: dict) -> Path:
    """Wipe original_root and copy the fixture there; return original_root."""
    root = Path(e["original_root"])
    if root.exists():
        shutil.rmtree(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(REPO / e["data_dir"], root, symlinks=True)
    return root


@pytest.fixture(params=CASES, ids=lambda c: f"{c[0]}-{c[1]}")
def case(request):
    """(version, scenario, manifest entry, original root), holding a lock on the original root.

    Afterwards the original root is as the test found it: a pristine copy of the fixture where one
    was (the machine that generated the fixtures), else gone, so that no later test can pass only
    because the fixtures' original location happens to exist.
    """
    version, scenario = request.param
    e = entry(version, scenario)
    flink_python(version)  # skip without Java; create the venv before taking the lock
    root = Path(e["original_root"])
    with original_root_held(e) as found:
        try:
            yield version, scenario, e, root
        finally:
            if found:
                install_copy(e)
            else:
                shutil.rmtree(root, ignore_errors=True)


def age_tree(root: Path, e: dict, now: float) -> dict:
    """Set mtimes (T0 = now - 3d; each _metadata T0 + 1h) and plant orphans; return what was planted."""
    t0 = now - 3 * DAY
    for p in root.rglob("*"):
        if p.is_file():
            os.utime(p, (t0, t0))
    for m in root.rglob("_metadata"):
        os.utime(m, (t0 + 3600, t0 + 3600))
    orphans: list[str] = []
    for job_id in e["job_ids"]:
        job = root / "checkpoints" / job_id
        for area, n in (("shared", 2), ("taskowned", 1)):
            d = job / area
            d.mkdir(exist_ok=True)
            for _ in range(n):
                p = d / str(uuid.uuid4())
                p.write_bytes(os.urandom(1500))
                os.utime(p, (t0 - 3600, t0 - 3600))
                orphans.append(str(p))
    newest_job = root / "checkpoints" / e["job_ids"][-1]
    in_flight = newest_job / "shared" / str(uuid.uuid4())
    in_flight.write_bytes(os.urandom(900))  # mtime = now: an upload of a checkpoint still in flight
    return {"t0": t0, "orphans": orphans, "in_flight": str(in_flight)}


def run_gc(tmp: Path, root: Path, engine: str = "local") -> tuple[dict, dict]:
    """``gc plan`` then ``gc apply``, planned and applied in-process by the real CLI in a process
    of its own, or on Spark (embedded ``local[*]``: the plan's lists in Parquet, the deletions on
    executors) by the same CLI in this process (its Spark session is the test run's)."""
    plan_file = tmp / "plan.json"
    plan_args = ("gc", "plan", str(root / "checkpoints"), "--older-than", "1d", "--margin", "10m",
                 "--engine", engine, "-o", str(plan_file), "--json")  # fmt: skip
    apply_args = ("gc", "apply", str(plan_file), "--engine", engine, "--yes", "--json")
    run = ckptctl if engine == "local" else in_process
    p = run(*plan_args)
    plan = json.loads(plan_file.read_text()) if plan_file.exists() else {}
    assert p.returncode == 0, (
        f"gc plan exited {p.returncode}\nrefusals: {plan.get('refusals')}\nstderr: {p.stderr}\nstdout: {p.stdout[:4000]}"
    )
    assert plan.get("engine", {"kind": "local"})["kind"] == engine, plan.get("engine")
    a = run(*apply_args)
    assert a.returncode == 0, f"gc apply exited {a.returncode}\nstderr: {a.stderr}\nstdout: {a.stdout[:4000]}"
    return plan, json.loads(a.stdout)


def in_process(*args: str) -> subprocess.CompletedProcess:
    """The CLI run in this process, its outcome as :func:`ckptctl`'s."""
    from tests.support.gc_support import ckptctl as cli

    r = cli(*args, expect=None)
    return subprocess.CompletedProcess(args, r.exit_code, r.stdout, r.stderr)


def reported_deleted(applied: dict) -> set[str]:
    """The files ``gc apply`` says it deleted: listed in its report (in-process), or in the
    manifests its executors wrote, one per batch (Spark), whose count the report gives."""
    if applied.get("engine") != "spark":
        return {d["path"].removeprefix("file:") for d in applied["deleted"]}
    records = [json.loads(line) for m in Path(applied["manifest"].removeprefix("file:")).glob("batch-*.jsonl")
               for line in m.read_text().splitlines()]  # fmt: skip
    deleted = {r["path"].removeprefix("file:") for r in records if r["outcome"] == "deleted"}
    assert applied["deleted_files"] == len(deleted) and not applied["failed_files"], applied
    return deleted


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_gc_then_flink_restores_every_retained_checkpoint(case, engine, tmp_path, flink_sessions):
    """After a gc planned and applied in-process, or planned and applied on Spark, exactly the
    unreferenced files are gone, and Flink restores every checkpoint that is left. Both engines
    must leave the same tree, file for file (the referenced files, each ``_metadata`` and the
    file in flight: asserted below), so Flink restores it once, after the Spark run (the
    in-process run's restores cost 40 s of the suite and proved the same tree again)."""
    version, scenario, e, _ = case
    root = install_copy(e)
    planted = age_tree(root, e, time.time())
    before = all_files(root)
    referenced = referenced_files(e)
    genuine = {str(root / f) for f in e["unreferenced_files"]}
    assert referenced <= before, f"fixture incomplete: {sorted(referenced - before)[:5]}"
    assert genuine <= before

    plan, applied = run_gc(tmp_path, root, engine)
    after = all_files(root)
    deleted = before - after

    assert not plan["refusals"], plan["refusals"]
    assert set(planted["orphans"]) <= deleted, sorted(set(planted["orphans"]) - deleted)
    assert genuine <= deleted, f"genuine orphans kept: {sorted(genuine - deleted)}"
    assert planted["in_flight"] in after, "a file written just now (in flight) was deleted"
    assert not (deleted & referenced), f"live files deleted: {sorted(deleted & referenced)}"
    # nothing else: exactly the files no _metadata references (the in-flight one excepted)
    unreferenced = {f for f in before if f not in referenced and not f.endswith("/_metadata")}
    assert deleted == unreferenced - {planted["in_flight"]}, {
        "unexpected": sorted(deleted - unreferenced),
        "missed": sorted(unreferenced - deleted),
    }
    assert reported_deleted(applied) == deleted

    # every checkpoint that is left must restore with Flink and complete a new checkpoint
    retained = completed_dirs(root)
    assert len(retained) == sum(1 for c in e["checkpoints"] if c.get("has_metadata"))
    if engine == "local":
        return  # the tree the Spark run leaves and Flink restores
    # (one after another in one JVM, each a job of its own: see tests/support/flink_harness.py FlinkSession)
    logs = [tmp_path / f"restore-{ck.parent.name[:8]}-{ck.name}.log" for ck in retained]
    reports = flink_sessions.restore_many(
        version,
        [(scenario, ck, {"timeout": 60, "log_out": log}) for ck, log in zip(retained, logs, strict=True)],
    )
    failures = []
    for ck, log, r in zip(retained, logs, reports, strict=True):
        print(f"restore {ck}: ok={r['ok']} status={r['status']} {r.get('seconds')}s")
        assert r["restored_from"] == f"file://{ck}", r  # the report is this checkpoint's
        if not r["ok"]:
            failures.append((str(ck), r.get("status"), r.get("error"), str(log)))
    assert not failures, failures


def test_restore_detects_a_missing_shared_file(case, tmp_path, flink_sessions):
    """Negative control: without one live SST of the newest checkpoint, Flink's restore must fail."""
    version, scenario, e, _ = case
    root = install_copy(e)
    newest = max(
        (c for c in e["checkpoints"] if c.get("has_metadata")),
        key=lambda c: (root / c["dir"] / "_metadata").stat().st_mtime,
    )
    dump = json.loads((REPO / newest["expected"]).read_text())
    shared = [
        r for r in dump["references"]
        if r["role"] == "shared" and (r.get("local_name") or "").endswith(".sst")
    ] or [r for r in dump["references"] if "/shared/" in r["path"]]  # fmt: skip
    assert shared, f"{newest['dir']} references no shared file"
    victim = Path(shared[0]["path"].removeprefix("file:"))
    victim.unlink()

    r = flink_sessions.restore(
        version, scenario, root / newest["dir"], timeout=60, log_out=tmp_path / "broken.log"
    )
    print(f"broken restore: ok={r['ok']} status={r['status']} error={str(r.get('error'))[:300]}")
    assert not r["ok"], f"Flink restored {newest['dir']} although {victim} is missing: {r}"
    assert r["status"] in ("FAILING", "FAILED", "GONE", "SUBMIT_FAILED"), r
    # and it failed for the right reason: the log names the missing file
    log = (tmp_path / "broken.log").read_text(errors="replace") or json.dumps(r)  # should the log be lost
    assert victim.name in log, f"the Flink log does not mention {victim.name}; error: {r.get('error')}"
