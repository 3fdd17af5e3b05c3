"""The whole verification: reference map -> tasks -> an engine -> :class:`VerifyResult`."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from ckptctl.checkpoint.dstl import changelog_starts
from ckptctl.checkpoint.flink39964 import explain_missing
from ckptctl.checkpoint.loading import LoadedCheckpoint
from ckptctl.checkpoint.refs import file_resolver, reference_groups
from ckptctl.engine import Engine
from ckptctl.errors import CkptError
from ckptctl.pycollector import paused_collector
from ckptctl.storage import FileInfo, Storage
from ckptctl.verify.checks import run_tasks
from ckptctl.verify.result import VerifyResult, assemble
from ckptctl.verify.tasks import group_file_refs, handle_refs


def verify(
    storage: Storage,
    checkpoints: list[LoadedCheckpoint],
    *,
    deep: bool = False,
    quick: bool = False,
    engine: str | Engine = "auto",
    master: str | None = None,
    progress: Callable[[int], None] | None = None,
    on_total: Callable[[int], None] | None = None,
    roots: Iterable[str] = (),
    savepoint_dirs: Iterable[str] = (),
    listings: dict[str, list[FileInfo]] | None = None,
) -> VerifyResult:
    """Check every file (and with ``deep`` every keyed RocksDB handle) the checkpoints need.

    ``engine``: an :class:`~ckptctl.engine.Engine` (or ``auto``/``local``/``spark`` with ``master``).
    ``quick``: existence and sizes only, no file read (no SST footer, no metadata file read in
    full): on S3 the listings answer everything, about one request per 1,000 files instead of one
    per SST. ``listings``: listings of ``roots`` the caller already has (``check``'s one scan), so
    the FLINK-39964 diagnosis of missing files does not list them again."""
    if quick and deep:
        raise CkptError(QUICK_AND_DEEP)
    chosen = Engine.parse(engine, master)
    with paused_collector():
        return _verify(
            storage, checkpoints, deep, quick, chosen, progress, on_total, roots, savepoint_dirs, listings
        )


def _verify(storage, checkpoints, deep, quick, chosen, progress, on_total, roots, savepoint_dirs, listings):
    started = time.monotonic()
    # the reference map's groups, never flattened into a row per reference
    files, n_rows = group_file_refs(g for ck in checkpoints for g in reference_groups(ck))
    if not quick:  # the change sets DSTL files must begin where the checkpoints' pieces say
        for ck in checkpoints:
            for path, starts in changelog_starts(ck.metadata, file_resolver(ck)).items():
                if path in files:
                    for offset, sizes in starts.items():
                        files[path].changelog_starts.setdefault(offset, set()).update(sizes)
    handles = handle_refs(checkpoints) if deep else []
    sizes = listed_sizes(storage, files, listings)
    # handle tasks first: they are the slow ones, so they start early on every executor
    tasks = [h.task() for h in handles] + [f.task(sizes.get(f.path), reads=not quick) for f in files.values()]
    # checks of local files are cheap in-process: they count for less towards starting Spark;
    # --quick: a file a listing answered costs nothing (its checks compare numbers)
    weighed = [p for p in files if not quick or p not in sizes]
    ran = chosen.resolve(len(handles) + len(weighed), sum(1 for p in weighed if p.startswith("file:")))
    ran.start()  # before the bar: the JVM's start-up gets its own status line
    if on_total:
        on_total(len(tasks))
    # checks of local files mostly use CPU: in this thread first (handle tasks: a pool)
    _ran, records = ran.run(tasks, partial(run_tasks, storage.options), progress, in_thread_first=not handles)
    result = assemble(
        [ck.location.uri for ck in checkpoints], n_rows, files, handles, records, ran.kind, ran.master,
        time.monotonic() - started,
    )  # fmt: skip
    result.misanchored = explain_missing(
        storage, checkpoints, result.problems, roots, savepoint_dirs, listings
    )
    result.moved = explain_moved(checkpoints, result.problems)
    result.what_if = sorted({spec for ck in checkpoints for spec in ck.rebase.specs()})
    result.quick = quick
    return result


QUICK_AND_DEEP = "--quick reads no file and --deep rebuilds every RocksDB instance: choose one"
LIST_FROM_FILES = 2  # on S3, from this many referenced files in a directory: sizes from listings


def listed_sizes(storage: Storage, files: dict, listings: dict[str, list[FileInfo]] | None) -> dict[str, int]:
    """Sizes of referenced files from listings instead of one request per file.

    ``check`` passes its one listing of the root. On S3 otherwise, the referenced files of each
    directory holding :data:`LIST_FROM_FILES` or more of them are found by
    :meth:`Storage.present`: listings that start just before the next referenced file, never a
    page of orphans between two referenced files a thousand keys apart. Its cost model: at most
    one request per referenced file, and at most the pages a full listing of the directory would
    take (plus one per concurrent run of 5,000 files) -- so a checkpoint costs about one request
    per 1,000 referenced files where they lie together, and never more than a full listing where
    orphans interleave with them. A directory with a single referenced file gets a HEAD instead
    (the same one request, a cheaper kind). A file no listing shows, and a symlink (a listing
    gives the link's own size), is asked for itself: listings may lag behind the store."""
    sizes: dict[str, int] = {}
    if listings:
        for listed in listings.values():
            sizes.update((f.uri, f.size) for f in listed if f.uri in files and not f.is_link)
        return sizes
    per_dir: dict[str, list[str]] = {}
    for p in files:
        if p.startswith("s3://"):
            per_dir.setdefault(p.rsplit("/", 1)[0], []).append(p)
    wanted = [p for group in per_dir.values() if len(group) >= LIST_FROM_FILES for p in group]
    sizes.update((uri, f.size) for uri, f in storage.present(wanted).items())
    return sizes


MOVED_DETAIL = "not found where Flink will read it: the checkpoint was written at another location"


def explain_moved(
    checkpoints: list[LoadedCheckpoint], problems: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Checkpoints whose absolute paths name where their directory was written, not where it is.

    Flink opens the paths as written: a gate must judge those, not a copy it infers. Each missing
    file of such a checkpoint gets where the inferred mapping would find it (``moved_to``) and a
    short detail; what to do (relocate the copy, or check it as a what-if with that ``--rebase``)
    is said once per mapping (``advice``, :func:`moved_lines`), not once per file. Every such
    checkpoint is listed, also when the written location still exists (then Flink reads that
    location's files).
    """
    moved = [ck for ck in checkpoints if ck.inferred_rebase]
    if not moved:
        return []
    by_ck = {ck.location.uri: ck for ck in moved}
    missing: dict[str, int] = {}
    for p in problems:
        if p.get("check") != "exists" or p.get("issue"):
            continue
        ck = next((by_ck[c] for c in p.get("checkpoints", ()) if c in by_ck), None)
        if ck is None:
            continue
        now = ck.inferred_rebase.apply(p["path"])
        if now == p["path"]:
            continue
        p["moved_to"] = now
        p["detail"] = MOVED_DETAIL
        spec = ck.inferred_rebase.describe()
        missing[spec] = missing.get(spec, 0) + 1
    out: dict[str, dict[str, Any]] = {}
    for ck in moved:
        spec = ck.inferred_rebase.describe()
        e = out.setdefault(
            spec,
            {
                "rebase": ck.inferred_rebase.specs(),
                "checkpoints": [],
                "missing_files": missing.get(spec, 0),
                "advice": "relocate the copy with `ckptctl relocate`, or check it as a what-if with --rebase "
                + " --rebase ".join(ck.inferred_rebase.specs()),
            },
        )
        e["checkpoints"].append(ck.location.uri)
    return list(out.values())


def moved_lines(moved: list[dict[str, Any]]) -> list[str]:
    """What the text reports say once per mapping for the files :func:`explain_moved` explained
    (they are not listed one by one: ``--json`` lists each, with ``moved_to``)."""
    from ckptctl.words import plural

    return [
        f"{plural(m['missing_files'], 'file')} not found where Flink will read them: "
        f"{plural(len(m['checkpoints']), 'checkpoint')} written at another location and moved or copied here; "
        f"{m['advice']} (--json lists each file)"
        for m in moved
        if m["missing_files"]
    ]
