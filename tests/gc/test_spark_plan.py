"""``gc plan --engine spark`` makes the local planner's plan: on every fixture root, on attack trees,
over S3 (listing and inventory), and ``gc apply`` of a Spark plan deletes exactly the local plan's
candidates. One embedded Spark session (local[2]) serves the whole module; both planners read one
fixed clock so that the plans can be compared whole (evidence names the cut-off)."""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from ckptctl.checkpoint.rebase import Rebase
from ckptctl.gc import build_plan
from ckptctl.gc.discovery import Discovery
from ckptctl.storage import Storage, StorageOptions
from tests.support.fixture_cases import scenario_roots
from tests.support.gc_support import DAY, STAND_INS, T0, Scenario, ckptctl
from tests.support.s3_clock import next_second

MASTER = "local[*]"  # the session the other Spark tests use: no JVM restart between modules
NOW = time.time()
CLOCK = [NOW]  # S3 tests move it past their uploads


@pytest.fixture(autouse=True)
def fixed_clock(monkeypatch):
    CLOCK[0] = NOW
    monkeypatch.setattr(Discovery, "clock", lambda self: (CLOCK[0], "test clock"))


def comparable(plan) -> dict:
    data = plan.to_json()
    for key in ("created_at", "engine", "files"):
        data.pop(key, None)
    return data


def assert_same_plan(storage: Storage, options, *, on_executors: tuple[bool, ...] = (False,)) -> dict:
    """The local plan equals the Spark plan, whose lists are read on the driver (a small plan's
    :class:`ckptctl.gc.spark.decided.Decided`) or, ``on_executors``, as at bucket scale; the lists
    the executors write pass apply's checks and hold the local plan's candidates (those written from
    the driver: test_spark_plan_lists_written_with_or_without_a_shuffle_are_the_same and
    test_lists_of_an_empty_plan_read_back_empty_both_ways)."""
    import shutil
    import tempfile

    from ckptctl.gc.spark import classify as spark_classify
    from ckptctl.gc.spark import plan as spark_plan
    from ckptctl.gc.spark.planner import build_plan_spark

    local = comparable(build_plan(storage, options))
    for executors in on_executors:
        collect = spark_classify.COLLECT_FILES
        spark_classify.COLLECT_FILES = -1 if executors else collect
        out = Path(tempfile.mkdtemp(prefix="spark-plan-"))
        try:
            plan = build_plan_spark(storage, options, MASTER)
        finally:
            spark_classify.COLLECT_FILES = collect
        assert (plan.files.decided is None) == executors
        try:
            on_spark = comparable(plan)
            if executors:
                plan.write(str(out / "plan.json"))
                record = json.loads((out / "plan.json").read_text())["files"]
                lists = spark_plan.read_lists(plan.files.frame.sparkSession, str(out / "plan.json"), record)
                written = {r.path for r in lists.filter("outcome = 'candidates'").select("path").collect()}
                assert written == {c["path"] for c in local["candidates"]}
        finally:
            plan.release()
            shutil.rmtree(out, ignore_errors=True)
        assert on_spark.keys() == local.keys()
        for key in local:
            assert on_spark[key] == local[key], (key, "on executors" if executors else "on the driver")
    return local


def test_a_released_plan_leaves_nothing_cached(spark, tmp_path: Path) -> None:
    """A long-lived session (a notebook, this test run) makes plan after plan: ``release()`` must
    drop everything a plan cached on the executors. It dropped nothing of the decisions (the
    persisted frame was the parent of the lists it unpersisted), so each plan's per-file rows
    stayed in the executors' storage until the session ended."""
    from ckptctl.gc import GcOptions
    from ckptctl.gc.spark.planner import build_plan_spark

    v, s, _d, _o = next(iter(scenario_roots()))
    sc = Scenario(v, s, tmp_path)
    sc.plant(f"checkpoints/{sc.jobs()[0].name}/shared/orphan-old")
    options = GcOptions(
        (str(sc.checkpoints),), older_than=DAY, force=True, rebase=Rebase.of([(sc.original, str(sc.root))])
    )
    persisted = spark.sparkContext._jsc.getPersistentRDDs
    before = persisted().size()
    plan = build_plan_spark(Storage(), options, MASTER)
    assert persisted().size() > before and plan.summary()["candidate_files"] == 1
    plan.release()
    assert persisted().size() == before
    # the rows per URI are not recomputed once dropped (nor when an executor holding them is lost):
    # reading them fails, in one line, instead of planning again from nothing
    from ckptctl.engine.spark import executor_error

    with pytest.raises(Exception) as lost:
        plan.files.frame.count()
    assert "plan again" in str(executor_error(lost.value))


def test_spark_plan_equals_local_plan_on_every_fixture(spark, tmp_path: Path) -> None:
    """Every fixture root at once (one plan of 33 roots, each mapped from where Flink wrote it):
    one Spark plan instead of 33, each decision still compared file by file."""
    from ckptctl.gc import GcOptions

    scenarios = [Scenario(v, s, tmp_path) for v, s, _d, _o in scenario_roots()]
    for sc in scenarios:
        job = sc.jobs()[0].name
        sc.plant(f"checkpoints/{job}/shared/orphan-old")
        sc.plant(f"checkpoints/{job}/shared/orphan-young", mtime=NOW - 60)
        sc.plant(f"checkpoints/{job}/chk-999999/aborted")
    options = GcOptions(
        tuple(str(sc.checkpoints) for sc in scenarios), older_than=DAY, margin=600.0, force=True,
        max_delete_fraction=1.0, rebase=Rebase.of((sc.original, str(sc.root)) for sc in scenarios),
    )  # fmt: skip
    plan = assert_same_plan(Storage(), options, on_executors=(False, True))
    orphans = {c["path"] for c in plan["candidates"] if c["path"].endswith("/orphan-old")}
    assert len(orphans) == len(scenarios) > 30  # each root planned: not two empty plans compared


