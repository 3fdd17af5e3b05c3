"""The Paimon fixtures (fixtures/paimon: a real Flink 1.20.3 job committing to a real Paimon table)
copied for a test, with file times as a running job leaves them: the table's files days old, the
job's retained checkpoints minutes old (a healthy job checkpoints every few minutes). ``paimon
orphans`` refuses a writer whose newest checkpoint is older than the cut-off (failing checkpoints, or
a stopped job) and keeps what a writer may have flushed since its newest checkpoint less --margin, so
a copy with every file two days old would plan nothing."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAIMON = REPO / "fixtures" / "paimon"
TABLE = Path("warehouse/default.db/events")
CHECKPOINTED = 600.0  # the age of a running job's retained checkpoints


def age_files(top: Path, age: float) -> float:
    """Every file and directory under ``top`` made ``age`` seconds old; the time set."""
    when = time.time() - age
    for p in [top, *top.rglob("*")]:
        os.utime(p, (when, when))
    return when


def sync_commit_times(table: Path, when: float | None = None) -> None:
    """Each commit's ``timeMillis`` (every snapshot, tag and changelog file of every branch) set to
    its file's time, or ``when``; the files' times kept. A copy aged with ``os.utime`` would keep the
    committer's times of the fixture's generation, and ``paimon orphans`` dates the table's latest
    commit by the earlier of its file's time and its ``timeMillis`` (a copy or a new branch gives the
    file a later time)."""
    for f in table.rglob("*"):
        if (
            f.is_file()
            and f.parent.name in ("snapshot", "tag", "changelog")
            and f.name.split("-")[0] in ("snapshot", "tag", "changelog")
        ):
            st = f.stat()
            snap = json.loads(f.read_text())
            snap["timeMillis"] = int((st.st_mtime if when is None else when) * 1000)
            f.write_text(json.dumps(snap))
            os.utime(f, (st.st_atime, st.st_mtime))


def copy_scenario(tmp_path: Path, scenario: str, age: float = 2 * 86400,
                  checkpointed: float = CHECKPOINTED) -> tuple[Path, Path]:  # fmt: skip
    """A scenario's checkpoints and table copied: (job dir, table). The table's files are ``age``
    seconds old, the checkpoints' ``checkpointed``."""
    dst = tmp_path / scenario
    shutil.copytree(PAIMON / "flink" / scenario, dst)
    age_files(dst, age)
    sync_commit_times(dst / TABLE)
    (job,) = (dst / "checkpoints").iterdir()
    age_files(dst / "checkpoints", checkpointed)
    return job, dst / TABLE


def commit_again(table: Path, identifier: int, when: float, user: str | None = None) -> None:
    """A later snapshot of the latest snapshot's commit user (or ``user``) with ``identifier`` (its
    manifests unchanged), its file written at ``when``: what a commit of the job's checkpoint
    ``identifier`` looks like to ``latestSnapshotOfUser``, and the table's latest commit from then on."""
    snap_dir = table / "snapshot"
    latest = int((snap_dir / "LATEST").read_text())
    snap = json.loads((snap_dir / f"snapshot-{latest}").read_text())
    snap.update(id=latest + 1, commitIdentifier=identifier, deltaRecordCount=0, timeMillis=int(when * 1000))
    if user is not None:
        snap["commitUser"] = user
    (snap_dir / f"snapshot-{latest + 1}").write_text(json.dumps(snap))
    (snap_dir / "LATEST").write_text(str(latest + 1))
    for p in (snap_dir / f"snapshot-{latest + 1}", snap_dir / "LATEST"):
        os.utime(p, (when, when))


def commit_user(table: Path) -> str:
    """The commit user of the table's first snapshot (the fixture job's)."""
    return json.loads(next((table / "snapshot").glob("snapshot-*")).read_text())["commitUser"]


def set_mtime(paths, when: float) -> None:
    for p in paths:
        os.utime(p, (when, when))
