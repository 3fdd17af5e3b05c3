"""A real fixture scenario uploaded to a moto bucket with its absolute paths moved to ``s3://bucket`` in
the typed model, and ``gc plan`` over it: the setting of the gc tests on S3.

Faults and races come from deterministic proxy rules (tests/support/faulty_proxy.py), never from
patching Python calls."""

from __future__ import annotations

import json
from pathlib import Path

from ckptctl.metadata import read_metadata, write_metadata
from ckptctl.metadata.handles import FileHandle, SegmentFileHandle
from tests.support.fixture_cases import REPO, manifest
from tests.support.gc_support import ckptctl
from tests.support.hostile_metadata import rewrite
from tests.support.s3_clock import next_second

VERSION, SCENARIO = "2.2.0", "basic"


GUARDS = ["--older-than", "0s", "--margin", "0s", "--force"]


# one failed storage call: s3fs/botocore already make 5 HTTP attempts per call (measured), so the
# clock call fails once when its first 5 requests fail; ckptctl must then retry the call
ATTEMPTS_PER_CALL = 5


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
        # side by side (one at a time, the wall of every S3 attack test went to these puts)
        s3_server.put_many(
            {
                f"{bucket}/{p.relative_to(data).as_posix()}": p.read_bytes()
                for p in files
                if p.name != "_metadata"
            }
            | {f"{bucket}/{key}": body for key, body in (extra or {}).items()}
        )
        next_second()  # S3 mtimes have one-second resolution: every _metadata is newer
        s3_server.put_many(
            {
                f"{bucket}/{meta.relative_to(data).as_posix()}": s3_metadata(
                    meta, bucket, hostile if meta == self.newest else None
                )
                for meta in metas
            }
        )
        next_second()
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


def socket_port_nobody_listens_on() -> int:
    from tests.conftest import free_port

    return free_port()
