"""The rule's Spark SQL form (:mod:`ckptctl.gc.spark.rule`) decides every file it takes as the rule
read one condition at a time (the oracle of ``test_rule_columns.py``): random files over every
branch -- symlinks, no mtime (null, NaN, zero, negative, minus infinity, a stand-in before 2016), future and infinite
mtimes, each threshold and its neighbours, expired-only, every kind of directory context -- and
the files it leaves to Python are at least those whose name the rule reads."""

from __future__ import annotations

import json
import math
import random

from ckptctl.gc.reasons import Reason
from ckptctl.gc.rule import FileRule
from tests.gc.test_rule_columns import NAMES, _contexts, _one_file, random_rule

UTF8_NAMES = [n for n in NAMES if n.isascii()]  # Spark holds UTF-8 only: the planner refuses others first


def _labels(contexts: list[tuple], rule: FileRule):
    from ckptctl.gc.spark.labels import Labels

    texts = sorted({json.dumps(c[3] or {}) for c in contexts} | {"{}", json.dumps(rule.young_evidence),
                                                                 json.dumps(rule.after_evidence)})  # fmt: skip
    return Labels(texts, ["job"], {t: i for i, t in enumerate(texts)}, {"job": 0})


def test_the_sql_rule_decides_as_one_condition_at_a_time(spark) -> None:
    from pyspark.sql import functions as F

    from ckptctl.gc.spark.columns import uri_parent
    from ckptctl.gc.spark.rule import CONTEXT_SCHEMA, context_rows, name_marks, needs_python, sql_verdicts

    compared = in_python = 0
    seen: set[tuple[str, Reason]] = set()
    for seed in range(12):
        rng = random.Random(seed)
        rule, times = random_rule(rng)
        times += [None, -math.inf, math.inf]  # what a listing or a report may hold besides
        contexts = _contexts()
        labels = _labels(contexts, rule)
        shipped = {f"s3://b/d{d}": (*c[:4], 0, *c[5:]) for d, c in enumerate(contexts)}
        files, want = [], {}
        for i in range(600):
            d = rng.randrange(len(contexts))
            name = rng.choice(UTF8_NAMES) if rng.random() < 0.3 else f"f{i}"
            uri = f"s3://b/d{d}/{name}"
            if uri in want:
                continue
            mtime, link, expired = (
                rng.choice(times),
                rng.choice([None, False, False, True]),
                rng.choice([None, False, True]),
            )
            files.append((uri, mtime, link, expired))
            want[uri] = _one_file(rule, contexts[d], name, mtime, bool(link), bool(expired))
        rows = spark.createDataFrame(files, "uri string, mtime double, is_link boolean, expired boolean")
        ctx = spark.createDataFrame(context_rows(shipped, labels, rule), CONTEXT_SCHEMA)
        taken, reason, verdict = sql_verdicts(rule, labels)
        rows = rows.withColumn("name", F.substring_index("uri", "/", -1))
        rows = rows.select("*", uri_parent("uri", "name").alias("dir"), name_marks("name").alias("marks"))
        got = rows.join(ctx, "dir", "left").select(
            "uri", needs_python().alias("py"), taken.alias("taken"), reason.alias("reason"), verdict.alias("verdict")
        ).collect()  # fmt: skip
        assert len(got) == len(files)
        for r in got:
            outcome, why, evidence = want[r.uri]
            name = r.uri.rsplit("/", 1)[1]
            if r.py:
                in_python += 1
                continue
            # what the SQL form takes it decides alone: never a name the rule reads
            assert (
                why not in (Reason.ABNORMAL_PATH, Reason.FORST_CONTROL_FILE)
                or not contexts[int(r.uri.split("/")[3][1:])][1]
            ), r
            got_one = ("taken" if r.taken else "kept", Reason(r.reason), labels.evidence[r.verdict])
            assert got_one == (outcome, why, json.dumps(evidence or {})), (r.uri, name)
            seen.add((outcome, why))
            compared += 1
    assert compared > 5_000 and 100 < in_python < compared / 3
    for pair in [
        ("taken", Reason.UNREFERENCED_SHARED), ("taken", Reason.UNREFERENCED_TASKOWNED),
        ("taken", Reason.UNREFERENCED_FORST), ("taken", Reason.EXPIRED_CHECKPOINT), ("taken", Reason.EXPIRED_ONLY),
        ("kept", Reason.SYMLINK), ("kept", Reason.NO_MTIME), ("kept", Reason.FUTURE_MTIME), ("kept", Reason.YOUNG),
        ("kept", Reason.AFTER_INVENTORY), ("kept", Reason.IN_FLIGHT), ("kept", Reason.NOT_FLINK_FILE),
        ("kept", Reason.RETAINED_CHECKPOINT_DIR),
    ]:  # fmt: skip
        assert pair in seen, pair


def test_a_file_without_name_marks_goes_to_python_in_a_candidate_directory(spark) -> None:
    """Marks are made for every file where the rows per URI are grouped; a file that had none
    would have its name read by the rule, never be decided as if the name said nothing."""
    from ckptctl.gc.spark.rule import needs_python

    rows = spark.createDataFrame([(None, True, False), (None, True, True), (None, False, True), (0, True, True)],
                                 "marks tinyint, cand boolean, forst boolean")  # fmt: skip
    assert [r[0] for r in rows.select(needs_python()).collect()] == [True, True, False, False]


def test_a_directory_is_cut_as_python_cuts_it(spark) -> None:
    """The Spark planner's directories are cut as bytes at the last ``/``: as ``rpartition`` cuts
    them for names of several bytes a character, a line break, none or a trailing ``/``."""
    from ckptctl.gc.spark.columns import uri_parent

    uris = ["s3://b/a/b/c", "s3://b/é/ü/x", "file:/r/d/", "file:/r/d/\n/x", "noslash", "/", "a/", "s3://b/日本/語/名",
            "x/\U0001f600/y", ""]  # fmt: skip
    from pyspark.sql import functions as F

    frame = spark.createDataFrame([(u,) for u in uris], "uri string").withColumn(
        "name", F.substring_index("uri", "/", -1)
    )
    got = frame.select(uri_parent("uri"), uri_parent("uri", "name")).collect()
    assert [tuple(r) for r in got] == [(u.rpartition("/")[0],) * 2 for u in uris]
