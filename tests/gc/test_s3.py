"""gc over a real S3 endpoint (moto server on loopback), also through injected throttling and 5xx."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.faulty_proxy import FaultyProxy
from tests.support.gc_support import ckptctl
from tests.support.s3_copied import exists, gc_args, upload_scenario


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
