"""`ckptctl gc` and Flink 2.x's ForSt state backend: working files inside the checkpoint directory.

With ``state.backend.type: forst`` an operator on the async state API (here the SQL ``GROUP BY k``
with ``table.exec.async-state.enabled``) keeps its DB's SST files in the checkpoint directory,
``<job>/shared/op_<OperatorClass>_<operator id>__<subtask+1>_<parallelism>__attempt_<k>/db/<uuid>``
(next to an empty ``_dummy_dir_<uuid>``), and each checkpoint references the files there in place.
A file the DB writes (a memtable flush, a compaction output) is part of the live DB at once, but
no ``_metadata`` references it until the next checkpoint completes: by the checkpoints alone it is
an orphan. See fixtures/README.md (scenario ``forst``) for the layout Flink 2.2 really writes.

- ``test_plan_names_forst_working_files``: the committed fixture (written by real Flink, ended by a
  crash so that unreferenced working files remain), aged; the unreferenced files of working
  directories a retained checkpoint uses are kept (``forst-in-use``: the job may be running), the
  old files of a superseded attempt directory are ``unreferenced-forst`` candidates, a young one
  and RocksDB control files found there (``forst-control-file``) are kept, and no referenced
  file is ever offered.
- ``test_gc_while_forst_job_runs`` (flink, about 2 minutes): a live ForSt job writes checkpoints
  into a temp dir; ``gc plan --older-than 0s --margin 0s --force`` + ``gc apply --yes`` run against
  it WHILE it runs; the job must complete 2 more checkpoints without failing (restart strategy
  none, no tolerable checkpoint failure), no file referenced by the checkpoints retained at the
  end may have been deleted (ckptctl's reference map and Flink's own dumper), and real Flink must
  restore the newest retained checkpoint. Each gc round starts right after a checkpoint completed:
  a file the DB flushed after that checkpoint's snapshot but before its ``_metadata`` landed is
  older than the newest ``_metadata`` (so no margin of 0s protects it) and unreferenced until the
  next checkpoint completes. Deleting it fails the next checkpoint ("Could not materialize
  checkpoint", FileNotFoundException on the working file) and so the job. Whether such a file
  exists in a round is up to timing, so on a gc without a ForSt guard the test fails often, not
  always.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support import jvm
from tests.support.flink_harness import REPO, flink_env, flink_python
from tests.support.java_build import compiled

VERSION, SCENARIO = "2.2.0", "forst"
MANIFEST = json.loads((REPO / "fixtures" / "manifest.json").read_text())
DAY = 86400.0
# the generating run's options that the live job must not inherit (flink_job.py sets its own)
DROP = ("pipeline.name", "execution.checkpointing.dir", "execution.state-recovery.", "rest.port")
FORST_RATE = 4000  # rows/s, as fixtures/generate.sh runs the forst scenario (flushes between checkpoints)
GC_ROUNDS = 4  # plan + apply rounds against the running job, each right after a checkpoint completed


def entry(version: str = VERSION, scenario: str = SCENARIO) -> dict:
    for e in MANIFEST["entries"]:
        if e["flink_version"] == version and e["scenario"] == scenario:
            return e
    raise LookupError(f"no manifest entry {version}/{scenario}")


# every committed fixture with a ForSt working directory: 2.2.0's SQL job (killed, so its working
# dirs keep SSTs flushed after the last snapshot) and the DataStream jobs of 2.0, 2.1 and 2.3
FORST_FIXTURES = sorted(
    (e["flink_version"], e["scenario"]) for e in MANIFEST["entries"] if e.get("forst_working_dirs")
)


def ckptctl(*args: str) -> subprocess.CompletedProcess:
    """The command in this process (Typer's runner): these tests are about what gc decides next to
    ForSt's files, not about a process; a process of its own cost ~2.5 CPU-s of imports, and the
    live test runs nine of them (4 rounds of plan + apply, then refs) while the job checkpoints."""
    from tests.support.gc_support import ckptctl as invoke

    result = invoke(*args, expect=None)
    return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout, result.stderr)


def plain(uri: str) -> str:
    return uri.removeprefix("file://").removeprefix("file:")


def is_forst_working_file(path: str) -> bool:
    """<job>/shared/op_*/db/<name>: a file in a ForSt working directory."""
    parts = Path(path).parts
    return len(parts) >= 4 and parts[-2] == "db" and parts[-3].startswith("op_") and parts[-4] == "shared"


# ---------------------------------------------------------------------------------------------
# the committed fixture


@pytest.mark.parametrize(("version", "scenario"), FORST_FIXTURES, ids=["/".join(f) for f in FORST_FIXTURES])
def test_plan_names_forst_working_files(tmp_path, version: str, scenario: str):
    e = entry(version, scenario)
    working = e.get("forst_working_dirs") or []
    assert working, "the forst manifest entry lists no ForSt working directory"
    copy = tmp_path / "copy"
    shutil.copytree(REPO / e["data_dir"], copy, symlinks=True)
    for w in working:  # git keeps no empty directories: put the _dummy_dir_<uuid> back
        for d in w["empty_dirs"]:
            (copy / w["dir"] / d).mkdir(parents=True, exist_ok=True)

    now = time.time()
    t0 = now - 3 * DAY
    for p in copy.rglob("*"):
        if p.is_file():
            os.utime(p, (t0, t0))
    dumps = [json.loads((REPO / c["expected"]).read_text()) for c in e["checkpoints"] if c.get("expected")]
    for c in e["checkpoints"]:
        if c.get("has_metadata"):  # 2h after the other files, in checkpoint order
            m = copy / c["dir"] / "_metadata"
            os.utime(m, (t0 + 7200 + c["checkpoint_id"], t0 + 7200 + c["checkpoint_id"]))

    def here(uri: str) -> str:
        return str(copy) + plain(uri)[len(e["original_root"]) :]

    referenced = {here(r["path"]) for d in dumps for r in d["references"]}
    unreferenced_working = sorted(str(copy / u) for u in e["unreferenced_files"] if is_forst_working_file(u))
    if len(unreferenced_working) < 2:
        # a cancelled job's ForSt deletes what no checkpoint uses; a killed one (2.2.0's) leaves
        # SSTs flushed after the last snapshot. Put one such file in each working dir: a copy of a
        # referenced SST of that dir under a new name, as old as everything else.
        for w in working:
            sst = next(f for f in sorted((copy / w["dir"]).iterdir()) if str(f) in referenced)
            flushed = sst.with_name("ffffffff-0000-4000-8000-000000000000")
            shutil.copyfile(sst, flushed)
            os.utime(flushed, (t0, t0))
            unreferenced_working.append(str(flushed))
    assert len(unreferenced_working) >= 2, "the fixture has too few unreferenced ForSt working files"
    assert not set(unreferenced_working) & referenced

    # A superseded attempt of the first working directory (a task that failed over): the same
    # real files under attempt_9, which no checkpoint references. Its old files may go; a file
    # written just now may not (the DB may still need it).
    first_dir = copy / working[0]["dir"]
    op_dir = first_dir.parent
    superseded = op_dir.with_name(op_dir.name.rsplit("__attempt_", 1)[0] + "__attempt_9")
    shutil.copytree(op_dir, superseded)
    old_dead = sorted(str(f) for f in superseded.rglob("*") if f.is_file())
    assert len(old_dead) >= 2
    young = old_dead.pop()
    os.utime(young, (now, now))

    # RocksDB control files next to the SSTs of the superseded attempt. Flink 2.2 keeps a ForSt
    # DB's CURRENT/MANIFEST/OPTIONS in the TaskManager's local dir (the working dir holds SSTs
    # only), so they are placed here by the test: the bytes are the DB's real MANIFEST and OPTIONS,
    # which the newest checkpoint uploaded as private files, under their names in the DB.
    newest = max(dumps, key=lambda d: d["checkpoint_id"])
    dead_db = superseded / first_dir.name
    subtask = int(op_dir.name.split("__")[1].split("_")[0]) - 1
    control = []
    for r in newest["references"]:
        name = r.get("local_name") or ""
        if (
            r["role"] == "private"
            and r["operator_id"] in op_dir.name
            and r["subtask"] == subtask
            and name.startswith(("MANIFEST-", "OPTIONS-"))
        ):
            target = dead_db / name
            shutil.copyfile(here(r["path"]), target)
            os.utime(target, (t0, t0))
            control.append(str(target))
    assert len(control) == 2, f"expected the MANIFEST and OPTIONS of subtask {subtask}: {control}"

    plan_file = tmp_path / "plan.json"
    p = ckptctl(
        "gc", "plan", str(copy / "checkpoints"), "--rebase", f"{e['original_root']}={copy}",
        "--older-than", "24h", "--margin", "1h", "-o", str(plan_file), "--json",
    )  # fmt: skip
    assert plan_file.exists(), f"gc plan wrote no plan (exit {p.returncode}): {p.stderr}"
    plan = json.loads(plan_file.read_text())
    assert p.returncode == 0 and not plan["refusals"], (p.returncode, plan["refusals"], p.stderr)

    candidates = {plain(c["path"]): c for c in plan["candidates"]}
    protected = {plain(c["path"]): c for c in plan["protected"]}
    offered_live = sorted(set(candidates) & referenced)
    assert not offered_live, f"referenced files offered for deletion: {offered_live}"
    assert young not in candidates, (
        f"a ForSt working file written just now is a candidate: {candidates[young]}"
    )
    assert protected.get(young, {}).get("reason") == "young", protected.get(young)
    # the working directories the retained checkpoints use belong to a job that may be running:
    # their unreferenced files (flushed after the last snapshot) are never candidates
    in_use = {f: (candidates.get(f) or protected.get(f) or {}).get("reason") for f in unreferenced_working}
    assert all(r == "forst-in-use" for r in in_use.values()), f"working files of a live DB: {in_use}"
    wrong = {
        f: (candidates.get(f) or protected.get(f) or {}).get("reason")
        for f in old_dead
        if candidates.get(f, {}).get("reason") != "unreferenced-forst"
    }
    assert not wrong, f"old files of a superseded attempt not named unreferenced-forst: {wrong}"
    kept = {f: (candidates.get(f) or protected.get(f) or {}).get("reason") for f in control}
    assert all(r == "forst-control-file" for r in kept.values()), f"control files: {kept}"


# ---------------------------------------------------------------------------------------------
# a running job


def completed_ids(job_dir: Path) -> list[int]:
    out = []
    with contextlib.suppress(OSError):
        for n in os.listdir(job_dir):
            m = job_dir / n / "_metadata"
            with contextlib.suppress(OSError):
                if n.startswith("chk-") and m.stat().st_size > 0:
                    out.append(int(n[4:]))
    return sorted(out)


def listing(root: Path) -> set[str]:
    return {str(p) for p in root.rglob("*") if p.is_file()}


class LiveJob:
    """fixtures/flink_job.py in live mode (--stop-file/--status-file) with the forst scenario's options."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.root = tmp / "run"
        self.ckroot = self.root / "checkpoints"
        self.stop_file = tmp / "stop"
        self.status_file = tmp / "status.json"
        self.info_file = tmp / "info.json"
        self.out_file = tmp / "flink_job.out"
        self.proc: subprocess.Popen | None = None

    def start(self, python: Path) -> None:
        conf = {k: v for k, v in entry()["config"].items() if not k.startswith(DROP)}
        conf.update({
            "restart-strategy.type": "none",  # a failure ends the job (FAILED) instead of a silent restart
            "execution.checkpointing.tolerable-failed-checkpoints": "0",
            "io.tmp.dirs": str(self.tmp / "io"),  # the MiniCluster's temp files stay in tmp_path
            "process.working-dir": str(self.tmp / "io"),
        })  # fmt: skip
        cmd = [str(python), str(REPO / "fixtures" / "flink_job.py"), "--root", str(self.root),
               "--job-name", "ckptctl-forst-live", "--run-seconds", "400",
               "--rows-per-second", str(FORST_RATE), "--stop-file", str(self.stop_file),
               "--status-file", str(self.status_file), "--info-out", str(self.info_file)]  # fmt: skip
        for k, v in conf.items():
            cmd += ["--conf", f"{k}={v}"]
        env = flink_env(python)
        env["FLINK_LOG_DIR"] = str(self.tmp / "log")
        (self.tmp / "io").mkdir(parents=True, exist_ok=True)
        with open(self.out_file, "w") as out:
            self.proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )  # fmt: skip

    def status(self) -> dict:
        with contextlib.suppress(OSError, ValueError):
            return json.loads(self.status_file.read_text())
        return {}

    @property
    def job_dir(self) -> Path:
        return self.ckroot / self.status()["job_id"]

    def tail(self) -> str:
        text = self.out_file.read_text(errors="replace") if self.out_file.exists() else ""
        return text[-3000:]

    def alive(self) -> str | None:
        """None while the job runs, else why not."""
        st = self.status().get("status")
        if st and st != "RUNNING" and st not in ("CREATED", "INITIALIZING"):
            return f"job status {st}"
        if self.proc is not None and self.proc.poll() is not None:
            return f"flink_job.py exited {self.proc.returncode}"
        return None

    def wait(self, what: str, cond, timeout: float) -> bool:
        deadline = time.time() + timeout
        while time.time() < deadline:
            with contextlib.suppress(KeyError, OSError):
                if cond():
                    return True
            if self.alive() is not None:
                return False
            time.sleep(0.25)
        return False

    def stop(self) -> None:
        """Cancel through the stop file; kill the process group (python + JVM) if it lingers."""
        if self.proc is None:
            return
        self.stop_file.touch()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=90)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # a cancelled ForSt JVM may not exit by itself
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)


