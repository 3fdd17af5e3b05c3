"""The in-process engine's fast path for local files says exactly what the storage layer says.

Local regular files are checked with os calls (open, fstat, pread) instead of fsspec; whatever
is not a plain answer (missing, a directory, a FIFO, an unreadable file) is asked of the storage
layer. These compare the records of both ways, file by file, and check the engine's choice of
thread(s) and of Spark for local files.
"""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

import pytest

from ckptctl.engine import AUTO_LOCAL_FILES, AUTO_SPARK_TASKS, Engine, local
from ckptctl.engine.local import run_local
from ckptctl.storage import Storage
from ckptctl.verify import SST_MAGIC, checks
from ckptctl.verify.checks import check_file, run_tasks
from ckptctl.verify.tasks import FileTask

FOOTER = SST_MAGIC.to_bytes(8, "little")


def task(path: str, *, size: int, sst: bool = False, spans=(), segment_end=None, sst_ends=(), changelog=()):
    whole = () if segment_end is not None or changelog else (size,)
    return FileTask(path, whole, tuple(changelog), segment_end, sst, tuple(sst_ends), tuple(spans))


def cases(tmp: Path) -> list[FileTask]:
    good = tmp / "good.sst"
    good.write_bytes(b"x" * 40 + FOOTER)
    bad = tmp / "bad.sst"
    bad.write_bytes(b"y" * 48)
    short = tmp / "short.sst"
    short.write_bytes(b"abc")
    meta = tmp / "meta"
    meta.write_bytes(b"m" * 100)
    merged = tmp / "merged"
    merged.write_bytes(b"s" * 30 + FOOTER + b"t" * 10)
    (tmp / "adir").mkdir()
    fifo = tmp / "fifo"
    os.mkfifo(fifo)
    secret = tmp / "secret"
    secret.write_bytes(b"z" * 20 + FOOTER)
    secret.chmod(0)
    link = tmp / "link.sst"
    link.symlink_to(good)
    dangling = tmp / "dangling"
    dangling.symlink_to(tmp / "nowhere")
    u = lambda p: "file:" + str(p)  # noqa: E731
    return [
        task(u(good), size=48, sst=True),
        task(u(good), size=47, sst=True),  # wrong recorded size
        task(u(bad), size=48, sst=True),
        task(u(short), size=3, sst=True),
        task(u(meta), size=100, spans=[(0, 100)]),
        task(u(meta), size=100, spans=[(90, 20)]),  # beyond the end: a size problem only
        task(u(meta), size=100, spans=[(0, 0), (10, 5)]),
        task(u(merged), size=48, segment_end=40, sst_ends=(38, 48, 400)),
        task(u(merged), size=48, changelog=(47,)),
        task(u(tmp / "missing"), size=1, sst=True),
        task(u(tmp / "adir"), size=1, sst=True),
        task(u(tmp / "adir"), size=1),
        task(u(fifo), size=0),
        task(u(secret), size=28, sst=True),
        task(u(link), size=48, sst=True),
        task(u(dangling), size=1),
        task(u(good / "under-a-file"), size=1),
        task(u(good), size=48, sst=True)._replace(listed=48),  # a listed size
        task(u(good), size=48, sst=True)._replace(listed=47),  # a listed size that disagrees
    ]


def test_local_fast_path_says_what_the_storage_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    storage = Storage()
    tasks = cases(tmp_path)
    fast = [list(check_file(storage, t)) for t in tasks]
    monkeypatch.setattr(checks, "_open_local", lambda path, read: (-1, None))  # always the storage
    slow = [list(check_file(storage, t)) for t in tasks]
    for t, a, b in zip(tasks, fast, slow, strict=True):
        assert a == b, t
    # the fixtures above do reach every kind of answer
    found = {(r.check, r.ok) for recs in fast for r in recs}
    assert found >= {("exists", False), ("size", False), ("sst_magic", False), ("sst_magic", True),
                     ("readable", True)}  # fmt: skip


def test_fast_and_pooled_runs_give_the_same_records_in_task_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = Storage()
    tasks = cases(tmp_path) * 40
    fn = partial(run_tasks, storage.options)
    serial = run_local(tasks, fn, in_thread_first=True)
    monkeypatch.setattr(local, "SERIAL_WAIT_SECONDS", -1.0)  # every chunk "waits": the pool
    monkeypatch.setattr(local, "MIN_WAIT_SECONDS", -1.0)
    done: list[int] = []
    pooled = run_local(tasks, fn, progress=done.append, in_thread_first=True)
    assert pooled == serial
    assert sum(done) == len(tasks) and len(done) > 2


def test_auto_counts_local_files_for_less() -> None:
    auto = Engine.parse("auto")
    assert auto.resolve(AUTO_SPARK_TASKS) == Engine("spark", "local[*]")  # as before: S3 files, handles
    assert auto.resolve(200_000, local_files=200_000) == Engine("local")
    assert auto.resolve(AUTO_LOCAL_FILES, local_files=AUTO_LOCAL_FILES) == Engine("spark", "local[*]")
    assert auto.resolve(AUTO_SPARK_TASKS + 100_000, local_files=100_000) == Engine("spark", "local[*]")
    assert Engine.parse("auto", "spark://h:7077").resolve(1, local_files=1).kind == "spark"
