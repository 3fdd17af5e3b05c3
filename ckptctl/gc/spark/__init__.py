"""``gc plan --engine spark`` and ``gc apply`` on Spark: the plan :func:`ckptctl.gc.plan.build_plan` makes,
with the files on executors.

The local planner holds every listed file in one process (~200 bytes each): a bucket of 10^8 objects
cannot be planned that way. Here the driver holds what is proportional to checkpoints, jobs and
directories only, and the same code decides:

* driver (:mod:`~ckptctl.gc.spark.planner`): options, clock, discovery (fresh pruned walks for
  ``_metadata``, never a full listing), retention, the per-directory contexts
  (:class:`ckptctl.gc.contexts.DirContexts`, computed for the distinct directories and broadcast),
  every refusal and warning (:class:`ckptctl.gc.conclusion.Conclusion`): the parts the local planner
  holds too (:class:`ckptctl.gc.steps.PlanSteps`);
* executors (:mod:`~ckptctl.gc.spark.executors`): decoding the checkpoints
  (:func:`ckptctl.gc.folding.fold_references` over slices of them) into the live DataFrame; listing
  the scopes (S3: one task per sub-prefix of a root, as :func:`ckptctl.storage.s3list.list_prefix`
  splits them; local roots: one walk, which must see every directory to find aliases) or reading the
  S3 Inventory's data files; the files and the references brought together in one shuffle by URI
  (:mod:`~ckptctl.gc.spark.columns`), summarised in one pass (:mod:`~ckptctl.gc.spark.summary`), and
  decided (:mod:`~ckptctl.gc.spark.classify`: the rule's SQL form, :mod:`~ckptctl.gc.spark.rule`,
  and :meth:`FileRule.verdicts` over Arrow batches of the few files it leaves); aggregates
  (:mod:`~ckptctl.gc.spark.frames`).

What costs at 10^7 files is the number of passes over them and the bytes each row carries, not the
rule (~0.3 µs a file): every aggregate over the files is a hash aggregate where it can be (a sort
of 10^7 strings costs more than the pass), live files never cross to Python, and decisions carry
numbers where they would repeat a string (:mod:`~ckptctl.gc.spark.labels`).

The per-file lists are written as Parquet next to the plan (:mod:`~ckptctl.gc.spark.plan`); ``gc
apply`` re-validates on Spark (:mod:`~ckptctl.gc.spark.apply`) and deletes on the executors
(:mod:`~ckptctl.gc.spark.delete`). Importing this package imports no Spark: its modules import
PySpark inside the functions that need it.
"""
