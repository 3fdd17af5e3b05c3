"""``ckptctl paimon`` in an incident: answers an operator can act on.

Every case is built from the real Flink 1.20.3 -> Paimon runs of fixtures/paimon (their expected JSON
is Java's reading and the real restore's outcome), changed only as a real incident changes them:
Paimon's own orphan clean-up deleted files (``pending_cleaned``), the commit user's snapshots
expired (``expired``), a retained checkpoint is lost. The answers are held to Java's reading and the
real restores: every missing or at-risk file by its bucket path, B (gone) apart from D (at risk),
why a user without snapshots re-commits everything, the rows and bytes a rewind writes again, the
newest safe checkpoint, and ``paimon orphans`` warning of a restore that is already broken.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

from typer.testing import CliRunner

from ckptctl.checkpoint.rebase import Rebase
from ckptctl.cli import app, gc_alias
from ckptctl.paimon.restore import run_report
from ckptctl.storage import Storage
from tests.support.paimon_scenarios import TABLE, copy_scenario

REPO = Path(__file__).resolve().parents[2]
PAIMON = REPO / "fixtures" / "paimon"
ENTRIES = {e["scenario"]: e for e in json.loads((PAIMON / "manifest.json").read_text())["entries"]}


def expected(scenario: str) -> dict:
    return json.loads((REPO / ENTRIES[scenario]["expected"]).read_text())


def moved(path: str) -> Path:
    for e in ENTRIES.values():
        if path == e["original_root"] or path.startswith(e["original_root"] + "/"):
            return REPO / e["data_dir"] / Path(path).relative_to(e["original_root"])
    raise AssertionError(path)


def table_of(scenario: str) -> Path:
    return REPO / ENTRIES[scenario]["data_dir"] / TABLE


def run(*args: str, columns: int = 80):
    res = CliRunner().invoke(app, gc_alias(list(args)), env={"COLUMNS": str(columns)})
    if "--json" not in args:
        for line in res.stdout.splitlines():
            assert len(line.rstrip()) <= columns, line
    return res


def never_old(table: Path) -> float:
    return min(p.stat().st_mtime for p in table.rglob("*") if p.is_file()) - 1


def cleaned_away() -> set[str]:
    """The files Paimon's own OrphanFilesClean deleted from pending's table, relative to the table."""
    before, after = table_of("pending"), table_of("pending_cleaned")
    return {p.relative_to(before).as_posix() for p in before.rglob("*.avro")} - {
        p.relative_to(after).as_posix() for p in after.rglob("*.avro")
    }


def test_every_missing_file_is_named_by_its_bucket_path_in_text_and_json() -> None:
    """The real restore of pending's newest checkpoint onto the cleaned table failed naming the files
    it missed: ckptctl names the same ones, every one, by partition/bucket-N/file."""
    r = expected("pending_cleaned")["restores"]["pending_cleaned-restore-newest"]
    chk, table = moved(r["restored_from"]), table_of("pending_cleaned")
    java = {p.split("/table-copy/events/", 1)[1] for p in re.findall(r"[^\s,]+\.avro", r["exception"])}
    assert len(java) > 1 and java == cleaned_away()
    res = run("--json", "paimon", "status", str(chk), "--table", str(table))
    assert res.exit_code == 1, res.output
    (ck,) = json.loads(res.stdout)["checkpoints"]
    (b,) = [h for h in ck["hazards"] if h["code"] == "B"]
    assert sorted(b["files"]) == sorted(java)
    missing = [f["path"] for c in ck["committables"] for f in c["files"] if f["state"] == "missing"]
    assert sorted(missing) == sorted(java)
    text = run("paimon", "status", str(chk), "--table", str(table)).stdout
    listed = {line.strip() for line in text.splitlines() if line.startswith("  ")}
    assert java <= listed, text


def test_a_gone_file_is_b_and_an_at_risk_one_d() -> None:
    """Before Paimon's clean-up the files are at risk (D, with their paths); after it they are gone (B).
    The real clean-up deleted exactly the D files; the real restore failed on exactly the B ones."""
    chk = moved(expected("pending_cleaned")["restores"]["pending_cleaned-restore-newest"]["restored_from"])
    deleted = cleaned_away()
    # pending: the clean-up's cut-off now, as it ran (older_than = now)
    for table, code, cut in ((table_of("pending"), "D", ["--older-than", "0s"]),
                             (table_of("pending_cleaned"), "B", [])):  # fmt: skip
        args = ["paimon", "status", str(chk), "--table", str(table), *cut]
        res = run("--json", *args)
        (ck,) = json.loads(res.stdout)["checkpoints"]
        assert [(h["code"], h["severe"], sorted(h["files"])) for h in ck["hazards"]] == [
            (code, True, sorted(deleted))
        ], res.stdout
        assert f"hazard {code}" in run(*args).stdout


def test_hazard_a_says_why_every_committable_is_committed_again() -> None:
    """expired: only user ckptctl-other's snapshot survives. The real restore handed every committable
    to the commit (restored_identifiers) and failed on the conflict; the output says why all of them."""
    exp = expected("expired")
    r = exp["restores"]["expired-restore-newest"]
    chk, table = moved(r["restored_from"]), table_of("expired")
    survivors = {s["commit_user"] for s in exp["table"]["snapshots"]}
    user = r["committer_attempts"][0]["commit_user"]
    assert user not in survivors
    doc = json.loads(run("--json", "paimon", "status", str(chk), "--table", str(table)).stdout)
    (ck,) = doc["checkpoints"]
    assert ck["recommitted"] == r["committer_attempts"][0]["restored_identifiers"]
    reason = ck["recommit_reason"]
    assert f"no snapshot of commit user {user} survives" in reason
    assert all(u in reason for u in survivors) and "every committable" in reason
    (a,) = ck["hazards"]
    assert a["code"] == "A" and reason in a["message"]
    text = " ".join(run("paimon", "status", str(chk), "--table", str(table)).stdout.split())
    assert "filterCommitted" in text and all(u in text for u in survivors)


def test_a_user_without_any_snapshot_is_explained_without_hazard_a(tmp_path: Path) -> None:
    """Every snapshot gone: the committables' files were never committed, so no hazard; the note says
    why the restore commits them all."""
    job, table = copy_scenario(tmp_path, "pending")
    for p in (table / "snapshot").iterdir():
        p.unlink()
    newest = max(job.glob("chk-*"), key=lambda p: int(p.name[4:]))
    before = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(never_old(table)))  # the clean-up takes nothing
    res = run("paimon", "status", str(newest), "--table", str(table), "--older-than", before)
    text = " ".join(res.stdout.split())
    assert res.exit_code == 0 and "hazard" not in text, res.stdout
    assert "note chk-" in text and "no snapshot, so none of commit user" in text, res.stdout


def test_hazard_c_counts_the_rows_and_bytes_written_again() -> None:
    """rewind restored from its oldest checkpoint wrote the commits after it again: the rows are the
    rewound snapshots' deltaRecordCount (Java's reading), the bytes their new data files on disk, and
    the real restore's duplicates are within them."""
    exp = expected("rewind")
    r = exp["restores"]["rewind-restore-oldest"]
    chk, table = moved(r["restored_from"]), table_of("rewind")
    (f,) = run_report(Storage(), str(chk), str(table), Rebase(), older_than_at=never_old(table)).forecasts
    snaps = {s["id"]: s for s in exp["table"]["snapshots"]}
    rewound = [s for s in snaps.values() if s["commit_user"] == f.commit_user
               and s["commit_identifier"] > f.checkpoint_id]  # fmt: skip
    assert len(rewound) >= 2
    rows = sum(s["delta_record_count"] for s in rewound)
    added = set().union(*(set(s["data_files"]) - set(snaps[s["id"] - 1]["data_files"]) for s in rewound))
    size = sum((table / p).stat().st_size for p in added)
    assert (f.replay.snapshots, f.replay.rows, f.replay.bytes) == ([s["id"] for s in rewound], rows, size)
    duplicates = r["rows_after"]["duplicate_rows"] - r["rows_before"]["duplicate_rows"]
    assert 0 < duplicates <= rows
    text = " ".join(run("paimon", "status", str(chk), "--table", str(table)).stdout.split())
    assert f"{rows:,} rows ({size:,} bytes) of {len(rewound)} committed snapshot(s)" in text
    doc = json.loads(run("--json", "paimon", "status", str(chk), "--table", str(table)).stdout)
    assert doc["checkpoints"][0]["replay"]["rows"] == rows


