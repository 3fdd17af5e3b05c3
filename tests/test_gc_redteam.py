"""Red-team findings against the redesigned gc: each test failed on the first version of it.

Every scenario is a private copy of a real Flink fixture (tests/support/gc_support.py); hostile
``_metadata`` is a real file decoded, edited in the typed model and re-encoded with ckptctl's
writer (tests/test_gc_attacks.py ``edit_metadata``/``rewrite``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ckptctl.metadata import read_metadata
from ckptctl.metadata.model import FileHandle
from tests.support.gc_support import T0, Scenario, ckptctl, plan_json
from tests.test_gc_attacks import J1, OLD, apply, candidates, edit_metadata, edit_plan, plan_to_file, rewrite


def first_shared_file_handle_path(meta: Path) -> str:
    found: list[str] = []

    def look(h):
        if type(h) is FileHandle and "/shared/" in h.path and not found:
            found.append(h.path)
        return None

    rewrite(read_metadata(meta.read_bytes(), str(meta)), look)
    return found[0]


# --- F1: a cluster-wide changelog dir, one job's checkpoint root scanned -----------------------


def test_f1_changelog_files_of_a_job_whose_checkpoints_are_not_scanned_are_kept(tmp_path: Path) -> None:
    """state.changelog.dstl.dfs.base-path is usually cluster-wide; the operator scans one job's
    checkpoint root with --changelog-dir. Another job's DSTL files (referenced by its checkpoints,
    per Flink's own reading in fixtures/expected) have no anchor: they must be kept and say why."""
    mine = Scenario("1.20.3", "changelog", tmp_path / "a")
    other = Scenario("2.2.0", "changelog", tmp_path / "b")  # its checkpoints live in a root not scanned
    dstl = mine.root / "dstl"
    (other_job,) = list((other.root / "dstl").iterdir())
    shutil.copytree(other_job, dstl / other_job.name)
    for p in (dstl / other_job.name).rglob("*"):
        if p.is_file():
            os.utime(p, (T0, T0))
    needed = {
        u.replace(f"file:{other.root}/dstl", f"file:{dstl}")
        for u in other.referenced_by_flink()
        if "/dstl/" in u
    }
    assert needed and all(Path(u[5:]).exists() for u in needed)

    args = (str(mine.checkpoints), "--changelog-dir", str(dstl), *mine.rebase, *OLD, "--force")
    plan = plan_json(*args)
    kept = {p["path"]: p["reason"] for p in plan["protected"]}
    assert all(kept.get(u) == "changelog-unscanned-job" for u in needed), [kept.get(u) for u in needed]
    apply(plan_to_file(tmp_path, *args))
    gone = {u for u in needed if not Path(u[5:]).exists()}
    assert not gone, f"{len(gone)} DSTL files another job's checkpoints reference were deleted"


# --- F2: Flink's Path trims the written string; ckptctl's fast path does not ------------------


@pytest.mark.parametrize("pad", [" ", "\t", "\x01"], ids=["space", "tab", "ctrl-a"])
def test_f2_trailing_whitespace_in_a_written_path(tmp_path: Path, pad: str) -> None:
    """Flink reads a FileStateHandle as ``new Path(readUTF())`` and Path(String) calls
    String.trim() (drops every char <= U+0020 at both ends). ckptctl's canonical() returns an
    already-normal path unchanged, so 'shared/x ' is live for ckptctl, and the file Flink opens,
    'shared/x', is an orphan. A decoy 'x ' keeps missing-live-files quiet."""
    sc = Scenario("1.20.3", "basic", tmp_path)
    (job,) = sc.jobs()
    metas = sorted(job.glob("chk-*/_metadata"))
    written = first_shared_file_handle_path(metas[-1])
    for meta in metas:
        edit_metadata(
            meta,
            lambda h: h._replace(path=written + pad) if type(h) is FileHandle and h.path == written else None,
        )
    real = sc.root / written[len("file:" + sc.original) + 1 :]
    assert "file:" + str(real) in sc.referenced_by_flink()
    shutil.copy2(real, real.with_name(real.name + pad))  # the decoy

    args = (str(sc.checkpoints), *sc.rebase, *OLD, "--force")
    plan = plan_json(*args)
    assert not plan["refusals"]
    apply(plan_to_file(tmp_path, *args))
    assert real.exists(), "the file Flink opens (the trimmed path) was deleted"


# --- F3: --keep-last ranks by N, not by completion --------------------------------------------