def _attack(name: str, sc: Scenario, tmp: Path) -> dict:
    """Build one attack on the scenario's tree; returns GcOptions overrides."""
    job = sc.jobs()[0]
    if name == "symlinked-chk":
        chk = sorted(job.glob("chk-*"))[-1]
        elsewhere = tmp / "volume" / chk.name
        elsewhere.parent.mkdir()
        chk.rename(elsewhere)
        chk.symlink_to(elsewhere)
    elif name == "checkpoint-under-shared":
        (sc.checkpoints / "tenant" / "shared").mkdir(parents=True)
        sc.plant("checkpoints/tenant/shared/report.csv")
    elif name == "mount-alias":
        (job / "alias").symlink_to(sc.checkpoints)
    elif name == "dead-job":
        sc.plant("checkpoints/" + "a" * 32 + "/chk-3/leftover")
        sc.plant("checkpoints/" + "a" * 32 + "/shared/sst-1")
        sc.plant("checkpoints/" + "b" * 32 + "/shared/report.csv")
    elif name == "dead-job-collected":
        sc.plant("checkpoints/" + "a" * 32 + "/chk-3/leftover")
        return {"collect_dead_jobs": True}
    elif name == "external-reference":
        return {"rebase": Rebase(), "allow_external": True}
    elif name == "future-mtime":
        sc.plant(f"checkpoints/{job.name}/shared/from-the-future", mtime=NOW + 10 * DAY)
    elif name == "young-and-in-flight":
        sc.plant(f"checkpoints/{job.name}/shared/young", mtime=NOW - 10)
        sc.plant(f"checkpoints/{job.name}/taskowned/in-flight", mtime=T0 + 3500)
    elif name == "starting-job":
        os.utime(job, (NOW, NOW))
        fresh = sc.checkpoints / ("c" * 32) / "shared"
        fresh.mkdir(parents=True)
        return {"keep_last": 1}
    elif name == "stand-in-mtimes":  # times a store reports for none it has: no age, kept (test_plan.py)
        for name, t in STAND_INS.items():
            sc.plant(f"checkpoints/{job.name}/shared/stand-in-{name}", mtime=t)
    elif name == "special-names":
        sc.plant(f"checkpoints/{job.name}/shared/_metadata")
        sc.plant(f"checkpoints/{job.name}/taskowned/a\\b")
    elif (
        name == "forst-control-names"
    ):  # names the rule reads one by one, in a ForSt directory no checkpoint uses
        dead = f"checkpoints/{job.name}/shared/op_Dead_0123__1_2__attempt_9/db"
        for leaf in ("CURRENT", "MANIFEST-000004", "OPTIONS-000007", "LOG.old.1", "LOG", "IDENTITY", "LOCK", "LOGx",
                     "CURRENTLY", "MANIFEST-x", "000042.sst", "_metadata", "a\\b"):  # fmt: skip
            sc.plant(f"{dead}/{leaf}")
    elif name == "newline-names":  # a line break in a directory's name and in a file's
        sc.plant(f"checkpoints/{job.name}/taskowned/odd\ndir/leftover")
        sc.plant(f"checkpoints/{job.name}/shared/odd\nname")
    elif name == "note-like-names":  # ':' separates a note's kind from its detail (kg); '%' is no escape
        sc.plant(f"checkpoints/{job.name}/shared/a:{job.name}")
        sc.plant(f"checkpoints/{job.name}/shared/d:")
        sc.plant(f"checkpoints/{job.name}/taskowned/f/100%25:x")
        sc.plant(f"checkpoints/{job.name}/chk-999999/l:%")
    elif name == "odd-shapes":  # a chk-N that is a file; a _metadata that is a directory (no checkpoint's)
        sc.plant(f"checkpoints/{job.name}/chk-77")
        sc.plant(f"checkpoints/{job.name}/chk-78/_metadata/part-0")
    elif name == "non-ascii-names":
        sc.plant(f"checkpoints/{job.name}/shared/\U0001f600-\u00e9")
        sc.plant(f"checkpoints/{job.name}/taskowned/\u00fc/leftover")
    elif name == "two-aliases":  # the first alias the walk reports is the one named
        chk = sorted(job.glob("chk-*"))[-1]
        (job / "shared" / "z-alias").symlink_to(chk)
        (chk / "a-alias").symlink_to(job / "shared")
        (sc.checkpoints / "m-alias").symlink_to(chk)
    elif name == "scope-alias":  # a second scope that is the first under another name: one walk sees both
        (tmp / "elsewhere").symlink_to(job)
        (sc.checkpoints / "later").symlink_to(job / "shared")
        return {"savepoint_dirs": (str(tmp / "elsewhere"),)}
    elif name == "keep-last":  # expired checkpoints (expired-checkpoint, expired-only) and a job starting
        sc.plant("checkpoints/" + "b" * 32 + "/shared/fresh", mtime=NOW - 10)
        sc.plant(f"checkpoints/{job.name}/shared/young", mtime=NOW - 10)
        return {"keep_last": 1, "max_delete_fraction": 1.0}
    elif (
        name == "restored-under-same-id"
    ):  # a rolled-back run's first checkpoint, below the newest completed one
        for f in (job / "chk-8").iterdir():
            f.unlink()
        sc.plant(f"checkpoints/{job.name}/chk-8/in-flight-state", mtime=NOW - 10)
        return {"keep_last": 1}
    elif name == "metadata-being-written":  # a checkpoint completing now, and a crashed write's leftover
        sc.plant(f"checkpoints/{job.name}/chk-1000/state", mtime=T0)
        sc.plant(f"checkpoints/{job.name}/chk-1000/._metadata.inprogress.0f1e", mtime=NOW - 5)
        sc.plant(f"checkpoints/{job.name}/chk-999/._metadata.inprogress.a9b8", mtime=T0)
    elif (
        name == "savepoint-metadata-gone"
    ):  # its files protected, then live again (FLINK-39964: a checkpoint uses them)
        for metadata in (sc.root / "savepoints").glob("savepoint-*/_metadata"):
            metadata.unlink()
        return {"savepoint_dirs": (str(sc.root / "savepoints"),), "max_delete_fraction": 1.0}
    elif name == "all-scopes":  # changelog and savepoints directories besides the root, one of them empty
        (sc.root / "empty-savepoints").mkdir()
        sc.plant("dstl/orphan-changelog")
        sc.plant(f"checkpoints/{job.name}/shared/young", mtime=NOW - 10)
        for savepoint in sorted((sc.root / "savepoints").glob("savepoint-*"))[
            :1
        ]:  # protected beside relived files
            sc.plant(str((savepoint / "stray").relative_to(sc.root)))
        savepoints = [str(p) for p in (sc.root / "savepoints", sc.root / "empty-savepoints") if p.is_dir()]
        return {"savepoint_dirs": tuple(savepoints), "max_delete_fraction": 1.0}
    return {}


# attacks that change no option and refuse nothing on their own: made together on one tree of a
# scenario (they plant different names), each scenario a root of one plan (one Spark plan instead of
# ten), read both ways; a refusal would blur the others (it protects everything), so the attacks
# that refuse or set options are planned one by one above
TOGETHER = [
    ("2.2.0", "basic", ("symlinked-chk", "checkpoint-under-shared", "dead-job", "young-and-in-flight", "special-names",
                        "newline-names", "note-like-names", "non-ascii-names", "odd-shapes", "stand-in-mtimes")),
    ("2.2.0", "forst", ("dead-job",)), ("2.2.0", "changelog", ("dead-job",)),
]  # fmt: skip


# attacks whose plans read the lists after deciding them (a collision with an external name, the
# young protected files of --keep-last, savepoint files made live again (claim_native: FLINK-39964),
# partially live files, a dead job's candidates counted by job): planned with the lists read on the
# driver and read on the executors
READ_BOTH_WAYS = {("2.2.0", "basic", "external-reference"), ("1.20.3", "filemerging", "keep-last"),
                  ("2.2.0", "claim_native", "all-scopes"), ("2.2.0", "filemerging", "young-and-in-flight"),
                  ("2.2.0", "basic", "dead-job-collected"), ("2.2.0", "claim_native", "savepoint-metadata-gone")}  # fmt: skip


# The attacks that refuse or set an option, each on its own tree, grouped by the options they set
# (their savepoint and changelog directories are their own tree's): a group is one plan of its
# trees' roots (one Spark plan instead of one per attack), its lists read both ways when one of
# its attacks is in READ_BOTH_WAYS. A fixture's tree appears once in a plan (two copies would share
# the original root --rebase maps). Each attack's own local plan, on its tree alone, is what the
# group's local plan holds for that tree (test_spark_plan_equals_local_plan_under_attack): so no
# attack's decisions, refusals or warnings are masked by another's (the attacks of a group refuse
# with different codes and warn of different things, or that check fails).
ATTACK_GROUPS = [
    (("2.2.0", "basic", "two-aliases"), ("2.2.0", "forst", "forst-control-names")),
    (("2.2.0", "basic", "mount-alias"), ("2.2.0", "claim_native", "dead-job"), ("2.2.0", "filemerging", "young-and-in-flight")),
    (("2.2.0", "basic", "future-mtime"),), (("2.2.0", "basic", "scope-alias"),),
    (("2.2.0", "basic", "metadata-being-written"),), (("2.2.0", "basic", "dead-job-collected"),),
    (("2.2.0", "basic", "external-reference"),), (("2.2.0", "basic", "starting-job"),),
    (("2.2.0", "basic", "restored-under-same-id"),),
    (("2.2.0", "basic", "keep-last"),),
    (("1.20.3", "filemerging", "keep-last"),),  # refuses as the one above (job-starting)
    (("2.2.0", "changelog", "all-scopes"), ("2.2.0", "savepoints", "all-scopes"), ("2.2.0", "claim_native", "all-scopes")),
    (("2.2.0", "claim_native", "savepoint-metadata-gone"),),
]  # fmt: skip
PER_TREE = ("savepoint_dirs", "changelog_dirs", "rebase")  # options naming one tree's directories


