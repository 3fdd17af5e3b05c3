"""A ROOT that is one job directory keeps what the jobs beside it borrow (issue 45 row 5).

The bundled ``claim`` fixture (2.2.0): job 2 was restored from job 1 in CLAIM mode, and its
retained checkpoints reference 12 SSTs in job 1's ``shared/``. ``gc plan <root>/<job 1>`` (the
docs/gc.md invites job directories as ROOTs) read job 1's checkpoints only, made those 12 files
candidates without a word, and ``gc apply`` broke 3 of job 2's 4 checkpoints. Now the
checkpoints beside such a ROOT are read: what they reference is kept, an unreadable one refuses.
In-process, on Spark, and over S3 (one more listing: the parent's pruned walk).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from ckptctl.checkpoint.rebase import Rebase
from ckptctl.gc import GcOptions
from ckptctl.gc.siblings import unmapped_references
from ckptctl.storage import Storage
from tests.gc.test_spark_plan import assert_same_plan
from tests.support.faulty_proxy import FaultyProxy, Rule, is_list, query
from tests.support.fixed_clock import fixed_clock
from tests.support.fixture_cases import REPO
from tests.support.gc_plans import OLD, apply, candidates, codes, plan_to_file
from tests.support.gc_support import DAY, Scenario, ckptctl, plan_json
from tests.support.s3_clock import next_second
from tests.support.s3_copied import exists

JOB_1, JOB_2 = "f0fed761440519b8cf2493650f4e5dd9", "8a4c8c97e1541abf6adb570589e5edd7"  # job 2 claimed job 1's


def borrowed_by_job_2(sc: Scenario) -> set[str]:
    """The files in job 1's directory that job 2's checkpoints reference, by Flink's own reading."""
    inside = sc.uri(sc.checkpoints / JOB_1) + "/"
    out = set()
    for exp in (REPO / sc.entry["expected_dir"] / "checkpoints" / JOB_2).glob("*.json"):
        for r in json.loads(exp.read_text())["references"]:
            uri = "file:" + str(sc.root) + r["path"].removeprefix("file:")[len(sc.original) :]
            if uri.startswith(inside):
                out.add(uri)
    return out


def test_a_job_directory_as_root_keeps_what_a_claim_restored_sibling_borrows(tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "claim", tmp_path)
    assert sc.entry["jobs"][1]["restored_from"].startswith(f"{sc.original}/checkpoints/{JOB_1}/")
    borrowed = borrowed_by_job_2(sc)
    assert len(borrowed) == 12
    plan_file = plan_to_file(tmp_path, str(sc.checkpoints / JOB_1), *sc.rebase, *OLD)
    plan = json.loads(plan_file.read_text())
    assert not plan["blocked"] and candidates(plan), plan["refusals"]  # job 1's genuine orphans still go
    assert not borrowed & candidates(plan), sorted(borrowed & candidates(plan))[:3]
    assert any("beside" in w for w in plan["warnings"])  # said, not silent
    assert len(plan["discovery"]["read_beside_roots"]) == 4
    apply(plan_file)
    assert all(Path(u[5:]).exists() for u in borrowed)
    for chk in sorted(
        (sc.checkpoints / JOB_2).glob("chk-*/_metadata")
    ):  # every one of job 2's still restores
        ckptctl("verify", str(chk.parent), *sc.rebase, "--engine", "local", expect=0)


def test_an_unreadable_sibling_checkpoint_refuses_the_plan(tmp_path: Path) -> None:
    """What a sibling whose ``_metadata`` cannot be read borrows is unknown: fail closed."""
    sc = Scenario("2.2.0", "claim", tmp_path)
    metadata = sc.checkpoints / JOB_2 / "chk-11" / "_metadata"
    metadata.write_bytes(metadata.read_bytes()[:100])
    plan = plan_json(str(sc.checkpoints / JOB_1), *sc.rebase, *OLD, expect=1)
    assert "unreadable-metadata" in codes(plan)
    assert any(sc.uri(metadata.parent) in r["message"] for r in plan["refusals"])


def test_a_job_starting_beside_a_job_directory_root_blocks_keep_last(tmp_path: Path) -> None:
    """A job restored from job 1 and taking its first checkpoint beside it (a ``chk-N`` with files
    and no ``_metadata`` yet) will reference what it restored: --keep-last expires nothing then,
    as for a job starting inside the scanned root."""
    sc = Scenario("2.2.0", "claim", tmp_path)
    args = [str(sc.checkpoints / JOB_1), *sc.rebase, *OLD, "--keep-last", "1", "--force"]
    quiet = plan_json(*args)
    assert quiet["expired"] and "job-starting" not in codes(quiet)
    sc.plant(f"checkpoints/{'c' * 32}/chk-1/operator-state", mtime=time.time() - 60)
    plan = plan_json(*args, expect=1)
    assert "job-starting" in codes(plan)
    assert any("c" * 32 in r["message"] for r in plan["refusals"])


