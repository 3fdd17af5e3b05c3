"""The local planner's columns: a listing held as names per directory, sizes and mtimes in arrays,
and decisions as positions, say exactly what per-file rows said.

The same plan is made from the walk (columns straight from ``scandir``) and from ``FileInfo`` rows
grouped into runs, with names packed two per chunk: every decision, count and warning agrees."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ckptctl.gc import build_plan
from ckptctl.gc import plan as gc_plan
from ckptctl.storage import FileInfo, Storage, listing
from ckptctl.storage.listing import dir_runs, walk_local_dirs
from tests.support.gc_support import Scenario


class _Rows(Storage):
    """A storage whose listing is FileInfo rows (as a scan's, an object store's)."""

    def list_files(self, uri, notes=None):
        yield from super().list_files(uri, notes)


def _without_clock(plan) -> dict:
    data = plan.to_json()
    del data["created_at"], data["now"]
    return data


def test_columns_and_rows_make_the_same_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sc = Scenario("2.2.0", "claim", tmp_path)
    job = sc.jobs()[0]
    for i in range(5):
        sc.plant(f"checkpoints/{job.name}/shared/old-{i}")
    sc.plant(f"checkpoints/{job.name}/shared/young", mtime=time.time())
    sc.plant(f"checkpoints/{job.name}/chk-999/_metadata")  # an incomplete checkpoint's stray file
    cutoff = time.time() - 86400  # one instant for both plans: the same evidence
    columns = build_plan(Storage(), sc.gc_options(older_than_at=cutoff))
    assert len(columns.candidates) >= 6 and columns.protected
    as_list = list(columns.candidates)
    assert [columns.candidates[i] for i in range(len(as_list))] == as_list
    assert columns.candidates[-1] == as_list[-1] and columns.candidates[1:4] == as_list[1:4]
    with pytest.raises(IndexError):
        columns.candidates[len(as_list)]
    assert columns.candidate_bytes == sum(c.size for c in as_list)

    monkeypatch.setattr(listing, "NAMES_CHUNK", 2)
    monkeypatch.setattr(gc_plan, "SPARK_HINT_FILES", 3)
    rows = build_plan(_Rows(), sc.gc_options(older_than_at=cutoff))
    hint = [w for w in rows.warnings if "--engine spark" in w]
    assert len(hint) == 1 and f"{rows.total_files:,} files listed" in hint[0]
    rows.warnings.remove(hint[0])
    assert list(rows.candidates) == as_list and list(rows.protected) == list(columns.protected)
    assert _without_clock(rows) == _without_clock(columns)


def test_walk_columns_are_the_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listing, "NAMES_CHUNK", 3)
    (tmp_path / "a" / "b").mkdir(parents=True)
    for i in range(10):
        (tmp_path / "a" / f"f{i}").write_bytes(b"x" * i)
    (tmp_path / "a" / "b" / "_metadata").write_bytes(b"m")
    elsewhere = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    elsewhere.mkdir()
    (elsewhere / "linked").write_bytes(b"l")
    os.symlink(elsewhere, tmp_path / "a" / "moved")
    runs = {run.parent: run for run in walk_local_dirs(str(tmp_path))}
    for parent, run in runs.items():
        d = Path(parent[len("file:") :])
        assert sorted(run.names) == sorted(e.name for e in os.scandir(d) if not e.is_dir())
        for i, name in enumerate(run.names):
            st = os.lstat(d / name)
            assert (run.sizes[i], run.mtime(i)) == (st.st_size, st.st_mtime)
            assert run.links[i] == (d.name == "moved")
    assert "_metadata" in runs[f"file:{tmp_path}/a/b"].names and "f9" in runs[f"file:{tmp_path}/a"].names
    assert [r.prefix for r in walk_local_dirs(str(tmp_path), only="_metadata")] == [f"file:{tmp_path}/a/b/"]

    # rows grouped into runs give back the same rows: a None mtime, an int one, a directory seen twice
    files = [FileInfo("s3://b/a/x", 1, 2.5), FileInfo("s3://b/a/c/y", 2, None, True), FileInfo("s3://b/a/z", 3, 4),
             FileInfo("s3://b/a/", 0, 1.0)]  # fmt: skip
    runs_of = list(dir_runs(files))
    assert [r.prefix for r in runs_of] == ["s3://b/a/", "s3://b/a/c/", "s3://b/a/"]
    assert [f for r in runs_of for f in r] == files
    assert type(runs_of[2].file(0).mtime) is int
