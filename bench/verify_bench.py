"""Benchmark: shallow ``verify`` of ~100k file references, Spark ``local[2]`` vs the in-process engine.

    .venv/bin/python bench/verify_bench.py [--refs 100000] [--s3-refs 5000] [--flink-restore]

Builds a synthetic checkpoint (bench/synth.py's shape: per keyed subtask one
IncrementalRemoteKeyedStateHandle with shared SSTs, private MANIFEST/OPTIONS and a relative meta
file) whose files really exist with their recorded sizes, SSTs ending in RocksDB's magic number,
then times ``ckptctl.verify.verify`` with each engine (Spark start-up measured separately: a CI
job pays it once). Optionally the same over a moto S3 server at a smaller scale, and the time of a
real Flink restore of a fixture checkpoint (tests/support/flink_harness.py, needs FLINK_VENV_120).
Prints the numbers; not a test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.synth import TRAILER, key_group_range  # noqa: E402
from ckptctl.metadata import write_metadata  # noqa: E402
from ckptctl.metadata.checkpoint import CheckpointMetadata
from ckptctl.metadata.handles import FileHandle, IncrementalHandle, LocalFile, RelativeFileHandle
from ckptctl.metadata.operators import OperatorState, SubtaskState
from ckptctl.verify import SST_MAGIC  # noqa: E402

JOB = "0123456789abcdef0123456789abcdef"
FOOTER = SST_MAGIC.to_bytes(8, "little")


def build(root: str, refs: int, write) -> str:
    """A chk-1 with ~``refs`` file references under ``root`` (a URI prefix); ``write(uri, bytes)``."""
    operators, subtasks = 4, 128
    per_subtask = max(1, refs // (operators * subtasks) - 3)
    job = f"{root}/{JOB}"
    rng = uuid.UUID(int=7)
    ops = []
    for o in range(operators):
        subs = []
        for i in range(subtasks):
            shared = []
            for f in range(per_subtask):
                uri = f"{job}/shared/{uuid.uuid5(rng, f'{o}-{i}-{f}')}"
                body = os.urandom(32 + (f % 64)) + FOOTER
                write(uri, body)
                shared.append(LocalFile(f"{f + 10:06d}.sst", FileHandle(uri, len(body))))
            private = []
            for name in ("MANIFEST-000004", "OPTIONS-000007"):
                uri = f"{job}/shared/{uuid.uuid5(rng, f'{o}-{i}-{name}')}"
                body = os.urandom(40)
                write(uri, body)
                private.append(LocalFile(name, FileHandle(uri, len(body))))
            meta = str(uuid.uuid5(rng, f"meta-{o}-{i}"))
            write(f"{job}/chk-1/{meta}", b"m" * 100)
            handle = IncrementalHandle(
                11, 1, str(uuid.uuid5(rng, f"b{o}-{i}")), key_group_range(4096, subtasks, i), 1 << 20,
                RelativeFileHandle(meta, 100), tuple(shared), tuple(private), str(uuid.uuid5(rng, f"id{o}-{i}")),
            )  # fmt: skip
            subs.append(SubtaskState(i, False, managed_keyed=handle))
        ops.append(OperatorState(uuid.uuid5(rng, f"op{o}").hex, subtasks, 4096, None, tuple(subs)))
    md = CheckpointMetadata(4, 1, (), tuple(ops), TRAILER, None)
    write(f"{job}/chk-1/_metadata", write_metadata(md))
    return f"{job}/chk-1"


def timed_verify(storage, chk: str, engine: str, master: str = "local[2]") -> tuple[float, dict]:
    from ckptctl.checkpoint.loading import load_checkpoint
    from ckptctl.verify import verify

    t = time.perf_counter()
    ck = load_checkpoint(storage, chk)
    result = verify(storage, [ck], engine=engine, master=master)
    elapsed = time.perf_counter() - t
    assert result.ok, result.problems[:3]
    return elapsed, result.counts


def report(label: str, elapsed: float, counts: dict) -> None:
    print(
        f"  {label:<34} {elapsed:7.2f} s  {counts['files'] / elapsed:10,.0f} files/s "
        f"({counts['references']:,} references, {counts['files']:,} files)"
    )


def bench_local(refs: int) -> None:
    from ckptctl.engine.spark import spark_session
    from ckptctl.storage import Storage

    tmp = tempfile.mkdtemp(prefix="ckptctl-verify-bench-")
    try:

        def write(uri: str, data: bytes) -> None:
            path = uri[len("file:") :]
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)

        t = time.perf_counter()
        chk = build("file:" + tmp, refs, write)
        print(f"local disk: built {refs:,}-reference checkpoint in {time.perf_counter() - t:.1f} s")
        storage = Storage()
        report("--engine local (16 threads)", *timed_verify(storage, chk, "local"))
        t = time.perf_counter()
        spark_session("local[2]")
        print(f"  Spark local[2] start-up             {time.perf_counter() - t:7.2f} s (once per process)")
        report("--engine spark --master local[2]", *timed_verify(storage, chk, "spark"))
        report("  again (warm Python workers)", *timed_verify(storage, chk, "spark"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def bench_s3(refs: int) -> None:
    import boto3

    from ckptctl.storage import Storage, StorageOptions

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    endpoint = f"http://127.0.0.1:{port}"
    os.environ.update(
        AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1"
    )
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        client = boto3.client("s3", endpoint_url=endpoint)
        client.create_bucket(Bucket="bench")

        def write(uri: str, data: bytes) -> None:
            key = uri[len("s3://bench/") :]
            client.put_object(Bucket="bench", Key=key, Body=data)

        t = time.perf_counter()
        chk = build("s3://bench/root", refs, write)
        print(
            f"S3 (moto on loopback): built {refs:,}-reference checkpoint in {time.perf_counter() - t:.1f} s"
        )
        storage = Storage(StorageOptions(s3_endpoint=endpoint))
        report("--engine local (16 threads)", *timed_verify(storage, chk, "local"))
        report("--engine spark --master local[2]", *timed_verify(storage, chk, "spark"))
    finally:
        proc.terminate()
        proc.wait(10)


def bench_flink_restore() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.support.fixture_cases import REPO, manifest
    from tests.support.flink_harness import restore

    if not os.environ.get("FLINK_VENV_120"):
        os.environ["FLINK_VENV_120"] = "/work/flinkenv/v120"
    e = next(e for e in manifest()["entries"] if e["flink_version"] == "1.20.3" and e["scenario"] == "basic")
    root = Path(e["original_root"])
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(REPO / e["data_dir"], root)
    chk = max((p.parent for p in root.rglob("chk-*/_metadata")), key=lambda p: int(p.name.split("-")[1]))
    from ckptctl.storage import Storage

    t, counts = timed_verify(Storage(), "file:" + str(chk), "local")
    report("ckptctl verify (local) of the same", t, counts)
    t = time.perf_counter()
    r = restore("1.20.3", "basic", chk, timeout=90)
    print(
        f"  real Flink 1.20.3 restore of {chk.name}: {time.perf_counter() - t:.1f} s wall "
        f"(ok={r.get('ok')}, status={r.get('status')}, harness seconds={r.get('seconds')})"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--refs", type=int, default=100_000)
    ap.add_argument("--s3-refs", type=int, default=5_000, help="0 to skip the S3 run")
    ap.add_argument("--flink-restore", action="store_true", help="also time a real Flink restore")
    args = ap.parse_args()
    bench_local(args.refs)
    if args.s3_refs:
        bench_s3(args.s3_refs)
    if args.flink_restore:
        print("Flink restore for comparison (fixture 1.20.3/basic, newest checkpoint):")
        bench_flink_restore()


if __name__ == "__main__":
    main()
