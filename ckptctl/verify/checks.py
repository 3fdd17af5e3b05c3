"""The check function: runs tasks (:mod:`ckptctl.verify.tasks`) on executors and in-process.

* a **file task**: the file exists; it has the recorded size (whole-file handles) or covers every
  segment (``size >= max(offset + size)``); an SST ends with RocksDB's block-based table magic
  number; metadata/private files can be read in full;
* a **handle task** (``--deep``): the handle's RocksDB directory is rebuilt in a temporary
  directory (shared and private files under their local names, segments sliced out, inline bytes
  written directly), opened read-only with ``rocksdict``, and every key's key-group prefix must
  lie inside the handle's key-group range. Entries and bytes per (column family, key group) come
  back as a histogram.

Executors reach storage through the driver's :class:`ckptctl.storage.StorageOptions` (endpoint,
credentials, timeouts), the first argument of :func:`run_tasks`, carried in the task closure and
turned into one :class:`ckptctl.storage.Storage` per process (:meth:`Storage.shared`).

What comes back are records: a :class:`Check` per check, and (handles) a :class:`KeyGroupCount` per
column family and key group.
"""

from __future__ import annotations

import os
import shutil
import stat as stat_mod
import struct
import tempfile
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from ckptctl.checkpoint import dstl
from ckptctl.errors import CkptError, MetadataFormatError, StorageError
from ckptctl.metadata.keyedproxy import parse_backend_header
from ckptctl.rocksdb.handledir import explain, open_read_only, rebuild_handle_dir
from ckptctl.rocksdb.logfile import CHECKED_LIMIT, log_problem
from ckptctl.storage import Storage, StorageOptions
from ckptctl.verify.tasks import FileTask, HandleTask

SST_MAGIC = 0x88E241B785F4CFF7  # BlockBasedTable (kBlockBasedTableMagicNumber)
SST_LEGACY_MAGIC = 0xDB4775248B80FB57  # kLegacyBlockBasedTableMagicNumber
SST_MAGICS = {SST_MAGIC: "block-based", SST_LEGACY_MAGIC: "legacy block-based"}

FILE_CHECKS = ("exists", "size", "sst_magic", "readable", "manifest", "changelog", "meta")
# a DSTL file is read whole for its structure (ckptctl.checkpoint.dstl); Flink uploads them in batches of a
# few MB (dstl.dfs.batch.persist-size-threshold): a larger one is size-checked only, not read
DSTL_READ_LIMIT = 256 << 20
META_READ_LIMIT = 64 << 20  # a keyed handle's meta data: a few KB per state
HANDLE_CHECKS = ("rocksdb", "key_groups")
CHECKS = FILE_CHECKS + HANDLE_CHECKS


class Check(NamedTuple):
    """One check's outcome. ``key``: the file URI (file tasks) or the handle index (handle tasks)."""

    key: str | int
    check: str
    ok: bool
    detail: str | None


class KeyGroupCount(NamedTuple):
    """Entries and bytes of one column family and key group of a handle (the ``--histogram``)."""

    index: int
    column_family: str
    key_group: int
    entries: int
    bytes: int


def run_tasks(
    options: StorageOptions, tasks: Iterable[FileTask | HandleTask]
) -> Iterator[Check | KeyGroupCount]:
    """Check each task; the task function of both engines (module level: Spark pickles it, with
    ``options`` bound, by reference)."""
    storage = Storage.shared(options)
    for task in tasks:
        if task.__class__ is FileTask:
            yield from check_file(storage, task)
        else:
            yield from check_handle(storage, task)


def check_file(storage: Storage, task: FileTask) -> list[Check]:
    """The records of one file task (a list: built in one go, no generator per file)."""
    path, whole_sizes, changelog_sizes, segment_end, sst_whole, sst_segment_ends, read_spans, listed, starts, meta, logs = task  # fmt: skip
    fd = -1  # a local regular file: opened once when it is read, its size from fstat
    if path.startswith("file:"):
        read = bool(sst_whole or sst_segment_ends or read_spans or starts or meta)
        if listed is None or read:
            fd, size = _open_local(path[5:], read)
            if listed is None:
                listed = size
    try:
        return _check_file(
            storage, path, listed, fd, whole_sizes, changelog_sizes, segment_end, sst_whole, sst_segment_ends,
            read_spans, starts, meta, logs,
        )  # fmt: skip
    finally:
        if fd >= 0:
            os.close(fd)