def test_f3_keep_last_refuses_when_checkpoint_numbers_and_times_disagree(tmp_path: Path) -> None:
    """A fixed job id (application mode, operator-managed jobs) restored from an older savepoint
    continues at a lower N next to a stale higher chk-N of the previous run. --keep-last 1 keeps
    the stale chk-9 and would delete chk-8, the checkpoint that completed last (the one Flink's HA
    store points to): the plan must be blocked."""
    sc = Scenario("1.20.3", "basic", tmp_path)
    (job,) = sc.jobs()
    os.utime(job / "chk-9" / "_metadata", (T0 + 600, T0 + 600))  # chk-7, chk-8 completed after it
    args = (str(sc.checkpoints), *sc.rebase, *OLD, "--force", "--keep-last", "1")
    plan = plan_json(*args, expect=1)
    assert "keep-last-order" in {r["code"] for r in plan["refusals"]}
    apply(plan_to_file(tmp_path, *args, expect=1), expect=1)
    assert (job / "chk-8" / "_metadata").exists(), "the most recently completed checkpoint was deleted"


# --- F4: a job starting from an expired checkpoint ---------------------------------------------


def test_f4_keep_last_refuses_while_a_job_is_starting(tmp_path: Path) -> None:
    """A job started a minute ago from J1/chk-7 (CLAIM, rolling back past chk-8) has no completed
    checkpoint yet: only its young files show it runs. --keep-last 1 deletes chk-7 (and the
    files only it references), which that job restores from on failover and whose shared files
    its first incremental checkpoint will reference: the plan must be blocked."""
    sc = Scenario("1.20.3", "claim", tmp_path)
    starting = "0123456789abcdef0123456789abcdef"
    recent = time.time() - 60
    sc.plant(f"checkpoints/{starting}/chk-1/in-flight-state", mtime=recent)
    sc.plant(f"checkpoints/{starting}/shared/new-sst", mtime=recent)
    args = (str(sc.checkpoints), *sc.rebase, *OLD, "--force", "--keep-last", "1")
    plan = plan_json(*args, expect=1)
    assert "job-starting" in {r["code"] for r in plan["refusals"]}
    apply(plan_to_file(tmp_path, *args, expect=1), expect=1)
    assert (sc.checkpoints / J1 / "chk-7" / "_metadata").exists(), (
        "the checkpoint a starting job restores from was deleted"
    )


# --- F5: ForSt in-use detection by substring ----------------------------------------------------


def test_f5_forst_working_files_kept_when_the_root_path_contains_shared_op(tmp_path: Path) -> None:
    """A root below /data/shared/op_team/...: 'in use' must be decided by the grammar below the
    root, not by the first '/shared/op_' in the path, or the working files of live ForSt DBs go."""
    base = tmp_path / "shared" / "op_team"
    base.mkdir(parents=True)
    sc = Scenario("2.2.0", "forst", base)
    prefix = "file:" + str(sc.root)
    used_dirs = {Path(u[5:]).parent for u in sc.referenced_by_flink() if "/shared/op_" in u[len(prefix) :]}
    working = [p for d in used_dirs for p in d.iterdir() if p.is_file()]
    args = (str(sc.checkpoints), *sc.rebase, *OLD, "--force")
    apply(plan_to_file(tmp_path, *args))
    gone = [p for p in working if not p.exists()]
    assert not gone, f"{len(gone)} files of in-use ForSt working directories deleted"


# --- F6: root spellings that silently name another directory -----------------------------------


def test_f6a_root_with_a_trailing_space_is_refused(tmp_path: Path) -> None:
    """`gc plan 'checkpoints '` must not scan and delete in 'checkpoints' (a trimmed spelling)."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    named = sc.checkpoints.with_name("checkpoints ")
    shutil.copytree(sc.checkpoints, named)
    (job,) = sc.jobs()
    orphan = sc.plant(f"checkpoints/{job.name}/shared/orphan-in-the-other-dir")
    args = (str(named), *sc.rebase, *OLD, "--force")
    result = ckptctl("gc", "plan", *args, expect=2)
    assert "blanks" in result.stderr
    assert orphan.exists(), "a file outside the named root was deleted"


def test_f6b_empty_root_is_refused(tmp_path: Path, monkeypatch) -> None:
    """`ckptctl gc plan "$CKPT_ROOT"` with the variable unset scans (and applies to) the cwd."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    monkeypatch.chdir(sc.checkpoints)
    result = ckptctl("gc", "plan", "", *sc.rebase, *OLD, "--force", "--json", expect=None)
    assert result.exit_code == 2, (
        f"an empty ROOT was accepted as {json.loads(result.stdout)['options']['roots']}"
    )


