"""Bucket-scale GC benchmark: `gc plan` from an S3 Inventory of many rows, on Spark and in-process,
against the floor any such plan has to pay, measured in the same run.

    .venv/bin/python bench/bucket_bench.py [--rows 10000000] [--jobs 20] [--checkpoints 2] [--refs 100000]
                                           [--skip-local] [--skip-spark] [--actions] [--runs N] [--workdir DIR]

The bucket (moto on loopback) holds only what discovery reads: each job's ``_metadata`` files,
written with ckptctl's writer (bench/synth.py shape: shared SSTs drawn from a pool, three private
files and a meta file per handle). The S3 Inventory report (Parquet, one data file per million
rows) lists every file those checkpoints reference plus orphans in ``shared/`` up to ``--rows``,
all a week old. gc plan never reads the data files themselves, so they need not exist.

Measured, each in a fresh process (wall time incl. the JVM start where there is one; peak RSS of
the Python driver and, separately, of its JVM):

- floor: a plain Spark job over the same two tables -- read the report's data files, keep the
  latest non-delete-marker rows under the root, left-anti-join them with the referenced keys,
  write the result as Parquet. Any Spark planner does at least this.
- ``gc plan --engine spark --inventory ...`` (when the CLI has the option)
- ``gc plan --engine local --inventory ...`` (the in-process planner; skip it above ~3M rows
  on a small machine: it holds the universe in memory)

``--actions`` also prints where a Spark plan's time went: every Spark action (collect, count,
write, ...) timed and attributed to the line of ckptctl that asked for it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

BUCKET, DEST, ROOT = "bench", "bench-inventory", "ckpt"
WEEK = 7 * 86400
ROWS_PER_FILE = 1_000_000

# Runs one command in a child process and reports its peak RSS: the Python driver's and its JVM's
# (a descendant: Spark's gateway, read before Spark stops) from /proc VmHWM. Not RUSAGE_SELF: its
# maxrss survives fork and exec, so a child would report this (large) bench process's peak.
PRELUDE = f"""
import json, sys, time
sys.path.insert(0, {str(HERE.parent)!r})
from bench.bucket_bench import jvm_peak_mib, vm_hwm_mib
"""
CLI_DRIVER = (
    PRELUDE
    + r"""
start = time.perf_counter()
from bench.bucket_bench import SparkActions
actions = SparkActions()
from ckptctl.cli import main
try:
    main(sys.argv[1:])
except SystemExit as e:
    rc = e.code or 0
else:
    rc = 0
jvm = jvm_peak_mib()
from ckptctl.engine.spark import stop_spark
stop_spark()
print(json.dumps({"wall": time.perf_counter() - start, "rc": rc,
                  "driver_rss_mib": vm_hwm_mib("self"),
                  "jvm_rss_mib": jvm, "actions": actions.table()}), file=sys.stderr)
"""
)

ACTIONS = {  # the DataFrame and RDD methods that run Spark jobs and return to the driver
    "DataFrame": ("collect", "count", "toLocalIterator", "toArrow", "localCheckpoint"),
    "RDD": ("collect", "count", "fold", "reduce", "countByValue", "take", "toLocalIterator"),
    "DataFrameWriter": ("parquet",),
}


class SparkActions:
    """Where a Spark run's time goes: every action (a job or more) timed and attributed to the
    line of ckptctl that asked for it (outermost action only: ``first()`` is one, not three)."""

    def __init__(self) -> None:
        self.sites: dict[str, list[float]] = {}
        self.depth = 0
        try:
            from pyspark import RDD
            from pyspark.sql import DataFrameWriter
            from pyspark.sql.classic.dataframe import DataFrame  # what a session's frames are
        except ImportError:
            return
        for cls in (DataFrame, RDD, DataFrameWriter):
            for name in ACTIONS[cls.__name__]:
                setattr(cls, name, self.timed(getattr(cls, name), f"{cls.__name__}.{name}"))

    def timed(self, method, label: str):
        import functools
        import traceback

        @functools.wraps(method)
        def run(*args, **kwargs):
            if self.depth:
                return method(*args, **kwargs)
            frames = [f for f in traceback.extract_stack()[:-1] if "/ckptctl/" in f.filename]
            # two lines of ckptctl: a helper's callers (materialise_rows, on_executors) told apart
            site = " <- ".join(
                [label, *(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in frames[:-3:-1])]
            )
            self.depth += 1
            t = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.depth -= 1
                self.sites.setdefault(site, []).append(time.perf_counter() - t)

        return run

    def table(self) -> list[tuple[str, int, float]]:
        return sorted(((s, len(t), sum(t)) for s, t in self.sites.items()), key=lambda r: -r[2])


FLOOR_DRIVER = (
    PRELUDE
    + r"""