def test_a_sibling_naming_the_root_where_no_mapping_reaches_is_named() -> None:
    """A sibling reference outside the scopes into a directory named like a ROOT's job: files of
    the ROOT under a name no --rebase maps (a sibling written when the job lived elsewhere)."""
    root = f"file:/ckpt/{JOB_1}"
    external = {
        f"file:/old/{JOB_1}/shared/sst-1": {"path": f"file:/old/{JOB_1}/shared/sst-1", "referenced_by": "x"},
        f"file:/old/{JOB_2}/shared/sst-2": {"path": f"file:/old/{JOB_2}/shared/sst-2", "referenced_by": "x"},
        f"file:/old/{JOB_1}-copy/shared/sst-3": {
            "path": f"file:/old/{JOB_1}-copy/shared/sst-3",
            "referenced_by": "x",
        },
    }
    assert [r["path"] for r in unmapped_references(external, [root])] == [f"file:/old/{JOB_1}/shared/sst-1"]


def test_spark_plan_of_a_job_directory_root_reads_its_siblings_as_in_process(
    spark, tmp_path: Path, monkeypatch
) -> None:
    fixed_clock(monkeypatch)
    sc = Scenario("2.2.0", "claim", tmp_path)
    borrowed = borrowed_by_job_2(sc)
    options = GcOptions((str(sc.checkpoints / JOB_1),), older_than=DAY, margin=600.0,
                        rebase=Rebase.of([(sc.original, str(sc.root))]))  # fmt: skip
    plan = assert_same_plan(Storage(), options, on_executors=(False, True))
    assert not plan["refusals"] and plan["candidates"] and not borrowed & candidates(plan)


def test_over_s3_a_job_directory_root_keeps_what_its_sibling_borrows(s3_server, tmp_path: Path) -> None:
    """The same on S3, where reading the siblings costs one listing of the parent that jumps over
    the jobs' areas, and a GET of each of their ``_metadata``."""
    sc = Scenario("2.2.0", "claim", tmp_path)  # the local copy: Flink's reading of it, as S3 keys
    bucket = "siblings"
    s3_server.create_bucket(bucket)
    fs = s3_server.filesystem()
    files = sorted(p for p in sc.root.rglob("*") if p.is_file())
    s3_server.put_many(
        {
            f"{bucket}/{p.relative_to(sc.root).as_posix()}": p.read_bytes()
            for p in files
            if p.name != "_metadata"
        }
    )
    next_second()  # S3 mtimes have one-second resolution: each _metadata the newest object of its job
    s3_server.put_many(
        {
            f"{bucket}/{p.relative_to(sc.root).as_posix()}": p.read_bytes()
            for p in files
            if p.name == "_metadata"
        }
    )
    next_second()
    local = sc.uri(sc.root)
    borrowed = {f"s3://{bucket}" + u[len(local) :] for u in borrowed_by_job_2(sc)}
    # listings of the parent (the walk beside the ROOT), and GETs of a _metadata
    parent = Rule(lambda m, p: is_list(p) and query(p).get("prefix") == "checkpoints/")
    reads = Rule(lambda m, p: m == "GET" and p.split("?")[0].endswith("/_metadata"))
    with FaultyProxy(s3_server.endpoint, fault_rate=0.0, rules=[parent, reads]) as proxy:
        args = [f"s3://{bucket}/checkpoints/{JOB_1}", "--s3-endpoint", proxy.endpoint,
                "--rebase", f"{sc.original}=s3://{bucket}", "--older-than", "0s", "--margin", "0s"]  # fmt: skip
        plan_file = plan_to_file(tmp_path, *args)
        plan = json.loads(plan_file.read_text())
        assert not plan["blocked"] and plan["candidates"], plan["refusals"]
        assert not borrowed & candidates(plan)
        # job 1's two checkpoints and job 2's four, each read once; one listing more than before
        # (21 listings of job 1 in all, measured): the parent's, jumping over the jobs' areas
        assert reads.seen == 6 and parent.seen == 1, (reads.seen, parent.seen)
        apply(plan_file, "--s3-endpoint", proxy.endpoint)
    assert all(exists(fs, u) for u in borrowed)
    assert not any(exists(fs, c) for c in candidates(plan))
