"""A keyed RocksDB handle's directory, rebuilt from the checkpoint's files, and opened read-only.

Both ``verify --deep`` and ``states --deep`` open every keyed incremental handle the way Flink
restores it: its shared and private files under their local names in one directory (segments of
merged files sliced out, inline bytes written directly), then RocksDB on that directory.
"""

from __future__ import annotations

import os
from typing import Any

from ckptctl.errors import StorageError
from ckptctl.storage import Storage


def rebuild_handle_dir(storage: Storage, files: tuple, workdir: str) -> None:
    """Write a handle's RocksDB files (see :attr:`ckptctl.verify.tasks.HandleRef.files`) into
    ``workdir`` under their local names."""
    for local_name, src in files:
        with open(os.path.join(workdir, local_name), "wb") as out:
            if src[0] == "inline":
                out.write(src[1])
            elif src[0] == "file":
                out.write(storage.read_recorded(src[1], src[2]))
            else:
                data = storage.read_range(src[1], src[2], src[3])
                if len(data) != src[3]:
                    raise StorageError(f"segment short: {len(data)} of {src[3]} bytes", path=src[1])
                out.write(data)


def open_read_only(path: str) -> tuple[Any, list[str]]:
    """The rebuilt directory opened read-only, raw bytes in and out, with every column family;
    and the column families' names."""
    from rocksdict import AccessType, Options, Rdict

    cfs = Rdict.list_cf(path)
    db = Rdict(
        path, options=Options(raw_mode=True), column_families={cf: Options(raw_mode=True) for cf in cfs},
        access_type=AccessType.read_only(),
    )  # fmt: skip
    return db, cfs
