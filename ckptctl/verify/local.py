"""The in-process engine: the check function in this thread, or over a thread pool when the
storage makes it wait."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator

from ckptctl.storage import StorageOptions
from ckptctl.verify.checks import run_tasks

# Below this many seconds per task, tasks run in the calling thread. A check of a local file in
# the page cache takes ~10 µs of which the syscalls are a few: threads only wait for each other's
# interpreter lock (each syscall hands it over), and 16 of them ran 2-3x slower than one. A task
# that waits on storage (S3, NFS, a cold disk; RocksDB handles) takes far longer: those overlap.
SERIAL_TASK_SECONDS = 50e-6


def run_local(
    options: StorageOptions,
    tasks: list[tuple],
    progress: Callable[[int], None] | None = None,
    workers: int = 16,
    runner: Callable[[StorageOptions, Iterable[tuple]], Iterator[tuple]] | None = None,
) -> list[tuple]:
    """The in-process engine: the same check function over chunks of the tasks.

    Chunks run in this thread while they take under :data:`SERIAL_TASK_SECONDS` per task; from the
    first slower one, the rest go to a pool of ``workers`` threads (storage is then I/O bound).
    Records come back in task order either way. ``runner`` replaces :func:`run_tasks` (other
    commands' task functions, e.g. ``states --deep``)."""
    from concurrent.futures import ThreadPoolExecutor

    if not tasks:
        return []
    fn = runner or run_tasks
    chunk = max(1, min(256, len(tasks) // (workers * 4) or 1))
    chunks = [tasks[i : i + chunk] for i in range(0, len(tasks), chunk)]
    out: list[tuple] = []
    done = 0
    while done < len(chunks):
        started = time.perf_counter()
        out.extend(fn(options, chunks[done]))
        seconds = time.perf_counter() - started
        if progress:
            progress(len(chunks[done]))
        done += 1
        if seconds > SERIAL_TASK_SECONDS * len(chunks[done - 1]):
            break
    rest = chunks[done:]
    if not rest:
        return out
    if len(rest) == 1 or workers <= 1:
        for c in rest:
            out.extend(fn(options, c))
            if progress:
                progress(len(c))
        return out
    with ThreadPoolExecutor(min(workers, len(rest))) as pool:
        for part, c in zip(pool.map(lambda c: list(fn(options, c)), rest), rest, strict=True):
            out.extend(part)
            if progress:
                progress(len(c))
    return out
