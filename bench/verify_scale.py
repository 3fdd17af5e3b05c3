"""Benchmark: shallow ``verify --engine local`` of ~100k real local files against a plain loop.

    .venv/bin/python bench/verify_scale.py [--files 100000] [--root DIR] [--keep] [--runs 3]

The root is built from a real fixture (fixtures/data/2.2.0/basic: RocksDB incremental
checkpoints, real SSTs): its job directory is copied N times under new job IDs and each copy's
``_metadata`` is rewritten (ckptctl's reader and writer, paths mapped to the copy), so every
checkpoint is sound and every byte real. Every checkpoint of every copy is loaded once; then,
in the same run and on the same (cached) files:

* **baseline**: a plain Python loop over the referenced files: ``os.stat`` each, and for each
  SST open it and read its 8-byte footer (what verify must at least do);
* **verify**: :func:`ckptctl.verify.verify` with ``--engine local`` (the default pool);
* **1 worker**: the same tasks through :func:`ckptctl.engine.local.run_local` with one worker, and with
  the default pool, to show contention.

Prints each as seconds (best of ``--runs``) and the ratio to the baseline. Target: verify within
2x of the baseline. Not a test.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

FIXTURE = HERE.parent / "fixtures" / "data" / "2.2.0" / "basic" / "checkpoints"
ORIGINAL = "/tmp/ckptctl-fixture-gen/2.2.0/basic/checkpoints"  # where Flink wrote the fixture


def build(root: str, files: int) -> None:
    """Copies of the fixture's job directory under ``root`` until ~``files`` files are referenced."""
    from ckptctl.metadata import read_metadata, write_metadata
    from ckptctl.metadata.transform import map_file_handles

    (src,) = [p for p in FIXTURE.iterdir() if p.is_dir()]
    mds = {}
    for m in sorted(src.glob("chk-*/_metadata")):
        mds[m.parent.name] = read_metadata(m.read_bytes())
    per_job = 77  # distinct files the fixture's three checkpoints reference
    jobs = max(1, -(-files // per_job))
    old = ORIGINAL + "/" + src.name
    for j in range(jobs):
        job = f"{j + 1:032x}"
        dst = os.path.join(root, job)
        shutil.copytree(src, dst)
        new = os.path.join(root, job)

        def rewrite(h, _where, new=new):
            path = getattr(h, "path", None)
            if path is None or old not in path:
                return h
            return h._replace(path=path.replace(old, new))

        for name, md in mds.items():
            with open(os.path.join(dst, name, "_metadata"), "wb") as f:
                f.write(write_metadata(map_file_handles(md, rewrite)))


def load(root: str):
    from ckptctl.checkpoint.loading import load_checkpoint
    from ckptctl.storage import Storage

    storage = Storage()
    cks = [
        load_checkpoint(storage, "file:" + os.path.dirname(m))
        for m in sorted(glob.glob(os.path.join(root, "*", "chk-*", "_metadata")))
    ]
    return storage, cks


def baseline(paths: list[tuple[str, bool]]) -> int:
    """os.stat each file; read the last 8 bytes of each SST."""
    n = 0
    for path, sst in paths:
        st = os.stat(path)
        if sst:
            with open(path, "rb") as f:
                f.seek(st.st_size - 8)
                n += len(f.read(8))
    return n


def baseline_with_spans(paths: list[tuple[str, bool, tuple]]) -> int:
    """:func:`baseline` plus what verify also reads: each metadata/private file's recorded span."""
    n = 0
    for path, sst, spans in paths:
        st = os.stat(path)
        if sst or spans:
            with open(path, "rb") as f:
                if sst:
                    f.seek(st.st_size - 8)
                    n += len(f.read(8))
                for offset, size in spans:
                    f.seek(offset)
                    n += len(f.read(size))
    return n


def best(fn, runs: int, clock=time.perf_counter) -> float:
    times = []
    for _ in range(runs):
        t = clock()
        fn()
        times.append(clock() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--root", help="build (or reuse, if it exists) the root here")
    ap.add_argument("--keep", action="store_true", help="keep the built root")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers-1", action="store_true", help="also time run_local with 1 and 16 workers")
    ap.add_argument("--profile", help="write a cProfile of one verify run to this file")
    args = ap.parse_args()

    from ckptctl.checkpoint.refs import reference_rows
    from ckptctl.verify import verify
    from ckptctl.verify.tasks import file_refs

    root = args.root or tempfile.mkdtemp(prefix="ckptctl-verify-scale-")
    try:
        if not glob.glob(os.path.join(root, "*", "chk-*", "_metadata")):
            t = time.perf_counter()
            build(root, args.files)
            print(f"built {root} in {time.perf_counter() - t:.1f} s")
        t = time.perf_counter()
        storage, cks = load(root)
        print(f"loaded {len(cks):,} checkpoints in {time.perf_counter() - t:.1f} s")
        files = file_refs(r for ck in cks for r in reference_rows(ck))
        paths = [(p[len("file:") :], f.sst_whole) for p, f in files.items()]
        print(f"{len(paths):,} referenced files, {sum(s for _, s in paths):,} SSTs")

        def run_verify():
            result = verify(storage, cks, engine="local")
            assert result.ok, result.problems[:3]
            return result

        # interleaved, best of each: a busy machine slows both alike. Wall time, and this
        # process's CPU time (user + system: what a loaded machine's other processes do not add)
        base, took, base_cpu, took_cpu = (float("inf"),) * 4
        for _ in range(args.runs):
            base = min(base, best(lambda: baseline(paths), 1))
            took = min(took, best(run_verify, 1))
            base_cpu = min(base_cpu, best(lambda: baseline(paths), 1, time.process_time))
            took_cpu = min(took_cpu, best(run_verify, 1, time.process_time))
        print(f"  baseline (os.stat + SST footer)  {base:7.2f} s wall  {base_cpu:7.2f} s CPU")
        print(
            f"  verify --engine local            {took:7.2f} s wall  {took_cpu:7.2f} s CPU   "
            f"{took / base:5.2f}x baseline (wall)  {took_cpu / base_cpu:5.2f}x (CPU)"
        )
        with_spans = [(p[len("file:") :], f.sst_whole, tuple(f.read_spans)) for p, f in files.items()]
        spans_cpu = min(
            best(lambda: baseline_with_spans(with_spans), 1, time.process_time) for _ in range(args.runs)
        )
        print(
            f"  (for reference: baseline + reading each metadata/private file's span, as verify does: "
            f"{spans_cpu:.2f} s CPU, verify {took_cpu / spans_cpu:.2f}x that)"
        )
        if args.workers_1:
            from functools import partial

            from ckptctl.engine.local import run_local
            from ckptctl.verify.checks import run_tasks

            rows = [r for ck in cks for r in reference_rows(ck)]
            fr = file_refs(rows)
            tasks = [f.task() for f in fr.values()]
            for w in (1, 16):
                t1 = best(
                    lambda w=w: run_local(
                        tasks, partial(run_tasks, storage.options), workers=w, in_thread_first=True
                    ),
                    args.runs,
                )
                print(f"  run_local(workers={w:2d}), checks only {t1:7.2f} s  {t1 / base:5.2f}x baseline")
        if args.profile:
            import cProfile

            cProfile.runctx("run_verify()", globals(), {"run_verify": run_verify}, args.profile)
            print(f"  profile in {args.profile}")
    finally:
        if not (args.keep or args.root):
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
