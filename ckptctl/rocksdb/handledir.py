"""A keyed RocksDB handle's directory, rebuilt from the checkpoint's files, and opened read-only.

Both ``verify --deep`` and ``states --deep`` open every keyed incremental handle the way Flink
restores it: its shared and private files under their local names in one directory (segments of
merged files sliced out, inline bytes written directly), then RocksDB on that directory.
"""

from __future__ import annotations

import os
import re
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


# RocksDB's "The file <dir>/MANIFEST-N may be corrupted." after an error about a table file: the
# MANIFEST only named that table (it is read fine); the table is what is broken
_MANIFEST_HINT = re.compile(r"\s*The file \S*MANIFEST-\d+ may be corrupted\.?")
# the footer fields RocksDB names without an offset: their place from the end of the table
_FOOTER = (("magic number", 8), ("format_version", 12), ("checksum type", 53))  # a 53-byte footer


def explain(error: BaseException | str, workdir: str, files: tuple) -> str:
    """A RocksDB error about the rebuilt directory told in the checkpoint's terms: each file of
    ``workdir`` named by the file it was copied from (a segment by its merged file), and a block
    offset (``offset N size S``) as the byte of that file (a segment's start added). RocksDB
    names the copy, deleted when the handle is done, and offsets within a segment; the operator
    needs the checkpoint's file and byte. Footer fields RocksDB names without an offset (the
    magic number, the format version) get theirs from the table's end."""
    text = str(error)
    hint = _MANIFEST_HINT.search(text)
    if hint and any(
        os.path.join(workdir, n) in text[: hint.start()] for n, _src in files if not n.startswith("MANIFEST-")
    ):
        text = text[: hint.start()] + text[hint.end() :]
    named = []
    for local_name, src in files:
        copy = os.path.join(workdir, local_name)
        if copy not in text:
            continue
        if src[0] == "inline":
            where, start, length = f"the bytes _metadata holds inline for {local_name}", 0, len(src[1])
        elif src[0] == "file":
            where, start, length = src[1], 0, src[2]
        else:
            where, start, length = f"{src[1]} (its segment at byte {src[2]:,})", src[2], src[3]
        named.append((where, start, length))

        def block(m, where=where, start=start) -> str:
            if m.group(1) is not None:  # RocksDB's "offset N size S"
                return f"{where} at byte {start + int(m.group(1)):,} (a block of {int(m.group(2)):,} bytes)"
            if m.group(3) is not None:  # ckptctl's own SST reader's "PATH: byte N"
                return f"{where} at byte {start + int(m.group(3)):,}"
            return where

        text = re.sub(re.escape(copy) + r"(?: offset (\d+) size (\d+)|: byte (\d+))?", block, text)
    if len(named) == 1 and "at byte" not in text.replace(named[0][0], ""):
        where, start, length = named[0]
        for field, from_end in _FOOTER:
            if field in text and length >= from_end:
                text = text.replace(
                    where, f"{where} at byte {start + length - from_end:,} (the footer's {field})", 1
                )
                break
    return text.replace(workdir, "the rebuilt RocksDB directory")
