"""The attack catalogue of issue 9, S3 rows (2, 9, 10, 15), over moto in server mode on loopback.

Hostile ``_metadata`` is a real fixture file decoded with ckptctl's reader, with path fields of real
handles changed in the typed model and re-encoded with ckptctl's writer. Faults and races come
from deterministic proxy rules (tests/support/faulty_proxy.py), never from patching Python calls.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ckptctl.metadata import read_metadata, write_metadata
from ckptctl.metadata.model import FileHandle, SegmentFileHandle
from tests.support.faulty_proxy import (
    FaultyProxy,
    Rule,
    is_clock_request,
    lists_inside,
    response_has_key_inside,
)
from tests.support.fixture_cases import REPO, manifest
from tests.support.gc_support import ckptctl
from tests.test_gc_attacks import candidates, codes, protected, rewrite

VERSION, SCENARIO = "2.2.0", "basic"
GUARDS = ["--older-than", "0s", "--margin", "0s", "--force"]
# one failed storage call: s3fs/botocore already make 5 HTTP attempts per call (measured), so the
# clock call fails once when its first 5 requests fail; ckptctl must then retry the call
ATTEMPTS_PER_CALL = 5


@pytest.fixture(autouse=True)
def s3_env(monkeypatch):
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    for var in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "CKPTCTL_S3_ENDPOINT", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)


def client(endpoint: str):
    import boto3

    return boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1",
        aws_access_key_id="testing", aws_secret_access_key="testing",
    )  # fmt: skip


def exists(s3, uri: str) -> bool:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    try:
        s3.head_object(Bucket=bucket, Key=key)
        return True
    except s3.exceptions.ClientError:
        return False


def all_keys(s3, bucket: str) -> dict[str, str]:
    out = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        out.update({o["Key"]: o["ETag"] for o in page.get("Contents", ())})
    return out


def fixture_entry() -> dict:
    return next(
        e for e in manifest()["entries"] if e["flink_version"] == VERSION and e["scenario"] == SCENARIO
    )


def checkpoint_metadata() -> list[Path]:
    """The scenario's _metadata files, oldest checkpoint first."""
    data = REPO / fixture_entry()["data_dir"]
    return sorted(data.rglob("_metadata"), key=lambda p: int(p.parent.name[4:]))


def shared_refs(meta: Path, bucket: str) -> list[str]:
    """The shared files a _metadata references, as ``s3://bucket/...`` once uploaded there."""
    original = "file:" + fixture_entry()["original_root"]
    found: list[str] = []

    def look(h):
        if type(h) is FileHandle and "/shared/" in h.path:
            path = f"s3://{bucket}" + h.path[len(original) :]
            if path not in found:
                found.append(path)
        return None

    rewrite(read_metadata(meta.read_bytes(), str(meta)), look)
    return found


def s3_metadata(meta: Path, bucket: str, spellings: dict[str, str] | None = None) -> bytes:
    """A real _metadata with every absolute path moved to ``s3://bucket`` in the typed model
    (``spellings``: such an ``s3://`` path -> the spelling to write instead), re-encoded."""
    original = "file:" + fixture_entry()["original_root"]

    def to_s3(h):
        if type(h) in (FileHandle, SegmentFileHandle) and h.path.startswith(original + "/"):
            path = f"s3://{bucket}" + h.path[len(original) :]
            return h._replace(path=(spellings or {}).get(path, path))
        return None

    return write_metadata(rewrite(read_metadata(meta.read_bytes(), str(meta)), to_s3))


class Upload:
    """A fixture scenario in a bucket, its absolute paths rewritten to ``s3://bucket/...`` in the
    typed model (as if the job had written there), so no --rebase is needed."""

    def __init__(self, s3_server, bucket: str, hostile: dict[str, str] | None = None, extra=None) -> None:
        """``hostile``: written path (``s3://…`` after the prefix change) -> the spelling to write
        instead, in the newest checkpoint; ``extra``: key -> bytes uploaded with the data files."""
        self.entry = fixture_entry()
        self.bucket = bucket
        self.s3 = client(s3_server.endpoint)
        s3_server.create_bucket(bucket)
        data = REPO / self.entry["data_dir"]
        files = sorted(p for p in data.rglob("*") if p.is_file())
        (self.job,) = self.entry["job_ids"]
        metas = checkpoint_metadata()
        self.newest = metas[-1]
        for p in files:
            if p.name != "_metadata":
                self.put(p.relative_to(data).as_posix(), p.read_bytes())
        for key, body in (extra or {}).items():
            self.put(key, body)
        time.sleep(1.2)  # S3 mtimes have one-second resolution: every _metadata is newer
        for meta in metas:
            body = s3_metadata(meta, bucket, hostile if meta == self.newest else None)
            self.put(meta.relative_to(data).as_posix(), body)
        time.sleep(1.2)
        self.referenced = set()
        for exp in (REPO / self.entry["expected_dir"]).rglob("*.json"):
            for r in json.loads(exp.read_text())["references"]:
                rel = r["path"].removeprefix("file:")[len(self.entry["original_root"]) :]
                self.referenced.add(f"s3://{bucket}{rel}")

    def put(self, key: str, body: bytes) -> None:
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=body)

    @property
    def root(self) -> str:
        return f"s3://{self.bucket}/checkpoints"

    def uri(self, rel: str) -> str:
        return f"s3://{self.bucket}/{rel}"


