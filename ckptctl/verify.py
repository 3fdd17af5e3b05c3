"""Will this checkpoint restore? Offline answers, in bulk, on Spark or in-process.

The reference map (:mod:`ckptctl.refs`) is turned into *tasks*, plain tuples that pickle cheaply
and carry everything an executor needs (no metadata objects travel):

* a **file task** per physical file (rows deduplicated by path): it exists; it has the recorded
  size (whole-file handles) or covers every segment (``size >= max(offset + size)``); an SST ends
  with RocksDB's block-based table magic number; metadata/private files can be read in full;
* a **handle task** per keyed ``IncrementalRemoteKeyedStateHandle`` (``--deep``): the handle's
  RocksDB directory is rebuilt in a temporary directory (shared and private files under their
  local names, segments sliced out, inline bytes written directly), opened read-only with
  ``rocksdict``, and every key's key-group prefix must lie inside the handle's key-group range.
  Entries and bytes per (column family, key group) come back as a histogram.

:func:`run_tasks` is the one check function; the Spark engine runs it in ``mapPartitions`` on the
executors, the local engine in a thread pool of this process. Executors reach storage through
the driver's :class:`ckptctl.storage.StorageOptions` (endpoint, credentials, timeouts), carried in
the task closure (:meth:`ckptctl.storage.Storage.shared`).
"""

from __future__ import annotations

import os
import shutil
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ckptctl.errors import CkptError, StorageError
from ckptctl.metadata.model import (
    ByteStreamHandle,
    ChangelogBackendHandle,
    FileHandle,
    IncrementalHandle,
    RelativeFileHandle,
    SegmentFileHandle,
)
from ckptctl.rebase import Rebase
from ckptctl.refs import COLUMNS, LoadedCheckpoint, file_resolver, reference_rows
from ckptctl.repair import explain_missing
from ckptctl.storage import Storage, StorageOptions

SST_MAGIC = 0x88E241B785F4CFF7  # BlockBasedTable (kBlockBasedTableMagicNumber)
SST_LEGACY_MAGIC = 0xDB4775248B80FB57  # kLegacyBlockBasedTableMagicNumber
SST_MAGICS = {SST_MAGIC: "block-based", SST_LEGACY_MAGIC: "legacy block-based"}

FILE_CHECKS = ("exists", "size", "sst_magic", "readable")
HANDLE_CHECKS = ("rocksdb", "key_groups")
CHECKS = FILE_CHECKS + HANDLE_CHECKS

_I = {name: i for i, name in enumerate(COLUMNS)}


class VerifyError(CkptError):
    """The verification could not run (Spark unavailable, engine failure): exit 2."""


# ---------------------------------------------------------------------------------------------
# tasks


@dataclass
class FileRefs:
    """What the reference map says about one physical file."""

    path: str
    whole_sizes: set[int] = field(default_factory=set)
    changelog_sizes: set[int] = field(default_factory=set)  # DSTL files: 1 header byte not counted
    segment_end: int = 0
    has_segments: bool = False
    sst_whole: bool = False
    sst_segment_ends: set[int] = field(default_factory=set)
    read_spans: set[tuple[int, int]] = field(default_factory=set)
    checkpoints: set[str] = field(default_factory=set)

    def task(self) -> tuple:
        return (
            "f", self.path, tuple(sorted(self.whole_sizes)), tuple(sorted(self.changelog_sizes)),
            self.segment_end if self.has_segments else None,
            self.sst_whole, tuple(sorted(self.sst_segment_ends)), tuple(sorted(self.read_spans)),
        )  # fmt: skip


def file_refs(rows: Iterable[tuple]) -> dict[str, FileRefs]:
    """Reference rows deduplicated by physical path."""
    out: dict[str, FileRefs] = {}
    ip, isc, ioff, isz, iname, ick, itype = (
        _I["path"], _I["scope"], _I["offset"], _I["size"], _I["local_name"], _I["checkpoint"], _I["handle_type"],
    )  # fmt: skip
    for r in rows:
        path = r[ip]
        f = out.get(path)
        if f is None:
            f = out[path] = FileRefs(path)
        f.checkpoints.add(r[ick])
        offset, size = r[ioff], r[isz]
        is_sst = bool(r[iname]) and r[iname].endswith(".sst")
        if r[itype] == "SegmentFileStateHandle":
            f.has_segments = True
            f.segment_end = max(f.segment_end, offset + size)
            if is_sst:
                f.sst_segment_ends.add(offset + size)
        elif r[isc] == "changelog":
            f.changelog_sizes.add(size)
        else:
            f.whole_sizes.add(size)
            if is_sst:
                f.sst_whole = True
        if r[isc] in ("metadata", "private") and not is_sst:
            f.read_spans.add((offset, size))
    return out


