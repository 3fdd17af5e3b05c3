"""Apache Paimon next to Flink checkpoints, without a JVM.

- :mod:`ckptctl.paimon.sinkstate` decodes the operator state Paimon's Flink sink keeps in a
  checkpoint (commit user, uncommitted ``ManifestCommittable`` s, writer states, pending savepoint
  tags); :mod:`ckptctl.paimon.binaryrow` reads the Paimon ``BinaryRow`` s inside them;
- :mod:`ckptctl.paimon.table` reads a Paimon table directory through ckptctl's one storage layer:
  snapshots, commit users, the live file set and orphan candidates;
- :mod:`ckptctl.paimon.restore` puts the two side by side: what a restore of a checkpoint commits
  again, and the hazards of doing it (A, B, C).
"""
