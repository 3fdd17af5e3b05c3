"""``--rebase`` and the inferred mapping of a moved directory (ckptctl.checkpoint.rebase), unit by unit.

The pure path rules are checked on small examples; inference is checked on a real Flink fixture
copied away from where Flink wrote it, against the manifest's record of that place.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

from ckptctl.checkpoint.layout import CheckpointLocation, scan_root
from ckptctl.checkpoint.loading import load_checkpoint
from ckptctl.checkpoint.rebase import Rebase, infer_rebase, moved_warnings, with_inferred, written_job_dir
from ckptctl.checkpoint.refs import COLUMNS, reference_rows
from ckptctl.errors import LayoutError
from ckptctl.storage import Storage
from tests.support.gc_support import Scenario

JOB = "d178cffb578b056896a311818643e963"
PATH = COLUMNS.index("path")


# ---- parse ------------------------------------------------------------------------------------


def test_parse_normalises_both_sides_and_orders_longest_old_first() -> None:
    r = Rebase.parse(["/old=/new", "s3a://bucket//ck/./jobs/=s3://other/ck", "/old/deeper/=/x"])
    assert r.mappings == (
        ("s3://bucket/ck/jobs", "s3://other/ck"),
        ("file:/old/deeper", "file:/x"),
        ("file:/old", "file:/new"),
    )
    assert Rebase.parse([]) == Rebase() and not Rebase.parse([])


@pytest.mark.parametrize("spec", ["no-equals-sign", "=/new", "/old=", ""])
def test_parse_refuses_what_is_not_old_equals_new(spec: str) -> None:
    with pytest.raises(LayoutError) as e:
        Rebase.parse(["/fine=/also-fine", spec])
    assert "OLD=NEW" in str(e.value) and f"'{spec}'" in str(e.value)


def test_specs_read_back_to_the_same_mapping_and_it_pickles() -> None:
    r = Rebase.parse(["/a=/b", "s3://x/y=file:/z"])
    assert Rebase.parse(r.specs()) == r
    assert Rebase.of(r.mappings) == r
    assert pickle.loads(pickle.dumps(r)) == r
    assert r.describe() == ", ".join(r.specs())


# ---- apply ------------------------------------------------------------------------------------


def test_apply_maps_whole_path_segments_only() -> None:
    r = Rebase.parse(["/data/job-a=/moved/job-a"])
    assert r.apply("file:/data/job-a/shared/x") == "file:/moved/job-a/shared/x"
    assert r.apply("file:/data/job-a") == "file:/moved/job-a"
    assert r.apply("file:/data/job-ab/shared/x") == "file:/data/job-ab/shared/x"  # job-ab is not job-a
    assert r.apply("s3://data/job-a/x") == "s3://data/job-a/x"  # another scheme entirely


def test_apply_longest_prefix_wins_whatever_the_order_given() -> None:
    for specs in (["/r=/one", "/r/special=/two"], ["/r/special=/two", "/r=/one"]):
        r = Rebase.parse(specs)
        assert r.apply("file:/r/special/f") == "file:/two/f"
        assert r.apply("file:/r/other/f") == "file:/one/other/f"


# ---- merge ------------------------------------------------------------------------------------


def test_merged_keeps_this_side_for_the_same_old_and_adds_the_others() -> None:
    explicit = Rebase.parse(["/old=/explicit"])
    inferred = Rebase.parse(["/old=/guessed", "/old/job=/elsewhere/job", "/third=/3"])
    merged = explicit.merged(inferred)
    assert dict(merged.mappings) == {
        "file:/old": "file:/explicit", "file:/old/job": "file:/elsewhere/job", "file:/third": "file:/3",
    }  # fmt: skip
    assert [len(o) for o, _ in merged.mappings] == sorted((len(o) for o, _ in merged.mappings), reverse=True)
    assert explicit.merged(None) is explicit and explicit.merged(Rebase()) is explicit
    assert Rebase().merged(inferred) == inferred


def test_with_inferred_and_moved_warnings_treat_each_mapping_once() -> None:
    a, b = Rebase.parse(["/a=/A"]), Rebase.parse(["/b=/B"])
    explicit = Rebase.parse(["/a=/mine"])
    assert with_inferred(explicit, [None, a, b, a]) == Rebase.parse(["/a=/mine", "/b=/B"])
    assert with_inferred(Rebase(), []) == Rebase()
    warnings = moved_warnings([a, None, b, a, Rebase.parse(["/a=/A"])])
    assert len(warnings) == 2
    assert "--rebase file:/a=file:/A (inferred)" in warnings[0] and "file:/b=file:/B" in warnings[1]
    assert moved_warnings([None, Rebase()]) == []


# ---- infer ------------------------------------------------------------------------------------


def _chk(uri: str, kind: str = "checkpoint") -> CheckpointLocation:
    return CheckpointLocation(uri, kind, JOB if kind == "checkpoint" else None, 1, None)


def test_written_job_dir_follows_flinks_layout() -> None:
    assert written_job_dir(f"s3://b/ck/{JOB}/shared/x") == f"s3://b/ck/{JOB}"
    assert written_job_dir(f"file:/r/{JOB}/taskowned/x") == f"file:/r/{JOB}"
    assert written_job_dir(f"file:/r/{JOB}/chk-12/f") == f"file:/r/{JOB}"
    assert written_job_dir("file:/r/somewhere/else/f") is None
    assert written_job_dir(f"file:/r/{JOB}/chk-x/f") is None


def test_infer_removes_the_common_tail_so_sibling_jobs_are_covered() -> None:
    loc = _chk(f"s3://new-bucket/flink/ck/{JOB}/chk-1")
    written = ["s3://old/elsewhere/file", "s3://old/ck/other-job/shared/x", f"s3://old/ck/{JOB}/shared/y"]
    assert infer_rebase(loc, written) == Rebase((("s3://old", "s3://new-bucket/flink"),))


def test_infer_up_to_the_filesystem_root() -> None:
    assert infer_rebase(_chk(f"file:/x/{JOB}/chk-1"), [f"file:/{JOB}/shared/a"]) == Rebase(
        (("file:/", "file:/x"),)
    )


def test_infer_nothing_when_not_moved_not_a_checkpoint_or_no_evidence() -> None:
    here = f"file:/r/{JOB}"
    assert infer_rebase(_chk(here + "/chk-1"), [here + "/shared/a"]) is None
    assert infer_rebase(_chk("file:/r/savepoint-0a0b0c-0123456789ab", "savepoint"), ["file:/old/x"]) is None
    assert infer_rebase(_chk(here + "/chk-1"), ["file:/old/unrelated/a", "file:/old/other/shared/b"]) is None


def test_inferred_mapping_of_a_copied_fixture_is_where_flink_wrote_it(tmp_path: Path) -> None:
    sc = Scenario("1.20.3", "basic", tmp_path)  # incremental RocksDB: absolute shared/ paths
    storage = Storage()
    layout = scan_root(storage, str(sc.checkpoints))
    complete = [loc for loc in layout.locations() if loc.complete]
    assert complete
    expected = Rebase.parse([f"{sc.original}={sc.root}"])
    for loc in complete:
        ck = load_checkpoint(storage, loc)
        assert ck.inferred_rebase == expected, loc.uri
        assert ck.rebase == expected  # applied by default
        assert all(os.path.exists(r[PATH][len("file:") :]) for r in reference_rows(ck))
        ignored = load_checkpoint(storage, loc, apply_inferred=False)
        assert ignored.inferred_rebase == expected and not ignored.rebase
        given = load_checkpoint(storage, loc, expected)
        assert given.inferred_rebase is None and given.rebase == expected


def test_plan_files_keep_a_rebase_as_pairs_that_never_split_wrong() -> None:
    """gc and relocate plan files keep one form, [[OLD, NEW], ...]: an 'OLD=NEW' string splits at
    the first '=', so a directory named dt=2026-11-25 in OLD came back as another mapping."""
    rebase = Rebase.of([("s3://b/dt=2026-11-25/ckpt", "s3://c/ckpt"), ("file:/a", "file:/b=1")])
    assert Rebase.from_json(rebase.to_json(), "plan") == rebase
    assert Rebase.parse(rebase.specs()) != rebase  # what the strings of relocate plans made of it
    for bad in (["file:/a=file:/b"], [["file:/a"]], [["file:/a", 3]], {"a": "b"}, [["", "file:/b"]]):
        with pytest.raises(LayoutError, match=r"plan: 'rebase' must be a list of \[OLD, NEW\] pairs"):
            Rebase.from_json(bad, "plan")


def test_relocate_plan_files_keep_pairs_and_refuse_strings(tmp_path: Path) -> None:
    import json

    from tests.support.gc_support import ckptctl

    sc = Scenario("1.20.3", "basic", tmp_path)
    plan_file = tmp_path / "plan.json"
    ckptctl("relocate", str(sc.checkpoints), str(tmp_path / "dst"), "--all", "-o", str(plan_file), *sc.rebase)
    plan = json.loads(plan_file.read_text())
    old, new = sc.rebase[1].split("=", 1)
    assert plan["options"]["rebase"] == Rebase.of([(old, new)]).to_json()
    plan["options"]["rebase"] = [sc.rebase[1]]  # the string form older plans had
    plan_file.write_text(json.dumps(plan))
    err = ckptctl("relocate", "apply", str(plan_file), expect=2).stderr
    assert "must be a list of [OLD, NEW] pairs" in err and len(err.strip().splitlines()) == 1