def run_plan(endpoint: str, root: str, *extra: str, out: Path | None = None) -> tuple[int, dict]:
    """(exit code, plan JSON) of ``gc plan`` over S3 with guards that make every old orphan go."""
    args = ["gc", "plan", root, "--s3-endpoint", endpoint, *GUARDS, *extra, "--json"]
    if out is not None:
        args += ["-o", str(out)]
    result = ckptctl(*args, expect=None)
    assert result.exit_code in (0, 1), result.stderr
    return result.exit_code, json.loads(result.stdout)


def plan(endpoint: str, root: str, *extra: str, expect: int = 0, out: Path | None = None) -> dict:
    code, data = run_plan(endpoint, root, *extra, out=out)
    assert code == expect, data.get("refusals")
    return data


# ---------------------------------------------------------------------------------------------
# row 2: S3 references with //, /./ and /../ are the same objects as their normal form


def test_row02_s3_paths_are_normalised_and_abnormal_keys_kept(s3_server, tmp_path: Path) -> None:
    bucket = "attack-row2"
    entry_job = fixture_entry()["job_ids"][0]
    job = f"s3://{bucket}/checkpoints/{entry_job}"
    spell = {
        "o1": f"{job}/shared/sub/../o1",
        "o2": f"s3://{bucket}/checkpoints//{entry_job}/shared/o2",
        "o3": f"{job}/./shared/o3",
        "o7": f"{job}/shared//o7",
    }
    # the newest checkpoint's first shared files get those spellings; a copy of each original
    # object lies at the normal form of the hostile path, so that object is the live one
    data = REPO / fixture_entry()["data_dir"]
    originals = shared_refs(checkpoint_metadata()[-1], bucket)[: len(spell)]
    assert len(originals) == len(spell)
    hostile = dict(zip(originals, spell.values(), strict=True))
    extra = {
        f"checkpoints/{entry_job}/shared/{name}": (data / path[len(f"s3://{bucket}/") :]).read_bytes()
        for path, name in zip(originals, spell, strict=True)
    }
    abnormal = f"checkpoints/{entry_job}/shared//o8"  # a listed key that is not in normal form
    extra[abnormal] = b"abnormal key, unreferenced"
    up = Upload(s3_server, bucket, hostile, extra)
    live_copies = {up.uri(k) for k in extra if k != abnormal}

    plan_file = tmp_path / "plan.json"
    p = plan(s3_server.endpoint, up.root, out=plan_file)
    assert not p["blocked"] and not codes(p)
    assert not live_copies & candidates(p), "a hostile spelling of a live object made it a candidate"
    assert up.uri(abnormal) not in candidates(p)
    assert protected(p).get(up.uri(abnormal)) == "abnormal-path"
    ckptctl("gc", "apply", str(plan_file), "--yes", "--s3-endpoint", s3_server.endpoint)
    for uri in live_copies | {up.uri(abnormal)}:
        assert exists(up.s3, uri), f"deleted: {uri}"
    # the four originals were re-spelled in the newest checkpoint: unless an older retained
    # checkpoint references one too, it is unreferenced now and may rightly go
    for uri in up.referenced - set(originals):
        assert exists(up.s3, uri), f"live object deleted: {uri}"


# ---------------------------------------------------------------------------------------------
# row 9: the request that reads the storage clock fails


def test_row09_clock_request_failing_once_is_retried(s3_server) -> None:
    up = Upload(s3_server, "attack-row9-once")
    rule = Rule(is_clock_request, fail=ATTEMPTS_PER_CALL)
    with FaultyProxy(s3_server.endpoint, fault_rate=0.0, rules=[rule]) as proxy:
        p = plan(proxy.endpoint, up.root)
    assert rule.failed == ATTEMPTS_PER_CALL, "the clock request must have failed"
    assert "S3" in p["now_source"] and "local" not in p["now_source"].lower()
    assert "clock-unknown" not in codes(p)


def test_row09_unknown_clock_blocks_unless_local_clock_is_chosen(s3_server, tmp_path: Path) -> None:
    up = Upload(s3_server, "attack-row9-never")
    before = all_keys(up.s3, up.bucket)
    rule = Rule(is_clock_request, fail=10**9)
    with FaultyProxy(s3_server.endpoint, fault_rate=0.0, rules=[rule]) as proxy:
        plan_file = tmp_path / "plan.json"
        code, p = run_plan(proxy.endpoint, up.root, out=plan_file)
        assert rule.failed >= ATTEMPTS_PER_CALL
        assert code == 1 and p["blocked"] and "clock-unknown" in codes(p)
        result = ckptctl("gc", "apply", str(plan_file), "--yes", "--s3-endpoint", proxy.endpoint, expect=None)
        assert result.exit_code == 1
        assert all_keys(up.s3, up.bucket) == before, "a plan without a storage clock deletes nothing"
        chosen = plan(proxy.endpoint, up.root, "--clock", "local")
    assert "clock-unknown" not in codes(chosen) and not chosen["blocked"]
    assert "local" in chosen["now_source"].lower()