def _in_one_plan(singles: list[dict]) -> dict:
    """The plan of several trees' roots that holds each tree's own plan (``singles``) and nothing
    else: the lists and notes of every tree, their totals added up, the same clock."""
    from collections import Counter

    def key(x):
        return json.dumps(x, sort_keys=True)

    first, whole = singles[0], {}
    for name, value in first.items():
        values = [s[name] for s in singles]
        if name == "options":
            continue
        if name == "blocked":
            whole[name] = any(values)
        elif name in ("oldest_candidate_mtime", "newest_candidate_mtime"):
            known = [v for v in values if v is not None]
            whole[name] = (min if name.startswith("oldest") else max)(known) if known else None
        elif isinstance(value, list):
            whole[name] = sorted((x for v in values for x in v), key=key)
        elif isinstance(value, dict) and name == "discovery":
            whole[name] = {k: sorted((x for v in values for x in v[k]), key=key) for k in value}
        elif isinstance(value, dict) and name.endswith("_by_reason"):
            whole[name] = dict(sum((Counter(v) for v in values), Counter()))
        elif isinstance(value, int) and not isinstance(value, bool) and name != "format":
            whole[name] = sum(values)
        else:
            assert all(v == value for v in values), name
            whole[name] = value
    return whole


def _as_compared(plan: dict) -> dict:
    """``plan`` with its lists in one order (a plan of several roots lists them in its own)."""
    out = {k: v for k, v in plan.items() if k != "options"}
    for name, value in plan.items():
        if isinstance(value, list):
            out[name] = sorted(value, key=lambda x: json.dumps(x, sort_keys=True))
        elif name == "discovery":
            out[name] = {k: sorted(v, key=lambda x: json.dumps(x, sort_keys=True)) for k, v in value.items()}
    return out


@pytest.mark.parametrize(
    "group", ATTACK_GROUPS, ids=["+".join("-".join(a) for a in g) for g in ATTACK_GROUPS]
)
def test_spark_plan_equals_local_plan_under_attack(spark, tmp_path: Path, group) -> None:
    """Each attack of the group made on its own scenario's tree; the group planned as one plan of
    their roots: the Spark plan (its lists read on the driver, and on the executors where an
    attack is in READ_BOTH_WAYS) equals the local plan, and the local plan holds, for each
    attack, exactly its own tree's local plan (a failure names the attack)."""
    from ckptctl.gc import GcOptions

    trees, singles, shared = [], [], {}
    assert len({a[:2] for a in group}) == len(group), "a fixture's tree once in a plan"
    for version, scenario, attack in group:
        tmp = tmp_path / f"{version}-{scenario}-{attack}"
        tmp.mkdir()
        sc = Scenario(version, scenario, tmp)
        overrides = _attack(attack, sc, tmp)
        changelog = (str(sc.root / "dstl"),) if (sc.root / "dstl").is_dir() else ()  # the fixtures' changelog
        options = sc.gc_options(**{"changelog_dirs": changelog, **overrides})
        common = {k: v for k, v in vars(options).items() if k not in (*PER_TREE, "roots")}
        assert shared.setdefault("options", common) == common, (attack, "sets other options than its group")
        trees.append((attack, sc, options))
    if len(group) == 1:
        attack, sc, options = trees[0]
    else:
        for attack, _sc, options in trees:
            singles.append((attack, comparable(build_plan(Storage(), options))))
        first = trees[0][2]
        options = replace(
            first,
            roots=tuple(r for _a, _s, o in trees for r in o.roots),
            savepoint_dirs=tuple(d for _a, _s, o in trees for d in o.savepoint_dirs),
            changelog_dirs=tuple(d for _a, _s, o in trees for d in o.changelog_dirs),
            rebase=Rebase.of(m for _a, _s, o in trees for m in o.rebase.mappings),
        )
    assert isinstance(options, GcOptions)
    both = any(a in READ_BOTH_WAYS for a in group)
    plan = assert_same_plan(Storage(), options, on_executors=(False, True) if both else (False,))
    if singles:  # each attack's plan is there whole, no other attack's hid or changed any of it
        whole, each = _as_compared(plan), _in_one_plan([p for _a, p in singles])
        assert whole.keys() == each.keys()
        for (
            name
        ) in whole:  # what differs names its attack's tree (tmp_path/<version>-<scenario>-<attack>/...)
            if isinstance(whole[name], list):
                extra = [x for x in whole[name] if x not in each[name]]
                lost = [x for x in each[name] if x not in whole[name]]
                assert whole[name] == each[name], (
                    name,
                    "in the group's plan only:",
                    extra,
                    "in an attack's only:",
                    lost,
                )
            else:
                assert whole[name] == each[name], (name, whole[name], each[name])
    mine = {a: p for a, p in singles} if singles else {group[0][2]: plan}
    if "forst-control-names" in mine:  # the names went to the rule's Python form, the others stayed in SQL
        forst = mine["forst-control-names"]
        reasons = {d["path"].rsplit("/", 1)[1]: d["reason"] for d in forst["candidates"] + forst["protected"]
                   if "/op_Dead_0123__" in d["path"]}  # fmt: skip
        assert {n for n, r in reasons.items() if r == "forst-control-file"} == {
            "CURRENT",
            "MANIFEST-000004",
            "OPTIONS-000007",
            "LOG.old.1",
            "LOG",
            "IDENTITY",
            "LOCK",
        }
        assert reasons["LOGx"] == reasons["CURRENTLY"] == reasons["000042.sst"] == "unreferenced-forst"
        assert reasons["_metadata"] == "not-flink-file" and reasons["a\\b"] == "abnormal-path"
    if "restored-under-same-id" in mine:  # both planners see the run restored from an older checkpoint
        restored = mine["restored-under-same-id"]
        assert any(r["code"] == "job-starting" and "/chk-8" in r["message"] for r in restored["refusals"]), (
            restored["refusals"]
        )