start = time.perf_counter()
inventory, live, out, prefix = sys.argv[1:5]
from ckptctl.engine.spark import spark_session, stop_spark
from pyspark.sql import functions as F
spark = spark_session("local[*]")
universe = (spark.read.parquet(inventory)
            .where(F.col("is_latest") & ~F.col("is_delete_marker") & F.col("key").startswith(prefix))
            .select("key", "size", "last_modified_date"))
referenced = spark.read.parquet(live)
orphans = universe.join(referenced, "key", "left_anti")
orphans.write.mode("overwrite").parquet(out)
n = spark.read.parquet(out).count()
jvm = jvm_peak_mib()
stop_spark()
print(json.dumps({"wall": time.perf_counter() - start, "rc": 0, "orphans": n,
                  "driver_rss_mib": vm_hwm_mib("self"),
                  "jvm_rss_mib": jvm}), file=sys.stderr)
"""
)


def vm_hwm_mib(pid: str) -> float:
    """A process's peak resident memory (VmHWM) in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def jvm_peak_mib() -> float:
    """Peak RSS (VmHWM) of this process's descendant JVMs, read before they are stopped."""
    kids: dict[int, list[int]] = {}
    peak = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            kids.setdefault(int(stat[1]), []).append(int(pid))
        except OSError:
            pass
    todo = [os.getpid()]
    while todo:
        for child in kids.get(todo.pop(), []):
            todo.append(child)
            try:
                if Path(f"/proc/{child}/comm").read_text().strip() == "java":
                    peak = max(peak, vm_hwm_mib(str(child)))
            except OSError:
                pass
    return peak


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (from /proc; 0 where there is none)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(
    script: str, args: list[str], env: dict[str, str], log: Path | None = None, server: int | None = None
) -> dict:
    """``script`` in a child process: its JSON measurements (the last line of its stderr), its whole
    stderr in ``log`` when given (a failed Spark run's JVM error is above the last lines), and the
    CPU seconds the S3 server (process ``server``) spent meanwhile: moto runs on the same cores,
    so its share of a wall time is the test's, not ckptctl's (a real S3 uses none of them)."""
    before = cpu_seconds(server) if server else 0.0
    proc = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env)
    if log is not None:
        log.write_text(proc.stderr)
    last = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "{}"
    try:
        result = json.loads(last)
    except ValueError:
        result = {"rc": proc.returncode, "error": proc.stderr[-800:]}
    if result.get("rc") not in (0, 1):  # the command's own one-line error, before the measurements
        result.setdefault("error", "\n".join(proc.stderr.strip().splitlines()[-6:-1]))
    result["stdout"] = proc.stdout
    if server:
        result["server_cpu"] = cpu_seconds(server) - before
    return result


