"""A small Spark plan's decisions read on the driver (:class:`ckptctl.gc.spark.decided.Decided`):
the reads that give a plan's order answer by the listing order, whatever order the rows were
collected in (Spark returns a union's partitions in no promised order). The plans themselves are
compared with the local planner's in tests/gc/test_spark_plan.py, read both ways."""

from __future__ import annotations

import random
from types import SimpleNamespace

from ckptctl.gc.spark.decided import Decided


def _row(outcome, root_idx, part, pos, path, reason, mtime=1.0, size=10, job=0, h=0):
    return SimpleNamespace(outcome=outcome, root_idx=root_idx, part=part, pos=pos, path=path, size=size,
                           mtime=mtime, reason=reason, evidence=None, verdict=0, job=job, h=h)  # fmt: skip


LABELS = SimpleNamespace(evidence=["{}"], jobs=["file:/r/job"])


def _decided(rows) -> Decided:
    rows = list(rows)
    random.Random(7).shuffle(rows)
    return Decided(rows, LABELS)


def test_firsts_and_collisions_follow_the_listing_order_not_the_collected_order() -> None:
    rows = [
        _row("candidates", 0, 0, 5, "file:/r/job/shared/b", "unreferenced-shared"),
        _row("candidates", 0, 0, 3, "file:/r/job/shared/z", "unreferenced-shared"),
        _row("candidates", 0, 1, 0, "file:/r/job/taskowned/a", "incomplete-checkpoint"),
        _row("candidates", 0, 0, 9, "file:/r/job/taskowned/c", "incomplete-checkpoint"),
        _row("candidates", 1, 0, 0, "file:/s/x", "incomplete-checkpoint"),
        _row("protected", 0, 0, 1, "file:/r/job/shared/young", "young", mtime=100.0),
        _row("protected", 0, 0, 2, "file:/r/job/shared/old", "young", mtime=5.0),
    ]
    d = _decided(rows)
    assert d.first_of_ties("candidates", ["unreferenced-shared", "incomplete-checkpoint"]) == {
        "unreferenced-shared": ((True, 0), (True, 0), (True, 3), (True, "file:/r/job/shared/z")),
        "incomplete-checkpoint": ((True, 0), (True, 0), (True, 9), (True, "file:/r/job/taskowned/c")),
    }
    assert d.first_candidate_named({"a": "", "b": "", "x": ""}) == "file:/r/job/shared/b"
    assert sorted(d.kept_paths_since(50.0)) == ["file:/r/job/shared/young"]
    lists = d.decisions()
    assert [f.path for f in lists["candidates"]] == ["file:/r/job/shared/z", "file:/r/job/shared/b",
                                                     "file:/r/job/taskowned/c", "file:/r/job/taskowned/a",
                                                     "file:/s/x"]  # fmt: skip


def test_files_made_live_again_leave_the_protected_list_and_its_totals() -> None:
    rows = [_row("protected", 0, 0, i, f"file:/r/job/savepoints/sp/f{i}", "in-savepoint", size=i + 1, h=i)
            for i in range(4)]  # fmt: skip
    d = _decided(rows)
    assert d.relive({"file:/r/job/savepoints/sp/f1", "file:/r/job/savepoints/sp/f3"}) == (2, 2 + 4)
    (totals,) = d.totals()
    assert (totals.n, totals.bytes, totals.digest) == (2, 1 + 3, 0 + 2)
    assert [f.path for f in d.decisions()["protected"]] == [
        "file:/r/job/savepoints/sp/f0",
        "file:/r/job/savepoints/sp/f2",
    ]
