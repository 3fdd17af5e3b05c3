"""The per-file rule over columns: one directory at a time, the local planner's batches of runs,
and a batch with a directory per file (the Spark planner's Arrow batches) give every file the
same verdict.

Random files over every branch of the rule -- symlinks, no mtime, zero, stand-in and future mtimes, young,
after the inventory, in flight, expired-only, the names :func:`_by_name` reads (``_metadata``,
``..``, backslashes, ForSt control files), names that are no UTF-8 -- in directories of every kind
of context, decided both ways; each verdict must be reached at least once, or the test proves
nothing."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.compute as pc

from ckptctl.checkpoint.layout import FORST_CONTROL_PREFIXES, FORST_CONTROL_RE
from ckptctl.gc.decisions import Verdicts
from ckptctl.gc.reasons import Reason
from ckptctl.gc.rule import FileRule, RuleColumns, RunToDecide
from ckptctl.storage.listing import DirFiles

NOW = 1_800_000_000.0
# mtimes stores report for times they do not have (0, 1, FAT's 1980-01-01): no age before this day
FIRST_AGE = datetime(2016, 1, 1, tzinfo=UTC).timestamp()
CUTOFF = NOW - 86_400
INVENTORY = CUTOFF - 43_200  # the report began before the cutoff: files between are "after the inventory"
ANCHOR = NOW - 7 * 86_400
MARGIN = 3_600.0

NAMES = ["a.sst", "b.sst", "_metadata", "..", ".", "", "x\\y", "CURRENT", "LOG.old.1", "LOG", "LOGx",
         "MANIFEST-000004", "MANIFEST-x", "OPTIONS-000007", "IDENTITY", "LOCK", "bad\udcff", "\ud800",
         "LOG.\ud800", "000042.sst", "uuid-1", "uuid-2"]  # fmt: skip
MTIMES = [math.nan, 0.0, -5.0, 1.0, FIRST_AGE - 1, FIRST_AGE, NOW + 3_600, NOW + 10, CUTOFF, CUTOFF - 1,
          INVENTORY, INVENTORY - 1, ANCHOR - MARGIN, ANCHOR - MARGIN - 1, ANCHOR, ANCHOR - 30 * 86_400]  # fmt: skip


def _contexts() -> list[tuple]:
    """Contexts as :meth:`_Contexts.get` makes them: (reason, candidate?, anchor, evidence, stats,
    unreferenced, forst)."""
    evidence = {"newest_retained": "file:/r/j/chk-9", "newest_retained_mtime": ANCHOR}
    return [
        (Reason.UNREFERENCED_SHARED, True, ANCHOR, evidence, [0] * 4, True, False),
        (Reason.UNREFERENCED_TASKOWNED, True, None, None, [0] * 4, True, False),
        (Reason.UNREFERENCED_FORST, True, ANCHOR, evidence, [0] * 4, True, True),
        (Reason.EXPIRED_CHECKPOINT, True, math.inf, evidence, [0] * 4, False, False),
        (Reason.RETAINED_CHECKPOINT_DIR, False, None, None, [0] * 4, False, False),
        (Reason.NOT_FLINK_FILE, False, None, None, [0] * 4, False, False),
    ]


def _flags(run: DirFiles, names: set[str]) -> bytes:
    """Per file of the run, 1 if its name is one of ``names`` (what the planner looks up once)."""
    return bytes(name in names for name in run.names)


def test_a_run_at_a_time_and_a_batch_of_directories_agree() -> None:
    rng = random.Random(7)
    rule = FileRule(
        CUTOFF, NOW + 60, MARGIN, INVENTORY, {"cutoff": CUTOFF}, {"inventory_created": INVENTORY}, True
    )
    contexts = _contexts()
    runs, live, expired = [], [], []
    for d, _ctx in enumerate(contexts * 3):
        run = DirFiles(f"file:/r/d{d}/")
        for name in rng.sample(NAMES, len(NAMES)) + [f"f{i}" for i in range(rng.randrange(40))]:
            run.add(name, rng.randrange(1, 1 << 20), rng.choice(MTIMES), rng.random() < 0.1)
        runs.append(run)
        live.append({n for n in run.names if rng.random() < 0.2})
        expired.append({n for n in run.names if rng.random() < 0.3})

    # the local planner's runs: one at a time, and all in one batch
    items = [RunToDecide(run, contexts[d % len(contexts)], _flags(run, live[d]), {}, _flags(run, expired[d]))
             for d, run in enumerate(runs)]  # fmt: skip
    by_run: dict[tuple[int, str], tuple] = {}
    verdicts = Verdicts()
    for d, item in enumerate(items):
        (decided,) = rule.decide_runs([item], verdicts, None)
        for outcome, at, codes in (
            ("taken", decided.took, decided.took_as),
            ("kept", decided.kept, decided.kept_as),
        ):
            for i, code in zip(at, codes, strict=True):
                by_run[d, item.run.names[i]] = (outcome, *verdicts.pairs[code])
    together: dict[tuple[int, str], tuple] = {}
    for d, decided in enumerate(rule.decide_runs(items, verdicts, None)):
        assert decided.run is runs[d]
        for outcome, at, codes in (
            ("taken", decided.took, decided.took_as),
            ("kept", decided.kept, decided.kept_as),
        ):
            for i, code in zip(at, codes, strict=True):
                together[d, decided.run.names[i]] = (outcome, *verdicts.pairs[code])
    assert together == by_run
    # every file in one batch, each with its directory, as the Spark planner does
    names, mtimes, links, settled, gone, at = [], [], [], [], [], []
    for d, run in enumerate(runs):
        for i, name in enumerate(run.names):
            names.append(name.encode("utf-8", "surrogatepass"))
            mtimes.append(run.mtimes[i])
            links.append(bool(run.links[i]))
            settled.append(name in live[d])
            gone.append(name in expired[d])
            at.append(d)
    batch_verdicts = Verdicts()
    codes, taken, kept = rule.verdicts(
        RuleColumns([contexts[d % len(contexts)] for d in range(len(runs))], pa.array(at, pa.int32()),
                    pa.array(names, pa.large_binary()), pa.array(mtimes, pa.float64()), pa.array(links),
                    pa.array(settled), pa.array(gone)), batch_verdicts,
    )  # fmt: skip
    by_batch = {}
    for k, (code, t, kk) in enumerate(
        zip(codes.to_pylist(), taken.to_pylist(), kept.to_pylist(), strict=True)
    ):
        assert not (t and kk)
        if t or kk:
            name = names[k].decode("utf-8", "surrogatepass")
            by_batch[at[k], name] = ("taken" if t else "kept", *batch_verdicts.pairs[code])
    assert by_batch == by_run
    assert pc.sum(pc.cast(taken, "int64")).as_py() == sum(1 for v in by_run.values() if v[0] == "taken")

    seen = {(outcome, reason) for outcome, reason, _ev in by_run.values()}
    for outcome, reason in [
        ("taken", Reason.UNREFERENCED_SHARED), ("taken", Reason.UNREFERENCED_TASKOWNED),
        ("taken", Reason.UNREFERENCED_FORST), ("taken", Reason.EXPIRED_CHECKPOINT), ("taken", Reason.EXPIRED_ONLY),
        ("kept", Reason.SYMLINK), ("kept", Reason.NO_MTIME), ("kept", Reason.FUTURE_MTIME), ("kept", Reason.YOUNG),
        ("kept", Reason.AFTER_INVENTORY), ("kept", Reason.IN_FLIGHT), ("kept", Reason.ABNORMAL_PATH),
        ("kept", Reason.NOT_FLINK_FILE), ("kept", Reason.FORST_CONTROL_FILE), ("kept", Reason.RETAINED_CHECKPOINT_DIR),
    ]:  # fmt: skip
        assert (outcome, reason) in seen, (outcome, reason)
    # ForSt control files are kept by name, in ForSt directories only; a near miss is not one
    forst = {name for (d, name), v in by_run.items() if v[1] is Reason.FORST_CONTROL_FILE}
    assert forst and all(FORST_CONTROL_RE.match(n) for n in forst)
    assert "LOGx" not in forst and "MANIFEST-x" not in forst


def test_every_forst_control_name_begins_with_a_listed_prefix() -> None:
    """The columnar rule tests FORST_CONTROL_RE only on names that begin with one of
    FORST_CONTROL_PREFIXES: each alternative of the pattern must begin with one."""
    alternatives = FORST_CONTROL_RE.pattern.removeprefix("^(?:").removesuffix(")\\Z").split("|")
    assert len(alternatives) == 6
    for alternative in alternatives:
        assert alternative.startswith(FORST_CONTROL_PREFIXES), alternative


def test_a_name_that_only_looks_like_a_forst_control_file_is_judged_like_any_other() -> None:
    """The columnar rule reads in Python every ForSt name that begins like a control file; one that
    is not (``LOGx``) must come out as the row-by-row rule had it: referenced only by expired
    checkpoints -> ``expired-only`` (the first columnar version said ``unreferenced-forst``)."""
    rule = FileRule(CUTOFF, NOW + 60, MARGIN, CUTOFF, {"cutoff": CUTOFF}, {"inventory_created": CUTOFF}, True)
    forst = _contexts()[2]
    run = DirFiles("file:/r/j/shared/op_x__0_1__attempt_1/db/")
    old = ANCHOR - 30 * 86_400
    for name in ("LOGx", "MANIFEST-x", "CURRENT", "000001.sst", "000002.sst"):
        run.add(name, 1, old)
    verdicts = Verdicts()
    expired = _flags(run, {"LOGx", "MANIFEST-x", "CURRENT", "000001.sst"})
    (decided,) = rule.decide_runs([RunToDecide(run, forst, None, {}, expired)], verdicts, None)
    got = {
        run.names[i]: ("taken", verdicts.pairs[c][0])
        for i, c in zip(decided.took, decided.took_as, strict=True)
    }
    got |= {
        run.names[i]: ("kept", verdicts.pairs[c][0])
        for i, c in zip(decided.kept, decided.kept_as, strict=True)
    }
    assert got == {
        "LOGx": ("taken", Reason.EXPIRED_ONLY), "MANIFEST-x": ("taken", Reason.EXPIRED_ONLY),
        "CURRENT": ("kept", Reason.FORST_CONTROL_FILE), "000001.sst": ("taken", Reason.EXPIRED_ONLY),
        "000002.sst": ("taken", Reason.UNREFERENCED_FORST),
    }  # fmt: skip


def _one_file(rule: FileRule, context: tuple, name: str, mtime: float, is_link: bool, expired: bool) -> tuple:
    """The rule for one file that is not live, read from its documentation one condition at a time
    (the row-by-row rule the columnar one replaced): an oracle independent of ckptctl's code."""
    reason, is_candidate, anchor, evidence, _stats, unreferenced, forst = context
    if not is_candidate:
        return "kept", reason, evidence
    verdict = (reason, evidence)
    if name in ("", ".", "..", "_metadata") or "\\" in name or (forst and FORST_CONTROL_RE.match(name)):
        if name in ("", ".", "..") or "\\" in name:
            return "kept", Reason.ABNORMAL_PATH, None
        if name == "_metadata" and reason in (Reason.UNREFERENCED_SHARED, Reason.UNREFERENCED_TASKOWNED,
                                              Reason.UNREFERENCED_FORST):  # fmt: skip
            return "kept", Reason.NOT_FLINK_FILE, None
        if reason is Reason.UNREFERENCED_FORST and FORST_CONTROL_RE.match(name):
            return "kept", Reason.FORST_CONTROL_FILE, None
    elif rule.check_expired and unreferenced and expired:
        verdict = (Reason.EXPIRED_ONLY, evidence)
    m = math.nan if mtime is None else mtime
    if is_link:
        return "kept", Reason.SYMLINK, None
    if not m >= FIRST_AGE:  # NaN compares false
        return "kept", Reason.NO_MTIME, None
    if m > rule.tolerance_limit:
        return "kept", Reason.FUTURE_MTIME, None
    if m >= rule.young_limit:
        return ("kept", Reason.YOUNG, rule.young_evidence) if m >= rule.cutoff else (
            "kept", Reason.AFTER_INVENTORY, rule.after_evidence)  # fmt: skip
    if m >= (math.inf if anchor is None else anchor - rule.margin):
        return "kept", Reason.IN_FLIGHT, evidence
    return "taken", *verdict


