"""``ckptctl paimon``: forecasts of a restore held against real Flink restores of the same checkpoints.

The fixtures (fixtures/paimon/flink, fixtures/paimon/README.md) were written by a real Flink 1.20.3 job
committing through Paimon's sink state to a real Paimon table, and each scenario was then restored by
real Flink; the outcome (committed identifiers, the exception, rows before and after) is in
fixtures/paimon/expected/<scenario>.json. ckptctl reads only the checkpoint's bytes and the table's
files, and must predict that outcome: what is committed again, and hazard A/B/C exactly where the
restore went wrong.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ckptctl.checkpoint.rebase import Rebase
from ckptctl.cli import app, gc_alias
from ckptctl.paimon.orphans import plan_orphans
from ckptctl.paimon.reachable import orphan_candidates
from ckptctl.paimon.restore import run_report
from ckptctl.paimon.table import PaimonTable
from ckptctl.storage import Storage
from tests.support.paimon_scenarios import CHECKPOINTED, age_files, commit_again, sync_commit_times
from tests.support.s3_clock import next_second

REPO = Path(__file__).resolve().parents[2]
PAIMON = REPO / "fixtures" / "paimon"
MANIFEST = json.loads((PAIMON / "manifest.json").read_text())
ENTRIES = {e["scenario"]: e for e in MANIFEST["entries"]}
TABLE = Path("warehouse/default.db/events")
RESTORED = [
    (sc, name)
    for sc in ENTRIES
    for name in json.loads((REPO / ENTRIES[sc]["expected"]).read_text())["restores"]
]


def expected(scenario: str) -> dict:
    return json.loads((REPO / ENTRIES[scenario]["expected"]).read_text())


def moved(path: str) -> Path:
    """Where a path the generator wrote lies in the fixtures (written elsewhere, then moved)."""
    for e in MANIFEST["entries"]:
        if path == e["original_root"] or path.startswith(e["original_root"] + "/"):
            return REPO / e["data_dir"] / Path(path).relative_to(e["original_root"])
    raise AssertionError(f"{path} is under no original_root of fixtures/paimon/manifest.json")


def table_of(scenario: str) -> Path:
    return REPO / ENTRIES[scenario]["data_dir"] / TABLE


def run(*args: str):
    return CliRunner().invoke(app, gc_alias(list(args)))


def never_old(table: Path) -> float:
    """A clean-up cut-off before every file of the table: nothing is old enough to be cleaned."""
    return min(p.stat().st_mtime for p in table.rglob("*") if p.is_file()) - 1


@pytest.mark.parametrize(("scenario", "restore"), RESTORED)
def test_forecast_matches_the_real_restore(scenario: str, restore: str) -> None:
    r = expected(scenario)["restores"][restore]
    first = r["committer_attempts"][0]
    table = table_of(scenario)
    report = run_report(Storage(), str(moved(r["restored_from"])), str(table), Rebase(),
                        older_than_at=never_old(table))  # fmt: skip
    (f,) = report.forecasts
    assert f.gated
    assert f.commit_user == first["commit_user"]
    assert [c.identifier for c in f.committables] == first["restored_identifiers"]
    codes = {h.code for h in f.hazards if h.severe}
    duplicates = r["rows_after"]["duplicate_rows"] > r["rows_before"]["duplicate_rows"]
    # safe exactly when the real restore succeeded without writing rows twice
    assert f.safe == (r["succeeded"] and not duplicates), (codes, r["exception"])
    assert report.ok == f.safe
    if r["succeeded"]:
        assert len([c for c in f.committables if c.recommitted]) == first["committed"]
        committed_ids = [s["commit_identifier"] for s in r["snapshots_committed_by_restore"]]
        assert [c.identifier for c in f.committables if c.recommitted] == committed_ids
    if r["exception"] and "Cannot recover from this checkpoint" in r["exception"]:
        named = {p.rpartition("/")[2] for p in re.findall(r"[^\s,]+\.avro", r["exception"])}
        missing = {x.name for c in f.committables for x in c.files if x.state == "missing" and x.checked}
        assert named and missing == named
        assert codes == {"B"}
    if duplicates:
        assert codes == {"C"}
        rewound = {s.commit_identifier for s in f.rewound}
        again = {s["commit_identifier"] for s in r["snapshots_committed_after_restore"]}
        assert rewound and rewound <= again
    if not r["succeeded"] and "File deletion conflicts" in (r["exception"] or ""):
        # the commit user's snapshots expired: Paimon re-commits what the table already holds
        assert codes == {"A"} and f.latest is None


def test_a_paimon_orphan_clean_deletes_exactly_the_files_flagged_d() -> None:
    """pending_cleaned is pending's table after Paimon's own OrphanFilesClean (older_than = now): the
    files it deleted are the ones the forecast of pending's newest checkpoint calls at risk, code D
    (B is a file already gone: the same checkpoint against the cleaned table), each by its bucket path."""
    exp = expected("pending_cleaned")
    chk = moved(exp["restores"]["pending_cleaned-restore-newest"]["restored_from"])
    before, after = table_of("pending"), table_of("pending_cleaned")
    deleted = {p.relative_to(before).as_posix() for p in before.rglob("*.avro")} - {
        p.relative_to(after).as_posix() for p in after.rglob("*.avro")
    }
    report = run_report(Storage(), str(chk), str(before), Rebase(), older_than_at=time.time())
    (f,) = report.forecasts
    at_risk = {x.path for c in f.committables if c.recommitted for x in c.files if x.state == "unreferenced"}
    assert deleted and at_risk == deleted
    assert [h.code for h in f.hazards if h.severe] == ["D"] and not report.ok
    assert set(f.hazards[0].files) == deleted
    # the same table judged with a cut-off before its files: a note, not a hazard
    calm = run_report(Storage(), str(chk), str(before), Rebase(), older_than_at=never_old(before))
    assert calm.ok and [h.code for h in calm.forecasts[0].hazards] == ["D"]
    # once Paimon's clean-up ran, the same files are gone: B, with the same paths
    (gone,) = run_report(Storage(), str(chk), str(after), Rebase(), older_than_at=never_old(after)).forecasts
    assert [(h.code, set(h.files)) for h in gone.hazards] == [("B", deleted)]


def test_a_root_gates_each_jobs_newest_checkpoint_and_shows_the_older_ones() -> None:
    root = moved(expected("rewind")["checkpoint_dir"]).parent
    table = table_of("rewind")
    report = run_report(Storage(), str(root), str(table), Rebase(), older_than_at=never_old(table))
    ids = [f.checkpoint_id for f in report.forecasts]
    assert ids == sorted(ids) and len(ids) >= 2
    assert [f.gated for f in report.forecasts] == [i == max(ids) for i in ids]
    assert report.ok and all(f.hazards and f.hazards[0].code == "C" for f in report.forecasts if not f.gated)


def test_cli_exit_codes_and_json() -> None:
    r = expected("pending_cleaned")["restores"]["pending_cleaned-restore-newest"]
    chk, table = moved(r["restored_from"]), table_of("pending_cleaned")
    res = run("paimon", str(chk.parent), "--table", str(table))
    assert res.exit_code == 1, res.output
    assert "hazard B" in res.output and "FAILED" in res.output
    res = run("--json", "paimon", "status", str(chk), "--table", str(table))
    assert res.exit_code == 1
    doc = json.loads(res.stdout)
    assert doc["ok"] is False and doc["checkpoints"][0]["hazards"][0]["code"] == "B"
    rewind = expected("rewind")
    newest = max(moved(rewind["checkpoint_dir"]).glob("chk-*"), key=lambda p: int(p.name[4:]))
    assert run("paimon", str(newest), "--table", str(table_of("rewind"))).exit_code == 0
    bad = run("paimon", str(newest), "--table", str(table_of("rewind") / "nope"))
    assert bad.exit_code == 2 and "Traceback" not in bad.output


def _copy_pending(tmp_path: Path) -> tuple[Path, Path, float]:
    """pending (checkpoints + table) copied, the table's files made two days old, the checkpoints
    minutes old (the job still runs: see tests/support/paimon_scenarios.py)."""
    dst = tmp_path / "pending"
    shutil.copytree(REPO / ENTRIES["pending"]["data_dir"], dst, copy_function=shutil.copy)  # times of now
    old = age_files(dst, 2 * 86400)
    chk_root = dst / Path(expected("pending")["checkpoint_dir"]).relative_to(
        ENTRIES["pending"]["original_root"]
    )
    age_files(chk_root, CHECKPOINTED)
    sync_commit_times(dst / TABLE)
    return chk_root, dst / TABLE, old


def _restored_from_older(chk_root: Path, table: Path, old: float) -> None:
    """The job restored from its checkpoint before the newest (chk-5) and re-committed 5: the files
    only the newest checkpoint named are garbage now, older than the table's latest commit."""
    commit_again(table, 5, old + 3 * 3600)


