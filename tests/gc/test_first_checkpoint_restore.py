"""Issue 45 row 1 against Flink's own restore: the first checkpoint gc kept is restorable.

The 2.2.0 basic job, copied back to its ORIGINAL root (the paths inside ``_metadata`` point
there), as it is while its first checkpoint uploads (chk-9 alone, its ``_metadata`` not yet
landed, every file 95 minutes old), beside a healthy job; ``gc plan ROOT --collect-dead-jobs
--older-than 1h`` + ``gc apply``; then the ``_metadata`` lands and real Flink restores chk-9.
Before the fix apply deleted all 75 files of the job and the restore failed with
``FileNotFoundException`` on a shared SST.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from tests.support.fixture_cases import REPO, manifest
from tests.support.flink_harness import flink_python, original_root_held
from tests.support.gc_plans import apply, plan_to_file

pytestmark = pytest.mark.flink


def entry(version: str, scenario: str) -> dict:
    return next(
        e for e in manifest()["entries"] if e["flink_version"] == version and e["scenario"] == scenario
    )


def test_gc_keeps_a_first_checkpoint_flink_then_restores(tmp_path: Path, flink_sessions) -> None:
    e, h = entry("2.2.0", "basic"), entry("1.20.3", "unaligned")
    flink_python("2.2.0")  # skip without Java; create the venv before taking the lock
    root = Path(e["original_root"])
    (job_id,), (healthy_id,) = e["job_ids"], h["job_ids"]
    with original_root_held(e) as found:  # 2.2.0 basic's: tests/gc/test_restore.py holds it too
        saved = tmp_path / "pristine"
        if found:
            shutil.copytree(root, saved, symlinks=True)
        try:
            shutil.rmtree(root, ignore_errors=True)
            shutil.copytree(REPO / e["data_dir"], root)
            job, healthy = root / "checkpoints" / job_id, root / "checkpoints" / healthy_id
            shutil.copytree(REPO / h["data_dir"] / "checkpoints" / healthy_id, healthy)
            for old in ("chk-7", "chk-8"):
                shutil.rmtree(job / old)
            metadata = tmp_path / "_metadata"
            shutil.move(job / "chk-9" / "_metadata", metadata)  # still uploading: not there yet
            now = time.time()
            for p in healthy.rglob("*"):
                if p.is_file():
                    t = now - 3 * 86400 + (3600 if p.name == "_metadata" else 0)
                    os.utime(p, (t, t))
            for p in [*job.rglob("*"), job / "chk-9"]:
                os.utime(p, (now - 95 * 60, now - 95 * 60))
            before = sorted(p for p in job.rglob("*") if p.is_file())
            args = [str(root / "checkpoints"), "--collect-dead-jobs", "--older-than", "1h", "--force",
                    "--rebase", f"{h['original_root']}/checkpoints/{healthy_id}={healthy}"]  # fmt: skip
            apply(plan_to_file(tmp_path, *args))
            assert sorted(p for p in job.rglob("*") if p.is_file()) == before
            shutil.move(metadata, job / "chk-9" / "_metadata")  # the checkpoint completes
            r = flink_sessions.restore(
                "2.2.0", "basic", job / "chk-9", timeout=90, log_out=tmp_path / "restore.log"
            )
            assert r["ok"], r
        finally:
            shutil.rmtree(root, ignore_errors=True)
            if saved.exists():
                shutil.copytree(saved, root, symlinks=True)