def _check_file(
    storage, path, listed, fd, whole_sizes, changelog_sizes, segment_end, sst_whole, sst_segment_ends, read_spans,
    changelog_starts=(), meta_spans=(), log_spans=(),
) -> list[Check]:  # fmt: skip
    actual = listed
    if actual is None:  # not listed (or listed as absent: a listing may lag, so ask the file itself)
        try:
            info = storage.stat(path)
        except StorageError as e:
            return [Check(path, "exists", False, f"cannot stat: {e.message}")]
        if info is None:
            return [Check(path, "exists", False, "file not found")]
        actual = info.size
    out = [Check(path, "exists", True, None)]
    add = out.append
    size_ok = True
    for recorded in whole_sizes:
        if actual != recorded:
            size_ok = False
            add(Check(path, "size", False, f"size {actual} bytes, recorded {recorded}"))
    # Flink's StateChangeFsUploader writes a compression-flag byte before the changes it counts; a
    # compressed file's size on disk is not the one recorded (the changelog check decompresses it)
    wrong = [r for r in changelog_sizes if actual not in (r, r + 1)]
    if wrong and not _compressed(storage, path, fd):
        size_ok = False
        for recorded in wrong:
            add(Check(path, "size", False, f"size {actual} bytes, recorded {recorded} (+1 header byte)"))
    if segment_end is not None and actual < segment_end:
        size_ok = False
        add(Check(path, "size", False, f"size {actual} bytes, segments need {segment_end}"))
    if size_ok:
        add(Check(path, "size", True, None))
    if sst_segment_ends:
        ends = ([actual] if sst_whole else []) + [e for e in sst_segment_ends if e <= actual]
    else:
        ends = (actual,) if sst_whole else ()
    for end in ends:
        if end < 8:
            add(Check(path, "sst_magic", False, f"{end} bytes: too short for an SST footer"))
            continue
        try:
            tail = _read_range(storage, path, end - 8, 8, fd)
        except StorageError as e:
            add(Check(path, "sst_magic", False, f"cannot read the footer: {e.message}"))
            continue
        magic = struct.unpack("<Q", tail)[0] if len(tail) == 8 else None
        if magic in SST_MAGICS:
            add(Check(path, "sst_magic", True, None))
        else:
            where = "" if end == actual else f" (segment ending at byte {end})"
            found = f"0x{magic:016x}" if magic is not None else f"{len(tail)} bytes"
            add(Check(path, "sst_magic", False, f"no RocksDB table magic number at the end{where}: {found}"))
    meta = set(meta_spans)  # spans read here too: parsed from the same bytes (one request each)
    for offset, size in read_spans:
        if offset + size > actual:
            continue  # already a size problem
        try:
            data = _read_range(storage, path, offset, size, fd)
        except StorageError as e:
            add(Check(path, "readable", False, e.message))
            continue
        if len(data) != size:
            add(Check(path, "readable", False, f"read {len(data)} of {size} bytes at offset {offset}"))
            continue
        add(Check(path, "readable", True, None))
        if (offset, size) in log_spans and size <= CHECKED_LIMIT:
            why = log_problem(data, offset)
            why = why and f"not the RocksDB MANIFEST RocksDB wrote: {why}"
            add(Check(path, "manifest", why is None, why))
        if (offset, size) in meta:
            meta.discard((offset, size))
            add(Check(path, "meta", *_meta_problem(data, path, offset)))
    if changelog_starts and size_ok and actual <= DSTL_READ_LIMIT:
        try:
            data = _read_range(storage, path, 0, actual, fd)
        except StorageError as e:
            add(Check(path, "changelog", False, f"cannot read: {e.message}"))
        else:
            why = dstl.problem(data, changelog_sizes, changelog_starts)
            add(Check(path, "changelog", why is None, why))
    for offset, size in sorted(meta):  # not among the spans read above
        if offset + size > actual or size > META_READ_LIMIT:
            continue  # a size problem already (or no meta data: parsed by nobody at that size)
        try:
            data = _read_range(storage, path, offset, size, fd)
        except StorageError as e:
            add(Check(path, "meta", False, f"cannot read: {e.message}"))
            continue
        add(Check(path, "meta", *_meta_problem(data, path, offset)))
    return out


def _meta_problem(data: bytes, path: str, offset: int) -> tuple[bool, str | None]:
    """Whether ``data`` (at ``offset`` of ``path``) is a keyed backend's serialization proxy, as
    Flink's restore reads it before anything else (a flipped byte in it fails the restore while
    every size and footer is right); what is wrong, at its byte of the file."""
    try:
        parse_backend_header(data, path, base=offset)
    except MetadataFormatError as e:
        return False, f"not the keyed state meta data Flink wrote: byte {e.offset:,}: {e.message}"
    except (CkptError, ValueError, IndexError, struct.error) as e:
        return False, f"not the keyed state meta data Flink wrote: {e}"
    return True, None


