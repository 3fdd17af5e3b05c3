"""gc over a real S3 endpoint (moto server on loopback), also through injected throttling and 5xx."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.support.faulty_proxy import FaultyProxy
from tests.support.fixture_cases import REPO, manifest
from tests.support.gc_support import ckptctl

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
    for rel in planted:
        fs.pipe_file(f"{bucket}/{rel}", b"orphan bytes")
    for p in files:
        if p.name != "_metadata":
            fs.pipe_file(f"{bucket}/{p.relative_to(data).as_posix()}", p.read_bytes())
    time.sleep(1.2)  # S3 mtimes have one-second resolution
    for p in files:
        if p.name == "_metadata":
            fs.pipe_file(f"{bucket}/{p.relative_to(data).as_posix()}", p.read_bytes())
    time.sleep(1.2)
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


@pytest.mark.parametrize("faults", [False, True], ids=["clean", "throttled-and-5xx"])
def test_gc_plan_and_apply_over_s3(s3_server, tmp_path: Path, faults: bool) -> None:
    bucket = f"gc-{'faulty' if faults else 'clean'}"
    up = upload_scenario(s3_server, bucket)
    proxy = FaultyProxy(s3_server.endpoint, fault_rate=0.3 if faults else 0.0)
    with proxy:
        args = gc_args(bucket, up["entry"], proxy.endpoint)
        plan_file = tmp_path / "plan.json"
        plan = json.loads(ckptctl("gc", "plan", *args, "--json", "-o", str(plan_file)).stdout)
        assert plan["now_source"] == "S3 Date header"
        assert {c["path"] for c in plan["candidates"]} == up["orphans"]
        assert not {c["path"] for c in plan["candidates"]} & up["referenced"]
        result = json.loads(
            ckptctl("gc", "apply", str(plan_file), "--yes", "--json", "--s3-endpoint", proxy.endpoint).stdout
        )
    assert {d["path"] for d in result["deleted"]} == up["orphans"] and not result["failed"]
    for uri in up["orphans"]:
        assert not exists(up["fs"], uri)
    for uri in up["referenced"]:
        assert exists(up["fs"], uri), f"live object deleted: {uri}"
    if faults:
        assert proxy.faults >= 5, "the proxy must actually have injected failures"


def test_s3_sibling_bucket_prefix(s3_server, tmp_path: Path) -> None:
    """s3://b/root must not list s3://b/root-other/..."""
    bucket = "gc-sibling"
    up = upload_scenario(s3_server, bucket)
    up["fs"].pipe_file(f"{bucket}/checkpoints-old/{'ab' * 16}/shared/x", b"not ours")
    args = gc_args(bucket, up["entry"], s3_server.endpoint)
    plan = json.loads(ckptctl("gc", "plan", *args, "--json").stdout)
    assert "checkpoints-old" not in json.dumps(plan)
