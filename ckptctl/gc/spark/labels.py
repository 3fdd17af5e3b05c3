"""Numbers for the strings decisions would repeat: a Spark plan's evidence texts and job names."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from ckptctl.gc.rule import FileRule

# what the lists keep of a decision as it is (its evidence and job come from Labels)
KEPT_COLUMNS = ("outcome", "root_idx", "part", "pos", "path", "size", "mtime", "reason")


@dataclass
class Labels:
    """The evidence texts and job names decisions point to by number (:data:`DECISION_SCHEMA`),
    made on the driver from the directories' contexts and the rule: a handful per job."""

    evidence: list[str]
    jobs: list[str]
    evidence_id: dict[str, int]
    job_id: dict[str, int]

    @classmethod
    def of(cls, contexts: Iterable[tuple], rule: FileRule, job_of: dict[int, str]) -> Labels:
        """Every evidence :meth:`FileRule.verdicts` can give (a directory's, the young and
        after-inventory ones, none) and every job of the directories."""
        contexts = list(contexts)
        texts = {json.dumps(c[3] or {}) for c in contexts} | {"{}"}
        texts |= {json.dumps(ev or {}) for ev in (rule.young_evidence, rule.after_evidence)}
        jobs = sorted({job for c in contexts if (job := job_of.get(id(c[4]))) is not None})
        evidence = sorted(texts)
        return cls(evidence, jobs, {t: i for i, t in enumerate(evidence)}, {j: i for i, j in enumerate(jobs)})

    def attach(self, frame):
        """``frame`` (:data:`DECISION_SCHEMA`) with ``evidence`` the text, ``job`` the name and
        ``job_id`` its last part (``none``: no job): two small tables sent to every task, the
        decisions not shuffled."""
        from pyspark.sql import functions as F

        spark = frame.sparkSession
        texts = spark.createDataFrame(list(enumerate(self.evidence)), "verdict int, text string")
        names = spark.createDataFrame([(i, job, job.rpartition("/")[2]) for i, job in enumerate(self.jobs)],
                                      "job int, name string, job_id string")  # fmt: skip
        out = frame.join(F.broadcast(texts), "verdict", "left").join(F.broadcast(names), "job", "left")
        return out.select(*KEPT_COLUMNS, F.coalesce("evidence", "text").alias("evidence"), F.col("name").alias("job"),
                          F.coalesce("job_id", F.lit("none")).alias("job_id"))  # fmt: skip