def checkpoints(args) -> tuple[dict[str, bytes], list[str]]:
    """(_metadata key -> bytes, every key the checkpoints reference)."""
    from bench.synth import synthetic_checkpoint
    from ckptctl.metadata import write_metadata

    metadata: dict[str, bytes] = {}
    live: set[str] = set()
    subtasks, operators = 64, 8
    per_subtask = max(1, args.refs // (operators * subtasks) - 4)
    for j in range(args.jobs):
        job = uuid.uuid5(uuid.NAMESPACE_OID, f"job{j}").hex
        job_dir = f"s3://{BUCKET}/{ROOT}/{job}"
        pool = [f"{job_dir}/shared/{uuid.uuid5(uuid.NAMESPACE_OID, f'{j}-{i}')}" for i in range(args.refs)]
        step = len(pool) // 10
        for k in range(args.checkpoints):
            cid = 100 + k
            md = synthetic_checkpoint(
                job_dir, checkpoint_id=cid, operators=operators, subtasks=subtasks, files_per_subtask=per_subtask,
                shared_pool=pool[k * step :] + pool[: k * step], seed=j,
            )  # fmt: skip
            metadata[f"{ROOT}/{job}/chk-{cid}/_metadata"] = write_metadata(md)
            for op in md.operators:
                for s in op.subtasks:
                    h = s.managed_keyed
                    live.update(f.handle.path for f in (*h.shared, *h.private))
                    live.add(f"{job_dir}/chk-{cid}/{h.meta.relative_path}")
    keys = sorted(p[len(f"s3://{BUCKET}/") :] for p in live)
    return metadata, keys


def write_report(args, workdir: Path, live: list[str], metadata_keys: list[str]) -> tuple[list[Path], Path]:
    """Parquet data files of ``--rows`` rows (the live keys, the _metadata, then orphans) and a
    Parquet table of the live keys; written locally, uploaded by the caller."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    job_ids = pa.array(sorted({k.split("/")[1] for k in metadata_keys}), pa.string())
    inv_dir, live_path = workdir / "inventory", workdir / "live.parquet"
    inv_dir.mkdir(parents=True, exist_ok=True)
    for old in inv_dir.glob("*.parquet"):
        old.unlink()
    pq.write_table(pa.table({"key": pa.array(live, pa.string())}), live_path)
    fixed = live + metadata_keys
    orphans = max(0, args.rows - len(fixed))
    old_ms = int((time.time() - WEEK) * 1000)
    files: list[Path] = []
    written = 0
    part = 0
    while written < len(fixed) + orphans:
        n = min(ROWS_PER_FILE, len(fixed) + orphans - written)
        keys = []
        if written < len(fixed):
            keys = fixed[written : written + n]
        rest = n - len(keys)
        if rest:
            # orphans spread over the jobs' shared/ directories, names made in Arrow (no Python loop)
            first = written + len(keys) - len(fixed)
            idx = pa.array(range(first, first + rest), pa.int64())
            job = pc.take(job_ids, pc.divide(idx, -(-orphans // len(job_ids))))
            names = pc.binary_join_element_wise(
                pa.scalar(f"{ROOT}/"), job, pa.scalar("/shared/orphan-"), pc.cast(idx, pa.string()), ""
            )
            keys = pa.concat_arrays([pa.array(keys, pa.string()), names]) if keys else names
        keys = pa.array(keys, pa.string()) if isinstance(keys, list) else keys
        table = pa.table({
            "bucket": pa.array([BUCKET] * n, pa.string()).dictionary_encode(),
            "key": keys,
            "is_latest": pa.array([True] * n, pa.bool_()),
            "is_delete_marker": pa.array([False] * n, pa.bool_()),
            "size": pa.array([4096] * n, pa.int64()),
            "last_modified_date": pa.array([old_ms] * n, pa.timestamp("ms", tz="UTC")),
        })  # fmt: skip
        path = inv_dir / f"part-{part:04d}.parquet"
        pq.write_table(table.cast(table.schema.set(0, pa.field("bucket", pa.string()))), path)
        files.append(path)
        written += n
        part += 1
    return files, live_path


def upload(endpoint: str, metadata: dict[str, bytes], data_files: list[Path]) -> str:
    """The _metadata into the bucket, the report into the inventory bucket; the manifest's URI."""
    import hashlib

    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    for b in (BUCKET, DEST):
        client.create_bucket(Bucket=b)
    for key, body in metadata.items():
        client.put_object(Bucket=BUCKET, Key=key, Body=body)
    time.sleep(1.5)  # S3 mtimes are whole seconds: the report begins after the last upload
    files = []
    for p in data_files:
        key = f"{BUCKET}/cfg/data/{p.name}"
        client.upload_file(str(p), DEST, key)
        files.append(
            {"key": key, "size": p.stat().st_size, "MD5checksum": hashlib.md5(p.read_bytes()).hexdigest()}
        )
    manifest = {
        "sourceBucket": BUCKET, "destinationBucket": f"arn:aws:s3:::{DEST}", "version": "2016-11-30",
        "creationTimestamp": str(int(time.time() * 1000)), "fileFormat": "Parquet",
        "fileSchema": "message s3.inventory { required binary bucket (STRING); required binary key (STRING); "
        "optional boolean is_latest; optional boolean is_delete_marker; optional int64 size; "
        "optional int64 last_modified_date (TIMESTAMP(MILLIS,true)); }",
        "files": files,
    }  # fmt: skip
    key = f"{BUCKET}/cfg/{time.strftime('%Y-%m-%dT%H-%MZ')}/manifest.json"
    client.put_object(Bucket=DEST, Key=key, Body=json.dumps(manifest).encode())
    return f"s3://{DEST}/{key}"


def plan_header(path: Path) -> dict | None:
    """The plan file's header (everything before its per-file lists), without loading the lists."""
    if not path.exists():
        return None
    with open(path, "rb") as f:
        head = f.read(64 << 20).decode("utf-8", "replace")
    cut = head.find(',\n "candidates": [')
    try:
        return json.loads(head[:cut] + "\n}" if cut >= 0 else head)
    except ValueError:
        return None


def requests_per_object(args, endpoint: str, env: dict[str, str], workdir: Path) -> None:
    """``ls`` and ``verify`` on a bucket of real objects (bench/gc_tree.py shape), through a counting
    proxy: the requests each makes, against the targets (ls: checkpoints + jobs; verify: one per
    1,000 referenced files plus one per _metadata)."""
    from bench.gc_bench import upload_tree
    from bench.gc_tree import JOB, build
    from tests.support.faulty_proxy import FaultyProxy

    local_root = workdir / "listing-src"
    built = build(local_root, args.listing_files, args.checkpoints, args.listing_refs, subtasks=32)
    t = time.time()
    objects = upload_tree(endpoint, local_root, "listing")
    print(f"listing bucket: {objects:,} objects ({built['checkpoints']} checkpoints, 1 job) uploaded in "
          f"{time.time() - t:.0f} s")  # fmt: skip
    newest = max(int(p.name[4:]) for p in (local_root / JOB).glob("chk-*"))
    rows = json.loads(subprocess.run(
        [sys.executable, "-m", "ckptctl", "--json", "refs", f"s3://listing/{JOB}/chk-{newest}", "--s3-endpoint",
         endpoint], capture_output=True, text=True, env=env).stdout or "[]")  # fmt: skip
    paths = {r["path"] for r in rows if r.get("path")}
    referenced = len(paths)
    floor = listing_floor(local_root, "s3://listing/", paths)
    print(f"  verify floor: {floor} listing requests + 1 for the _metadata (any listing: a page holds 1,000 "
          "consecutive keys; the referenced ones interleave with orphans)")  # fmt: skip
    for name, cmd, target in (
        ("ls", ["ls", "s3://listing"], built["checkpoints"] + 1),
        ("verify --engine local", ["verify", f"s3://listing/{JOB}/chk-{newest}", "--engine", "local"],
         -(-(referenced or 0) // 1000) + 1 if referenced else None),
        ("verify --quick", ["verify", f"s3://listing/{JOB}/chk-{newest}", "--engine", "local", "--quick"],
         -(-(referenced or 0) // 1000) + 1 if referenced else None),
    ):  # fmt: skip
        with FaultyProxy(endpoint, fault_rate=0.0) as proxy:
            start = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "ckptctl", "-q", *cmd, "--s3-endpoint", proxy.endpoint],
                                  capture_output=True, text=True, env=env)  # fmt: skip
            wall = time.perf_counter() - start
        verdict = (
            ""
            if target is None
            else f" (target <= {target}: {'met' if proxy.requests <= target else 'MISSED'})"
        )
        print(
            f"  {name:24} {proxy.requests:6,} requests{verdict}  {wall:.1f} s  exit {proc.returncode}"
            + (f"  referenced files {referenced:,}" if name.startswith("verify") and referenced else "")
        )


def listing_floor(local_root: Path, base: str, paths: set[str]) -> int:
    """The fewest ListObjectsV2 requests (1,000 consecutive keys each) that show every referenced
    file of the bucket: per directory, pages that each start at the next referenced key not yet
    shown, or a HEAD per file where that is fewer (what verify's listing does, at best)."""
    by_dir: dict[str, set[str]] = {}
    for p in paths:
        d, _, name = p[len(base) :].rpartition("/")
        by_dir.setdefault(d, set()).add(name)
    total = 0
    for d, names in by_dir.items():
        keys = sorted(e.name for e in os.scandir(local_root / d))
        pages, i = 0, 0
        while i < len(keys):
            if keys[i] in names:
                pages, i = pages + 1, i + 1000
            else:
                i += 1
        total += min(pages, len(names))
    return total


def has_spark_gc() -> bool:
    out = subprocess.run(
        [sys.executable, "-m", "ckptctl", "gc", "plan", "--help"], capture_output=True, text=True
    )
    return "--engine" in out.stdout


def _keep_fastest(results: dict, walls: dict, name: str, r: dict) -> None:
    """``r`` as ``results[name]`` if it is the first or fastest run of ``name``; its wall noted
    (a failed run is said at once: a faster one would hide it)."""
    if "wall" in r:
        walls.setdefault(name, []).append(r["wall"])
    if r.get("rc") not in (0, 1) or "wall" not in r:
        print(f"  {name}: a run failed: {r.get('error', '')[-400:]}")
    was = results.get(name)
    if was is None or ("wall" in r and r["wall"] < was.get("wall", float("inf"))):
        results[name] = r


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--jobs", type=int, default=20)
    ap.add_argument("--checkpoints", type=int, default=2)
    ap.add_argument(
        "--refs", type=int, default=100_000, help="shared files referenced per job and checkpoint"
    )
    ap.add_argument(
        "--listing-files", type=int, default=20_000, help="objects of the ls/verify bucket (0: skip)"
    )
    ap.add_argument("--listing-refs", type=int, default=8_000)
    ap.add_argument("--skip-local", action="store_true")
    ap.add_argument("--skip-spark", action="store_true")
    ap.add_argument(
        "--actions", action="store_true", help="time every Spark action of gc plan, by line of ckptctl"
    )
    ap.add_argument(
        "--runs",
        type=int,
        default=1,
        help="runs of each, taken in turn; the fastest is reported "
        "(the floor's wall varied 17.7-27.3 s between runs on one idle machine)",
    )
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "ckptctl-bucket-bench"))
    args = ap.parse_args()
    from tests.conftest import free_port

    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    moto = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    endpoint = f"http://127.0.0.1:{port}"
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true", "PYTHONHASHSEED": "0"}  # fmt: skip
    os.environ.update(env)
    try:
        time.sleep(2)
        t = time.time()
        metadata, live = checkpoints(args)
        data_files, live_path = write_report(args, workdir, live, sorted(metadata))
        manifest = upload(endpoint, metadata, data_files)
        print(f"bucket: {args.jobs} jobs x {args.checkpoints} checkpoints, {len(live):,} referenced files; "
              f"inventory {args.rows:,} rows in {len(data_files)} Parquet files ({time.time() - t:.0f} s to build)")  # fmt: skip
        results: dict[str, dict] = {}
        walls: dict[str, list[float]] = {}
        plan = ["-q", "gc", "plan", f"s3://{BUCKET}/{ROOT}", "--s3-endpoint", endpoint, "--inventory", manifest,
                "--force", "--margin", "0s"]  # fmt: skip
        engines = has_spark_gc()
        runs = []
        if not args.skip_spark and engines:
            runs.append(("gc plan --engine spark", ["--engine", "spark"], workdir / "plan-spark.json"))
        if not args.skip_local:
            runs.append(
                (
                    "gc plan (in-process)",
                    ["--engine", "local"] if engines else [],
                    workdir / "plan-local.json",
                )
            )
        floor_name = "floor (plain Spark anti-join)"
        for _ in range(args.runs):  # in turn: a drift of the machine weighs on all alike
            r = run(FLOOR_DRIVER, [str(workdir / "inventory"), str(live_path), str(workdir / "floor-out"), f"{ROOT}/"],
                    env)  # fmt: skip
            _keep_fastest(results, walls, floor_name, r)
            for name, extra, out in runs:
                out.unlink(missing_ok=True)
                r = run(
                    CLI_DRIVER, [*plan, *extra, "-o", str(out)], env, out.with_suffix(".stderr"), moto.pid
                )
                r["header"] = plan_header(out)
                _keep_fastest(results, walls, name, r)
        if args.runs > 1:
            print("  walls of every run: " + "; ".join(f"{n}: {', '.join(f'{w:.1f}' for w in ws)} s"
                                                       for n, ws in walls.items()))  # fmt: skip
        base = results[floor_name].get("wall")
        for name, r in results.items():
            if r.get("rc") not in (0, 1) or "wall" not in r:
                print(f"  {name:32} failed: {r.get('error', '')[-400:]}")
                continue
            summary = ""
            if r.get("header"):
                h = r["header"]
                summary = (f"  candidates {h['candidate_files']:,}  live {h['live_files']:,}  "
                           f"refusals {[x['code'] for x in h['refusals']]}")  # fmt: skip
            elif "orphans" in r:
                summary = f"  orphans {r['orphans']:,}"
            ratio = f"{r['wall'] / base:5.2f}x" if base else "   - "
            server = f"   S3 server CPU {r['server_cpu']:5.1f} s" if "server_cpu" in r else ""
            print(f"  {name:32} {r['wall']:7.1f} s  {ratio} floor   driver {r['driver_rss_mib']:6.0f} MiB   "
                  f"JVM {r['jvm_rss_mib']:6.0f} MiB{server}{summary}")  # fmt: skip
            if args.actions and r.get("actions"):
                total = sum(t for _s, _n, t in r["actions"])
                print(f"    {sum(n for _s, n, _t in r['actions'])} Spark actions, {total:.1f} s:")
                for site, n, t in r["actions"]:
                    print(f"    {t:7.1f} s  {n:3}x  {site}")
        if args.listing_files:
            requests_per_object(args, endpoint, env, workdir)
    finally:
        moto.terminate()


if __name__ == "__main__":
    main()