@dataclass
class HandleRef:
    """One keyed incremental handle to rebuild and open (deep mode)."""

    index: int
    # (local_name, source); source: ("inline", bytes) | ("file", uri) | ("range", uri, offset, length)
    files: tuple
    key_group_start: int
    key_group_end: int
    prefix_bytes: int
    owners: list[tuple[str, str, int | None]] = field(default_factory=list)  # (checkpoint, operator, subtask)

    def task(self) -> tuple:
        return ("h", self.index, self.files, self.key_group_start, self.key_group_end, self.prefix_bytes)


def key_group_prefix_bytes(max_parallelism: int) -> int:
    """Flink's ``computeRequiredBytesInKeyGroupPrefix``: 1 byte up to 128 key groups, else 2."""
    return 2 if max_parallelism > 128 else 1


def handle_refs(checkpoints: Iterable[LoadedCheckpoint]) -> list[HandleRef]:
    """Every keyed incremental handle (also the materialized part of changelog handles), deduplicated."""
    seen: dict[tuple, HandleRef] = {}
    for ck in checkpoints:
        base = ck.location.uri
        resolve = file_resolver(ck)

        for op in ck.metadata.operators:
            for s in op.subtasks or ():
                for keyed in (s.managed_keyed, s.raw_keyed):
                    for h in _incremental_parts(keyed):
                        kgr = h.key_groups
                        if kgr.empty:
                            continue
                        files = []
                        for lf in (*h.shared, *h.private):
                            src = _source(lf.handle, resolve) if lf.handle is not None else None
                            if src is not None:
                                files.append((lf.local_path, src))
                        files_t = tuple(sorted(files, key=lambda f: f[0]))
                        key = (kgr.start, kgr.end, op.max_parallelism, files_t)
                        ref = seen.get(key)
                        if ref is None:
                            ref = seen[key] = HandleRef(
                                len(seen),
                                files_t,
                                kgr.start,
                                kgr.end,
                                key_group_prefix_bytes(op.max_parallelism),
                            )
                        ref.owners.append((base, op.operator_id, s.index))
    return list(seen.values())


def _source(h, resolve) -> tuple | None:
    """Where a RocksDB file's bytes come from, as a picklable tuple."""
    t = type(h)
    if t is ByteStreamHandle:
        return ("inline", h.data)
    if t is SegmentFileHandle:
        return ("range", resolve(h), h.offset, h.size)
    if t is FileHandle or t is RelativeFileHandle:
        return ("file", resolve(h))
    return None


def _incremental_parts(h) -> Iterator[IncrementalHandle]:
    if h is None:
        return
    if type(h) is IncrementalHandle:
        yield h
    elif type(h) is ChangelogBackendHandle:
        for part in h.materialized:
            yield from _incremental_parts(part)


# ---------------------------------------------------------------------------------------------
# the check function (runs on executors and in-process)


def run_tasks(options: StorageOptions, tasks: Iterable[tuple]) -> Iterator[tuple]:
    """Check each task; yields ``("c", key, check, ok, detail)`` and histogram ``("h", index, cf, kg, n, bytes)``.

    ``key`` is the file URI for file tasks and the handle index for handle tasks.
    """
    storage = Storage.shared(options)
    for task in tasks:
        if task[0] == "f":
            yield from check_file(storage, task)
        else:
            yield from check_handle(storage, task)


def run_partition(options: StorageOptions, tasks: Iterable[tuple]) -> Iterator[tuple]:
    """Spark ``mapPartitions`` entry point (a module-level function: pickled by reference)."""
    return run_tasks(options, tasks)


