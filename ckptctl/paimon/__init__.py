"""Apache Paimon tables next to Flink checkpoints: snapshots, commit users, the live file set and
orphan candidates of a Paimon table directory, read through ckptctl's one storage layer."""