def test_spark_plan_equals_local_plan_under_attacks_planned_together(spark, tmp_path: Path) -> None:
    """The attacks of :data:`TOGETHER` (each sets no option and refuses nothing), made on their
    scenarios' trees and planned as one plan of three roots: the Spark plan, its lists read on the
    driver and on the executors, equals the local plan, nothing is refused, and every root has
    files in it (three empty plans would compare equal too)."""
    from ckptctl.gc import GcOptions

    scenarios, changelogs = [], []
    for version, scenario, attacks in TOGETHER:
        tmp = tmp_path / f"{version}-{scenario}"
        tmp.mkdir()
        sc = Scenario(version, scenario, tmp)
        for attack in attacks:
            assert _attack(attack, sc, tmp) == {}, attack
        scenarios.append(sc)
        if (sc.root / "dstl").is_dir():
            changelogs.append(str(sc.root / "dstl"))
    options = GcOptions(
        tuple(str(sc.checkpoints) for sc in scenarios), older_than=DAY, margin=600.0, force=True,
        changelog_dirs=tuple(changelogs), rebase=Rebase.of((sc.original, str(sc.root)) for sc in scenarios),
    )  # fmt: skip
    plan = assert_same_plan(Storage(), options, on_executors=(False, True))
    assert not plan["refusals"], plan["refusals"]
    # odd-shapes: a file named like a checkpoint directory is no Flink file's; a _metadata
    # directory makes no checkpoint, its old chk-N is an incomplete one's leftovers
    reasons = {d["path"].split("/checkpoints/", 1)[1].split("/", 1)[1]: d["reason"]
               for d in plan["candidates"] + plan["protected"] if "/chk-7" in d["path"]}  # fmt: skip
    assert (
        reasons["chk-77"] == "not-flink-file"
        and reasons["chk-78/_metadata/part-0"] == "incomplete-checkpoint"
    )
    stand_ins = {d["path"].rsplit("/", 1)[1]: d["reason"] for d in plan["candidates"] + plan["protected"]
                 if "/shared/stand-in-" in d["path"]}  # fmt: skip
    assert stand_ins == {f"stand-in-{name}": "no-mtime" for name in STAND_INS}
    # each scenario's root planned (not two empty plans compared)
    for sc in scenarios:
        root = sc.uri(sc.checkpoints) + "/"
        assert any(d["path"].startswith(root) for d in plan["candidates"] + plan["protected"]), root


@pytest.mark.parametrize("where", ["file", "directory", "alias"])
def test_spark_plan_of_a_name_that_is_no_utf8_is_one_line_naming_it(spark, tmp_path: Path, where) -> None:
    """A local name of bytes that are no UTF-8 is planned in-process (a surrogate escape in
    Python); Spark strings cannot hold it, and the task's failure was a multi-kilobyte traceback
    (``internal error``). Now the plan fails closed: one line naming the file, directory or link."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    bad = os.fsdecode(b"orphan-\xff")
    rel = f"checkpoints/{sc.jobs()[0].name}/shared/{bad}"
    if where == "file":
        sc.plant(rel)
    elif where == "directory":
        (sc.root / rel).mkdir()
    else:  # a link back into the root: only the walk's alias note names it
        (sc.root / rel).symlink_to(sc.checkpoints)
    options = sc.gc_options(max_delete_fraction=1.0)
    assert build_plan(Storage(), options).total_files > 0
    args = [
        str(sc.checkpoints),
        *sc.rebase,
        "--older-than",
        "1d",
        "--force",
        "--engine",
        "spark",
        "--master",
        MASTER,
    ]
    message = ckptctl("gc", "plan", *args, expect=2).stderr.strip()
    assert len(message.splitlines()) == 1 and "orphan-\\udcff: a name that is not UTF-8" in message, message


def test_spark_plan_anchors_a_tenants_files_on_s3_as_in_process(spark, s3_server) -> None:
    """The same tenant on S3, without an inventory: the local planner finds the inner checkpoints
    in its one listing (scan_root: chk-N by name), the Spark planner after the listing (fold_late),
    and the anchor came from fold_late only: the two plans differed (a review), the local one
    collecting the file in flight. The anchor is now taken from every retained checkpoint inside."""
    from ckptctl.checkpoint.rebase import Rebase
    from ckptctl.gc import GcOptions
    from tests.support.fixture_cases import REPO
    from tests.support.s3_copied import VERSION, manifest

    entry = next(
        e for e in manifest()["entries"] if e["flink_version"] == VERSION and e["scenario"] == "basic"
    )
    data = REPO / entry["data_dir"] / "checkpoints"
    (job,) = [p.name for p in data.iterdir()]
    bucket, base = "spark-tenant-flight", "fleet/3fa85f6457174562b3fc2c963f66afa6/shared"
    s3_server.create_bucket(bucket)
    fs = s3_server.filesystem()
    files = sorted(p for p in (data / job).rglob("*") if p.is_file())
    for metadata in (False, True):  # the data files, then the _metadata: the newest objects
        fs.pipe({f"{bucket}/{base}/{p.relative_to(data).as_posix()}": p.read_bytes() for p in files
                 if (p.name == "_metadata") == metadata})  # fmt: skip
        next_second()
    flight = f"s3://{bucket}/{base}/{job}/shared/uploaded-for-the-next-checkpoint"
    fs.pipe_file(flight[5:], b"sst")
    next_second()
    CLOCK[0] = time.time()
    # --margin 0s: with more, the tenant (no retained checkpoint of its own) wrote within --older-than +
    # --margin and is kept whole (job-active, issue 45 row 1), before the inner anchor is asked
    options = GcOptions((f"s3://{bucket}/{base.rsplit('/', 1)[0]}",), older_than=0.0, margin=0.0, force=True,
                        rebase=Rebase.of([(f"{entry['original_root']}/checkpoints", f"s3://{bucket}/{base}")]))  # fmt: skip
    plan = assert_same_plan(Storage(StorageOptions.from_env(s3_server.endpoint)), options)
    assert {d["path"]: d["reason"] for d in plan["candidates"] + plan["protected"]}[flight] == "in-flight"


def test_spark_plan_keeps_the_changelog_of_a_fixed_job_id_as_in_process(spark, tmp_path: Path) -> None:
    """The red-team attack of a fixed JobID shared by two deployments (test_dead_jobs): both
    planners keep the unscanned deployment's DSTL files (collected when asked: test_dead_jobs)."""
    from ckptctl.checkpoint.rebase import Rebase
    from ckptctl.gc import GcOptions
    from tests.gc.test_dead_jobs import fixed_id_deployments

    a, mappings, needed = fixed_id_deployments(tmp_path, "0" * 32)
    options = GcOptions((str(a.checkpoints),), changelog_dirs=(str(a.root / "dstl"),), rebase=Rebase.of(mappings),
                        older_than=86400.0, margin=600.0, force=True)  # fmt: skip
    plan = assert_same_plan(Storage(), options)
    reasons = {c["path"]: c["reason"] for c in plan["candidates"]} | {
        p["path"]: p["reason"] for p in plan["protected"]
    }
    assert {reasons[u] for u in needed} == {"changelog-fixed-job-id"}


def test_spark_plan_reads_a_savepoint_found_by_the_listing_only_as_in_process(spark, tmp_path: Path) -> None:
    """A savepoint moved into a job's shared/, where discovery does not look, under a name of no
    checkpoint (known by its content): the full listing finds its _metadata and the driver reads
    it after the listing and the references met; what it references is live (counted as such,
    never a candidate) in both plans."""
    import shutil

    sc = Scenario("2.2.0", "savepoints", tmp_path)
    savepoint = next(p for p in (sc.root / "savepoints").iterdir() if (p / "_metadata").is_file())
    inside = sc.jobs()[0] / "shared" / "release-42"  # by content: a name is the simpler case (test_discovery)
    shutil.move(str(savepoint), inside)
    plan = assert_same_plan(Storage(), sc.gc_options(max_delete_fraction=1.0))
    assert plan["discovery"]["found_by_listing_only"] == [sc.uri(inside)]
    assert not [c for c in plan["candidates"] if c["path"].startswith(sc.uri(inside) + "/")]