def test_orphans_keep_what_a_checkpoint_holds_and_gc_apply_deletes_the_rest(tmp_path: Path) -> None:
    chk_root, table, _old = _copy_pending(tmp_path)
    newest = max(chk_root.glob("chk-*"), key=lambda p: int(p.name[4:]))
    paimon_would_delete = {c.path for c in orphan_candidates(PaimonTable(str(table)))}
    held_by_newest = run_report(Storage(), str(newest), str(table), Rebase()).forecasts[0]
    newest_files = {x.path for c in held_by_newest.committables for x in c.files if x.state == "unreferenced"}
    assert newest_files and newest_files <= paimon_would_delete  # hazard B, as Paimon's clean-up stands
    # all retained checkpoints: nothing of Paimon's orphans may go
    plan = plan_orphans(Storage(), str(table), [str(chk_root)], Rebase())
    assert not plan.refusals and not plan.candidates
    assert {h["path"] for h in plan.held} == paimon_would_delete
    # the newest checkpoint gone (the job restored from the one before): the files only it named become garbage
    shutil.rmtree(newest)
    _restored_from_older(chk_root, table, _old)
    plan_file = tmp_path / "plan.json"
    res = run(
        "paimon", "orphans", "--table", str(table), "--checkpoints", str(chk_root), "-o", str(plan_file)
    )
    assert res.exit_code == 0, res.output
    plan = json.loads(plan_file.read_text())
    going = {c["path"].rpartition("/")[2] for c in plan["candidates"]}
    kept = {h["path"].rpartition("/")[2] for h in plan["held"]}
    still_held = {x.name for f in run_report(Storage(), str(chk_root), str(table), Rebase()).forecasts
                  for c in f.committables for x in c.files}  # fmt: skip
    assert going and going.isdisjoint(still_held) and kept <= still_held
    assert going | kept == {p.rpartition("/")[2] for p in paimon_would_delete}
    res = run("gc", "apply", str(plan_file), "--yes")
    assert res.exit_code == 0, res.output
    assert not any(p.name in going for p in table.rglob("*"))
    assert all(any(p.name == k for p in table.rglob("*")) for k in kept)
    # every retained checkpoint still restores: nothing it needs is missing
    after = run_report(Storage(), str(chk_root), str(table), Rebase())
    assert after.forecasts and all(
        x.state != "missing" for f in after.forecasts for c in f.committables for x in c.files
    )


