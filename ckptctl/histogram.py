"""Reading the key-group histogram ``verify --deep --histogram`` writes (Parquet), for
``plan-rescale --data-aware``: real entries and bytes per key group instead of a uniform guess."""

from __future__ import annotations

import os

COLUMNS = ("checkpoint", "operator_id", "subtask", "column_family", "key_group", "entries", "bytes")


def read_histogram(path: str) -> list[tuple]:
    """The histogram's rows as tuples in :data:`COLUMNS` order; a missing file or one that is not
    a verify histogram is a one-line :class:`~ckptctl.errors.CkptError` naming the file."""
    from ckptctl.errors import CkptError

    if "://" not in path and not os.path.isfile(path):
        raise CkptError("no such file" if not os.path.exists(path) else "not a file", path=path)
    try:
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        return list(zip(*(table.column(n).to_pylist() for n in COLUMNS), strict=True))
    except (OSError, KeyError, ValueError) as e:
        raise CkptError(f"not a verify histogram: {e}", path=path) from None