def test_spark_plan_of_a_reference_that_is_no_utf8_is_one_line(spark, tmp_path: Path) -> None:
    """A _metadata whose file path holds a lone surrogate (a Java string may; modified UTF-8 encodes
    it, and ckptctl's reader keeps it): Spark's strings cannot hold it, so the plan stops with one
    line naming the path instead of a task's traceback."""
    from ckptctl.errors import CkptError
    from ckptctl.gc.spark.planner import build_plan_spark
    from ckptctl.metadata.handles import FileHandle
    from tests.support.hostile_metadata import edit_metadata

    sc = Scenario("2.2.0", "basic", tmp_path)
    meta = sorted(sc.jobs()[0].glob("chk-*/_metadata"))[-1]
    edit_metadata(meta, lambda h: h._replace(path=h.path + "\ud800") if type(h) is FileHandle else None)
    with pytest.raises(CkptError, match="not UTF-8") as raised:
        build_plan_spark(Storage(), sc.gc_options(), MASTER)
    assert "\\ud800" in str(raised.value) and "\n" not in str(raised.value)


def test_spark_plan_of_a_file_merging_root_reports_the_same_partially_live_files(
    spark, tmp_path: Path
) -> None:
    sc = Scenario("1.20.3", "filemerging", tmp_path)
    plan = assert_same_plan(Storage(), sc.gc_options(max_delete_fraction=1.0))
    assert plan["live_files"] > 0


def test_spark_plan_orders_tied_reasons_and_joins_many_segments_as_in_process(
    spark, tmp_path: Path, monkeypatch
) -> None:
    """Reasons of one list with equal counts come in the order of their first file in the listing
    (``Counter.most_common``), not by name; the segments' spans joined to the files (more than
    :data:`BROADCAST_SPANS`) decide as when broadcast."""
    from ckptctl.gc.spark import columns

    monkeypatch.setattr(columns, "BROADCAST_SPANS", 0)
    sc = Scenario("1.20.3", "filemerging", tmp_path)
    job = sc.jobs()[0].name
    for i in range(2):
        sc.plant(f"checkpoints/{job}/shared/orphan-{i}")
        sc.plant(f"checkpoints/{job}/taskowned/leftover-{i}")
        sc.plant(f"checkpoints/{job}/chk-999999/aborted-{i}")
    sc.plant(f"checkpoints/{job}/shared/young", mtime=NOW - 10)
    sc.plant(f"checkpoints/{job}/taskowned/in-flight", mtime=T0 + 3500)
    plan = assert_same_plan(Storage(), sc.gc_options(max_delete_fraction=1.0), on_executors=(False, True))
    assert list(plan["candidates_by_reason"].values()) == [2, 2, 2]
    assert list(plan["protected_by_reason"].values()) == [1, 1]
    assert plan["live_files"] > 0


def test_apply_of_a_spark_plan_deletes_the_local_plans_candidates(spark, tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0].name
    planted = {sc.uri(sc.plant(f"checkpoints/{job}/shared/orphan-{i}")) for i in range(3)}
    local = build_plan(Storage(), sc.gc_options())
    expected = {c.path for c in local.candidates}
    assert planted <= expected
    plan_file = tmp_path / "plan.json"
    args = [str(sc.checkpoints), *sc.rebase, "--older-than", "1d", "--margin", "10m", "--force"]
    ckptctl("gc", "plan", *args, "--engine", "spark", "--master", MASTER, "-o", str(plan_file), expect=0)
    written = json.loads(plan_file.read_text())
    assert written["engine"] == {"kind": "spark", "master": MASTER}
    assert written["files"]["candidates"] == len(expected) and (tmp_path / "plan.parquet").is_dir()
    before = {sc.uri(p) for p in sc.root.rglob("*") if p.is_file()}
    result = json.loads(ckptctl("gc", "apply", str(plan_file), "--yes", "--json").stdout)
    after = {sc.uri(p) for p in sc.root.rglob("*") if p.is_file()}
    assert result["engine"] == "spark" and result["deleted_files"] == len(expected)
    assert expected == before - after
    for loc in local.retained:
        ckptctl("verify", loc["path"].removeprefix("file:"), *sc.rebase, "--engine", "local", expect=0)


def test_spark_plan_lists_in_parquet_are_checked_on_apply(spark, tmp_path: Path) -> None:
    """Edited Parquet lists (a row dropped) are refused by apply, before anything is deleted."""
    from ckptctl.errors import CkptError
    from ckptctl.gc.spark.plan import read_lists

    sc = Scenario("2.2.0", "basic", tmp_path)
    sc.plant(f"checkpoints/{sc.jobs()[0].name}/shared/orphan")
    plan_file = tmp_path / "plan.json"
    ckptctl("gc", "plan", str(sc.checkpoints), *sc.rebase, "--older-than", "1d", "--margin", "10m", "--force",
            "--engine", "spark", "--master", MASTER, "-o", str(plan_file))  # fmt: skip
    record = json.loads(plan_file.read_text())["files"]
    assert read_lists(spark, str(plan_file), record).count() == record["candidates"] + record["protected"]
    broken = dict(record, candidates=record["candidates"] + 1)
    with pytest.raises(CkptError, match="not those it was written with"):
        read_lists(spark, str(plan_file), broken)


def test_spark_plan_lists_written_with_or_without_a_shuffle_are_the_same(
    spark, tmp_path: Path, monkeypatch
) -> None:
    """Few tasks and jobs: the lists are written as decided (a file per task and directory); many:
    shuffled to a task per directory (a file each); a small plan's, from the driver (a file per
    directory). The same rows and directories every way, each verified by its digests on apply."""
    from ckptctl.gc.spark import classify as spark_classify
    from ckptctl.gc.spark import plan as spark_plan
    from ckptctl.gc.spark.plan import read_lists

    sc = Scenario("2.2.0", "basic", tmp_path)
    for i in range(3):
        sc.plant(f"checkpoints/{sc.jobs()[0].name}/shared/orphan-{i}")
    written, dirs = {}, {}
    for limit in (spark_plan.WRITE_FILES, 0, "driver"):
        monkeypatch.setattr(
            spark_classify, "COLLECT_FILES", spark_plan.INLINE_FILES if limit == "driver" else -1
        )
        monkeypatch.setattr(spark_plan, "WRITE_FILES", spark_plan.WRITE_FILES if limit == "driver" else limit)
        plan_file = tmp_path / f"plan-{limit}.json"
        ckptctl("gc", "plan", str(sc.checkpoints), *sc.rebase, "--older-than", "1d", "--margin", "10m", "--force",
                "--engine", "spark", "--master", MASTER, "-o", str(plan_file))  # fmt: skip
        lists = read_lists(spark, str(plan_file), json.loads(plan_file.read_text())["files"])
        written[limit] = sorted(map(tuple, lists.select("outcome", "job_id", "path", "size", "mtime", "reason",
                                                        "evidence").collect()))  # fmt: skip
        files = {}
        for f in tmp_path.glob(f"plan-{limit}.parquet/outcome=*/job_id=*/*.parquet"):
            files.setdefault(f.parent.relative_to(tmp_path / f"plan-{limit}.parquet"), []).append(f)
        if limit in (0, "driver"):
            assert files and all(len(fs) == 1 for fs in files.values())
        dirs[limit] = set(files)
    assert written[0] == written[spark_plan.WRITE_FILES] == written["driver"]
    assert dirs[0] == dirs["driver"]
    assert any(r[0] == "candidates" for r in written[0])


