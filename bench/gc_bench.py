"""GC benchmark: `gc plan` against a bare listing of the same tree, measured in the same run.

    .venv/bin/python bench/gc_bench.py [--files 1000000 --refs 400000 --checkpoints 3] [--s3-files 50000]
        [--baseline-code DIR]

Local: a synthetic root (bench/gc_tree.py: one job, N files in shared/, K checkpoints of R
references each, written with ckptctl's writer). The floor is `find -printf '%s %T@'` (every
file with size and mtime, which any GC must read, in C); ckptctl's own listing (the walk the
planner uses) and `gc plan` in-process are measured against it, interleaved, best of --runs:
wall, ratio to find, peak RSS and RSS bytes per listed file. ``--baseline-code DIR`` runs the
planner of another checkout's ckptctl package too (e.g. a `git worktree` of the base commit),
in the same rounds: before/after measured the same way.
S3: the same shape, smaller (every object is a PUT into moto on loopback), listed and planned
over HTTP. Prints wall times, the ratio plan/listing and peak RSS (main process and worker).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

DRIVER = r"""
import json, resource, sys, time
from ckptctl.storage import Storage, StorageOptions
def main():
    try:  # what the CLI does first (a --baseline-code checkout may predate it)
        from ckptctl.columns import return_freed_memory
        return_freed_memory()
    except ImportError:
        pass
    mode, root, endpoint = sys.argv[1], sys.argv[2], sys.argv[3] or None
    storage = Storage(StorageOptions(s3_endpoint=endpoint))
    t = time.perf_counter()
    if mode == "list":
        n = sum(1 for _ in storage.list_files(root))
        extra = {"files": n}
    elif mode == "walk":  # the columns gc plan lists a local root into
        from ckptctl.gc.listed import list_runs
        from ckptctl.storage import WalkNotes
        extra = {"files": sum(len(run) for run in list_runs(storage, root, WalkNotes()))}
    else:
        from ckptctl.gc import GcOptions, build_plan
        plan = build_plan(storage, GcOptions((root,), older_than=float(sys.argv[4]), margin=0, force=True))
        extra = {"candidates": len(plan.candidates), "live": plan.live_files, "refusals": plan.refusals,
                 "files": plan.total_files}
    wall = time.perf_counter() - t
    ru = resource.getrusage
    print(json.dumps({"wall": wall, "rss_mib": ru(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "worker_rss_mib": ru(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, **extra}))
if __name__ == "__main__":
    main()
"""


def run_driver(
    mode: str,
    root: str,
    endpoint: str = "",
    older_than: float = 86400,
    runs: int = 2,
    code: str | None = None,
) -> dict:
    """The best of ``runs`` runs of DRIVER; ``code``: the directory of another ckptctl package."""
    best = None
    env = dict(os.environ, PYTHONSAFEPATH="1", PYTHONPATH=code) if code else None
    for _ in range(runs):
        # through a fresh trampoline: a child forked from this (large) process would inherit its
        # RSS high-water mark, which Linux keeps across exec
        trampoline = "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)"
        out = subprocess.run(
            [sys.executable, "-c", trampoline, sys.executable, "-c", DRIVER, mode, root, endpoint, str(older_than)],
            capture_output=True, text=True, env=env,
        )  # fmt: skip
        if out.returncode != 0:
            raise SystemExit(out.stderr)
        r = json.loads(out.stdout)
        if best is None or r["wall"] < best["wall"]:
            best = r
    return best


def local(args) -> None:
    from bench.gc_tree import build

    root = Path(args.workdir) / "local"
    t = time.time()
    info = build(root, args.files, args.checkpoints, args.refs)
    print(
        f"local tree: {info['files']:,} files in shared/, {args.checkpoints} checkpoints × ~{args.refs:,} refs "
        f"(built in {time.time() - t:.0f}s, reused when present)"
    )

    def find() -> dict:
        t = time.perf_counter()
        subprocess.run(["find", "-L", str(root), "-type", "f", "-printf", "%s %T@\n"], stdout=subprocess.DEVNULL,
                       check=True)  # fmt: skip
        return {"wall": time.perf_counter() - t}

    # interleaved, best of --runs each: a busy machine slows all alike only on average
    rows = {"find -printf (floor)": find, "ckptctl listing": lambda: run_driver("walk", f"file:{root}", runs=1),
            "gc plan (in-process)": lambda: run_driver("plan", str(root), runs=1)}  # fmt: skip
    if args.baseline_code:
        rows[f"gc plan ({args.baseline_code})"] = lambda: run_driver(
            "plan", str(root), runs=1, code=args.baseline_code
        )
    best: dict[str, dict] = {}
    for _ in range(args.runs):
        for label, measure in rows.items():
            r = measure()
            if label not in best or r["wall"] < best[label]["wall"]:
                best[label] = r
    floor = best["find -printf (floor)"]["wall"]
    for label, r in best.items():
        line = f"  {label:34} {r['wall']:7.2f} s  {r['wall'] / floor:5.2f}x find"
        if "rss_mib" in r:
            line += f"   {r['rss_mib']:6.0f} MiB peak RSS, {r['rss_mib'] * 2**20 / r['files']:4.0f} B/file"
        if "candidates" in r:
            line += (f"   (worker {r['worker_rss_mib']:.0f} MiB; {r['candidates']:,} candidates, "
                     f"{r['live']:,} live of {r['files']:,})")  # fmt: skip
        print(line)
    ckptctl = str(Path(sys.executable).parent / "ckptctl")
    t = time.perf_counter()
    plan_file = Path(args.workdir) / "plan.json"
    subprocess.run(
        [ckptctl, "gc", "plan", str(root), "--older-than", "1d", "--margin", "0s", "--force", "-o", str(plan_file)],
        stdout=subprocess.DEVNULL, check=True,
    )  # fmt: skip
    cli_s = time.perf_counter() - t
    print(f"  {'gc plan -o plan.json (CLI, once)':34} {cli_s:7.2f} s  {cli_s / floor:5.2f}x find   "
          f"plan file {plan_file.stat().st_size / 1e6:.0f} MB")  # fmt: skip


def _in_bucket(md, old: str, new: str):
    """The same checkpoint with its absolute paths moved from ``old`` to ``new`` (via the writer)."""
    from ckptctl.metadata.handles import FileHandle

    def move(files):
        return tuple(
            f._replace(handle=FileHandle(f.handle.path.replace(old, new), f.handle.size)) for f in files
        )

    ops = []
    for op in md.operators:
        subs = []
        for s in op.subtasks:
            h = s.managed_keyed
            subs.append(s._replace(managed_keyed=h._replace(shared=move(h.shared), private=move(h.private))))
        ops.append(op._replace(subtasks=tuple(subs)))
    return md._replace(operators=tuple(ops))


def upload_tree(endpoint: str, local_root: Path, bucket: str) -> int:
    """A bench/gc_tree.py root as a bucket (its paths in _metadata rewritten to name the bucket,
    the _metadata uploaded last, past a whole second: S3 mtimes are seconds); the object count."""
    from concurrent.futures import ThreadPoolExecutor

    import boto3

    from ckptctl.metadata import read_metadata, write_metadata

    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    client.create_bucket(Bucket=bucket)
    prefix_local = f"file:{local_root}"

    def put(p: Path) -> None:
        body = p.read_bytes()
        if p.name == "_metadata":
            body = write_metadata(_in_bucket(read_metadata(body), prefix_local, f"s3://{bucket}"))
        client.put_object(Bucket=bucket, Key=p.relative_to(local_root).as_posix(), Body=body)

    files = [p for p in local_root.rglob("*") if p.is_file()]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, [p for p in files if p.name != "_metadata"]))
    time.sleep(1.5)
    for p in files:
        if p.name == "_metadata":
            put(p)
    time.sleep(1.5)
    return len(files)


def s3(args) -> None:

    from bench.gc_tree import build
    from tests.conftest import free_port

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    endpoint = f"http://127.0.0.1:{port}"
    os.environ.update(
        AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1"
    )
    try:
        time.sleep(2)
        local_root = Path(args.workdir) / "s3-src"
        build(local_root, args.s3_files, args.checkpoints, args.s3_refs, subtasks=32)
        t = time.time()
        files = upload_tree(endpoint, local_root, "bench")
        print(f"s3 (moto on loopback): {files:,} objects uploaded in {time.time() - t:.0f}s")
        listing = run_driver("list", "s3://bench", endpoint)
        plan = run_driver("plan", "s3://bench", endpoint, older_than=0)
        print(f"  ckptctl listing (floor)    {listing['wall']:7.2f} s   {listing['files']:,} objects")
        print(
            f"  gc plan (library)          {plan['wall']:7.2f} s   {plan['rss_mib']:6.0f} MiB   "
            f"{plan['candidates']:,} candidates, {plan['live']:,} live, refusals {plan['refusals'][:1]}"
        )
        print(f"  ratio plan / listing: {plan['wall'] / listing['wall']:.2f}x")
    finally:
        proc.terminate()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=1_000_000)
    ap.add_argument("--refs", type=int, default=400_000)
    ap.add_argument("--checkpoints", type=int, default=3)
    ap.add_argument("--s3-files", type=int, default=50_000)
    ap.add_argument("--s3-refs", type=int, default=20_000)
    ap.add_argument("--skip-s3", action="store_true")
    ap.add_argument("--skip-local", action="store_true")
    ap.add_argument("--runs", type=int, default=3, help="interleaved runs of listing and plan (best of each)")
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "ckptctl-gc-bench"))
    ap.add_argument(
        "--baseline-code", help="a directory holding another ckptctl package, planned in the same rounds"
    )
    args = ap.parse_args()
    if not args.skip_local:
        local(args)
    if not args.skip_s3:
        s3(args)


if __name__ == "__main__":
    main()