def test_the_newest_safe_checkpoint_is_named() -> None:
    """pending's checkpoints against the cleaned table: the newest (the real restore failed) and the
    one before need deleted files; the newest whose re-committed files all exist is named, and it
    replays nothing committed (the table's latest commit of the user is its own)."""
    exp = expected("pending")
    table = table_of("pending_cleaned")
    on_disk = {p.name for p in table.rglob("*.avro")}
    whole = [
        ck["checkpoint_id"] for ck in exp["checkpoints"]
        if all(f["file_name"] in on_disk for c in ck["committables"] if c["committed_in_snapshot"] is None
               for m in c["commit_messages"] for f in m["new_files"])
    ]  # fmt: skip
    newest = max(ck["checkpoint_id"] for ck in exp["checkpoints"])
    assert whole and max(whole) < newest
    root = moved(exp["checkpoint_dir"])
    doc = json.loads(run("--json", "paimon", str(root), "--table", str(table)).stdout)
    (s,) = doc["newest_safe"]
    assert (s["checkpoint_id"], s["safe"], s["is_the_restored"]) == (max(whole), True, False)
    assert s["replay"]["snapshots"] == []
    text = " ".join(run("paimon", str(root), "--table", str(table)).stdout.split())
    assert f"newest safe checkpoint of job {exp['job_id']}: chk-{max(whole)};" in text


