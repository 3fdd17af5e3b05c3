"""A column family's entries and bytes per key group: the one loop ``verify --deep`` (are the keys
inside the handle's range?) and ``states --deep`` (how big is each state, how old are its entries?)
both run over every key of a rebuilt RocksDB instance."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")


def read_counted(
    db: Any, workdir: str, cf: str, count: Callable[[Iterable[tuple[bytes, bytes]], str], T]
) -> T:
    """``count(rows, source)`` over column family ``cf``, ``source`` saying where the rows come from
    (``"rocksdb"`` or ``"sst"``). rocksdict's iterator stops at the first unmerged list-state operand (it cannot set
    Flink's merge operator); such column families are read from the SST files in ``workdir``
    instead, so ``count`` must be all or nothing: it runs again from the first row."""
    from ckptctl.rocksdb.sst import MergeOperandsError, iterate_cf, read_column_family

    try:
        return count(iterate_cf(db, cf), "rocksdb")
    except MergeOperandsError:
        return count(read_column_family(workdir, cf), "sst")


def count_key_groups(
    rows: Iterable[tuple[bytes, bytes]],
    prefix_bytes: int,
    visit: Callable[[int, bytes, bytes], None] | None = None,
) -> dict[int, list[int]]:
    """key group -> [entries, key + value bytes]. The key group is the key's first ``prefix_bytes``
    bytes (1 up to 128 key groups, 2 beyond, as Flink writes them), -1 for a key too short to hold
    one; ``visit(kg, key, value)`` is called for every entry when given."""
    counts: dict[int, list[int]] = {}
    get = counts.get
    for k, v in rows:
        if prefix_bytes == 1:  # noqa: SIM108
            kg = k[0] if k else -1
        else:
            kg = (k[0] << 8) | k[1] if len(k) >= 2 else -1
        c = get(kg)
        if c is None:
            c = counts[kg] = [0, 0]
        c[0] += 1
        c[1] += len(k) + len(v)
        if visit is not None:
            visit(kg, k, v)
    return counts