def gc_round(job: LiveJob, tmp: Path, i: int, log: list[dict]) -> set[str]:
    """One gc plan + apply against the running job (retried while a refusal says it raced a checkpoint)."""
    deleted: set[str] = set()
    for attempt in range(8):
        plan_file = tmp / f"plan-{i}-{attempt}.json"
        t = time.time()
        p = ckptctl("gc", "plan", str(job.ckroot), "--older-than", "0s", "--margin", "0s", "--force",
                    "-o", str(plan_file))  # fmt: skip
        plan = json.loads(plan_file.read_text()) if plan_file.exists() else {}
        rec = {
            "round": i, "attempt": attempt, "plan_exit": p.returncode, "plan_seconds": round(time.time() - t, 2),
            "refusals": plan.get("refusals"), "candidates": len(plan.get("candidates", [])),
            "candidates_by_reason": plan.get("candidates_by_reason"),
            "forst_candidates": sorted(
                plain(c["path"]) for c in plan.get("candidates", []) if is_forst_working_file(plain(c["path"]))
            ),
            "completed_at_plan": completed_ids(job.job_dir),
        }  # fmt: skip
        log.append(rec)
        if p.returncode != 0:
            rec["stderr"] = p.stderr[-1500:]
            time.sleep(0.3)
            continue
        t = time.time()
        a = ckptctl("gc", "apply", str(plan_file), "--yes", "--json")
        rec.update({"apply_exit": a.returncode, "apply_seconds": round(time.time() - t, 2)})
        if a.returncode != 0:
            rec["apply_stderr"] = a.stderr[-1500:]
            time.sleep(0.3)
            continue
        result = json.loads(a.stdout)
        deleted = {plain(d["path"]) for d in result.get("deleted", [])}
        rec["deleted"] = sorted(deleted)
        rec["deleted_forst"] = sorted(f for f in deleted if is_forst_working_file(f))
        rec["skipped"] = len(result.get("skipped", []))
        break
    return deleted


