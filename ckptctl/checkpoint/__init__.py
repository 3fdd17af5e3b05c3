"""The checkpoint model: where a checkpoint's files live and what it needs.

``layout`` (Flink's ``FsCheckpointStorage`` directories, and where a moved root was written),
``targets`` (what a PATH argument names: one checkpoint, or every one under a root, with the one
error policy for those that cannot be read), ``refs`` (loading a checkpoint, and its reference
map: one row per (handle, file)), ``rebase`` (``--rebase OLD=NEW``), ``dstl`` (changelog
handles), ``flink39964`` (the FLINK-39964 diagnosis), ``scan`` (one scan of a root shared by
``check``'s three questions). Every feature (gc, verify, states, relocate, ...) builds on it.
"""
