"""Apache Paimon next to Flink checkpoints, without a JVM.

- :mod:`ckptctl.paimon.sinkstate` decodes the operator state Paimon's Flink sink keeps in a
  checkpoint (commit user, uncommitted ``ManifestCommittable`` s, writer states, pending savepoint
  tags); :mod:`ckptctl.paimon.binaryrow` reads the Paimon ``BinaryRow`` s inside them;
- :mod:`ckptctl.paimon.table` reads a Paimon table directory through ckptctl's one storage layer:
  schemas, snapshots, tags, commit users; its manifests through :mod:`ckptctl.paimon.manifests`,
  its data file places through :mod:`ckptctl.paimon.tablelayout`, into the records of
  :mod:`ckptctl.paimon.records`; :mod:`ckptctl.paimon.reachable` walks every branch for the live
  file set and the orphan candidates;
- :mod:`ckptctl.paimon.restore` puts the two side by side: what a restore of a checkpoint commits
  again, and the hazards of doing it (A, B, C).
"""
