"""The in-process engine: the task function in this thread, or over a thread pool when the
storage makes it wait."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

# Tasks run in the calling thread while they wait on storage less than this many seconds each
# (wall time minus the thread's CPU time). A check of a local file in the page cache takes ~10 µs,
# mostly the interpreter's: threads only wait for each other's interpreter lock (each syscall hands
# it over), and 16 of them ran 2-3x slower than one. Tasks that wait on storage (S3, NFS, a cold
# disk; RocksDB handles) wait far longer, and those overlap in a pool.
SERIAL_WAIT_SECONDS = 50e-6
MIN_WAIT_SECONDS = 0.05  # and this long in all: a few preemptions are no reason for a pool
PROBE_TASKS = 32  # the first chunk, small: tasks that wait on S3 go to the pool after a few of them


def run_local(
    tasks: list,
    fn: Callable[[Iterable[Any]], Iterator[Any]],
    progress: Callable[[int], None] | None = None,
    workers: int = 16,
    *,
    in_thread_first: bool = False,
) -> list:
    """The in-process engine: the task function ``fn`` over chunks of the tasks, on a pool of
    ``workers`` threads.

    ``in_thread_first`` (checks of local files): the chunks run in this thread while their tasks
    wait on storage under :data:`SERIAL_WAIT_SECONDS` each; from the first chunk that waits
    longer, the rest go to the pool. Records come back in task order either way."""
    from concurrent.futures import ThreadPoolExecutor

    if not tasks:
        return []
    chunk = max(1, min(256, len(tasks) // (workers * 4) or 1))
    first = min(chunk, PROBE_TASKS)
    chunks = [tasks[:first]] + [tasks[i : i + chunk] for i in range(first, len(tasks), chunk)]
    out: list = []
    done = 0
    serial = in_thread_first
    waited = 0.0  # seconds this thread was off the CPU while checking, so far
    checked = 0
    while serial and done < len(chunks):
        part = chunks[done]
        wall, cpu = time.perf_counter(), time.thread_time()
        out.extend(fn(part))
        waited += (time.perf_counter() - wall) - (time.thread_time() - cpu)
        checked += len(part)
        if progress:
            progress(len(part))
        done += 1
        # on average, not per chunk: on a busy machine the scheduler alone takes this thread off
        # the CPU for a few milliseconds now and then, which a pool would not make shorter
        if waited > max(SERIAL_WAIT_SECONDS * checked, MIN_WAIT_SECONDS):
            break
    rest = chunks[done:]
    if not rest:
        return out
    if len(rest) == 1 or workers <= 1:
        for c in rest:
            out.extend(fn(c))
            if progress:
                progress(len(c))
        return out
    with ThreadPoolExecutor(min(workers, len(rest))) as pool:
        for part, c in zip(pool.map(lambda c: list(fn(c)), rest), rest, strict=True):
            out.extend(part)
            if progress:
                progress(len(c))
    return out