def test_apply_skips_a_file_a_checkpoint_holds_again(tmp_path: Path) -> None:
    chk_root, table, old = _copy_pending(tmp_path)
    newest = max(chk_root.glob("chk-*"), key=lambda p: int(p.name[4:]))
    aside = tmp_path / "aside"
    shutil.move(newest, aside)
    _restored_from_older(chk_root, table, old)
    plan_file = tmp_path / "plan.json"
    assert (
        run(
            "paimon", "orphans", "--table", str(table), "--checkpoints", str(chk_root), "-o", str(plan_file)
        ).exit_code
        == 0
    )
    n = len(json.loads(plan_file.read_text())["candidates"])
    assert n > 0
    shutil.move(aside, newest)  # the checkpoint is back (a restore from it is possible again)
    res = run("--json", "gc", "apply", str(plan_file), "--yes")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout[res.stdout.index("{") :])
    assert doc["deleted_files"] == 0 and len(doc["skipped"]) == n
    f = run_report(Storage(), str(newest), str(table), Rebase()).forecasts[0]
    assert f.committables and all(x.state != "missing" for c in f.committables for x in c.files)


def test_orphans_fail_closed(tmp_path: Path) -> None:
    chk_root, table, _old = _copy_pending(tmp_path)
    # checkpoints of another job: the table's streaming commit user is not protected
    other = moved(expected("rewind")["checkpoint_dir"])
    res = run("paimon", "orphans", "--table", str(table), "--checkpoints", str(other))
    assert res.exit_code == 1 and "commit user" in res.output and "blocked" in res.output
    plan = plan_orphans(Storage(), str(table), [str(other)], Rebase())
    assert [r["code"] for r in plan.refusals] == ["unprotected-commit-user"]
    # a directory with no Paimon sink state at all
    flink_only = REPO / "fixtures" / "data" / "2.2.0"
    plan = plan_orphans(Storage(), str(table), [str(flink_only)], Rebase())
    assert "no-paimon-checkpoint" in {r["code"] for r in plan.refusals}
    # a blocked plan written to a file can never be applied
    plan_file = tmp_path / "blocked.json"
    assert (
        run(
            "paimon", "orphans", "--table", str(table), "--checkpoints", str(other), "-o", str(plan_file)
        ).exit_code
        == 1
    )
    res = run("gc", "apply", str(plan_file), "--yes")
    assert res.exit_code == 1 and "blocked" in res.output
    # an unreadable _metadata under the roots blocks: its files cannot be protected
    broken = chk_root / "chk-99"
    broken.mkdir()
    (broken / "_metadata").write_bytes(b"\x00\x01")
    plan = plan_orphans(Storage(), str(table), [str(chk_root)], Rebase())
    assert "unreadable-metadata" in {r["code"] for r in plan.refusals}
    # a cut-off in the future is refused, as Paimon refuses it
    res = run("paimon", "orphans", "--table", str(table), "--checkpoints", str(chk_root), "--older-than",
              "2999-01-01T00:00:00Z")  # fmt: skip
    assert res.exit_code == 2 and "past" in res.output


