"""Applying a relocation plan: :func:`apply_relocation` refuses when DST already holds a different
``_metadata``, copies with a thread pool or on Spark executors (each copy under a temporary name,
renamed when complete; S3: one PUT or a multipart upload plus a size check), skips files already
copied with the right size (so a re-run after an interruption finishes the job), and writes every
``_metadata`` last. Nothing is ever written under a source directory.

Apart from :mod:`~ckptctl.relocate.plan` because this is the only part that writes; it takes a
plan made (or made again, :func:`replan`) there and trusts nothing older.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

from ckptctl import storage as st
from ckptctl.checkpoint.loading import LoadedCheckpoint, load_checkpoint
from ckptctl.checkpoint.rebase import Rebase
from ckptctl.errors import CkptError, StoreUnanswered
from ckptctl.relocate.plan import (
    PLAN_FORMAT,
    CopyItem,
    RelocateError,
    RelocatePlan,
    RelocateRefused,
    load_sources,
    plan_relocation,
)
from ckptctl.storage import Storage
from ckptctl.storage.copying import check_copies, copy_file, write_atomic


@dataclass
class RelocateResult:
    copied_files: int
    copied_bytes: int
    skipped_files: int
    metadata_written: list[str]
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "copied_files": self.copied_files, "copied_bytes": self.copied_bytes,
            "already_there": self.skipped_files, "metadata_written": self.metadata_written,
            "seconds": round(self.seconds, 3),
        }  # fmt: skip


@dataclass
class RelocateReport:
    """``relocate``: the plan (without its file list) and, once applied, the copy and the shallow
    verify of the relocated checkpoints (``verify``: None with --no-verify)."""

    plan: RelocatePlan
    applied: bool
    result: RelocateResult | None = None
    verify: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out = {**self.plan.to_json(with_files=False), "applied": self.applied}
        if self.applied:
            out.update(result=self.result.to_json() if self.result else None, verify=self.verify)
        return out


def replan(storage: Storage, plan_data: dict[str, Any], workers: int = 8) -> RelocatePlan:
    """``relocate apply PLAN``: never trust an old plan; plan again with its options and refuse
    when anything (a file, a size, a new ``_metadata``) differs from what was reviewed."""
    if not isinstance(plan_data, dict) or plan_data.get("format") != PLAN_FORMAT:
        raise RelocateError(f"not a relocate plan (expected format {PLAN_FORMAT})")
    o = plan_data.get("options")
    if not isinstance(o, dict) or not isinstance(o.get("src"), str) or not isinstance(o.get("dst"), str):
        raise RelocateError("the plan has no options.src/options.dst: not written by `ckptctl relocate -o`")
    try:
        rebase = Rebase.from_json(o.get("rebase", []), "the plan's options")
    except CkptError as e:
        raise RelocateError(str(e)) from None
    checkpoints, source = load_sources(storage, o["src"], rebase, bool(o.get("all")))
    fresh = plan_relocation(storage, checkpoints, source, o["dst"], workers)
    fresh.options = o
    if fresh.fingerprint() != plan_data.get("fingerprint"):
        raise RelocateRefused(
            "the source or DST changed since this plan was made; run `ckptctl relocate` again"
        )
    return fresh


def apply_relocation(
    storage: Storage,
    plan: RelocatePlan,
    *,
    workers: int = 8,
    bwlimit: float | None = None,
    progress: Callable[[int], None] | None = None,
    engine: Any = "local",
    master: str | None = None,
) -> RelocateResult:
    """Copy every file (resumable), then write each new ``_metadata`` last.

    ``engine`` (an :class:`~ckptctl.engine.Engine` or its name): ``local`` (a thread pool of
    ``workers``) or ``spark`` (each executor copies a partition of the files; the driver writes
    the ``_metadata`` files once all are copied); ``auto`` picks by the number of files."""
    from ckptctl.engine import Engine

    chosen = Engine.parse(engine, master).resolve(len(plan.copies))
    if plan.conflicts:
        raise RelocateRefused(
            f"DST already holds a different checkpoint: {plan.conflicts[0]} differs from the one relocate "
            "would write; choose another DST or remove it"
        )
    started = time.monotonic()
    lock = threading.Lock()
    stats = {"copied": 0, "bytes": 0, "skipped": 0}
    limiter = _Limiter(bwlimit) if bwlimit else None

    copied: list[tuple[str, int]] = []  # checked together, before any _metadata is written
    # set by the copy that fails, in its own thread: a worker freed by a failed copy took the next
    # one from the pool's queue before the main thread (woken by as_completed, late on a loaded
    # machine) could cancel it, and that copy waited out the deadline too (4 held files, 2 workers)
    failed = threading.Event()

    def one(item: CopyItem) -> None:
        if failed.is_set():
            return  # the run is ending: a copy not begun is not begun
        try:
            copy_one(item)
        except BaseException:
            failed.set()
            raise

    def copy_one(item: CopyItem) -> None:
        if item.dst in already:
            with lock:
                stats["skipped"] += 1
        else:
            n = copy_file(storage, item.src, item.dst, item.size, checked=False)
            if limiter is not None:
                limiter.spend(n)
            with lock:
                stats["copied"] += 1
                stats["bytes"] += n
                copied.append((item.dst, item.size))
        if progress is not None:
            progress(1)

    if chosen.kind == "spark":
        for outcome in run_spark_copies(storage, plan.copies, chosen, progress):
            stats["skipped" if outcome.skipped else "copied"] += 1
            stats["bytes"] += outcome.copied
    else:
        already = _already_copied(storage, plan.copies)
        if workers <= 1:
            for item in plan.copies:
                one(item)
        else:
            with ThreadPoolExecutor(workers) as pool:
                futures = [pool.submit(one, item) for item in plan.copies]
                try:
                    for fut in as_completed(futures):
                        fut.result()
                except BaseException:  # the first failure ends the run: the copies not begun are not
                    for f in futures:  # (a hung endpoint: each would wait out the deadline, in turn)
                        f.cancel()
                    raise
        check_copies(storage, copied)
    written = []
    for c in plan.checkpoints:  # last: a _metadata never names a file that is not there yet
        write_atomic(storage, c.metadata_uri, c.data)
        written.append(c.metadata_uri)
    return RelocateResult(
        stats["copied"], stats["bytes"], stats["skipped"], written, time.monotonic() - started
    )


class CopyOutcome(NamedTuple):
    """What one copy on an executor did: ``copied`` bytes, or ``skipped`` (already there with its
    size), or the ``error``."""

    src: str
    copied: int = 0
    skipped: bool = False
    error: str | None = None


def copy_partition(options: st.StorageOptions, items: Iterable[CopyItem]) -> Iterator[CopyOutcome]:
    """The task function of the Spark copies (module level: pickled, with ``options`` bound, by reference)."""
    storage = Storage.shared(options)
    items = list(items)
    try:
        already = _already_copied(storage, items)
    except StoreUnanswered:
        raise  # the task stops: each copy would wait out the same deadline
    except CkptError as e:
        yield from (CopyOutcome(item.src, error=str(e)) for item in items)
        return
    for item in items:
        try:
            if item.dst in already:
                yield CopyOutcome(item.src, skipped=True)
            else:
                yield CopyOutcome(item.src, copy_file(storage, item.src, item.dst, item.size))
        except StoreUnanswered:
            raise
        except CkptError as e:
            yield CopyOutcome(item.src, error=str(e))


def _already_copied(storage: Storage, items: list[CopyItem]) -> set[str]:
    """The destinations that hold a file of their item's size already (a repeated run): on S3 one
    listing per destination directory (:meth:`Storage.stat_many`), not a stat each."""
    there = storage.stat_many([item.dst for item in items], unlisted_is_absent=True)
    return {item.dst for item in items if there[item.dst] is not None and there[item.dst].size == item.size}


def run_spark_copies(
    storage: Storage, copies: list[CopyItem], engine: Any, progress: Callable[[int], None] | None = None
) -> list[CopyOutcome]:
    """Every copy on the executors of ``engine`` (a Spark :class:`~ckptctl.engine.Engine`)."""
    _ran, outcomes = engine.run(copies, partial(copy_partition, storage.options), progress)
    errors = [o for o in outcomes if o.error is not None]
    if errors:
        raise RelocateError(f"{len(errors)} copies failed on Spark; first: {errors[0].error}")
    return outcomes


class _Limiter:
    """``--bwlimit``: at most this many bytes per second over the whole copy."""

    def __init__(self, rate: float) -> None:
        self.rate, self.spent, self.t0, self.lock = rate, 0, time.monotonic(), threading.Lock()

    def spend(self, n: int) -> None:
        with self.lock:
            self.spent += n
            wait = self.spent / self.rate - (time.monotonic() - self.t0)
        if wait > 0:
            time.sleep(wait)


def relocated_checkpoints(storage: Storage, plan: RelocatePlan) -> list[LoadedCheckpoint]:
    """The relocated copies, read back from DST (no rebase: their paths must be right as written)."""
    return [load_checkpoint(storage, c.destination, apply_inferred=False) for c in plan.checkpoints]


def shallow_verify(storage: Storage, plan: RelocatePlan) -> dict[str, Any]:
    """``verify --engine local`` (shallow) on the relocated copies."""
    from ckptctl.verify import verify

    result = verify(storage, relocated_checkpoints(storage, plan), engine="local")
    return result.to_json()
