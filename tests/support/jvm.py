"""JVM options for the suite's JVMs, and the environment that hands them on.

Every JVM the suite starts (Spark's embedded driver, PyFlink's MiniCluster, Flink's own reader,
the Paimon sink job) works on small inputs, and the suite is CPU-bound on the 2-core CI machine
(vmstat: 8 % idle over a run). There the tiered JIT's C2 compiler threads burned a good part of
those JVMs' CPU on code that never ran long enough to repay them. One Spark session making eight
small gc plans: 116 CPU-s and 66.3 s with the defaults, 70 CPU-s and 56.9 s with C1 only (its
last plan 4.53 -> 3.94 s: C2 did not catch up within the session). The serial collector made a
long session's plans slower (pauses of a large heap): not used beyond the one-shot JVMs that
already had it. A JIT tier changes how fast the same bytecode runs, not what it computes. The
product keeps the JVM's default JIT: at bucket scale (bench/) C2 pays for itself.

The long-lived JVMs (each worker's Spark session, Flink's restore gateways) collect with the
parallel collector, as the product's embedded Spark JVM does (ckptctl.engine.spark_startup.jvm_collector):
G1's concurrent threads took a third of a session's CPU. One Spark session making 36 small gc
plans (three fixture roots in turn), C1 only: G1 125 CPU-s of the JVM and 93.0 s; parallel 80.7
CPU-s and 78.6 s; serial 81.2 CPU-s and 85.1 s. Set through the launchers' variables only: a
command line that names its own collector (the one-shot serial JVMs) must not get a second one
(the JVM refuses to start with two).
"""

from __future__ import annotations

from collections.abc import MutableMapping

SHORT_LIVED = ("-XX:TieredStopAtLevel=1",)
# Each test worker's embedded Spark JVM (the driver is the executor of local[*]): its heap. The
# product sizes it from the machine (a quarter of the free memory, up to 8 GiB); two workers of 6
# GB each beside Flink's MiniClusters on a 24 GB machine shared with other work drew the kernel's OOM
# killer, and every later Spark test of that worker failed. The suite's inputs are small: every Spark
# test passes with 1 GiB; 1.5 GiB leaves room, and two workers' JVMs (with their Python workers)
# stay within ~4 GB.
SPARK_HEAP = "1536m"
LONG_LIVED = (*SHORT_LIVED, "-XX:+UseParallelGC")
# Flink's JVMs load many classes outside the class archive, some of them again and again: each
# MiniCluster (one per restore) extracts Pekko's jar anew and loads its 852 classes in a class
# loader of its own, and the Table planner's 1,172 classes come from a jar the planner's loader
# extracts. The JVM verifies the bytecode of every such class as it loads it (the archive's were
# verified when it was written). These are Flink's released jars: verification guards
# against malformed bytecode and changes nothing a well-formed class does. Four restores of a 2.2
# savepoint in one gateway: 28.0 CPU-s and 83 s verified, 22.7 CPU-s and 65 s not (each restore
# after the first 4.8 -> 3.0 CPU-s; the machine at a load of 13-20).
UNVERIFIED = ("-XX:+UnlockDiagnosticVMOptions", "-XX:-BytecodeVerificationRemote")
FLINK = (*LONG_LIVED, *UNVERIFIED)


def hand_on(environ: MutableMapping[str, str]) -> None:
    """Set (unless the caller set them) the variables through which Spark's launcher
    (``SPARK_SUBMIT_OPTS``, read by spark-class), PySpark's standalone daemons and PyFlink's
    gateway (``FLINK_ENV_JAVA_OPTS``) pass options to the JVMs they start, and the heap of Spark's
    embedded JVM (``SPARK_DRIVER_MEMORY``: :data:`SPARK_HEAP`). Spark's embedded JVM
    gets its collector from ckptctl itself (:func:`ckptctl.engine.spark_startup.jvm_collector`), so the
    suite's sessions start as a user's do; naming it here as well left that path to one test."""
    for name, opts in (("SPARK_SUBMIT_OPTS", SHORT_LIVED), ("SPARK_DAEMON_JAVA_OPTS", LONG_LIVED),
                       ("FLINK_ENV_JAVA_OPTS", FLINK)):  # fmt: skip
        environ.setdefault(name, " ".join(opts))
    environ.setdefault("SPARK_DRIVER_MEMORY", SPARK_HEAP)  # spark-submit reads it; a user's own wins


def javac_options() -> list[str]:
    """The same options for javac's own JVM."""
    return [f"-J{o}" for o in SHORT_LIVED]