def test_a_tampered_orphan_plan_is_refused(tmp_path: Path) -> None:
    chk_root, table, _old = _copy_pending(tmp_path)
    shutil.rmtree(max(chk_root.glob("chk-*"), key=lambda p: int(p.name[4:])))
    plan_file = tmp_path / "plan.json"
    assert (
        run(
            "paimon", "orphans", "--table", str(table), "--checkpoints", str(chk_root), "-o", str(plan_file)
        ).exit_code
        == 0
    )
    plan = json.loads(plan_file.read_text())
    victim = next(chk_root.glob("chk-*/_metadata"))
    plan["candidates"].append({"path": victim.as_uri().replace("file:///", "file:/"), "size": victim.stat().st_size,
                               "mtime": victim.stat().st_mtime, "reason": "unreferenced"})  # fmt: skip
    plan_file.write_text(json.dumps(plan))
    res = run("gc", "apply", str(plan_file), "--yes")
    assert res.exit_code == 2 and "outside the table" in res.output
    assert victim.exists()


@pytest.mark.parametrize("scenario", ["committed", "pending", "expired", "rewind"])
def test_states_shows_the_committables_java_read(scenario: str) -> None:
    exp = expected(scenario)
    for ck in exp["checkpoints"]:
        res = run("--json", "states", str(moved(exp["checkpoint_dir"]) / ck["dir"]))
        assert res.exit_code == 0, res.output
        sinks = [op["paimon"] for op in json.loads(res.stdout)["operators"] if op.get("paimon")]
        assert {s["commit_user"] for s in sinks} == {ck["commit_user"]}
        got = [(c["identifier"], c["watermark"], c["files"]) for s in sinks for c in s["committables"]]
        want = [
            (c["identifier"], c["watermark"],
             sum(len(m[k]) for m in c["commit_messages"] for k in m if isinstance(m[k], list)))
            for c in ck["committables"]
        ]  # fmt: skip
        assert got == want


def _upload(s3_server, bucket: str, src: Path, prefix: str, skip: str | None = None, where=None) -> str:
    """``src``'s files to s3://bucket/prefix, but ``skip`` (a file or directory) and those whose
    path relative to ``src`` ``where`` (if given) refuses."""
    fs = s3_server.filesystem()
    if not fs.exists(bucket):
        s3_server.create_bucket(bucket)
    for p in sorted(src.rglob("*")):
        rel = p.relative_to(src).as_posix()
        if (
            p.is_file()
            and not (skip and (rel == skip or rel.startswith(skip + "/")))
            and (where is None or where(rel))
        ):
            fs.pipe_file(f"{bucket}/{prefix}/{rel}", p.read_bytes())
    return f"s3://{bucket}/{prefix}"


