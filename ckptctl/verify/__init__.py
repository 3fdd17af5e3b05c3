"""Will this checkpoint restore? Offline answers, in bulk, on Spark or in-process.

The package, in the order the work flows:

* :mod:`~ckptctl.verify.tasks`: the reference map (:mod:`ckptctl.checkpoint.refs`) turned into picklable
  *tasks*, one per physical file and (``--deep``) one per keyed RocksDB handle;
* :mod:`~ckptctl.verify.checks`: the one check function that runs them on an engine
  (:mod:`ckptctl.engine`: in-process or on Spark executors), and the records it returns;
* :mod:`~ckptctl.verify.result`: the records assembled into a :class:`VerifyResult`;
* :mod:`~ckptctl.verify.run`: :func:`verify`, all of the above for a list of checkpoints;
* :mod:`~ckptctl.verify.report`: the Parquet outputs.

This package exports what its users call (:func:`verify` and its result, the Parquet writers,
and the handle helpers :mod:`ckptctl.states` shares; the RocksDB directory of a handle is
:mod:`ckptctl.rocksdb`'s); the rest is imported from
its module. The CI gate ``check`` lives in :mod:`ckptctl.check`, the FLINK-39964 diagnosis in
:mod:`ckptctl.checkpoint.flink39964`. Nothing here imports pyspark, pyarrow or rocksdict at import time.
"""

from __future__ import annotations

from ckptctl.verify.checks import CHECKS, SST_MAGIC
from ckptctl.verify.report import write_histogram, write_report
from ckptctl.verify.result import VerifyResult
from ckptctl.verify.run import verify
from ckptctl.verify.tasks import HandleRef, handle_refs, key_group_prefix_bytes

__all__ = [
    "CHECKS", "SST_MAGIC", "HandleRef", "VerifyResult",
    "handle_refs", "key_group_prefix_bytes", "verify", "write_histogram", "write_report",
]  # fmt: skip
