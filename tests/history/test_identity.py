"""What identifies a ledgered entry: a job's checkpoint by (job id, checkpoint id), wherever its root
is (a job moved with ``relocate`` keeps its history), a savepoint by its directory (its ``_metadata``
carries no job id, so two jobs' savepoints share checkpoint ids). Real savepoints only: the 1.20.3
and 2.2.0 ``savepoints`` fixtures are two jobs whose savepoints are both numbered 5 and 6."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.support.cli_runner import DATA, cli, cli_json

JOBS = (DATA / "1.20.3" / "savepoints", DATA / "2.2.0" / "savepoints")
BASIC = DATA / "1.20.3" / "basic" / "checkpoints"


def _savepoint(fixture: Path, checkpoint_id: int) -> tuple[Path, int]:
    """The fixture's savepoint directory numbered ``checkpoint_id`` and its full bytes per ``ls``."""
    (row,) = [
        r for r in cli_json("ls", str(fixture))
        if r["kind"] == "savepoint" and r["checkpoint_id"] == checkpoint_id
    ]  # fmt: skip
    return Path(row["path"].removeprefix("file:")), row["state_size"]


def _savepoints(doc: dict) -> list[dict]:
    (group,) = [j for j in doc["jobs"] if j["kind"] == "savepoints"]
    return group["checkpoints"]


def _arrange(tmp_path: Path, checkpoint_id: int = 5) -> tuple[Path, list[tuple[Path, int]]]:
    """A root whose ``savepoints/`` holds each job's savepoint ``checkpoint_id``, one directory per
    job (as ``state.savepoints.dir`` per job lays them out); their copied paths and sizes."""
    root = tmp_path / "root"
    out = []
    for n, fixture in enumerate(JOBS):
        src, size = _savepoint(fixture, checkpoint_id)
        dst = root / "savepoints" / f"job-{n}" / src.name
        shutil.copytree(src, dst)
        out.append((dst, size))
    return root, out


def test_two_jobs_savepoints_with_one_id_are_two_entries(tmp_path: Path) -> None:
    root, sps = _arrange(tmp_path)
    for extra in ((), ("--ledger", str(tmp_path / "ledger"))):
        got = _savepoints(cli_json("history", str(root), *extra))
        assert sorted((c["checkpoint_id"], c["full_bytes"]) for c in got) == sorted((5, s) for _p, s in sps)
        assert sorted(c["path"] for c in got) == sorted(f"file:{p}" for p, _s in sps)
    shown = cli("history", str(root), "--ledger", str(tmp_path / "ledger"), env={"COLUMNS": "300"})
    assert shown.exit_code == 0, shown.output
    for p, _s in sps:
        assert f"savepoint 5 file:{p}: full" in shown.stdout


def test_a_savepoint_with_a_ledgered_id_is_added_and_kept(tmp_path: Path) -> None:
    """The second job's savepoint arrives after the first was ledgered (then the first is deleted, as
    a retention policy would): the ledger adds it, keeps both, and a run after adds nothing, whatever
    the spelling of the root and ledger (``file://``, ``//``: the storage layer's URI model)."""
    root, sps = _arrange(tmp_path)
    (first, _), (second, _) = sps
    hidden = tmp_path / "later"
    shutil.move(second.parent, hidden)
    ledger = tmp_path / "ledger"
    assert cli_json("history", str(root), "--ledger", str(ledger))["ledger_added"] == 1
    shutil.move(hidden, second.parent)
    assert cli_json("history", str(root), "--ledger", str(ledger))["ledger_added"] == 1
    shutil.rmtree(first.parent)
    doc = cli_json("history", f"file://{root.parent}//{root.name}/", "--ledger", f"file://{ledger}/")
    assert doc["ledger_added"] == 0
    assert sorted((c["path"], c["full_bytes"]) for c in _savepoints(doc)) == sorted(
        (f"file:{p}", s) for p, s in sps
    )


def test_a_job_relocated_to_another_root_keeps_one_history(tmp_path: Path) -> None:
    """The ledger spans two roots holding one job: its checkpoints ledgered from the old root and
    relocated to the new one are counted once, and the checkpoint taken after the move is measured
    against the one before it (uploaded bytes = Flink's checkpointed size), not as all new."""
    whole = cli_json("history", str(BASIC))["jobs"][0]["checkpoints"]
    old = tmp_path / "old" / "checkpoints"
    shutil.copytree(BASIC, old, ignore=lambda d, names: [x for x in names if x == "chk-9"])
    ledger = tmp_path / "ledger"
    assert cli_json("history", str(old), "--ledger", str(ledger))["ledger_added"] == 2
    new = tmp_path / "new" / "checkpoints"
    job = next(p for p in BASIC.iterdir() if len(p.name) == 32)
    result = cli("relocate", "--all", "--apply", str(job), str(new))
    assert result.exit_code == 0, result.output
    doc = cli_json("history", str(new), "--ledger", str(ledger))
    assert doc["ledger_added"] == 1
    (got,) = doc["jobs"]
    keys = ("checkpoint_id", "full_bytes", "uploaded_bytes", "reused_bytes", "base_checkpoint_id")
    assert [{k: c[k] for k in keys} for c in got["checkpoints"]] == [{k: c[k] for k in keys} for c in whole]
    back = cli_json("history", str(old), "--ledger", str(ledger))  # the old root again: nothing twice
    assert back["ledger_added"] == 0
    assert [c["checkpoint_id"] for c in back["jobs"][0]["checkpoints"]] == [7, 8, 9]


def test_a_file_is_compared_from_its_job_directory_on() -> None:
    """The job's directory is the last path segment named by the job id (a root may carry the
    name too); a file outside any directory of the job is compared whole."""
    from ckptctl.history.rows import moved_key

    job = "d178cffb578b056896a311818643e963"
    for root in ("s3://a/ck", f"file:/data/{job}/ck", "s3://b"):
        assert moved_key(f"{root}/{job}/shared/x#128", job) == f"{job}/shared/x#128"
    assert moved_key("file:/sp/savepoint-d178cf-1/x", job) == "file:/sp/savepoint-d178cf-1/x"
    assert moved_key("file:/sp/x", "") == "file:/sp/x"