def random_rule(rng: random.Random) -> tuple[FileRule, list[float]]:
    """A rule with random cut-off, inventory time, margin and expired check, and mtimes to try
    on it: none, zero, negative, old ones, and every threshold with its neighbours."""
    cutoff = NOW - rng.choice([0, 3_600, 86_400])
    inventory = cutoff - rng.choice([0, 1, 7_200])
    margin = rng.choice([0.0, 60.0, MARGIN])
    rule = FileRule(cutoff, NOW + 60, margin, inventory, {"cutoff": cutoff}, {"inventory_created": inventory},
                    rng.random() < 0.7)  # fmt: skip
    edges = [cutoff, inventory, ANCHOR - margin, NOW + 60]
    old = [FIRST_AGE, ANCHOR - margin - 1, ANCHOR - 30 * 86_400]
    stand_ins = [1.0, 315_532_800.0, FIRST_AGE - 1, FIRST_AGE - 0.5]  # Nix, FAT's 1980, the day before
    return rule, [math.nan, 0.0, -1.0, *stand_ins, *old * 4, *(t + d for t in edges for d in (-1, 0, 1))]


def test_the_columnar_rule_decides_as_one_condition_at_a_time() -> None:
    """Random runs (every context kind, names the rule reads, every mtime threshold and its
    neighbours, links, live, expired): each file's outcome, reason and evidence are the oracle's."""
    compared = 0
    for seed in range(40):
        rng = random.Random(seed)
        rule, times = random_rule(rng)
        items = []
        for d in range(rng.randrange(1, 5)):
            run = DirFiles(f"file:/r/d{d}/")
            for i in range(rng.choice([1, 3, 40, 700])):
                name = rng.choice(NAMES) if rng.random() < 0.4 else f"f{i}"
                run.add(name, rng.randrange(1000), rng.choice(times), rng.random() < 0.05)
            live = {n for n in run.names if rng.random() < 0.3}
            gone = {n for n in run.names if rng.random() < 0.3}
            items.append(
                (
                    RunToDecide(run, rng.choice(_contexts()), _flags(run, live), {}, _flags(run, gone)),
                    live,
                    gone,
                )
            )
        verdicts = Verdicts()
        for (item, live, gone), decided in zip(items, rule.decide_runs([i[0] for i in items], verdicts, None),
                                               strict=True):  # fmt: skip
            got = {}
            for outcome, at, codes in (
                ("taken", decided.took, decided.took_as),
                ("kept", decided.kept, decided.kept_as),
            ):
                got |= {i: (outcome, *verdicts.pairs[c]) for i, c in zip(at, codes, strict=True)}
            run = item.run
            want = {i: _one_file(rule, item.context, name, run.mtime(i), bool(run.links[i]), name in gone)
                    for i, name in enumerate(run.names) if name not in live}  # fmt: skip
            assert got == want
            assert decided.live_files == sum(1 for n in run.names if n in live)
            compared += len(want)
    assert compared > 5_000
