"""Root spellings that would silently name another directory (a trailing space, an empty string, a
regular file, an unsupported scheme) are one-line errors, never a scan."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.support.gc_plans import OLD
from tests.support.gc_support import Scenario, ckptctl

# --- F6: root spellings that silently name another directory -----------------------------------


def test_root_with_a_trailing_space_is_refused(tmp_path: Path) -> None:
    """`gc plan 'checkpoints '` must not scan and delete in 'checkpoints' (a trimmed spelling).

    Tracker: f6a."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    named = sc.checkpoints.with_name("checkpoints ")
    shutil.copytree(sc.checkpoints, named)
    (job,) = sc.jobs()
    orphan = sc.plant(f"checkpoints/{job.name}/shared/orphan-in-the-other-dir")
    args = (str(named), *sc.rebase, *OLD, "--force")
    result = ckptctl("gc", "plan", *args, expect=2)
    assert "blanks" in result.stderr
    assert orphan.exists(), "a file outside the named root was deleted"


def test_empty_root_is_refused(tmp_path: Path, monkeypatch) -> None:
    """`ckptctl gc plan "$CKPT_ROOT"` with the variable unset scans (and applies to) the cwd.

    Tracker: f6b."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    monkeypatch.chdir(sc.checkpoints)
    result = ckptctl("gc", "plan", "", *sc.rebase, *OLD, "--force", "--json", expect=None)
    assert result.exit_code == 2, (
        f"an empty ROOT was accepted as {json.loads(result.stdout)['options']['roots']}"
    )


def test_root_that_is_a_regular_file_is_refused(tmp_path: Path) -> None:
    """Tracker: f6c."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    a_file = next(p for p in sc.checkpoints.rglob("*") if p.is_file() and p.name != "_metadata")
    result = ckptctl("gc", "plan", str(a_file), *OLD, "--json", expect=None)
    assert result.exit_code == 2, (
        "a ROOT that is a file should be 'not a directory' (exit 2), not an empty plan"
    )


def test_unsupported_scheme_is_one_line_exit_2(tmp_path: Path) -> None:
    """An HDFS checkpoint root (an ordinary mistake: ckptctl is file:/s3: only) exits 3 with a
    multi-kilobyte libjvm dlopen message.

    Tracker: f8c."""
    result = ckptctl("gc", "plan", "hdfs://namenode:8020/flink/checkpoints", "--json", expect=None)
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1 and len(result.stderr) < 300, (
        result.exit_code, result.stderr[:200],
    )  # fmt: skip