def check_file(storage: Storage, task: tuple) -> Iterator[tuple]:
    _f, path, whole_sizes, changelog_sizes, segment_end, sst_whole, sst_segment_ends, read_spans = task
    try:
        info = storage.stat(path)
    except StorageError as e:
        yield ("c", path, "exists", False, f"cannot stat: {e.message}")
        return
    if info is None:
        yield ("c", path, "exists", False, "file not found")
        return
    yield ("c", path, "exists", True, None)
    actual = info.size
    size_ok = True
    for recorded in whole_sizes:
        if actual != recorded:
            size_ok = False
            yield ("c", path, "size", False, f"size {actual} bytes, recorded {recorded}")
    for recorded in changelog_sizes:
        # Flink's StateChangeFsUploader writes a compression-flag byte before the changes it counts
        if actual not in (recorded, recorded + 1):
            size_ok = False
            yield ("c", path, "size", False, f"size {actual} bytes, recorded {recorded} (+1 header byte)")
    if segment_end is not None and actual < segment_end:
        size_ok = False
        yield ("c", path, "size", False, f"size {actual} bytes, segments need {segment_end}")
    if size_ok:
        yield ("c", path, "size", True, None)
    ends = ([actual] if sst_whole else []) + [e for e in sst_segment_ends if e <= actual]
    for end in ends:
        if end < 8:
            yield ("c", path, "sst_magic", False, f"{end} bytes: too short for an SST footer")
            continue
        try:
            tail = storage.read_range(path, end - 8, 8)
        except StorageError as e:
            yield ("c", path, "sst_magic", False, f"cannot read the footer: {e.message}")
            continue
        magic = struct.unpack("<Q", tail)[0] if len(tail) == 8 else None
        if magic in SST_MAGICS:
            yield ("c", path, "sst_magic", True, None)
        else:
            where = "" if end == actual else f" (segment ending at byte {end})"
            found = f"0x{magic:016x}" if magic is not None else f"{len(tail)} bytes"
            yield ("c", path, "sst_magic", False, f"no RocksDB table magic number at the end{where}: {found}")
    for offset, size in read_spans:
        if offset + size > actual:
            continue  # already a size problem
        try:
            data = storage.read_range(path, offset, size)
        except StorageError as e:
            yield ("c", path, "readable", False, e.message)
            continue
        if len(data) != size:
            yield ("c", path, "readable", False, f"read {len(data)} of {size} bytes at offset {offset}")
        else:
            yield ("c", path, "readable", True, None)


def check_handle(storage: Storage, task: tuple) -> Iterator[tuple]:
    _h, index, files, kg_start, kg_end, prefix_bytes = task
    workdir = tempfile.mkdtemp(prefix="ckptctl-verify-")
    try:
        try:
            rebuild_handle_dir(storage, files, workdir)
        except (StorageError, OSError) as e:
            yield ("c", index, "rocksdb", False, f"cannot rebuild the RocksDB directory: {e}")
            return
        try:
            counts, outside = _scan_rocksdb(workdir, kg_start, kg_end, prefix_bytes)
        except Exception as e:  # noqa: BLE001 - rocksdict raises plain exceptions
            yield ("c", index, "rocksdb", False, f"RocksDB cannot open the rebuilt directory: {e}")
            return
        yield ("c", index, "rocksdb", True, None)
        for (cf, kg), (n, nbytes) in sorted(counts.items()):
            yield ("h", index, cf, kg, n, nbytes)
        if outside:
            for cf, (n, lo, hi, total) in sorted(outside.items()):
                yield (
                    "c", index, "key_groups", False,
                    f"{n} of {total} keys in column family '{cf}' are in key groups {lo}..{hi}, "
                    f"outside the handle's range [{kg_start}, {kg_end}]",
                )  # fmt: skip
        else:
            yield ("c", index, "key_groups", True, None)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def rebuild_handle_dir(storage: Storage, files: tuple, workdir: str) -> None:
    """Write a handle's RocksDB files (see :attr:`HandleRef.files`) into ``workdir`` under their local names."""
    for local_name, src in files:
        with open(os.path.join(workdir, local_name), "wb") as out:
            if src[0] == "inline":
                out.write(src[1])
            elif src[0] == "file":
                out.write(storage.read_bytes(src[1]))
            else:
                data = storage.read_range(src[1], src[2], src[3])
                if len(data) != src[3]:
                    raise StorageError(f"segment short: {len(data)} of {src[3]} bytes", path=src[1])
                out.write(data)


