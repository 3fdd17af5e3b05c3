"""A real fixture scenario copied as it is into a moto bucket, planted orphans included, and the
``gc plan`` arguments that reach it (``--rebase`` from where Flink wrote it)."""

from __future__ import annotations

import json

from tests.support.fixture_cases import REPO, manifest
from tests.support.s3_clock import next_second

VERSION, SCENARIO = "2.2.0", "basic"


def upload_scenario(s3_server, bucket: str) -> dict:
    """Upload a fixture scenario plus planted orphans; _metadata last so it is the newest object."""
    entry = next(
        e for e in manifest()["entries"] if e["flink_version"] == VERSION and e["scenario"] == SCENARIO
    )
    s3_server.create_bucket(bucket)
    fs = s3_server.filesystem()
    data = REPO / entry["data_dir"]
    files = sorted(p for p in data.rglob("*") if p.is_file())
    job = next((data / "checkpoints").iterdir()).name
    planted = [f"checkpoints/{job}/shared/planted-{i}" for i in range(5)] + [
        f"checkpoints/{job}/chk-77/aborted"
    ]
    s3_server.put_many(
        {f"{bucket}/{rel}": b"orphan bytes" for rel in planted}  # uploaded side by side
        | {
            f"{bucket}/{p.relative_to(data).as_posix()}": p.read_bytes()
            for p in files
            if p.name != "_metadata"
        }
    )
    next_second()  # S3 mtimes have one-second resolution
    s3_server.put_many(
        {f"{bucket}/{p.relative_to(data).as_posix()}": p.read_bytes() for p in files if p.name == "_metadata"}
    )
    next_second()
    referenced = set()
    for exp in (REPO / entry["expected_dir"]).rglob("*.json"):
        for r in json.loads(exp.read_text())["references"]:
            referenced.add(f"s3://{bucket}" + r["path"].removeprefix("file:")[len(entry["original_root"]) :])
    orphans = {f"s3://{bucket}/{rel}" for rel in entry["unreferenced_files"]} | {
        f"s3://{bucket}/{r}" for r in planted
    }
    return {"entry": entry, "referenced": referenced, "orphans": orphans, "fs": fs}


def gc_args(bucket: str, entry: dict, endpoint: str) -> list[str]:
    return [
        f"s3://{bucket}/checkpoints", "--s3-endpoint", endpoint, "--rebase", f"{entry['original_root']}=s3://{bucket}",
        "--older-than", "0s", "--margin", "0s", "--force",
    ]  # fmt: skip


def exists(fs, uri: str) -> bool:
    fs.invalidate_cache()
    return fs.exists(uri[len("s3://") :])
