"""Will this checkpoint restore? Offline answers, in bulk, on Spark or in-process.

The package, in the order the work flows:

* :mod:`~ckptctl.verify.tasks`: the reference map (:mod:`ckptctl.refs`) turned into picklable
  *tasks*, one per physical file and (``--deep``) one per keyed RocksDB handle;
* :mod:`~ckptctl.verify.checks`: the one check function that runs them, on executors and in-process;
* engines: :mod:`~ckptctl.verify.local` (a thread pool) and :mod:`~ckptctl.verify.spark` (one
  SparkSession per process, ``mapPartitions`` on its executors);
* :mod:`~ckptctl.verify.result`: the records assembled into a :class:`VerifyResult`;
* :mod:`~ckptctl.verify.run`: :func:`verify`, all of the above for a list of checkpoints;
* :mod:`~ckptctl.verify.report`: the Parquet outputs.

The CI gate ``check`` lives in :mod:`ckptctl.check`. Nothing here imports pyspark, pyarrow or
rocksdict at import time.
"""

from __future__ import annotations

from typing import Any

from ckptctl.verify.checks import (
    CHECKS,
    FILE_CHECKS,
    HANDLE_CHECKS,
    SST_LEGACY_MAGIC,
    SST_MAGIC,
    SST_MAGICS,
    check_file,
    check_handle,
    rebuild_handle_dir,
    run_partition,
    run_tasks,
)
from ckptctl.verify.local import run_local
from ckptctl.verify.report import write_histogram, write_report
from ckptctl.verify.result import VerifyResult, assemble, repairable
from ckptctl.verify.run import verify
from ckptctl.verify.spark import (
    VerifyError,
    java_problem,
    run_spark,
    spark_log_path,
    spark_session,
    stop_spark,
    unreachable_master,
)
from ckptctl.verify.tasks import (
    FileRefs,
    HandleRef,
    file_refs,
    handle_refs,
    key_group_prefix_bytes,
)

__all__ = [
    "CHECKS", "FILE_CHECKS", "HANDLE_CHECKS", "SST_LEGACY_MAGIC", "SST_MAGIC", "SST_MAGICS",
    "FileRefs", "HandleRef", "VerifyError", "VerifyResult",
    "assemble", "check_file", "check_handle", "file_refs", "handle_refs",
    "java_problem", "key_group_prefix_bytes", "rebuild_handle_dir", "repairable", "run_local",
    "run_partition", "run_spark", "run_tasks", "spark_log_path", "spark_session", "stop_spark",
    "unreachable_master", "verify", "write_histogram", "write_report",
]  # fmt: skip


def __getattr__(name: str) -> Any:
    """``run_check`` and ``junit_xml`` moved to :mod:`ckptctl.check`; still found here by callers
    written before the move (imported on first use: ``check`` imports this package)."""
    if name in ("run_check", "junit_xml"):
        from ckptctl import check

        return getattr(check, name)
    raise AttributeError(f"module 'ckptctl.verify' has no attribute '{name}'")
