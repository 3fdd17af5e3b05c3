"""Apache Paimon's Flink sink, read from Flink checkpoints without a JVM.

:mod:`ckptctl.paimon.sinkstate` decodes the operator state Paimon's sink keeps (commit user,
uncommitted ``ManifestCommittable`` s, writer states, pending savepoint tags);
:mod:`ckptctl.paimon.binaryrow` reads the Paimon ``BinaryRow`` s inside them.
"""