def test_with_no_safe_checkpoint_the_one_that_restores_is_named_with_its_replay(tmp_path: Path) -> None:
    """rewind with its newest checkpoint lost (every commit made): each retained checkpoint rewinds
    (C); the newest is named with the rows, bytes and snapshots it writes again."""
    job, table = copy_scenario(tmp_path, "rewind")
    newest = max(job.glob("chk-*"), key=lambda p: int(p.name[4:]))
    shutil.rmtree(newest)
    exp = expected("rewind")
    left = max(int(p.name[4:]) for p in job.glob("chk-*"))
    again = [s for s in exp["table"]["snapshots"] if s["commit_identifier"] > left]
    res = run("--json", "paimon", str(job), "--table", str(table))
    assert res.exit_code == 1
    (s,) = json.loads(res.stdout)["newest_safe"]
    assert (s["checkpoint_id"], s["safe"], s["is_the_restored"]) == (left, False, True)
    assert s["replay"]["snapshots"] == [x["id"] for x in again]
    assert s["replay"]["rows"] == sum(x["delta_record_count"] for x in again) > 0
    text = " ".join(run("paimon", str(job), "--table", str(table)).stdout.split())
    assert "no safe checkpoint; the newest that restores" in text and f"{s['replay']['rows']:,} rows" in text


def test_orphans_warns_that_the_checkpoint_a_restore_takes_is_already_broken(tmp_path: Path) -> None:
    """pending's job still running against the table Paimon's clean-up ran on: its newest checkpoint
    (the one a restore takes) needs the deleted files. The plan keeps what the checkpoints hold and
    says the restore is already broken, naming the files."""
    job, _table = copy_scenario(tmp_path, "pending")
    cleaned = tmp_path / "cleaned"
    shutil.copytree(table_of("pending_cleaned"), cleaned)
    args = ["paimon", "orphans", "--table", str(cleaned), "--checkpoints", str(job)]
    doc = json.loads(run("--json", *args).stdout)
    newest = max(int(p.name[4:]) for p in job.glob("chk-*"))
    (b,) = doc["broken_restores"]
    assert b["checkpoint_id"] == newest and sorted(b["missing"]) == sorted(cleaned_away())
    assert any("already broken" in w for w in doc["warnings"])
    text = " ".join(run(*args).stdout.split() + run(*args).stderr.split())
    assert f"chk-{newest}, the checkpoint a restore of job" in text and "already broken" in text
    # the table before the clean-up: nothing is broken
    _job, table = copy_scenario(tmp_path / "ok", "pending")
    doc = json.loads(
        run("--json", "paimon", "orphans", "--table", str(table), "--checkpoints", str(job)).stdout
    )
    assert doc["broken_restores"] == [] and not any("already broken" in w for w in doc["warnings"])


def test_a_job_directory_at_80_columns_names_rows_chk_n_and_the_commit_user_whole() -> None:
    """The review's c1/c3: a job directory's rows read chk-N (not the job id folded over four lines),
    and the commit user is printed whole (it was cut to 8 characters), every line within 80 columns."""
    exp = expected("rewind")
    job = moved(exp["checkpoint_dir"])
    res = run("paimon", str(job.parent), "--table", str(table_of("rewind")))  # the directory of jobs
    assert res.exit_code == 0, res.output
    rows = [
        line.strip("│ ").split("│")[0].strip() for line in res.stdout.splitlines() if line.startswith("│")
    ]
    assert rows == [f"chk-{ck['checkpoint_id']}" for ck in exp["checkpoints"]], res.stdout
    users = {ck["commit_user"] for ck in exp["checkpoints"]}
    assert all(u in res.stdout for u in users), res.stdout


def test_orphans_min_age_default_is_a_duration_in_help() -> None:
    """The review's c6: `--min-age … [default: 3600.0]`; every other duration is shown as written."""
    text = " ".join(run("paimon", "orphans", "--help").stdout.split())
    assert "[default: 1h]" in text and "3600" not in text