def test_status_and_orphans_over_s3_agree_with_local(s3_server, tmp_path: Path) -> None:
    """The checkpoints and the table on moto S3 (server mode, loopback): the same forecast as on
    disk, and an orphan plan gc apply carries out on the bucket."""
    exp = expected("pending")
    job = Path(exp["checkpoint_dir"]).relative_to(exp["original_root"]).as_posix()
    local = tmp_path / "pending"  # the times of now on disk too, as on S3 (uploaded now) and in a fresh clone
    shutil.copytree(REPO / ENTRIES["pending"]["data_dir"], local, copy_function=shutil.copy)
    base = _upload(s3_server, "ckptctl-paimon-run", local, "pending")
    cleaned = _upload(s3_server, "ckptctl-paimon-cleaned", table_of("pending_cleaned"), "events")
    newest = max((local / job).glob("chk-*"), key=lambda p: int(p.name[4:])).name
    endpoint = ["--s3-endpoint", s3_server.endpoint]

    def forecast(chk: str, table: str) -> list:
        res = run("--json", "paimon", chk, "--table", table, *endpoint)
        assert res.exit_code in (0, 1), res.output
        return [(c["checkpoint_id"], c["recommitted"], sorted(h["code"] for h in c["hazards"]), c["safe"],
                 sorted((f["name"], f["state"]) for k in c["committables"] for f in k["files"]))
                for c in json.loads(res.stdout)["checkpoints"]]  # fmt: skip

    on_s3 = forecast(f"{base}/{job}/{newest}", f"{base}/{TABLE.as_posix()}")
    on_disk = forecast(str(local / job / newest), str(local / TABLE))
    assert on_s3 == on_disk and on_s3[0][1] == [5, 6]
    broken = forecast(f"{base}/{job}/{newest}", cleaned)
    assert broken[0][2] == ["B"] and broken[0][3] is False
    # orphans on S3: the newest checkpoint not uploaded (the job restored from the one before), so
    # only its own files are garbage. Uploaded in the order the job wrote them, a second apart (S3
    # times have whole seconds): the data files, then the table's commits, then the checkpoints.
    table_rel = TABLE.as_posix()
    bucket_files = re.compile(re.escape(table_rel) + r"/part=[^/]+/bucket-")
    run_base = _upload(s3_server, "ckptctl-paimon-gc", local, "pending", where=bucket_files.match)
    next_second()
    sync_commit_times(local / TABLE, time.time())  # committed now, after those files
    _upload(s3_server, "ckptctl-paimon-gc", local, "pending",
            where=lambda rel: rel.startswith(table_rel + "/") and not bucket_files.match(rel))  # fmt: skip
    next_second()
    checkpointed = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    _upload(s3_server, "ckptctl-paimon-gc", local, "pending", skip=f"{job}/{newest}",
            where=lambda rel: rel.startswith(job + "/"))  # fmt: skip
    next_second()  # the cut-off "now" must be after the uploads
    plan_file = tmp_path / "plan.json"
    orphans = ["paimon", "orphans", "--table", f"{run_base}/{table_rel}", "--checkpoints", f"{run_base}/{job}",
               "-o", str(plan_file), *endpoint]  # fmt: skip
    res = run(*orphans, "--older-than", "0s")
    assert (
        res.exit_code == 2 and "--min-age" in res.output
    )  # the uploads are seconds old: a job could be writing
    # a cut-off after the job's newest checkpoint: a job that checkpoints no more (failing, or stopped)
    res = run(*orphans, "--older-than", "0s", "--min-age", "0s", "--margin", "0s")
    assert res.exit_code == 1 and "failing-checkpoints" in {
        r["code"] for r in json.loads(plan_file.read_text())["refusals"]
    }
    res = run(*orphans, "--older-than", checkpointed, "--min-age", "0s", "--margin", "0s")
    assert res.exit_code == 0, res.output
    plan = json.loads(plan_file.read_text())
    going = {c["path"] for c in plan["candidates"]}
    assert going and all(p.startswith(f"{run_base}/{TABLE.as_posix()}/") for p in going)
    assert plan["held"]
    res = run("gc", "apply", str(plan_file), "--yes", *endpoint)
    assert res.exit_code == 0, res.output
    fs = s3_server.filesystem()
    left = {"s3://" + k for k in fs.find(f"ckptctl-paimon-gc/pending/{TABLE.as_posix()}")}
    assert going.isdisjoint(left)
    assert {f"{run_base}/{TABLE.as_posix()}/{h['path']}" for h in plan["held"]} <= left


def test_a_user_without_snapshots_whose_files_the_table_never_named_is_not_hazard_a(tmp_path: Path) -> None:
    """Every snapshot gone (a table recreated from its data files, or expired to nothing): the
    committables' files are named by no snapshot, so committing them again is the restore's job."""
    chk_root, table, _old = _copy_pending(tmp_path)
    for p in (table / "snapshot").iterdir():
        p.unlink()
    newest = max(chk_root.glob("chk-*"), key=lambda p: int(p.name[4:]))
    (f,) = run_report(Storage(), str(newest), str(table), Rebase(), older_than_at=never_old(table)).forecasts
    assert f.latest is None and [c.identifier for c in f.committables if c.recommitted] == [5, 6]
    assert not [h for h in f.hazards if h.code == "A"] and f.safe
    # the same checkpoint against the real table whose user's snapshots expired: hazard A
    exp = expected("expired")
    (g,) = run_report(Storage(), str(moved(exp["restores"]["expired-restore-newest"]["restored_from"])),
                      str(table_of("expired")), Rebase()).forecasts  # fmt: skip
    assert [h.code for h in g.hazards] == ["A"] and not g.safe