# ---------------------------------------------------------------------------------------------
# row 10: a checkpoint completes while shared/ is listed


def test_row10_checkpoint_completing_during_listing_blocks(s3_server, tmp_path: Path) -> None:
    up = Upload(s3_server, "attack-row10")
    newest_key = f"checkpoints/{up.job}/{up.newest.parent.name}/_metadata"
    body = up.s3.get_object(Bucket=up.bucket, Key=newest_key)["Body"].read()
    completing = f"checkpoints/{up.job}/chk-999/_metadata"
    uploader = client(s3_server.endpoint)  # straight to moto, not through the proxy

    def complete_checkpoint() -> None:
        uploader.put_object(Bucket=up.bucket, Key=completing, Body=body)

    rule = Rule(
        lists_inside("shared"), before=complete_checkpoint, after_response=response_has_key_inside("shared")
    )
    with FaultyProxy(s3_server.endpoint, fault_rate=0.0, rules=[rule]) as proxy:
        plan_file = tmp_path / "plan.json"
        code, p = run_plan(proxy.endpoint, up.root, out=plan_file)
    assert rule.fired, "the checkpoint must have completed during the listing"
    assert code == 1 and p["blocked"] and "checkpoints-changed" in codes(p)
    before = all_keys(up.s3, up.bucket)
    result = ckptctl("gc", "apply", str(plan_file), "--yes", "--s3-endpoint", s3_server.endpoint, expect=None)
    assert result.exit_code == 1
    assert all_keys(up.s3, up.bucket) == before


# ---------------------------------------------------------------------------------------------
# row 15: apply uses the endpoint the plan was made with


def test_row15_apply_uses_the_plans_endpoint(s3_server, tmp_path: Path) -> None:
    job = fixture_entry()["job_ids"][0]
    planted = {f"checkpoints/{job}/shared/orphan-{i}": b"o" * 10 for i in range(3)}
    up = Upload(s3_server, "attack-row15", extra=planted)
    orphans = {up.uri(k) for k in planted}
    plan_file = tmp_path / "plan.json"
    p = plan(s3_server.endpoint, up.root, out=plan_file)
    assert orphans <= candidates(p)
    assert p["storage"]["s3_endpoint"] == s3_server.endpoint

    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AWS_ENDPOINT_URL") and k != "CKPTCTL_S3_ENDPOINT" and "PROXY" not in k.upper()
    }
    closed = socket_port_nobody_listens_on()
    env.update(
        AWS_EC2_METADATA_DISABLED="true", AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1", AWS_CONFIG_FILE=str(tmp_path / "none"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
        # a request that misses the plan's endpoint must not leave this machine: it goes to a
        # closed loopback port instead of the real AWS
        HTTP_PROXY=f"http://127.0.0.1:{closed}", HTTPS_PROXY=f"http://127.0.0.1:{closed}",
        NO_PROXY="127.0.0.1,localhost", AWS_RETRY_MODE="standard", AWS_MAX_ATTEMPTS="2",
    )  # fmt: skip
    exe = str(Path(sys.executable).parent / "ckptctl")
    try:
        done = subprocess.run(
            [exe, "gc", "apply", str(plan_file), "--yes", "--json"],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail("gc apply without --s3-endpoint hung instead of using the plan's endpoint")
    assert done.returncode == 0, done.stderr
    assert {d["path"] for d in json.loads(done.stdout)["deleted"]} >= orphans
    for uri in orphans:
        assert not exists(up.s3, uri)
    for uri in up.referenced:
        assert exists(up.s3, uri)


def socket_port_nobody_listens_on() -> int:
    from tests.conftest import free_port

    return free_port()


# ---------------------------------------------------------------------------------------------
# row 14 on S3: a stray _metadata inside shared/ is just a file there (the second, pruned listing
# of _metadata keys skips shared/, so it must not count as a checkpoint that appeared)


def test_row14_s3_stray_metadata_in_shared_is_just_a_file(s3_server, tmp_path: Path) -> None:
    job = fixture_entry()["job_ids"][0]
    stray = f"checkpoints/{job}/shared/_metadata"
    bucket = "attack-row14"
    up = Upload(s3_server, bucket, extra={stray: s3_metadata(checkpoint_metadata()[0], bucket)})
    plan_file = tmp_path / "plan.json"
    p = plan(s3_server.endpoint, up.root, out=plan_file)
    assert not p["blocked"] and not codes(p)
    # Flink never writes a _metadata into shared/: not a Flink file, so kept and said why
    assert up.uri(stray) not in candidates(p)
    assert protected(p).get(up.uri(stray)) == "not-flink-file"
    ckptctl("gc", "apply", str(plan_file), "--yes", "--s3-endpoint", s3_server.endpoint)
    assert exists(up.s3, up.uri(stray))
    for uri in up.referenced:
        assert exists(up.s3, uri), f"live object deleted: {uri}"