def test_lists_of_an_empty_plan_read_back_empty_both_ways(spark, tmp_path: Path, monkeypatch) -> None:
    """A plan without a candidate or a protected file (a sound root): its lists, written from the
    driver (no Parquet file at all) or by the executors (Spark's partitioned write of no rows: only
    ``_SUCCESS``), are read by apply as no rows -- not refused for a schema nothing can be inferred
    from (UNABLE_TO_INFER_SCHEMA, which made three fixtures' plans unreadable once)."""
    from ckptctl.gc.spark import classify as spark_classify
    from ckptctl.gc.spark import plan as spark_plan
    from ckptctl.gc.spark.planner import build_plan_spark

    sc = Scenario("1.20.3", "basic", tmp_path)
    for executors in (False, True):
        monkeypatch.setattr(spark_classify, "COLLECT_FILES", -1 if executors else spark_plan.INLINE_FILES)
        plan = build_plan_spark(Storage(), sc.gc_options(), MASTER)
        try:
            assert (plan.files.decided is None) == executors
            plan_file = tmp_path / f"plan-{executors}.json"
            plan.write(str(plan_file))
        finally:
            plan.release()
        record = json.loads(plan_file.read_text())["files"]
        assert record["candidates"] == record["protected"] == 0
        assert spark_plan.read_lists(spark, str(plan_file), record).count() == 0


def test_partition_directories_written_from_the_driver_are_named_as_spark_names_them(
    spark, tmp_path: Path
) -> None:
    """A small plan's lists are written by pyarrow on the driver, in the directories Spark's own
    write makes (and reads back to the same values): the escaping of partition values."""
    from ckptctl.gc.spark.decided import escape_path_name

    values = [
        "none",
        "a/b",
        "x=y:z",
        "100%",
        "q?#*'\"{[]^",
        "tab\there",
        "line\nbreak",
        "\x7f",
        "sp ace",
        "é😀",
        "",
    ]
    out = tmp_path / "by-spark"
    spark.createDataFrame([(v, 1) for v in values], "job_id string, n int").write.partitionBy(
        "job_id"
    ).parquet(str(out))
    assert {p.name for p in out.glob("job_id=*")} == {f"job_id={escape_path_name(v)}" for v in values}
    back = {r.job_id for r in spark.read.parquet(str(out)).collect()}
    assert back == {v or None for v in values}


# -- S3 (moto) ------------------------------------------------------------------------------------


def _s3_options(up: dict, bucket: str, **extra):
    from ckptctl.gc import GcOptions

    return GcOptions(
        (f"s3://{bucket}/checkpoints",), older_than=0.0, margin=0.0, force=True,
        rebase=Rebase.of([(up["entry"]["original_root"], f"s3://{bucket}")]), **extra,
    )  # fmt: skip


def test_spark_plan_equals_local_plan_over_s3_listing_each_prefix_once(spark, s3_server) -> None:
    """The Spark plan of a bucket equals the local plan (made without the proxy, so that its
    requests are not counted), its candidates the orphans planted. The listing's rows are
    evaluated once, by the cache they go to: a cache built on another that was dropped first is
    re-planned by Spark, which listed every prefix a second time. Every full (undelimited) listing
    request through a proxy, none asked twice. (One Spark plan for both, where two tests made two.)"""
    from collections import Counter

    from ckptctl.gc.spark.planner import build_plan_spark
    from tests.support.faulty_proxy import FaultyProxy, Rule, query
    from tests.support.inventory import shared

    up = shared(s3_server)
    CLOCK[0] = time.time()
    asked: list[tuple] = []

    def full_listing(method: str, path: str) -> bool:
        q = query(path)
        if q.get("list-type") == "2" and "delimiter" not in q and q.get("max-keys") != "1":
            asked.append(
                (path.split("?")[0], q.get("prefix"), q.get("start-after"), q.get("continuation-token"))
            )
        return False

    local = comparable(
        build_plan(Storage(StorageOptions.from_env(s3_server.endpoint)), _s3_options(up, up["bucket"]))
    )
    with FaultyProxy(s3_server.endpoint, fault_rate=0.0, rules=[Rule(full_listing)]) as proxy:
        storage = Storage(StorageOptions.from_env(proxy.endpoint))
        plan = build_plan_spark(storage, _s3_options(up, up["bucket"]), MASTER)
        try:
            on_spark = comparable(plan)
        finally:
            plan.release()
    assert on_spark.pop("storage") == {"s3_endpoint": proxy.endpoint}  # the one difference: whom it asked
    assert local.pop("storage") == {"s3_endpoint": s3_server.endpoint}
    assert on_spark.keys() == local.keys()
    for key in local:
        assert on_spark[key] == local[key], key
    assert {c["path"] for c in local["candidates"]} == up["orphans"]
    assert asked, "no full listing seen: the proxy was not asked"
    assert [k for k, n in Counter(asked).items() if n > 1] == []


def test_spark_plan_equals_local_plan_over_s3_with_odd_keys(spark, s3_server) -> None:
    """Keys a file system has no names for: directory markers (``a/``, an empty name); ':', '%'
    and a blank in names; an object directly in the root (listed by the driver, before the
    sub-prefixes' tasks) and a directory after it; the bucket itself as the root."""
    from tests.support.inventory import setup

    bucket = "odd-keys"
    up = setup(s3_server, bucket)
    job = up["job"]
    odd = [f"checkpoints/{job}/shared/", f"checkpoints/{job}/fresh/", f"checkpoints/{job}/shared/%41",
           f"checkpoints/{job}/shared/a:b%2Fc d", f"checkpoints/{job}/taskowned/f:", "checkpoints/loose.txt",
           "checkpoints/zz/chk-1/leftover"]  # fmt: skip
    client = s3_server.client()
    for key in odd:
        client.put_object(Bucket=bucket, Key=key, Body=b"" if key.endswith("/") else b"odd")
    next_second()  # past the cut-off of --older-than 0s (S3 keeps whole seconds)
    CLOCK[0] = time.time()
    storage = Storage(StorageOptions.from_env(s3_server.endpoint))
    plan = assert_same_plan(storage, _s3_options(up, bucket, max_delete_fraction=1.0))
    decided = {d["path"] for d in plan["candidates"] + plan["protected"]}
    assert {f"s3://{bucket}/{k}" for k in odd} <= decided
    client.put_object(Bucket=bucket, Key="top-level", Body=b"odd")
    whole = assert_same_plan(
        storage, replace(_s3_options(up, bucket), roots=(f"s3://{bucket}",))
    )  # no prefix
    assert {d["path"] for d in whole["candidates"] + whole["protected"]} >= decided | {
        f"s3://{bucket}/top-level"
    }