def test_f6c_root_that_is_a_regular_file_is_refused(tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    a_file = next(p for p in sc.checkpoints.rglob("*") if p.is_file() and p.name != "_metadata")
    result = ckptctl("gc", "plan", str(a_file), *OLD, "--json", expect=None)
    assert result.exit_code == 2, (
        "a ROOT that is a file should be 'not a directory' (exit 2), not an empty plan"
    )


# --- F7: directory grammar wider than Flink's --------------------------------------------------


@pytest.mark.parametrize("dirname", ["chk-03", "chk-\u0663", "chk-\uff13", "chk-3\n"],
                         ids=["leading-zero", "arabic-indic-3", "fullwidth-3", "trailing-newline"])  # fmt: skip
def test_f7_directories_flink_never_names_are_not_checkpoints(
    tmp_path: Path, dirname: str
) -> None:
    """Flink names them 'chk-' + Long.toString(id). CHK_RE = ^chk-(\\d+)$ accepts any Unicode
    decimal digit, leading zeros, and (with $) a trailing newline (JOB_ID_RE has the same $)."""
    sc = Scenario("1.20.3", "basic", tmp_path)
    (job,) = sc.jobs()
    mine = sc.plant(f"checkpoints/{job.name}/{dirname}/notes.txt")
    args = (str(sc.checkpoints), *sc.rebase, *OLD, "--force")
    assert "file:" + str(mine) not in candidates(plan_json(*args))


# --- F8: crashes (exit 3) and hangs -----------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("roots", ["/tmp/a\u0000b"]),
        ("savepoint_dirs", ["/tmp/a\u0000b"]),
        ("changelog_dirs", ["/tmp/\ud800"]),
    ],
)
def test_f8a_plan_file_paths_with_nul_or_lone_surrogates_are_invalid(
    tmp_path: Path, field: str, value
) -> None:
    sc = Scenario("1.20.3", "basic", tmp_path)
    plan_file = plan_to_file(tmp_path, str(sc.checkpoints), *sc.rebase, *OLD, "--force")
    edit_plan(plan_file, lambda d: d["options"].__setitem__(field, value))
    result = apply(plan_file, expect=None)
    assert result.exit_code == 2, f"exit {result.exit_code}: {result.stderr.strip()}"
    assert "not a valid plan" in result.stderr


@pytest.mark.parametrize("kind", ["fifo", "symlink-to-dev-zero"])
def test_f8b_non_regular_metadata_is_refused_not_read(tmp_path: Path, kind: str) -> None:
    """chk-N/_metadata as a FIFO: gc plan blocks forever in read. As a symlink to /dev/zero (or
    to any huge file): read until MemoryError (exit 3) or the OOM killer."""
    sc = Scenario("1.20.3", "basic", tmp_path)
    (job,) = sc.jobs()
    meta = job / "chk-10" / "_metadata"
    meta.parent.mkdir()
    if kind == "fifo":
        os.mkfifo(meta)
    else:
        meta.symlink_to("/dev/zero")
    code = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)); "
        "from ckptctl.cli import main; sys.argv[0] = 'ckptctl'; main()"
    )
    argv = [sys.executable, "-c", code, "gc", "plan", str(sc.checkpoints), *sc.rebase, *OLD]
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("gc plan hung on a FIFO _metadata")
    assert result.returncode in (1, 2), result.stderr


def test_f8c_unsupported_scheme_is_one_line_exit_2(tmp_path: Path) -> None:
    """An HDFS checkpoint root (an ordinary mistake: ckptctl is file:/s3: only) exits 3 with a
    multi-kilobyte libjvm dlopen message."""
    result = ckptctl("gc", "plan", "hdfs://namenode:8020/flink/checkpoints", "--json", expect=None)
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1 and len(result.stderr) < 300, (
        result.exit_code, result.stderr[:200],
    )  # fmt: skip


def test_plan_warnings_name_the_same_file_whatever_the_hash_seed() -> None:
    """The FLINK-39964 warning names its first file: the same one on every run (it was taken from a
    set, so it followed Python's hash seed)."""
    root = Path(__file__).resolve().parent.parent / "fixtures" / "data" / "2.2.0" / "claim_native"
    outs = []
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        p = subprocess.run([sys.executable, "-m", "ckptctl", "gc", str(root), "--clock", "local"],
                           capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
        outs.append([line for line in p.stderr.splitlines() if "FLINK-39964" in line])
    assert outs[0] and outs[0] == outs[1] == outs[2]
