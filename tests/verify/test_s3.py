"""``verify`` and ``check`` over a real S3 endpoint (moto server on loopback), Spark executors included.

The SparkSession (and its Python workers) may predate the moto server: the endpoint and the
credentials reach the executors only because verify carries them with the tasks.
"""

from __future__ import annotations

import json

from tests.support.fixture_cases import REPO, manifest
from tests.support.gc_support import ckptctl

MASTER = "local[*]"  # the session the other Spark tests use: another master stops it and starts another


def entry(version: str, scenario: str) -> dict:
    return next(
        e for e in manifest()["entries"] if e["flink_version"] == version and e["scenario"] == scenario
    )


def s3_verify(endpoint: str, *args: str, expect: int = 0) -> dict:
    r = ckptctl("verify", "--json", "--master", MASTER, "--s3-endpoint", endpoint, *args, expect=expect)
    return json.loads(r.stdout)


def test_fixtures_over_s3_are_sound_deep_on_spark(s3_server, s3_fixtures: str) -> None:
    for version, scenario in (("1.20.3", "basic"), ("2.2.0", "filemerging"), ("1.20.3", "maxpar256")):
        e = entry(version, scenario)
        base = f"{s3_fixtures}/{version}/{scenario}"
        report = s3_verify(
            s3_server.endpoint, f"{base}/checkpoints", "--deep", "--rebase", f"{e['original_root']}={base}"
        )
        assert report["ok"], report["problems"][:3]
        c = report["checked"]
        assert (
            c["files"] > 0
            and c["exists"] == c["files"]
            and c["handles"] > 0
            and c["key_groups"] == c["handles"]
        )
        assert all(ck.startswith("s3://") for ck in report["checkpoints"])


def test_damage_over_s3_is_found_and_named(s3_server, s3_fixtures: str) -> None:
    e = entry("2.2.0", "basic")
    bucket = "verify-damage"
    s3_server.create_bucket(bucket)
    fs = s3_server.filesystem()
    data = REPO / e["data_dir"]
    s3_server.put_many(
        {
            f"{bucket}/{p.relative_to(data).as_posix()}": p.read_bytes()
            for p in sorted(data.rglob("*"))
            if p.is_file()
        }
    )
    ssts = sorted(
        {
            r["path"].removeprefix("file:")[len(e["original_root"]) + 1 :]
            for exp in (REPO / e["expected_dir"]).rglob("*.json")
            for r in json.loads(exp.read_text())["references"]
            if (r.get("local_name") or "").endswith(".sst")
        }
    )
    deleted, truncated = ssts[0], ssts[1]
    fs.rm_file(f"{bucket}/{deleted}")
    fs.pipe_file(f"{bucket}/{truncated}", (data / truncated).read_bytes()[:-50])
    rebase = ["--rebase", f"{e['original_root']}=s3://{bucket}"]
    report = s3_verify(s3_server.endpoint, f"s3://{bucket}/checkpoints", "--deep", *rebase, expect=1)
    named = {
        (p["path"], p["check"]) for p in report["problems"] if p["check"] not in ("rocksdb", "key_groups")
    }
    assert named == {
        (f"s3://{bucket}/{deleted}", "exists"),
        (f"s3://{bucket}/{truncated}", "size"),
        (f"s3://{bucket}/{truncated}", "sst_magic"),
    }
    assert any(p["check"] == "rocksdb" for p in report["problems"])
    # the in-process engine agrees
    local = json.loads(
        ckptctl("verify", "--json", "--engine", "local", "--s3-endpoint", s3_server.endpoint,
                f"s3://{bucket}/checkpoints", *rebase, expect=1).stdout
    )  # fmt: skip
    assert {(p["path"], p["check"]) for p in local["problems"]} == named
    # and the CI gate fails, naming the file
    check = json.loads(
        ckptctl("check", "--json", "--s3-endpoint", s3_server.endpoint, f"s3://{bucket}/checkpoints", *rebase,
                expect=1).stdout
    )  # fmt: skip
    assert {(p["path"], p["check"]) for p in check["problems"]} == named


def test_check_over_s3_passes_on_sound_fixture(s3_server, s3_fixtures: str) -> None:
    e = entry("1.20.3", "claim")
    base = f"{s3_fixtures}/1.20.3/claim"
    r = ckptctl("check", "--json", "--s3-endpoint", s3_server.endpoint, f"{base}/checkpoints",
                "--rebase", f"{e['original_root']}={base}")  # fmt: skip
    report = json.loads(r.stdout)
    assert report["ok"] and len(report["checkpoints"]) == 6


def test_verify_on_s3_takes_sizes_from_listings_not_a_head_per_file(
    s3_server, s3_fixtures: str, monkeypatch
) -> None:
    """Issue 23: verify made two requests per file on S3 (a HEAD that repeats what a listing
    knows, then a GET). Sizes now come from one listing per directory; a HEAD only for what no
    listing shows. Measured against the per-file HEADs in the same run (listing switched off)."""
    import ckptctl.verify.run as run
    from tests.support.faulty_proxy import FaultyProxy

    e = entry("2.2.0", "basic")
    root = f"{s3_fixtures}/{e['data_dir'].removeprefix('fixtures/data/')}"
    rebase = ["--rebase", f"{e['original_root']}={root}"]

    def requests_of_verify() -> tuple[int, dict]:
        with FaultyProxy(s3_server.endpoint, fault_rate=0.0) as proxy:
            report = json.loads(ckptctl("verify", root, "--engine", "local", "--json", "--s3-endpoint",
                                        proxy.endpoint, *rebase).stdout)  # fmt: skip
            return proxy.requests, report

    listed, report = requests_of_verify()
    monkeypatch.setattr(run, "LIST_FROM_FILES", 10**9)  # the baseline: a HEAD per file
    per_file, baseline = requests_of_verify()
    c = report["checked"]
    assert report["ok"] and baseline["ok"] and c == baseline["checked"] and c["files"] >= 64
    assert listed <= per_file - 0.8 * c["files"], (listed, per_file, c["files"])