def dumper_references(tmp: Path, python: Path, metadata: list[Path]) -> set[str] | None:
    """Flink's own reading (fixtures/dumper/MetadataDump.java) of each _metadata: referenced files."""
    javac, java = shutil.which("javac"), shutil.which("java")
    if not javac or not java:
        return None
    lib = Path(subprocess.check_output(
        [str(python), "-c", "import pyflink,os;print(os.path.join(os.path.dirname(pyflink.__file__),'lib'))"],
        text=True,
    ).strip())  # fmt: skip
    classes = compiled(REPO / "fixtures" / "dumper" / "MetadataDump.java", f"{lib}/*")
    args = []
    for i, m in enumerate(metadata):
        args += [str(m), str(tmp / f"dump-{i}.json")]
    subprocess.run([java, *jvm.SHORT_LIVED, "-cp", f"{classes}:{lib}/*", "MetadataDump", VERSION, *args],
                   check=True, capture_output=True, timeout=300)  # fmt: skip
    refs = set()
    for i in range(len(metadata)):
        refs |= {plain(r["path"]) for r in json.loads((tmp / f"dump-{i}.json").read_text())["references"]}
    return refs


@pytest.mark.flink
def test_gc_while_forst_job_runs(tmp_path, flink_sessions):
    python = flink_python(VERSION)
    job = LiveJob(tmp_path)
    report: dict = {"gc": []}
    gc_deleted: set[str] = set()
    problems: list[str] = []
    t_start = time.time()
    job.start(python)
    try:
        ok = job.wait("two completed checkpoints", lambda: len(completed_ids(job.job_dir)) >= 2, 150)
        assert ok, f"the ForSt job did not complete 2 checkpoints ({job.alive()}):\n{job.tail()}"
        report["seconds_to_2_checkpoints"] = round(time.time() - t_start, 1)
        forst_dirs = list(job.job_dir.glob("shared/op_*/db"))
        assert forst_dirs, f"no ForSt working dir under {job.job_dir}/shared: is the operator on async state?"

        for i in range(GC_ROUNDS):
            # right after a checkpoint completes: the DB's files written since that checkpoint's
            # snapshot are older than its _metadata but referenced by no checkpoint until the next
            # one lands, about one interval later -- the worst moment for a gc that trusts margins
            last = max(completed_ids(job.job_dir))
            job.wait("a new checkpoint", lambda last=last: max(completed_ids(job.job_dir)) > last, 30)
            if job.alive() is not None:
                break
            gc_deleted |= gc_round(job, tmp_path, i, report["gc"])
        at_gc = max(completed_ids(job.job_dir))
        report["last_checkpoint_at_gc"] = at_gc
        if not job.wait("two more checkpoints", lambda: max(completed_ids(job.job_dir)) >= at_gc + 2, 120):
            problems.append(
                f"after gc the job did not complete 2 more checkpoints (last {completed_ids(job.job_dir)}, "
                f"{job.alive() or 'still running'})"
            )
        if job.alive() is not None:
            problems.append(f"the job did not survive gc: {job.alive()}")
        report["completed_before_cancel"] = completed_ids(job.job_dir)
    finally:
        job.stop()
    report["status_history"] = job.status().get("history")
    with contextlib.suppress(OSError, ValueError):
        report["status_history"] = json.loads(job.info_file.read_text()).get("status_history")
    if any(s == "FAILED" for _t, s in report["status_history"] or []):
        problems.append(f"the job FAILED: {report['status_history']}")

    # the checkpoints retained at the end and everything they reference
    retained = sorted(job.job_dir.glob("chk-*/_metadata"), key=lambda m: int(m.parent.name[4:]))
    assert retained, f"no retained checkpoint under {job.job_dir}"
    r = ckptctl("refs", str(job.ckroot), "--json")
    assert r.returncode == 0, r.stderr
    refs = {plain(row["path"]) for row in json.loads(r.stdout)}
    flink_refs = dumper_references(tmp_path, python, retained)
    if flink_refs is not None:
        assert flink_refs <= refs, f"ckptctl misses references Flink reports: {sorted(flink_refs - refs)[:5]}"
        refs |= flink_refs
    present = listing(job.ckroot)
    deleted_live = sorted(gc_deleted & refs)
    missing = sorted(refs - present)
    report.update({
        "retained": [m.parent.name for m in retained], "references": len(refs),
        "gc_deleted": len(gc_deleted), "gc_deleted_forst": sorted(f for f in gc_deleted if is_forst_working_file(f)),
        "deleted_live": deleted_live, "missing": missing,
    })  # fmt: skip
    if deleted_live:
        problems.append(
            f"gc deleted {len(deleted_live)} files that retained checkpoints reference: {deleted_live[:5]}"
        )
    if missing:
        problems.append(f"{len(missing)} referenced files are missing: {missing[:5]}")

    newest = retained[-1].parent
    res = flink_sessions.restore(VERSION, SCENARIO, newest, timeout=90, log_out=tmp_path / "restore.log")
    report["restore"] = {k: res.get(k) for k in ("ok", "status", "error", "seconds")}
    if not res["ok"]:
        problems.append(
            f"Flink could not restore {newest.name}: {res.get('status')} {str(res.get('error'))[:600]}"
        )
    report["seconds_total"] = round(time.time() - t_start, 1)
    (tmp_path / "report.json").write_text(json.dumps(report, indent=2))
    print("forst live gc report:", json.dumps(report, indent=1))
    assert not problems, "\n".join(problems) + f"\nreport: {tmp_path / 'report.json'}"