def _scan_rocksdb(path: str, kg_start: int, kg_end: int, prefix_bytes: int):
    from rocksdict import AccessType, Options, Rdict

    from ckptctl.sstread import MergeOperandsError, iterate_cf, read_column_family

    cfs = Rdict.list_cf(path)
    db = Rdict(
        path, options=Options(raw_mode=True), column_families={cf: Options(raw_mode=True) for cf in cfs},
        access_type=AccessType.read_only(),
    )  # fmt: skip
    counts: dict[tuple[str, int], list[int]] = {}
    outside: dict[str, list[int]] = {}
    try:
        for cf in cfs:
            # rocksdict's iterator stops at the first unmerged list-state operand (it cannot set
            # Flink's merge operator); such column families are read from the SST files instead
            try:
                cf_counts, bad = _count_keys(iterate_cf(db, cf), kg_start, kg_end, prefix_bytes)
            except MergeOperandsError:
                cf_counts, bad = _count_keys(read_column_family(path, cf), kg_start, kg_end, prefix_bytes)
            for kg, c in cf_counts.items():
                counts[(cf, kg)] = c
            if bad is not None:
                outside[cf] = bad
    finally:
        db.close()
    return counts, outside


def _count_keys(rows, kg_start: int, kg_end: int, prefix_bytes: int):
    counts: dict[int, list[int]] = {}
    total = 0
    bad: list[int] | None = None
    for k, v in rows:
        total += 1
        if prefix_bytes == 1:  # noqa: SIM108
            kg = k[0] if k else -1
        else:
            kg = (k[0] << 8) | k[1] if len(k) >= 2 else -1
        c = counts.get(kg)
        if c is None:
            c = counts[kg] = [0, 0]
        c[0] += 1
        c[1] += len(k) + len(v)
        if not kg_start <= kg <= kg_end:
            if bad is None:
                bad = [0, kg, kg, 0]
            bad[0] += 1
            bad[1] = min(bad[1], kg)
            bad[2] = max(bad[2], kg)
    if bad is not None:
        bad[3] = total
    return counts, bad


# ---------------------------------------------------------------------------------------------
# engines


