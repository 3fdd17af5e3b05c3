"""Parquet outputs of verify: every check (``--report``) and the key-group histogram (``--histogram``)."""

from __future__ import annotations

from ckptctl.verify.result import VerifyResult


def write_report(result: VerifyResult, path: str) -> None:
    import pyarrow as pa

    from ckptctl.export import write_parquet

    cols = list(zip(*result.checks, strict=True)) if result.checks else [[], [], [], [], []]
    table = pa.table(
        {
            "path": pa.array(cols[0], pa.string()),
            "check": pa.array(cols[1], pa.string()),
            "ok": pa.array(cols[2], pa.bool_()),
            "detail": pa.array(cols[3], pa.string()),
            "checkpoints": pa.array(cols[4], pa.list_(pa.string())),
        }
    )
    write_parquet(table, path)


def write_histogram(result: VerifyResult, path: str) -> None:
    import pyarrow as pa

    from ckptctl.export import write_parquet

    cols = list(zip(*result.histogram, strict=True)) if result.histogram else [[]] * 7
    names_types = (
        ("checkpoint", pa.string()), ("operator_id", pa.string()), ("subtask", pa.int32()),
        ("column_family", pa.string()), ("key_group", pa.int32()), ("entries", pa.int64()), ("bytes", pa.int64()),
    )  # fmt: skip
    table = pa.table({n: pa.array(c, t) for (n, t), c in zip(names_types, cols, strict=True)})
    write_parquet(table, path)
