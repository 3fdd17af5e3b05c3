"""The Spark side of one plan: the session, the frames the plan keeps on the executors until it is
released, and what the executors told the driver while folding and deciding (counts kept as they
were made, not by a later pass). Held by the Spark planner and handed to the steps that run on
executors (:mod:`ckptctl.gc.spark.classify`, :mod:`ckptctl.gc.spark.frames`)."""

from __future__ import annotations

import functools
import pickle

from ckptctl.gc.spark.executors import unpickled


class SparkWork:
    def __init__(self, spark, master: str) -> None:
        self.spark, self.master = spark, master
        self.sc = spark.sparkContext
        self.cached: list = []  # frames cached while planning, released with the plan (or by the planner)
        self.segments = 0  # the segments retained checkpoints use: without any, no file is partially live
        self.fold_counts = [0, 0]  # the fold's rows of live paths and of segments
        self.forst_parents: set[str] = set()  # directories of live paths a ForSt working directory's may be

    def cache(self, frame):
        """``frame`` kept (memory, spilling to disk) while the plan is made, released after: a
        long-lived session (a test run, a notebook) making many plans must not fill its executors'
        storage with old listings until aggregations run out of memory."""
        from pyspark import StorageLevel

        frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
        self.cached.append(frame)
        return frame

    def materialise_rows(self, frame):
        """``frame``'s rows kept as they are (serialized, in memory, spilling to disk) while the
        plan is made: the rows per URI, read by every later pass. A cache would keep them as
        compressed columns, and building those cost 16 s of a 10^7-row plan's 105
        (bench/bucket_bench.py; 26 s to shuffle, group and keep the rows this way, 42 s cached).
        Kept by the first pass that reads them (not eagerly: the summary's aggregation and the
        keeping are one pass, a scan of 10^7 kept rows less: 118.6 -> 109.0 s). Kept rows are
        not recomputed: if an executor holding some is lost, the next pass fails
        (:func:`executor_error`'s line) -- a plan made again, never one made of fewer rows."""
        from pyspark import StorageLevel

        frame = frame.localCheckpoint(eager=False, storageLevel=StorageLevel.MEMORY_AND_DISK)
        self.cached.append(frame)
        return frame

    def on_executors(self, items: list, slices: int, fn, ddl: str, *, arrow: bool = False):
        """The rows (tuples of ``ddl``) ``fn`` makes of each of ``slices`` slices of ``items`` (in
        order), on executors, handed to the JVM in Arrow batches: a pickled Python row each costs
        more than making it (10^7 listed files). ``arrow``: ``fn`` yields the record batches of
        ``ddl`` itself (rows read as columns stay columns)."""
        from ckptctl.engine.arrow import map_in_arrow

        pickled = self.sc.parallelize([(pickle.dumps(x),) for x in items], slices)
        return map_in_arrow(self.spark.createDataFrame(pickled, "item binary"),
                            functools.partial(unpickled, fn, None if arrow else ddl), ddl)  # fmt: skip
