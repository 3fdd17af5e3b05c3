"""Shared by the tests of ``gc apply`` on Spark executors: a proxy that logs every request, a
fixture bucket with planted orphans, plans of it."""

from __future__ import annotations

import json
from pathlib import Path

from ckptctl.checkpoint.rebase import Rebase
from ckptctl.gc import GcOptions, build_plan
from ckptctl.storage import Storage, StorageOptions
from tests.support.faulty_proxy import FaultyProxy, query
from tests.support.s3_clock import next_second
from tests.support.s3_copied import upload_scenario


class CountingProxy(FaultyProxy):
    """The faulty proxy, also keeping (method, path) of every request it answers or forwards."""

    def __init__(self, upstream: str, **kwargs) -> None:
        super().__init__(upstream, **{"fault_rate": 0.0, **kwargs})
        self.log: list[tuple[str, str]] = []

    def decide(self, method: str, path: str):
        self.log.append((method, path))
        return super().decide(method, path)

    def deletes(self) -> int:
        return sum(1 for m, p in self.log if m == "POST" and "delete" in query(p))

    def lists(self) -> int:
        return sum(1 for m, p in self.log if m == "GET" and query(p).get("list-type") == "2")


def is_delete(method: str, path: str) -> bool:
    return method == "POST" and "delete" in query(path)


def rows(plan) -> list[tuple]:
    return [(c.path, c.size, c.mtime, str(c.reason)) for c in plan.candidates]


def manifest_records(manifest_dir: Path) -> list[dict]:
    out = []
    for f in sorted(manifest_dir.glob("batch-*.jsonl")):
        out += [json.loads(line) for line in f.read_text().splitlines()]
    return out


def objects(up: dict, bucket: str) -> set[str]:
    up["fs"].invalidate_cache()
    return {"s3://" + k for k in up["fs"].find(bucket)}


def bulk_bucket(s3_server, bucket: str, per_dir: dict[str, int], extra: list[str] = ()) -> dict:
    """The fixture scenario plus planted orphans (``per_dir``: directory below the job -> count,
    and the ``extra`` names in each), its ``_metadata`` put again afterwards so that they stay the
    newest objects of the job."""
    up = upload_scenario(s3_server, bucket)
    fs, data = up["fs"], Path(__file__).resolve().parents[2] / up["entry"]["data_dir"]
    job = next((data / "checkpoints").iterdir()).name
    fs.pipe({
        f"{bucket}/checkpoints/{job}/{d}/{name}": b"x" * (i % 7 + 1)
        for d, n in per_dir.items() for i, name in enumerate([f"bulk-{i:04d}" for i in range(n)] + list(extra))
    })  # fmt: skip
    next_second()  # S3 mtimes have one-second resolution
    for meta in data.rglob("_metadata"):
        fs.pipe_file(f"{bucket}/{meta.relative_to(data).as_posix()}", meta.read_bytes())
    next_second()
    up["job"] = job
    return up


def s3_plan(up: dict, bucket: str, endpoint: str):
    options = GcOptions(
        (f"s3://{bucket}/checkpoints",), rebase=Rebase.of([(up["entry"]["original_root"], f"s3://{bucket}")]),
        older_than=0.0, margin=0.0, force=True,
    )  # fmt: skip
    plan = build_plan(Storage(StorageOptions.from_env(endpoint)), options)
    assert not plan.refusals, plan.refusals
    return plan