def _compressed(storage: Storage, path: str, fd: int) -> bool:
    """Whether a DSTL file is Snappy-compressed: its first byte (one ranged read, also under
    ``--quick``, and only of a file whose size is not the one recorded)."""
    try:
        return dstl.is_compressed(_read_range(storage, path, 0, 1, fd))
    except StorageError:
        return False  # unreadable: its size is reported as it is


# Local regular files are checked with plain os calls (one open, fstat, pread, close), not through
# fsspec (whose info/open/cat_file cost ~10x the syscalls' own time per file). Only answers that
# need no wording are taken from them: a size and the bytes read. Anything else (a missing file, a
# directory, permission, ENOTDIR, I/O errors) asks the storage layer as before, so every check
# reports the same detail either way.


def _open_local(path: str, read: bool) -> tuple[int, int | None]:
    """``(fd, size)`` of a local regular file (``fd`` -1 unless ``read``); ``(-1, None)``: ask
    :meth:`Storage.stat` (missing, a directory or a FIFO, an error it words)."""
    try:
        if not read:
            st = os.stat(path)
            return -1, (st.st_size if stat_mod.S_ISREG(st.st_mode) else None)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not block the open
    except OSError:
        return -1, None
    try:
        st = os.fstat(fd)
    except OSError:
        st = None
    if st is None or not stat_mod.S_ISREG(st.st_mode):
        os.close(fd)
        return -1, None
    return fd, st.st_size


def _read_range(storage: Storage, path: str, start: int, length: int, fd: int = -1) -> bytes:
    """:meth:`Storage.read_range`; from ``fd`` (a local file, :func:`_open_local`) with ``os.pread``,
    falling back to the storage on any error (which words it)."""
    if fd >= 0 and start >= 0 and length >= 0:
        try:
            data = os.pread(fd, length, start)
            while 0 < len(data) < length:  # a short read before the end of the file
                more = os.pread(fd, length - len(data), start + len(data))
                if not more:
                    break
                data += more
            return data
        except OSError:
            pass
    return storage.read_range(path, start, length)


def check_handle(storage: Storage, task: HandleTask) -> Iterator[Check | KeyGroupCount]:
    index, files, kg_start, kg_end, prefix_bytes = task
    workdir = tempfile.mkdtemp(prefix="ckptctl-verify-")
    try:
        try:
            rebuild_handle_dir(storage, files, workdir)
        except (StorageError, OSError) as e:
            yield Check(index, "rocksdb", False, f"cannot rebuild the RocksDB directory: {e}")
            return
        try:
            counts, outside = _scan_rocksdb(workdir, kg_start, kg_end, prefix_bytes)
        except Exception as e:  # noqa: BLE001 - rocksdict raises plain exceptions
            yield Check(
                index,
                "rocksdb",
                False,
                f"RocksDB cannot open the rebuilt directory: {explain(e, workdir, files)}",
            )
            return
        yield Check(index, "rocksdb", True, None)
        for (cf, kg), (n, nbytes) in sorted(counts.items()):
            yield KeyGroupCount(index, cf, kg, n, nbytes)
        if outside:
            for cf, (n, lo, hi, total) in sorted(outside.items()):
                yield Check(
                    index, "key_groups", False,
                    f"{n} of {total} keys in column family '{cf}' are in key groups {lo}..{hi}, "
                    f"outside the handle's range [{kg_start}, {kg_end}]",
                )  # fmt: skip
        else:
            yield Check(index, "key_groups", True, None)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _scan_rocksdb(path: str, kg_start: int, kg_end: int, prefix_bytes: int):
    from ckptctl.rocksdb.keygroups import count_key_groups, read_counted

    db, cfs = open_read_only(path)
    counts: dict[tuple[str, int], list[int]] = {}
    outside: dict[str, list[int]] = {}
    try:
        for cf in cfs:
            cf_counts = read_counted(db, path, cf, lambda rows, _source: count_key_groups(rows, prefix_bytes))
            for kg, c in cf_counts.items():
                counts[(cf, kg)] = c
            bad = [kg for kg in cf_counts if not kg_start <= kg <= kg_end]
            if bad:  # [keys outside, lowest, highest key group, keys in the column family]
                outside[cf] = [sum(cf_counts[kg][0] for kg in bad), min(bad), max(bad),
                               sum(c[0] for c in cf_counts.values())]  # fmt: skip
    finally:
        db.close()
    return counts, outside