def test_spark_plan_equals_local_plan_from_an_inventory(spark, s3_server) -> None:
    """A CSV report (URL-encoded keys, the awkward-name orphan) read on executors; the three formats'
    decoding is one package (ckptctl.inventory), proven against listings in tests/gc/test_inventory.py.
    An orphan's key is current twice, in the report's two data files (two tasks): one file, the row
    sorted last (the larger size) speaking whole, as in the local plan: its older mtime too (each
    field's largest would pair the larger size with the other row's newer mtime)."""
    from tests.support.inventory import shared, versioned_rows, write_inventory

    fmt = "CSV"
    up = shared(s3_server)
    bucket, rows = up["bucket"], up["rows"]
    report = rows + versioned_rows(bucket, up["job"], rows)
    at, twice = next((i, r) for i, r in enumerate(report) if r["key"].endswith("/shared/planted-0"))
    again = {
        **twice,
        "size": twice["size"] + 1000,
        "last_modified_date": twice["last_modified_date"] - timedelta(days=1),
    }
    half = -(-(len(report) + 1) // 2)  # write_inventory's two data files
    report = [again, *report] if at + 1 >= half else [*report, again]
    manifest = write_inventory(s3_server, report, fmt, source=bucket)
    CLOCK[0] = time.time()
    storage = Storage(StorageOptions.from_env(s3_server.endpoint))
    plan = assert_same_plan(storage, _s3_options(up, bucket, inventory=manifest))
    assert plan["inventory"]["rows_read"] == len(rows) + 4
    assert {c["path"] for c in plan["candidates"]} == up["orphans"]
    planted = f"s3://{bucket}/{twice['key']}"
    assert [(c["size"], c["mtime"]) for c in plan["candidates"] if c["path"] == planted] == [
        (again["size"], again["last_modified_date"].timestamp())
    ]


def test_spark_plan_equals_local_plan_from_an_inventory_listing_keys_twice(spark, s3_server) -> None:
    """Keys current twice in a Parquet report: with equal sizes and different mtimes (the newer
    row speaks), with a row without mtime, and beside a delete marker of the same key (dropped);
    a key with no mtime at all (kept)."""
    from tests.support.inventory import shared, write_inventory

    up = shared(s3_server)
    bucket, rows = up["bucket"], up["rows"]
    planted = sorted((r for r in rows if "/shared/planted-" in r["key"]), key=lambda r: r["key"])
    assert len(planted) >= 3
    newer, undated, marked = planted[:3]
    report = [
        *rows,
        {**newer, "last_modified_date": newer["last_modified_date"] + timedelta(seconds=30)},
        {**undated, "last_modified_date": None},
        {**marked, "version_id": "v9", "is_delete_marker": True, "size": None},
        {**undated, "key": undated["key"] + "-undated", "last_modified_date": None},
    ]
    manifest = write_inventory(s3_server, report, "Parquet", source=bucket)
    CLOCK[0] = time.time() + 60
    storage = Storage(StorageOptions.from_env(s3_server.endpoint))
    plan = assert_same_plan(storage, _s3_options(up, bucket, inventory=manifest))
    assert plan["inventory"]["rows_read"] == len(report)
    by_path = {c["path"]: c for c in plan["candidates"] + plan["protected"]}
    assert by_path[f"s3://{bucket}/{newer['key']}"]["mtime"] == newer["last_modified_date"].timestamp() + 30
    assert by_path[f"s3://{bucket}/{undated['key']}-undated"]["reason"] == "no-mtime"


def test_spark_plan_folds_a_checkpoint_only_an_inventory_lists_as_in_process(spark, s3_server) -> None:
    """A checkpoint's ``_metadata`` copied into a job's ``shared/`` (discovery does not look there)
    and a key the report lists twice: the references the driver folds late are grouped again
    with rows grouped exactly; what the copy references stays live in both plans."""
    from tests.support.inventory import listing, setup, write_inventory

    bucket = "late-inventory"
    up = setup(s3_server, bucket)
    fs = up["fs"]
    metadata = sorted(k for k in fs.find(f"{bucket}/checkpoints") if k.endswith("/_metadata"))[-1]
    copy = f"{bucket}/checkpoints/{up['job']}/shared/chk-100/_metadata"
    fs.pipe_file(copy, fs.cat_file(metadata))
    next_second()
    rows = listing(s3_server, bucket)
    twice = next(r for r in rows if "/shared/planted-" in r["key"])
    manifest = write_inventory(
        s3_server, [*rows, {**twice, "size": twice["size"] + 1}], "Parquet", source=bucket
    )
    CLOCK[0] = time.time()
    storage = Storage(StorageOptions.from_env(s3_server.endpoint))
    plan = assert_same_plan(storage, _s3_options(up, bucket, inventory=manifest))
    assert plan["discovery"]["found_by_listing_only"] == [f"s3://{copy.rpartition('/')[0]}"]
    assert not {c["path"] for c in plan["candidates"]} & up["referenced"]


def test_spark_plan_looks_now_below_job_areas_an_inventory_lists_as_in_process(spark, s3_server) -> None:
    """test_inventory's savepoint copied into a job's shared/ as the report began: the Spark
    planner hands the report's directories (its summary's) to the same fresh look, and both plans
    keep the savepoint's files."""
    from tests.gc.test_inventory import savepoint_copied_as_the_report_began

    bucket = "spark-inv-savepoint-copied"
    up = savepoint_copied_as_the_report_began(s3_server, bucket)
    CLOCK[0] = time.time()
    storage = Storage(StorageOptions.from_env(s3_server.endpoint))
    plan = assert_same_plan(storage, _s3_options(up, bucket, inventory=up["manifest"]))
    assert not up["files"] & {c["path"] for c in plan["candidates"]}
    assert up["savepoint"] in plan["discovery"]["found_by_listing_only"]


def test_auto_plans_an_inventory_too_big_for_this_process_on_spark(spark, s3_server, monkeypatch) -> None:
    """``--engine auto`` (the default) with an S3 Inventory: the manifest's data-file sizes bound
    the rows, so the choice is made before anything is listed. A report that fits in half this
    machine's memory is planned in-process; one that does not (here: a machine of 64 KiB) on Spark,
    said on stderr, with the same candidates. Before, auto never chose Spark for gc."""
    from ckptctl.engine import machine
    from ckptctl.inventory.manifest import most_rows, read_manifest
    from tests.support.inventory import shared, write_inventory

    up = shared(s3_server)
    bucket = up["bucket"]
    manifest = write_inventory(s3_server, up["rows"], "Parquet", source=bucket)
    args = ["gc", "plan", f"s3://{bucket}/checkpoints", "--s3-endpoint", s3_server.endpoint, "--inventory", manifest,
            "--rebase", f"{up['entry']['original_root']}=s3://{bucket}", "--older-than", "0s", "--margin", "0s",
            "--force", "--json"]  # fmt: skip
    CLOCK[0] = time.time()
    storage = Storage(StorageOptions.from_env(s3_server.endpoint))
    assert most_rows(read_manifest(storage, manifest, latest=float("inf"))) >= len(
        up["rows"]
    )  # an upper bound
    here = ckptctl(*args)
    monkeypatch.setattr(machine, "machine_memory", lambda: 64 << 10)
    small = ckptctl(*args)
    in_process, on_spark = json.loads(here.stdout), json.loads(small.stdout)
    assert "engine" not in in_process and "on Spark" not in here.stderr
    assert on_spark["engine"]["kind"] == "spark" and "so the plan is made on Spark" in small.stderr
    assert (
        {c["path"] for c in on_spark["candidates"]}
        == {c["path"] for c in in_process["candidates"]}
        == up["orphans"]
    )


def _summary_view(summary) -> tuple:
    """What the driver reads of a Spark plan's summary (the directories in their order)."""
    fields = (
        "kg",
        "key",
        "root_idx",
        "files",
        "bytes",
        "future",
        "duplicated",
        "live_files",
        "live_bytes",
        "mtime",
    )
    dirs = [(*(getattr(d, f) for f in fields), d.metadata and tuple(d.metadata)) for d in summary.dirs]
    notes = [(k, r.key, r.root_idx, r.pos, r.mtime) for k, r in summary.notes]
    return (
        dirs,
        notes,
        summary.rows_read,
        summary.rows_kept,
        summary.future,
        summary.live,
        summary.missing,
        summary.being_written,
    )


@pytest.fixture
def summaries_compared(monkeypatch):
    """Every summary of a Spark plan also made by the sorting aggregates: the two must agree.
    Returns, per plan, whether the summary had to sort."""
    from ckptctl.gc.spark import planner, summary

    compared: list[bool] = []
    fast, sorting = summary.summarise, summary.summarise_sorting

    def both(joined, tolerance_limit, cutoff, by_name):
        sorted_too = []
        monkeypatch.setattr(summary, "summarise_sorting", lambda *a: sorted_too.append(1) or sorting(*a))
        made = fast(joined, tolerance_limit, cutoff, by_name)
        monkeypatch.setattr(summary, "summarise_sorting", sorting)
        assert _summary_view(made) == _summary_view(sorting(joined, tolerance_limit, cutoff))
        compared.append(bool(sorted_too))
        return made

    monkeypatch.setattr(planner, "summarise", both)
    return compared


def test_the_summary_by_hash_aggregates_is_the_sorting_ones(spark, s3_server, tmp_path: Path, summaries_compared,
                                                            ) -> None:  # fmt: skip
    """The directories' order (of their first files), their _metadata and the first file dated in
    the future come from hash aggregates -- the least order keys as two longs, a name's first
    bytes where an inventory orders by name -- not from sorting every row: over an inventory
    whose names tie on their first bytes, with a subdirectory named like a first file's first
    bytes but not all of them, and over a local walk of a fixture with files in the future, both
    give what the sorting aggregates give (an inventory row from the future is a broken report,
    refused before any plan: tests/gc/test_inventory.py). A subdirectory named with all of a first file's first
    bytes leaves the order to the sorting aggregates."""
    from ckptctl.gc import GcOptions
    from tests.support.inventory import shared, write_inventory

    up = shared(s3_server)
    bucket, rows = up["bucket"], up["rows"]
    base = next(r for r in rows if "/shared/" in r["key"])
    folder = base["key"].rpartition("/")[0]
    # the folder's first names (before its UUIDs), tied on their first seven bytes
    tied = [{**base, "key": f"{folder}/{name}"} for name in ("0000000-2", "0000000-10", "0000001")]
    sub = {
        **base,
        "key": f"{folder}/000000-sub/x",
    }  # a subdirectory sorting just before the folder's first file
    storage = Storage(StorageOptions.from_env(s3_server.endpoint))
    CLOCK[0] = time.time()
    for extra, sorts in (([*tied, sub], False), ([*tied, {**sub, "key": f"{folder}/0000000-0/x"}], True)):
        manifest = write_inventory(s3_server, [*extra, *rows], "Parquet", source=bucket)
        assert_same_plan(storage, _s3_options(up, bucket, inventory=manifest))
        assert summaries_compared[-1] is sorts
    v, s, _d, _o = next(iter(scenario_roots()))
    sc = Scenario(v, s, tmp_path)
    job = next(p for p in sc.checkpoints.iterdir() if p.is_dir())
    later = time.time() + 400 * DAY
    for name in (
        "from-the-future",
        "0000000-future",
    ):  # the first file dated in the future, by hash aggregates
        sc.plant(f"checkpoints/{job.name}/shared/{name}", mtime=later)
    assert_same_plan(Storage(), GcOptions((str(sc.checkpoints),), older_than=DAY, force=True,
                                          rebase=Rebase.of([(sc.original, str(sc.root))])))  # fmt: skip
    assert summaries_compared == [False, True, False]


def test_directories_are_ordered_by_their_first_files_with_names_read_for_nested_ones_only() -> None:
    """The summary reads a name's first bytes (k2) only for directories nested in another one
    (:func:`ckptctl.gc.spark.summary.nested_dirs`); ordering every directory of random inventories by its name and that k2
    gives the order of their first files (an inventory's: by URI) whenever it is not left to
    the sorting aggregates -- names that share prefixes, a ``-`` that sorts before ``/``,
    empty names (double slashes), several bytes a character."""
    import random

    from ckptctl.gc.spark.columns import NAME_BYTES
    from ckptctl.gc.spark.summary import DirRow, in_listing_order, nested_dirs

    decided = 0
    for seed in range(400):
        rng = random.Random(seed)
        parts = ["a", "a-", "a/", "ab", "b", "é", "0", "00000000", "/"]
        uris = {"s3://b/r/" + "".join(rng.choice(parts) for _ in range(rng.randint(1, 5))) for _ in range(12)}
        first: dict[str, str] = {}
        for uri in sorted(uris):
            first.setdefault(uri.rpartition("/")[0], uri)
        nested = nested_dirs(first)
        rows = []
        for key, uri in first.items():
            name = uri[len(key) + 1 :].encode()[:NAME_BYTES].ljust(NAME_BYTES, b"\0")
            rows.append(DirRow(key=key, k1=0, k2=int.from_bytes(name, "big") if key in nested else 0))
        got = in_listing_order(rows, by_name=True)
        if got is not None:
            decided += 1
            assert [d.key for d in got] == sorted(first, key=first.get), seed
    assert decided > 200


def test_spark_plan_of_order_keys_beyond_two_longs_sorts_as_in_process(
    spark, tmp_path: Path, monkeypatch
) -> None:
    """A listing position too large for the packed order key (here: any beyond 1) makes the
    summary sort: the plan is still the local planner's."""
    from ckptctl.gc import GcOptions
    from ckptctl.gc.spark import columns, summary

    monkeypatch.setattr(columns, "_POS_BITS", 1)
    sorted_too = []
    monkeypatch.setattr(summary, "summarise_sorting",
                        lambda *a, _real=summary.summarise_sorting: sorted_too.append(1) or _real(*a))  # fmt: skip
    v, s, _d, _o = next(iter(scenario_roots()))
    sc = Scenario(v, s, tmp_path)
    sc.plant(f"checkpoints/{sc.jobs()[0].name}/shared/orphan-old")
    assert_same_plan(Storage(), GcOptions((str(sc.checkpoints),), older_than=DAY, force=True,
                                          rebase=Rebase.of([(sc.original, str(sc.root))])))  # fmt: skip
    assert sorted_too


def test_a_root_whose_path_holds_spaces_percent_signs_and_url_delimiters(spark, tmp_path: Path) -> None:
    """Flink writes paths as plain strings (Path.toString: a space stays a space, a literal
    ``%20`` stays ``%20``): checkpoints whose _metadata name such paths (a real Flink checkpoint
    relocated there by ``ckptctl relocate``, which writes the new paths) must be planned by the
    strings, never decoded as URLs, on both engines. Were ``%41`` read as ``A`` or ``+`` as a space,
    every referenced file would look unlisted and every listed one unreferenced."""
    from ckptctl.gc import GcOptions

    sc = Scenario("2.2.0", "basic", tmp_path)
    odd = tmp_path / "flink state 100%25 %41+b #1 ?x=&é"
    for job in sc.jobs():
        ckptctl("relocate", str(job), str(odd), "--all", "--apply", *sc.rebase)
    job = next(p for p in odd.iterdir() if p.is_dir())
    for p in odd.rglob("*"):
        if p.is_file():
            os.utime(p, (T0 + 3600, T0 + 3600) if p.name == "_metadata" else (T0, T0))
    orphan = odd / job.name / "shared" / "orphan %2F+#?"
    orphan.write_bytes(b"o")
    os.utime(orphan, (T0, T0))
    refs = json.loads(ckptctl("refs", str(odd), "--json").stdout)
    written = {r["written_path"] for r in refs if r.get("written_path")}
    assert any("%25 %41+b #1 ?x=&" in w for w in written), sorted(written)[:3]  # the _metadata name them
    plan = assert_same_plan(Storage(), GcOptions((str(odd),), older_than=DAY, margin=600.0, force=True))
    candidates = {d["path"] for d in plan["candidates"]}
    assert not plan["refusals"] and not plan["missing"], (plan["refusals"], plan["missing"])
    assert candidates == {"file:" + str(orphan)}, sorted(candidates)
    assert plan["live_files"] == len({r["path"] for r in refs}) + len(list(odd.rglob("_metadata")))