def run_local(
    options: StorageOptions,
    tasks: list[tuple],
    progress: Callable[[int], None] | None = None,
    workers: int = 16,
    runner: Callable[[StorageOptions, Iterable[tuple]], Iterator[tuple]] | None = None,
) -> list[tuple]:
    """The in-process engine: the same check function over a thread pool (storage is I/O bound).

    ``runner`` replaces :func:`run_tasks` (other commands' task functions, e.g. ``states --deep``)."""
    from concurrent.futures import ThreadPoolExecutor

    if not tasks:
        return []
    fn = runner or run_tasks
    chunk = max(1, min(256, len(tasks) // (workers * 4) or 1))
    chunks = [tasks[i : i + chunk] for i in range(0, len(tasks), chunk)]
    out: list[tuple] = []
    if len(chunks) == 1:
        out.extend(fn(options, chunks[0]))
        if progress:
            progress(len(chunks[0]))
        return out
    with ThreadPoolExecutor(min(workers, len(chunks))) as pool:
        for part, done in zip(pool.map(lambda c: list(fn(options, c)), chunks), chunks, strict=True):
            out.extend(part)
            if progress:
                progress(len(done))
    return out


_SPARK_LOCK = threading.Lock()
_SPARK: Any = None


def spark_session(master: str) -> Any:
    """One SparkSession per process and master (re-created when the master changes).

    What can be checked before a JVM starts is checked first, in a second: a usable Java
    (Spark needs Java 17+) and, for ``spark://`` masters, that a master answers on its port. The
    JVM's own output (Spark and Hadoop warnings, stack traces) goes to :func:`spark_log_path`, not
    to the user's terminal; errors name that file.
    """
    global _SPARK
    with _SPARK_LOCK:
        if _SPARK is not None:
            sc = _SPARK.sparkContext
            if sc._jsc is not None and sc.master == master:
                return _SPARK
            _SPARK.stop()
            _SPARK = None
        # executors must run the driver's Python (same ckptctl, same rocksdict)
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
        try:
            from pyspark import SparkContext
            from pyspark.sql import SparkSession
        except ImportError as e:
            raise VerifyError(f"the Spark engine needs pyspark ({e}); use --engine local") from None
        log = spark_log_path()
        if SparkContext._gateway is None:
            problem = java_problem()
            if problem:
                raise VerifyError(f"the Spark engine needs Java 17+ ({problem}); or use --engine local")
        unreachable = unreachable_master(master)
        if unreachable:
            raise VerifyError(unreachable)
        builder = (
            SparkSession.builder.master(master)
            .appName("ckptctl verify")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.pyspark.python", sys.executable)
            .config("spark.pyspark.driver.python", sys.executable)
            .config("spark.python.worker.reuse", "true")
        )
        if _loopback_master(master):
            builder = builder.config("spark.driver.host", "127.0.0.1").config(
                "spark.driver.bindAddress", "127.0.0.1"
            )
        try:
            if SparkContext._gateway is None:
                _launch_gateway(log)
            _SPARK = builder.getOrCreate()
        except Exception as e:  # noqa: BLE001 - py4j / JVM start-up failures
            raise VerifyError(
                f"cannot start Spark with master {master}: {_short(e)} (Spark log: {log})"
            ) from None
        _SPARK.sparkContext.setLogLevel("ERROR")
        return _SPARK


def spark_log_path() -> str:
    """Where the embedded JVM writes (CKPTCTL_SPARK_LOG, default: a per-user file in the temp dir)."""
    import getpass
    import tempfile

    explicit = os.environ.get("CKPTCTL_SPARK_LOG")
    if explicit:
        return explicit
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name (containers): any stable name will do
        user = str(os.getuid()) if hasattr(os, "getuid") else "user"
    return os.path.join(tempfile.gettempdir(), f"ckptctl-spark-{user}.log")


def _launch_gateway(log: str) -> None:
    """Start the JVM with its stdout and stderr in ``log`` (truncated: one run per file)."""
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway

    with open(log, "wb") as f:
        gateway = launch_gateway(popen_kwargs={"stdout": f, "stderr": f})
    SparkContext._ensure_initialized(gateway=gateway)


def _short(e: BaseException, limit: int = 200) -> str:
    """The first meaningful line of a (py4j, multi-kilobyte) exception, cut to ``limit`` characters."""
    text = " ".join(str(e).strip().splitlines()[:1]) or type(e).__name__
    text = f"{type(e).__name__}: {text}" if type(e).__name__ not in text else text
    return text if len(text) <= limit else text[: limit - 1] + "…"


def java_problem() -> str | None:
    """Why the Java Spark would start is unusable (missing, broken, older than 17), or ``None``."""
    import re
    import shutil
    import subprocess

    home = os.environ.get("JAVA_HOME")
    if home:
        java = os.path.join(home, "bin", "java")
        if not (os.path.isfile(java) and os.access(java, os.X_OK)):
            return f"JAVA_HOME={home} has no bin/java"
    else:
        java = shutil.which("java")
        if java is None:
            return "no java on PATH and JAVA_HOME is not set"
    try:
        proc = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        return f"{java} does not run: {e}"
    m = re.search(r'version "(\d+)(?:\.(\d+))?', proc.stderr + proc.stdout)
    if proc.returncode != 0 or m is None:
        first = (proc.stderr or proc.stdout).strip().splitlines()[:1]
        return f"{java} -version failed" + (f": {first[0]}" if first else "")
    major = int(m.group(1))
    if major == 1 and m.group(2):  # 1.8 is Java 8
        major = int(m.group(2))
    if major < 17:
        return f"{java} is Java {major}"
    return None


def unreachable_master(master: str, timeout: float = 3.0) -> str | None:
    """For ``spark://host:port[,host:port]``: an error line if no master accepts a connection."""
    import socket

    if not master.startswith("spark://"):
        return None
    errors = []
    for hostport in master[len("spark://") :].split(","):
        host, _, port = hostport.strip().rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
                return None
        except (OSError, ValueError) as e:
            errors.append(f"{hostport}: {e.strerror or e}" if isinstance(e, OSError) else f"{hostport}: {e}")
    return (
        f"cannot reach the Spark master {master} ({'; '.join(errors)}); is it running? or use --engine local"
    )


def stop_spark() -> None:
    global _SPARK
    with _SPARK_LOCK:
        if _SPARK is not None:
            _SPARK.stop()
            _SPARK = None


def _loopback_master(master: str) -> bool:
    return master.startswith("local") or "://127.0.0.1" in master or "://localhost" in master


def run_spark(
    options: StorageOptions,
    tasks: list[tuple],
    master: str,
    progress: Callable[[int], None] | None = None,
    partition: Callable[[StorageOptions, Iterable[tuple]], Iterator[tuple]] | None = None,
) -> list[tuple]:
    """The Spark engine: tasks are distributed with ``parallelize`` and checked in ``mapPartitions``.

    ``partition`` (a module-level function, pickled by reference) replaces :func:`run_partition`."""
    import functools

    if not tasks:
        return []
    spark = spark_session(master)
    sc = spark.sparkContext
    slots = max(sc.defaultParallelism, 1)
    partitions = max(1, min(len(tasks), max(slots * 4, len(tasks) // 5000)))
    # handle tasks come first in the list; deal tasks round-robin so each partition gets its share
    dealt = [tasks[i] for p in range(partitions) for i in range(p, len(tasks), partitions)]
    rdd = sc.parallelize(dealt, partitions).mapPartitions(functools.partial(partition or run_partition, options))
    try:
        if progress is None:
            return rdd.collect()
        return _collect_with_progress(sc, rdd, partitions, len(tasks), progress)
    except Exception as e:  # noqa: BLE001 - Py4JJavaError with the executor's traceback
        raise VerifyError(f"Spark job failed: {_short(e)} (Spark log: {spark_log_path()})") from None


def _collect_with_progress(sc, rdd, partitions: int, total: int, progress) -> list[tuple]:
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["rows"] = rdd.collect()
        except Exception as e:  # noqa: BLE001
            result["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    reported = 0
    tracker = sc.statusTracker()
    while thread.is_alive():
        thread.join(0.2)
        done = 0
        for stage in tracker.getActiveStageIds():
            info = tracker.getStageInfo(stage)
            if info is not None:
                done = max(done, info.numCompletedTasks)
        estimate = min(total, total * done // max(partitions, 1))
        if estimate > reported:
            progress(estimate - reported)
            reported = estimate
    if "error" in result:
        raise result["error"]
    if total > reported:
        progress(total - reported)
    return result["rows"]


# ---------------------------------------------------------------------------------------------
# the whole verification


@dataclass
class VerifyResult:
    checkpoints: list[str]
    references: int
    files: dict[str, FileRefs]
    handles: list[HandleRef]
    checks: list[tuple]  # (path, check, ok, detail, checkpoints)
    histogram: list[tuple]  # (checkpoint, operator_id, subtask, column_family, key_group, entries, bytes)
    problems: list[dict[str, Any]]
    counts: dict[str, int]
    engine: str
    master: str | None
    elapsed: float
    misanchored: list[Any] = field(default_factory=list)  # FLINK-39964 handles (ckptctl.repair)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "engine": self.engine,
            "master": self.master,
            "checkpoints": self.checkpoints,
            "checked": self.counts,
            "problem_count": len(self.problems),
            "problems": self.problems,
            "repairable": repairable(self.misanchored),
            "elapsed_seconds": round(self.elapsed, 3),
        }


def repairable(misanchored: list[Any]) -> list[dict[str, Any]]:
    """Per checkpoint: how many FLINK-39964 handles, whether all were found, the command that fixes it."""
    by_ck: dict[str, dict[str, Any]] = {}
    for m in misanchored:
        e = by_ck.setdefault(
            m.checkpoint,
            {
                "checkpoint": m.checkpoint,
                "handles": 0,
                "found": 0,
                "savepoint_dirs": set(),
                "repair": f"ckptctl repair {m.checkpoint} -o DEST",
            },
        )
        e["handles"] += 1
        if m.found is not None:
            e["found"] += 1
            e["savepoint_dirs"].add(m.savepoint_dir)
    return [{**e, "savepoint_dirs": sorted(e["savepoint_dirs"])} for e in by_ck.values()]


def verify(
    storage: Storage,
    checkpoints: list[LoadedCheckpoint],
    *,
    deep: bool = False,
    engine: str = "spark",
    master: str = "local[*]",
    progress: Callable[[int], None] | None = None,
    on_total: Callable[[int], None] | None = None,
    roots: Iterable[str] = (),
    savepoint_dirs: Iterable[str] = (),
) -> VerifyResult:
    """Check every file (and with ``deep`` every keyed RocksDB handle) the checkpoints need."""
    if engine not in ("spark", "local"):
        raise CkptError(f"unknown --engine '{engine}'; use spark or local")
    started = time.monotonic()
    rows: list[tuple] = []
    for ck in checkpoints:
        rows.extend(reference_rows(ck))
    files = file_refs(rows)
    handles = handle_refs(checkpoints) if deep else []
    # handle tasks first: they are the slow ones, so they start early on every executor
    tasks = [h.task() for h in handles] + [f.task() for f in files.values()]
    if on_total:
        on_total(len(tasks))
    if engine == "local":
        records = run_local(storage.options, tasks, progress)
    else:
        records = run_spark(storage.options, tasks, master, progress)
    result = assemble(
        [ck.location.uri for ck in checkpoints], len(rows), files, handles, records, engine,
        master if engine == "spark" else None, time.monotonic() - started,
    )  # fmt: skip
    result.misanchored = explain_missing(storage, checkpoints, result.problems, roots, savepoint_dirs)
    return result


def assemble(checkpoints, n_rows, files, handles, records, engine, master, elapsed) -> VerifyResult:
    checks: list[tuple] = []
    histogram: list[tuple] = []
    problems: list[dict[str, Any]] = []
    counts = {
        "checkpoints": len(checkpoints),
        "references": n_rows,
        "files": len(files),
        "handles": len(handles),
    }
    counts.update({c: 0 for c in CHECKS})
    for rec in records:
        if rec[0] == "h":
            _h, index, cf, kg, n, nbytes = rec
            for ck, op, sub in handles[index].owners:
                histogram.append((ck, op, sub, cf, kg, n, nbytes))
            continue
        _c, key, check, ok, detail = rec
        counts[check] += 1
        if isinstance(key, int):
            ref = handles[key]
            for ck, op, sub in ref.owners:
                where = f"operator {op} subtask {sub} key groups [{ref.key_group_start}, {ref.key_group_end}]"
                checks.append((ck, check, ok, f"{where}: {detail}" if detail else where, [ck]))
                if not ok:
                    problems.append(
                        {"path": ck, "check": check, "detail": f"{where}: {detail}", "checkpoints": [ck],
                         "operator_id": op, "subtask": sub}
                    )  # fmt: skip
        else:
            cks = sorted(files[key].checkpoints)
            checks.append((key, check, ok, detail, cks))
            if not ok:
                problems.append({"path": key, "check": check, "detail": detail, "checkpoints": cks})
    problems.sort(key=lambda p: (p["path"], CHECKS.index(p["check"]), p.get("subtask") or 0))
    return VerifyResult(
        checkpoints, n_rows, files, handles, checks, histogram, problems, counts, engine, master, elapsed
    )


# ---------------------------------------------------------------------------------------------
# Parquet outputs


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


# ---------------------------------------------------------------------------------------------
# check: the CI gate


def run_check(
    storage: Storage, root: str, rebase: Rebase, max_orphan_bytes: int | None, savepoint_dirs: Iterable[str] = ()
) -> dict[str, Any]:
    """Every ``_metadata`` parses, every reference resolves (local engine, shallow), orphans within a limit."""
    from ckptctl import storage as st
    from ckptctl.gc import GcOptions, build_plan
    from ckptctl.layout import scan_root
    from ckptctl.rebase import moved_warnings, with_inferred
    from ckptctl.refs import load_checkpoint

    started = time.monotonic()
    root = st.normalize_uri(root)
    listed = list(storage.list_files(root))  # kept: the FLINK-39964 diagnosis searches it for savepoint files
    layout = scan_root(storage, root, listed)
    if not any(loc.complete for loc in layout.locations()):
        # a gate that passes on a path with nothing to check would hide a wrong path in CI
        raise CkptError(f"no checkpoints under {layout.root}: no completed checkpoint or savepoint to check")
    warnings: list[str] = []
    loaded: list[LoadedCheckpoint] = []
    entries: list[dict[str, Any]] = []
    for loc in layout.locations():
        if not loc.complete:
            continue
        entry = {"path": loc.uri, "job_id": loc.job_id, "kind": loc.kind, "ok": True, "error": None,
                 "files": 0, "problems": []}  # fmt: skip
        entries.append(entry)
        try:
            ck = load_checkpoint(storage, loc, rebase)
        except CkptError as e:
            entry["ok"], entry["error"] = False, str(e)
            continue
        loaded.append(ck)
    warnings += moved_warnings(ck.inferred_rebase for ck in loaded)
    mappings = with_inferred(rebase, (ck.inferred_rebase for ck in loaded))  # for the orphan count
    rows: list[tuple] = []
    for ck in loaded:
        rows.extend(reference_rows(ck))
    files = file_refs(rows)
    records = run_local(storage.options, [f.task() for f in files.values()])
    result = assemble([ck.location.uri for ck in loaded], len(rows), files, [], records, "local", None, 0.0)
    misanchored = explain_missing(
        storage, loaded, result.problems, [layout.root], savepoint_dirs, {layout.root: listed}
    )
    by_ck = {e["path"]: e for e in entries}
    for f in files.values():
        for ck_uri in f.checkpoints:
            by_ck[ck_uri]["files"] += 1
    for p in result.problems:
        for ck_uri in p["checkpoints"]:
            e = by_ck[ck_uri]
            e["ok"] = False
            e["problems"].append({k: v for k, v in p.items() if k != "checkpoints"})
    problems = list(result.problems)
    for e in entries:
        if e["error"]:
            problems.append({"path": st.join(e["path"], "_metadata"), "check": "metadata", "detail": e["error"],
                             "checkpoints": [e["path"]]})  # fmt: skip

    orphans: dict[str, Any] = {"files": 0, "bytes": 0, "limit": max_orphan_bytes, "ok": True, "error": None}
    try:
        plan = build_plan(
            storage,
            GcOptions(
                (layout.root,), older_than=0.0, margin=0.0, force=True, allow_external=True,
                rebase=mappings.mappings,
            ),
        )  # fmt: skip
        orphans["files"], orphans["bytes"] = len(plan.candidates), plan.candidate_bytes
    except CkptError as e:
        orphans["error"] = f"cannot measure orphans: {e}"
        if max_orphan_bytes is not None:
            orphans["ok"] = False
        else:
            warnings.append(orphans["error"])
    if max_orphan_bytes is not None and orphans["bytes"] > max_orphan_bytes:
        orphans["ok"] = False
        problems.append({"path": layout.root, "check": "orphans", "checkpoints": [],
                         "detail": f"{orphans['bytes']} orphaned bytes in {orphans['files']} files, "
                                   f"above --max-orphan-bytes {max_orphan_bytes}"})  # fmt: skip
    elif not orphans["ok"]:
        problems.append(
            {"path": layout.root, "check": "orphans", "detail": orphans["error"], "checkpoints": []}
        )
    checked = dict(result.counts)
    checked["checkpoints"] = len(entries)
    checked["metadata"] = len(entries)
    return {
        "root": layout.root,
        "ok": not problems,
        "checked": checked,
        "checkpoints": entries,
        "orphans": orphans,
        "problem_count": len(problems),
        "problems": problems,
        "repairable": repairable(misanchored),
        "warnings": warnings,
        "elapsed_seconds": round(time.monotonic() - started, 3),
    }


def junit_xml(report: dict[str, Any]) -> str:
    """JUnit XML: one testcase per checkpoint, plus one for the orphan bytes."""
    import xml.etree.ElementTree as ET

    suites = ET.Element("testsuites")
    cases = report["checkpoints"]
    failures = sum(1 for c in cases if not c["ok"]) + (0 if report["orphans"]["ok"] else 1)
    suite = ET.SubElement(
        suites, "testsuite", name="ckptctl check", tests=str(len(cases) + 1), failures=str(failures),
        errors="0", time=f"{report['elapsed_seconds']:.3f}",
    )  # fmt: skip
    ET.SubElement(ET.SubElement(suite, "properties"), "property", name="root", value=report["root"])
    for c in cases:
        name = c["path"][len(report["root"]) :].lstrip("/") or c["path"]
        case = ET.SubElement(
            suite, "testcase", classname=f"ckptctl.check.{c['job_id'] or c['kind']}", name=name
        )
        if c["error"]:
            f = ET.SubElement(case, "failure", message=f"unreadable _metadata: {c['error']}", type="metadata")
            f.text = c["error"]
        elif not c["ok"]:
            first = c["problems"][0]
            f = ET.SubElement(
                case, "failure", type=first["check"],
                message=f"{len(c['problems'])} problems; first: {first['check']} {first['path']}: {first['detail']}",
            )  # fmt: skip
            f.text = "\n".join(f"{p['check']}: {p['path']}: {p['detail']}" for p in c["problems"])
    o = report["orphans"]
    case = ET.SubElement(suite, "testcase", classname="ckptctl.check", name="orphan bytes")
    out = ET.SubElement(case, "system-out")
    out.text = f"{o['bytes']} bytes in {o['files']} orphaned files; limit {o['limit']}"
    if not o["ok"]:
        f = ET.SubElement(case, "failure", type="orphans", message=o["error"] or out.text)
        f.text = out.text
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
