"""The in-process engine: the check function over a thread pool of this process."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from ckptctl.storage import StorageOptions
from ckptctl.verify.checks import run_tasks


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
