"""gc plan --inventory: an S3 Inventory report (CSV.gz, Parquet, ORC) stands in for the listing of
the roots' files, on a real S3 endpoint (moto server on loopback).

The reports are generated here from a real listing of the moto bucket, in the format AWS documents
(manifest.json with sourceBucket, destinationBucket ARN, creationTimestamp in ms, fileFormat,
fileSchema, files[{key, size, MD5checksum}]; header-less gzipped CSV with URL-encoded keys; ORC and
Parquet with snake_case columns), plus rows a versioned bucket has: a delete marker and versions
that are not the latest.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import time
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote_plus

import pytest

from tests.support.gc_support import ckptctl
from tests.support.inventory import (
    DEST,
    FORMATS,
    ODD_NAME,
    csv_gz,
    encode,
    listing,
    local_report,
    report_rows,
    setup,
    shared,
    versioned_rows,
    write_inventory,
)
from tests.support.s3_clock import next_second
from tests.support.s3_copied import exists, gc_args

LATEST = time.time() + 300  # the latest time a report may name: the clock plus its tolerance, as a plan gives


def plan(args: list[str], *extra: str, expect: int = 0) -> dict:
    return json.loads(ckptctl("gc", "plan", *args, "--json", *extra, expect=expect).stdout)


def decided(p: dict, key: str = "candidates") -> set[tuple]:
    return {(c["path"], c["size"], c["mtime"], c["reason"]) for c in p[key]}


@pytest.mark.parametrize("fmt", FORMATS)
def test_inventory_plan_equals_listing_plan(s3_server, fmt: str) -> None:
    up = shared(s3_server)
    bucket, rows = up["bucket"], up["rows"]
    manifest = write_inventory(s3_server, rows + versioned_rows(bucket, up["job"], rows), fmt, source=bucket)
    args = gc_args(bucket, up["entry"], s3_server.endpoint)
    by_listing = plan(args)  # now, not cached: a file's age guard (young / in-flight) moves with the clock
    by_inventory = plan(args, "--inventory", manifest)
    assert not by_inventory["refusals"]
    assert {c["path"] for c in by_inventory["candidates"]} == up["orphans"]
    assert decided(by_inventory) == decided(by_listing)
    assert decided(by_inventory, "protected") == decided(by_listing, "protected")
    assert up["odd"] in {d["path"] for d in by_inventory["protected"]}  # its key decoded right
    assert by_inventory["live_files"] == by_listing["live_files"]
    record = by_inventory["inventory"]
    assert record["uri"] == manifest and record["format"] == fmt and record["data_files"] == 2
    assert record["rows_read"] == len(rows) + 3 and record["rows_in_scope"] == len(rows)
    options = by_inventory["options"]
    assert options["inventory"] == manifest and options["inventory_rows"] == len(rows) + 3
    assert options["inventory_created"] == record["created"]


def test_files_written_after_the_inventory_are_never_candidates(s3_server) -> None:
    bucket = "inv-late"
    up = setup(s3_server, bucket)
    fs, job = up["fs"], up["job"]
    during = f"checkpoints/{job}/shared/written-while-the-report-ran"
    fs.pipe_file(f"{bucket}/{during}", b"orphan?")
    rows = listing(s3_server, bucket)
    mtime = next(r for r in rows if r["key"] == during)["last_modified_date"].timestamp()
    manifest = write_inventory(s3_server, rows, "Parquet", source=bucket, created=mtime)  # began as it landed
    next_second()
    after = f"checkpoints/{job}/shared/written-after-the-report"
    fs.pipe_file(f"{bucket}/{after}", b"orphan?")
    next_second()
    p = plan(gc_args(bucket, up["entry"], s3_server.endpoint), "--inventory", manifest)
    paths = {c["path"] for c in p["candidates"]}
    assert f"s3://{bucket}/{during}" not in paths and f"s3://{bucket}/{after}" not in paths
    kept = {d["path"]: d["reason"] for d in p["protected"]}
    assert kept[f"s3://{bucket}/{during}"] == "after-inventory"
    assert f"s3://{bucket}/{after}" not in kept  # invisible to the report: never judged at all
    assert paths == up["orphans"]  # everything older is judged as before


def test_a_checkpoint_completed_after_the_inventory_protects_its_directory(s3_server) -> None:
    """chk-77 is an incomplete checkpoint in the report; its _metadata lands afterwards. Discovery
    lists afresh: chk-77 is a retained checkpoint, nothing in it is a candidate (or the plan is
    blocked because its references are not all there)."""
    bucket = "inv-new-metadata"
    up = setup(s3_server, bucket)
    fs, job = up["fs"], up["job"]
    manifest = write_inventory(s3_server, listing(s3_server, bucket), "CSV", source=bucket)
    existing = next(k for k in fs.find(bucket) if k.endswith("/_metadata") and f"{job}/chk-" in k)
    fs.pipe_file(f"{bucket}/checkpoints/{job}/chk-77/_metadata", fs.cat_file(existing))
    next_second()
    result = ckptctl("gc", "plan", *gc_args(bucket, up["entry"], s3_server.endpoint), "--json",
                     "--inventory", manifest, expect=None)  # fmt: skip
    p = json.loads(result.stdout)
    aborted = f"s3://{bucket}/checkpoints/{job}/chk-77/aborted"
    assert aborted not in {c["path"] for c in p["candidates"]}
    assert f"s3://{bucket}/checkpoints/{job}/chk-77" in {r["path"] for r in p["retained"]}
    assert (
        p["refusals"]
        or {d["path"]: d["reason"] for d in p["protected"]}[aborted] == "retained-checkpoint-dir"
    )
    assert result.exit_code == (1 if p["refusals"] else 0)


def test_live_files_missing_from_the_inventory(s3_server) -> None:
    """Live files written after the report are not in it: they are there now (HEAD), so live and
    never candidates. A live file that is really gone still blocks the plan."""
    bucket = "inv-missing-live"
    up = setup(s3_server, bucket)
    fs = up["fs"]
    rows = listing(s3_server, bucket)
    live_keys = sorted(u[len(f"s3://{bucket}/") :] for u in up["referenced"])
    dropped = set(live_keys[:3])
    manifest = write_inventory(s3_server, [r for r in rows if r["key"] not in dropped], "ORC", source=bucket)
    args = gc_args(bucket, up["entry"], s3_server.endpoint)
    p = plan(args, "--inventory", manifest)
    assert not p["refusals"] and not p["missing"]
    assert {c["path"] for c in p["candidates"]} == up["orphans"]
    assert p["inventory"]["live_files_not_in_inventory"] == 3
    assert p["live_files"] == plan(args)["live_files"]
    # now one of them is really gone: missing-live-files, exit 1
    gone = sorted(dropped)[0]
    fs.rm_file(f"{bucket}/{gone}")
    p = plan(args, "--inventory", manifest, expect=1)
    assert [r["code"] for r in p["refusals"]] == ["missing-live-files"]
    assert [m["path"] for m in p["missing"]] == [f"s3://{bucket}/{gone}"]


@pytest.mark.parametrize(
    ("fmt", "what"),
    [("CSV", "not gzip"), ("Parquet", "truncated"), ("ORC", "garbage"), ("CSV", "manifest"), ("CSV", "md5")],
)
def test_a_corrupt_report_is_one_line_naming_the_file(s3_server, fmt: str, what: str) -> None:
    up = shared(s3_server)
    bucket, up_entry, rows = up["bucket"], up["entry"], up["rows"]
    if what == "manifest":
        manifest = write_inventory(s3_server, rows, fmt, source=bucket)
        s3_server.filesystem().pipe_file(manifest[5:], b'{"sourceBucket": "inv-corrupt", "files": [')
        named = manifest
    else:
        good, _, _ = encode(rows[len(rows) // 2 :], fmt)
        bad = {"not gzip": b"Bucket,Key\n" * 10, "truncated": good[: len(good) // 2],
               "garbage": b"\x00ORC" + bytes(range(256)) * 4, "md5": csv_gz(rows[len(rows) // 2 :][:-1])}[what]  # fmt: skip
        manifest = write_inventory(s3_server, rows, fmt, source=bucket, corrupt=bad)
        if what in ("truncated", "garbage", "not gzip", "md5"):  # sizes as the manifest says, or it says so
            data = json.loads(s3_server.filesystem().cat_file(manifest[5:]))
            data["files"][-1]["size"] = len(bad)
            s3_server.filesystem().pipe_file(manifest[5:], json.dumps(data).encode())
        named = f"s3://{DEST}/{data['files'][-1]['key']}"
    result = ckptctl("gc", "plan", *gc_args(bucket, up_entry, s3_server.endpoint), "--inventory", manifest,
                     expect=2)  # fmt: skip
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1 and named in message, message
    assert "internal error" not in message


def test_inventory_refused_for_local_roots_other_buckets_and_keep_last(s3_server, tmp_path: Path) -> None:
    up = shared(s3_server)
    bucket = up["bucket"]
    manifest = write_inventory(s3_server, up["rows"], "CSV", source=bucket)
    local = ckptctl("gc", "plan", str(tmp_path), "--inventory", manifest, expect=2).stderr.strip()
    assert len(local.splitlines()) == 1 and "not on S3" in local
    other = write_inventory(s3_server, up["rows"], "CSV", source="some-other-bucket")
    result = ckptctl(
        "gc", "plan", *gc_args(bucket, up["entry"], s3_server.endpoint), "--inventory", other, expect=2
    )
    assert "some-other-bucket" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    result = ckptctl("gc", "plan", *gc_args(bucket, up["entry"], s3_server.endpoint), "--inventory", manifest,
                     "--keep-last", "1", expect=2)  # fmt: skip
    assert "--keep-last" in result.stderr


def test_apply_of_an_inventory_plan_deletes_only_unchanged_candidates(s3_server, tmp_path: Path) -> None:
    bucket = "inv-apply"
    up = setup(s3_server, bucket)
    fs, job = up["fs"], up["job"]
    manifest = write_inventory(s3_server, listing(s3_server, bucket), "Parquet", source=bucket)
    args = gc_args(bucket, up["entry"], s3_server.endpoint)
    plan_file = tmp_path / "plan.json"
    p = json.loads(
        ckptctl("gc", "plan", *args, "--json", "--inventory", manifest, "-o", str(plan_file)).stdout
    )
    assert {c["path"] for c in p["candidates"]} == up["orphans"]
    # after the plan (the report is a day old anyway): one candidate rewritten, one deleted
    rewritten = f"s3://{bucket}/checkpoints/{job}/shared/planted-1"
    deleted = f"s3://{bucket}/checkpoints/{job}/shared/planted-2"
    next_second()
    fs.pipe_file(rewritten[5:], b"new bytes, a new object")
    fs.rm_file(deleted[5:])
    result = json.loads(ckptctl("gc", "apply", str(plan_file), "--yes", "--json").stdout)
    assert {d["path"] for d in result["deleted"]} == up["orphans"] - {rewritten, deleted}
    skipped = {s["path"]: s["reason"] for s in result["skipped"]}
    assert set(skipped) == {rewritten, deleted}
    assert "changed since the inventory" in skipped[rewritten] and "gone" in skipped[deleted]
    assert exists(fs, rewritten)
    for uri in up["referenced"]:
        assert exists(fs, uri), f"live object deleted: {uri}"
    # a plan names its report: another report in its place is refused
    data = json.loads(plan_file.read_text())
    data["options"]["inventory_created"] += 1000
    plan_file.write_text(json.dumps(data))
    result = ckptctl("gc", "apply", str(plan_file), "--yes", "--json", expect=2)
    assert "not the same report" in result.stderr


def test_encoded_prefix_regex_matches_every_encoding() -> None:
    import re

    from ckptctl.inventory.schema import encoded_prefix_regex

    prefix = "checkpoints/a b+c/ü/"
    rx = re.compile(encoded_prefix_regex(prefix))
    for safe in ("", "/"):
        assert rx.match(quote_plus(prefix + "x", safe=safe))
    assert rx.match(prefix.replace("+", "%2b") + "x") and not rx.match("checkpoints/a b+c/u/x")
    assert not rx.match(quote_plus("checkpoints-old/a b+c/ü/x", safe=""))


def test_metadata_changing_while_the_plan_is_built_blocks(s3_server) -> None:
    """The last look: once the plan is built, _metadata is listed again. Here the newest one is
    rewritten while the plan HEADs a live file the report does not have (after every other check
    has looked)."""
    from tests.support.faulty_proxy import FaultyProxy, Rule

    bucket = "inv-metadata-changes"
    up = setup(s3_server, bucket)
    fs = up["fs"]
    rows = listing(s3_server, bucket)
    live_key = sorted(u[len(f"s3://{bucket}/") :] for u in up["referenced"])[0]
    manifest = write_inventory(s3_server, [r for r in rows if r["key"] != live_key], "CSV", source=bucket)
    newest = max((r for r in rows if r["key"].endswith("/_metadata")), key=lambda r: r["last_modified_date"])
    body = fs.cat_file(f"{bucket}/{newest['key']}")

    def rewrite_metadata() -> None:
        next_second()  # a new mtime
        import boto3

        boto3.client("s3", endpoint_url=s3_server.endpoint, region_name="us-east-1", aws_access_key_id="testing",
                     aws_secret_access_key="testing").put_object(Bucket=bucket, Key=newest["key"], Body=body)  # fmt: skip

    name = live_key.rpartition("/")[2]
    rule = Rule(lambda method, path: method == "HEAD" and path.split("?")[0].endswith("/" + name),
                before=rewrite_metadata)  # fmt: skip
    with FaultyProxy(s3_server.endpoint, fault_rate=0.0, rules=[rule]) as proxy:
        args = gc_args(bucket, up["entry"], proxy.endpoint)
        p = plan(args, "--inventory", manifest, expect=1)
    assert rule.fired, "the _metadata must have changed while the plan was built"
    assert [r["code"] for r in p["refusals"]] == ["checkpoints-changed"]
    assert newest["key"] in p["refusals"][0]["message"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_reading_a_local_copy_of_a_report(tmp_path: Path, fmt: str) -> None:
    """The core API on a report copied to local disk (``aws s3 sync`` of the destination bucket):
    only current objects under the scopes come out, decoded, with sizes and epoch mtimes."""
    from ckptctl.inventory.manifest import read_manifest
    from ckptctl.inventory.report import ReadStats
    from ckptctl.inventory.rows import iter_files
    from ckptctl.storage import Storage

    t = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    base = {"bucket": "src", "version_id": None, "is_latest": True, "is_delete_marker": False, "e_tag": "e",
            "storage_class": "STANDARD", "last_modified_date": t}  # fmt: skip
    rows = [
        {**base, "key": "ck/job/shared/a", "size": 1},
        {**base, "key": f"ck/job/shared/{ODD_NAME}", "size": 2},
        {**base, "key": "ck-other/job/shared/b", "size": 3},  # a sibling prefix, not under ck/
        {**base, "key": "ck/job/shared/gone", "size": None, "is_delete_marker": True},
        {**base, "key": "ck/job/shared/gone", "size": 4, "is_latest": False},
        {**base, "key": "elsewhere/x", "size": 5},
    ]
    data, suffix, schema = encode(rows, fmt)
    dest = tmp_path / "dest-bucket"
    (dest / "src/cfg/data").mkdir(parents=True)
    (dest / f"src/cfg/data/part.{suffix}").write_bytes(data)
    (dest / "src/cfg/2026-01-03T00-00Z").mkdir()
    manifest = dest / "src/cfg/2026-01-03T00-00Z/manifest.json"
    manifest.write_text(json.dumps({
        "sourceBucket": "src", "destinationBucket": "arn:aws:s3:::dest-bucket", "version": "2016-11-30",
        "creationTimestamp": "1767398400000", "fileFormat": fmt, "fileSchema": schema,
        "files": [{"key": f"src/cfg/data/part.{suffix}", "size": len(data), "MD5checksum": hashlib.md5(data).hexdigest()}],
    }))  # fmt: skip
    storage = Storage()
    inv = read_manifest(storage, str(manifest), latest=LATEST)
    assert (
        inv.created == 1767398400.0 and inv.source_bucket == "src" and inv.destination_bucket == "dest-bucket"
    )
    stats = ReadStats()
    got = sorted(iter_files(storage, inv, ["s3://src/ck"], stats))
    assert [(f.uri, f.size, f.mtime) for f in got] == [
        ("s3://src/ck/job/shared/a", 1, t.timestamp()),
        (f"s3://src/ck/job/shared/{ODD_NAME}", 2, t.timestamp()),
    ]
    assert stats.rows_read == len(rows) and stats.rows_kept == 2 and stats.files_read == 1


def _local_csv_report(tmp_path: Path, schema: str, lines: list[list[str]]) -> str:
    data = gzip.compress("".join(",".join(f'"{v}"' for v in line) + "\n" for line in lines).encode())
    (tmp_path / "src/cfg/data").mkdir(parents=True, exist_ok=True)
    (tmp_path / "src/cfg/data/part.csv.gz").write_bytes(data)
    (tmp_path / "src/cfg/2026-01-03T00-00Z").mkdir(exist_ok=True)
    manifest = tmp_path / "src/cfg/2026-01-03T00-00Z/manifest.json"
    manifest.write_text(json.dumps({
        "sourceBucket": "src", "destinationBucket": "arn:aws:s3:::dest", "version": "2016-11-30",
        "creationTimestamp": "1767398400000", "fileFormat": "CSV", "fileSchema": schema,
        "files": [{"key": "src/cfg/data/part.csv.gz", "size": len(data), "MD5checksum": hashlib.md5(data).hexdigest()}],
    }))  # fmt: skip
    return str(manifest)


def test_a_current_versions_only_report_and_one_without_sizes(tmp_path: Path) -> None:
    from ckptctl.inventory.manifest import read_manifest
    from ckptctl.inventory.report import InventoryError
    from ckptctl.inventory.rows import iter_files
    from ckptctl.storage import Storage

    storage = Storage()
    current = _local_csv_report(tmp_path / "a", "Bucket, Key, Size, LastModifiedDate",
                                [["src", "ck%2Fx", "7", "2026-01-02T03:04:05.000Z"]])  # fmt: skip
    got = list(iter_files(storage, read_manifest(storage, current, latest=LATEST), ["s3://src/ck"]))
    assert [(f.uri, f.size) for f in got] == [("s3://src/ck/x", 7)]
    sizeless = _local_csv_report(
        tmp_path / "b", "Bucket, Key, LastModifiedDate", [["src", "ck/x", "2026-01-02T03:04:05Z"]]
    )
    with pytest.raises(InventoryError, match="no Size column"):
        list(iter_files(storage, read_manifest(storage, sizeless, latest=LATEST), ["s3://src/ck"]))


def test_a_throttled_report_read_is_retried(s3_server) -> None:
    """A SlowDown or 500 on the first GET of the manifest and of a data file does not fail the plan."""
    from tests.support.faulty_proxy import INTERNAL, SLOW_DOWN, FaultyProxy, Rule

    up = shared(s3_server)
    bucket, rows = up["bucket"], up["rows"]
    for fmt, fault in zip(FORMATS, (SLOW_DOWN, INTERNAL, SLOW_DOWN), strict=True):
        manifest = write_inventory(s3_server, rows, fmt, source=bucket)
        rules = [
            Rule(lambda method, path: method == "GET" and "/cfg/data/" in path, fail=1, fault=fault),
            Rule(lambda method, path: method == "GET" and path.split("?")[0].endswith("/manifest.json"), fail=1,
                 fault=fault),
        ]  # fmt: skip
        with FaultyProxy(s3_server.endpoint, fault_rate=0.0, rules=rules) as proxy:
            p = plan(gc_args(bucket, up["entry"], proxy.endpoint), "--inventory", manifest)
        assert all(r.failed == 1 for r in rules)
        assert {c["path"] for c in p["candidates"]} == up["orphans"]


def test_csv_keys_and_times_decoded_by_arrow_as_row_by_row(tmp_path: Path) -> None:
    """The batch reader decodes in Arrow what it can (keys without ``%`` or ``+``, S3's own time
    format) and in Python the rest: every row comes out as ``unquote_plus`` and
    ``datetime.fromisoformat`` decode it one at a time; a date that is none is one line naming it."""
    from urllib.parse import unquote_plus

    from ckptctl.inventory.manifest import read_manifest
    from ckptctl.inventory.report import InventoryError
    from ckptctl.inventory.rows import iter_batches, iter_files
    from ckptctl.storage import Storage

    keys = ["ck/plain", "ck%2Fenc%2Fa+b", "ck/x%2By", "ck/%C3%BC+%2B", "ck/e", "ck/f", "ck/g", "ck%2Dother/z",
            "other%2Fck/z", "ck+/blank"]  # fmt: skip
    times = ["2026-01-02T03:04:05.000Z", "2026-01-02T03:04:05Z", " 2026-01-02T03:04:05.5Z ", "2026-01-02T03:04:05+01:00",
             "", "2026-01-02T03:04:05.1234567Z", "2026-01-02 03:04:05Z"] * 2  # fmt: skip
    times = times[: len(keys)]
    lines = [["src", k, str(i), t] for i, (k, t) in enumerate(zip(keys, times, strict=True))]
    storage = Storage()
    manifest = _local_csv_report(tmp_path / "a", "Bucket, Key, Size, LastModifiedDate", lines)
    inv = read_manifest(storage, manifest, latest=LATEST)
    expected = [
        (f"s3://src/{unquote_plus(k)}", i, datetime.fromisoformat(t.strip().replace("Z", "+00:00")).timestamp() if t else None)
        for i, (k, t) in enumerate(zip(keys, times, strict=True)) if unquote_plus(k).startswith("ck/")
    ]  # fmt: skip
    assert len(expected) == 7  # ck-other/z, other/ck/z and "ck /blank" are not under ck/
    assert [(f.uri, f.size, f.mtime) for f in iter_files(storage, inv, ["s3://src/ck"])] == expected
    batches = list(iter_batches(storage, inv, ["s3://src/ck"]))
    assert [str(t) for t in batches[0].schema.types] == ["string", "int64", "double"]
    bad = _local_csv_report(tmp_path / "b", "Bucket, Key, Size, LastModifiedDate",
                            [["src", "ck/a", "1", "2026-01-02T03:04:05Z"], ["src", "ck/b", "1", "2026-02-30T00:00:00Z"]])  # fmt: skip
    with pytest.raises(
        InventoryError, match="LastModifiedDate '2026-02-30T00:00:00Z' is not an ISO 8601 time"
    ):
        list(iter_files(storage, read_manifest(storage, bad, latest=LATEST), ["s3://src/ck"]))


# ---------------------------------------------------------------------------------------------
# a red-team helper's attack: with --inventory the only listing of a job's shared/ is the report, so
# a _metadata written there after it began was in no listing; the files it alone references were


def savepoint_copied_as_the_report_began(s3_server, bucket: str) -> dict:
    """An operator copies a savepoint into ``<job>/shared/savepoints/release-42/`` (its data files
    first, ``_metadata`` last) while the report begins: the data files are in the report, older
    than the job's newest checkpoint, and the ``_metadata`` is not."""
    from tests.support.fixture_cases import REPO

    up = setup(s3_server, bucket)
    fs, job = up["fs"], up["job"]
    key = f"checkpoints/{job}/shared/savepoints/release-42"
    savepoint = REPO / "fixtures/data/2.2.0/savepoints/savepoints/savepoint-2cadc2-053498faf5d0"
    data = {p.name: p.read_bytes() for p in savepoint.iterdir()}
    fs.pipe({f"{bucket}/{key}/{n}": b for n, b in data.items() if n != "_metadata"})
    next_second()  # the job's checkpoints stay the newest objects: the savepoint's files are not in flight
    metas = [k for k in fs.find(f"{bucket}/checkpoints/{job}") if k.endswith("/chk-9/_metadata")]
    fs.pipe({k: fs.cat_file(k) for k in metas})
    next_second()
    began = datetime.now(UTC).timestamp()
    rows = listing(s3_server, bucket)  # the report: the savepoint's data files are in it...
    fs.pipe_file(f"{bucket}/{key}/_metadata", data["_metadata"])  # ...its _metadata, copied last, is not
    up["manifest"] = write_inventory(s3_server, rows, "CSV", source=bucket, created=began)
    next_second()
    up["savepoint"] = f"s3://{bucket}/{key}"
    up["files"] = {f"s3://{bucket}/{key}/{n}" for n in data if n != "_metadata"}
    return up


def test_a_savepoint_copied_into_shared_as_the_report_began_keeps_its_files(s3_server) -> None:
    """The directory the report shows below the area is asked now (a HEAD of its ``_metadata``):
    the savepoint is read as retained, its files live (the Spark planner: test_spark_plan)."""
    up = savepoint_copied_as_the_report_began(s3_server, "inv-savepoint-copied")
    p = plan(gc_args("inv-savepoint-copied", up["entry"], s3_server.endpoint), "--inventory", up["manifest"])
    assert not up["files"] & {c["path"] for c in p["candidates"]}
    assert up["savepoint"] in p["discovery"]["found_by_listing_only"]


def tenant_with_a_checkpoint_after_the_report(s3_server, bucket: str) -> dict:
    """The tenant of redteam4 on S3: the team's checkpoints in ``<tenant>/shared/<job>/``. The
    report lists chk-7 and chk-8; chk-9, in flight when it began, lands after it (every file of
    its directory) and references shared files the report has, old. Returns the ROOT (the
    tenant), the --rebase mapping, the manifest, chk-9's directory and what it references."""
    from tests.support.fixture_cases import REPO
    from tests.support.s3_copied import VERSION, manifest

    entry = next(
        e for e in manifest()["entries"] if e["flink_version"] == VERSION and e["scenario"] == "basic"
    )
    data = REPO / entry["data_dir"] / "checkpoints"
    (job,) = [p.name for p in data.iterdir()]
    s3_server.create_bucket(bucket)
    fs = s3_server.filesystem()
    base = "fleet/3fa85f6457174562b3fc2c963f66afa6/shared"

    def put(paths) -> None:
        fs.pipe({f"{bucket}/{base}/{p.relative_to(data).as_posix()}": p.read_bytes() for p in paths})

    files = sorted(p for p in (data / job).rglob("*") if p.is_file())
    later = [p for p in files if p.parent.name == "chk-9"]
    put(p for p in files if p not in later and p.name != "_metadata")
    next_second()
    put(p for p in files if p not in later and p.name == "_metadata")
    next_second()
    began = datetime.now(UTC).timestamp()
    rows = listing(s3_server, bucket)
    next_second()
    put(p for p in later if p.name != "_metadata")
    put(p for p in later if p.name == "_metadata")
    manifest_uri = write_inventory(s3_server, rows, "Parquet", source=bucket, created=began)
    next_second()
    expected = json.loads((REPO / entry["expected_dir"] / "checkpoints" / job / "chk-9.json").read_text())
    original = f"file:{entry['original_root']}/checkpoints"
    needed = {f"s3://{bucket}/{base}" + r["path"][len(original) :] for r in expected["references"]}
    assert needed and all(u.startswith(f"s3://{bucket}/{base}/{job}/") for u in needed)
    return {"root": f"s3://{bucket}/{base.rsplit('/', 1)[0]}", "manifest": manifest_uri, "needed": needed,
            "rebase": (f"{entry['original_root']}/checkpoints", f"s3://{bucket}/{base}"),
            "chk9": f"s3://{bucket}/{base}/{job}/chk-9"}  # fmt: skip


def test_the_next_checkpoint_of_a_root_inside_a_tenants_shared_dir_after_the_report(s3_server) -> None:
    """The directory holding the checkpoints found below the area is walked afresh (discovery's
    pruned walk): chk-9 is read as retained, nothing it references is a candidate."""
    t = tenant_with_a_checkpoint_after_the_report(s3_server, "inv-tenant-next")
    old, new = t["rebase"]
    args = [t["root"], "--s3-endpoint", s3_server.endpoint, "--rebase", f"{old}={new}", "--older-than", "0s",
            "--margin", "0s", "--force", "--inventory", t["manifest"]]  # fmt: skip
    p = plan(args)
    assert not t["needed"] & {c["path"] for c in p["candidates"]}
    assert t["chk9"] in p["discovery"]["found_by_listing_only"]


# ---------------------------------------------------------------------------------------------
# every field of a manifest and of a report checked: a report that is broken is one line naming
# the file (exit 2), never a plan and never an internal error


def _parquet(rows: list[dict], **replace) -> bytes:
    """A Parquet report of ``rows`` whose columns ``replace`` names are other arrays (bad types,
    values no writer of S3 Inventory makes)."""
    import io

    import pyarrow.parquet as pq

    from tests.support.inventory import _table

    table = _table(rows)
    for name, array in replace.items():
        table = table.set_column(table.schema.get_field_index(name), name, array)
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


def _flipped_etag(rows: list[dict]) -> bytes:
    """A Parquet report one byte of whose e_tag values was changed in transit: Parquet (no page
    checksums by default) reads it without complaint; only the manifest's MD5 tells."""
    data = bytearray(encode(rows, "Parquet")[0])
    at = bytes(data).index(b"etag-of-the-row")
    data[at] ^= 0x01
    return bytes(data)


CSV4 = "Bucket, Key, Size, LastModifiedDate"
T = "2026-01-02T03:04:05.000Z"
# (id, what makes the report broken, a word the one line must hold)
MANIFEST_ATTACKS = [
    ("created-beyond-64-bits", {"creationTimestamp": "99999999999999999999"}, "creationTimestamp"),
    ("created-year-5138", {"creationTimestamp": "99999999999999"}, "creationTimestamp"),
    ("created-tomorrow", {"creationTimestamp": str(int((time.time() + 86400) * 1000))}, "creationTimestamp"),
    ("created-at-0", {"creationTimestamp": "0"}, "creationTimestamp"),
    ("created-before-inventory-existed", {"creationTimestamp": "1451606400000"}, "creationTimestamp"),
    ("created-in-arabic-digits", {"creationTimestamp": "\u0661\u0667\u0666\u0667\u0663\u0669\u0668\u0664\u0660\u0660\u0660\u0660\u0660"}, "creationTimestamp"),
    ("created-superscript", {"creationTimestamp": "\u00b2"}, "creationTimestamp"),
    ("created-a-number", {"creationTimestamp": 1767398400000}, "creationTimestamp"),
    ("created-in-seconds-with-a-dot", {"creationTimestamp": "1767398400.000"}, "creationTimestamp"),
    ("source-bucket-with-a-slash", {"sourceBucket": "src/ck"}, "sourceBucket"),
    ("destination-arn-without-a-name", {"destinationBucket": "arn:aws:s3:::"}, "destinationBucket"),
    ("no-format", {"fileFormat": None}, "fileFormat"),
    ("format-json", {"fileFormat": "JSON"}, "fileFormat"),
    ("schema-empty", {"fileSchema": ""}, "fileSchema"),
    ("schema-twice-a-column", {"fileSchema": "Bucket, Key, Key, Size, LastModifiedDate"}, "fileSchema"),
    ("schema-without-size", {"fileSchema": "Bucket, Key, LastModifiedDate"}, "Size"),
    ("versions-without-is-latest", {"fileSchema": "Bucket, Key, VersionId, IsDeleteMarker, Size, LastModifiedDate"},
     "IsLatest"),
    ("files-empty", {"files": []}, "files"),
    ("file-key-climbing", {"files": [{"key": "../../etc/passwd", "size": 10}]}, "files[0].key"),
    ("file-size-negative", {"files": [{"key": "src/cfg/data/part.csv.gz", "size": -1}]}, "files[0].size"),
    ("file-size-true", {"files": [{"key": "src/cfg/data/part.csv.gz", "size": True}]}, "files[0].size"),
    ("file-size-float", {"files": [{"key": "src/cfg/data/part.csv.gz", "size": 1e30}]}, "files[0].size"),
    ("file-size-huge", {"files": [{"key": "src/cfg/data/part.csv.gz", "size": 10**30}]}, "files[0].size"),
    ("file-md5-not-hex", {"files": [{"key": "src/cfg/data/part.csv.gz", "size": 10, "MD5checksum": "zz"}]},
     "MD5checksum"),
    ("file-listed-twice", {"files": [{"key": "src/cfg/data/part.csv.gz", "size": 10}] * 2}, "twice"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("changed", "word"), [a[1:] for a in MANIFEST_ATTACKS], ids=[a[0] for a in MANIFEST_ATTACKS]
)
def test_every_field_of_a_manifest_is_checked(tmp_path: Path, changed: dict, word: str) -> None:
    from ckptctl.inventory.manifest import read_manifest
    from ckptctl.inventory.report import InventoryError
    from ckptctl.inventory.rows import iter_files
    from ckptctl.storage import Storage

    manifest = local_report(tmp_path, report_rows(["ck/a"]), "CSV", **changed)
    storage = Storage()
    with pytest.raises(InventoryError) as broken:
        list(iter_files(storage, read_manifest(storage, manifest, latest=LATEST), ["s3://src/ck"]))
    assert word in broken.value.message and broken.value.path == f"file:{manifest}"
    assert len(str(broken.value).splitlines()) == 1


def test_a_manifest_not_matching_its_checksum_file(tmp_path: Path) -> None:
    """AWS writes ``manifest.checksum`` (the manifest's MD5) beside it: a manifest changed since, or
    a checksum that is no MD5, is refused; a right one (or none) is read."""
    from ckptctl.inventory.manifest import read_manifest
    from ckptctl.inventory.report import InventoryError
    from ckptctl.storage import Storage

    manifest = Path(local_report(tmp_path, report_rows(["ck/a"]), "CSV"))
    checksum = manifest.with_name("manifest.checksum")
    storage = Storage()
    checksum.write_text(hashlib.md5(manifest.read_bytes()).hexdigest() + "\n")
    assert read_manifest(storage, str(manifest), latest=LATEST).files
    for text, word in (("0" * 32, "does not match"), ("not-an-md5", "not an MD5")):
        checksum.write_text(text)
        with pytest.raises(InventoryError, match=word):
            read_manifest(storage, str(manifest), latest=LATEST)


def _csv(keys_and_values: list[list[str]]) -> list[list[str]]:
    return [["src", *row] for row in keys_and_values]


# (id, fileSchema, rows of the CSV) or (id, format, data-file bytes): the word the line must hold
ROW_ATTACKS = [
    ("csv-size-negative", CSV4, _csv([["ck/a", "-5", T]]), "Size"),
    ("csv-size-plus", CSV4, _csv([["ck/a", "+5", T]]), "Size"),
    ("csv-size-beyond-64-bits", CSV4, _csv([["ck/a", "99999999999999999999", T]]), "Size"),
    ("csv-size-beyond-s3s-largest", CSV4, _csv([["ck/a", str(10**15), T]]), "Size"),
    ("csv-size-a-word", CSV4, _csv([["ck/a", "big", T]]), "Size"),
    ("csv-mtime-year-1", CSV4, _csv([["ck/a", "1", "0001-01-01T00:00:00.000Z"]]), "LastModifiedDate"),
    ("csv-mtime-1970", CSV4, _csv([["ck/a", "1", "1970-01-01T00:00:00.000Z"]]), "LastModifiedDate"),
    ("csv-mtime-year-9999", CSV4, _csv([["ck/a", "1", "9999-12-31T23:59:59.000Z"]]), "LastModifiedDate"),
    ("csv-mtime-tomorrow", CSV4, _csv([["ck/a", "1", time.strftime("%Y-%m-%dT%H:%M:%S.000Z",
                                                                  time.gmtime(time.time() + 86400))]]),
     "LastModifiedDate"),
    ("csv-mtime-a-word", CSV4, _csv([["ck/a", "1", "yesterday"]]), "LastModifiedDate"),
    ("csv-a-column-missing", CSV4, [["src", "ck/a", "1"]], "column"),
    ("csv-a-column-more", CSV4, [["src", "ck/a", "1", T, "x"]], "column"),
    ("csv-key-encoding-no-utf8", CSV4, _csv([["ck/%FF", "1", T]]), "UTF-8"),
    ("csv-key-encoding-cut-short", CSV4, _csv([["ck/%C3", "1", T]]), "UTF-8"),
    ("csv-is-latest-yes", "Bucket, Key, VersionId, IsLatest, IsDeleteMarker, Size, LastModifiedDate",
     _csv([["ck/a", "v1", "yes", "false", "1", T]]), "IsLatest"),
    ("csv-another-bucket", CSV4, [["other", "ck/a", "1", T]], "bucket"),
    ("csv-no-size", CSV4, _csv([["ck/a", "", T]]), "size"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("schema", "lines", "word"), [a[1:] for a in ROW_ATTACKS], ids=[a[0] for a in ROW_ATTACKS]
)
def test_every_field_of_a_csv_report_row_is_checked(tmp_path: Path, schema: str, lines, word: str) -> None:
    from ckptctl.inventory.manifest import read_manifest
    from ckptctl.inventory.report import InventoryError
    from ckptctl.inventory.rows import iter_files
    from ckptctl.storage import Storage

    manifest = _local_csv_report(tmp_path, schema, lines)
    storage = Storage()
    with pytest.raises(InventoryError) as broken:
        list(iter_files(storage, read_manifest(storage, manifest, latest=LATEST), ["s3://src/ck"]))
    assert word.lower() in broken.value.message.lower(), broken.value.message
    assert broken.value.path == f"file:{tmp_path}/src/cfg/data/part.csv.gz"
    assert len(str(broken.value).splitlines()) == 1


def _columnar_attacks() -> list[tuple]:
    import pyarrow as pa

    rows = report_rows(["ck/a", "ck/b"], e_tag="etag-of-the-row")
    ms = pa.timestamp("ms", tz="UTC")
    return [
        ("parquet-size-negative", "Parquet", _parquet(rows, size=pa.array([1, -1], pa.int64())), "Size"),
        ("parquet-size-a-string", "Parquet", _parquet(rows, size=pa.array(["1", "1"])), "size"),
        ("parquet-mtime-at-0", "Parquet", _parquet(rows, last_modified_date=pa.array([0, 0], ms)), "LastModifiedDate"),
        ("parquet-mtime-year-294000", "Parquet",
         _parquet(rows, last_modified_date=pa.array([2**62, 2**62], ms)), "LastModifiedDate"),
        ("parquet-key-no-utf8", "Parquet",
         _parquet(rows, key=pa.array([b"ck/\xff", b"ck/b"], pa.binary()).view(pa.string())), "UTF-8"),
        ("parquet-key-empty", "Parquet", _parquet(rows, key=pa.array(["", "ck/b"])), "key"),
        ("parquet-is-latest-a-string", "Parquet", _parquet(rows, is_latest=pa.array(["true", "true"])), "is_latest"),
        ("parquet-a-column-the-schema-lacks", "Parquet",
         _parquet(rows, storage_class=pa.array(["x", "x"])).replace(b"storage_class", b"storage_klass"), "fileSchema"),
        ("parquet-bytes-changed-in-transit", "Parquet", _flipped_etag(rows), "MD5"),
        ("orc-mtime-year-3000", "ORC", None, "ORC"),
    ]  # fmt: skip


COLUMNAR_ATTACKS = ["parquet-size-negative", "parquet-size-a-string", "parquet-mtime-at-0", "parquet-mtime-year-294000",
                    "parquet-key-no-utf8", "parquet-key-empty", "parquet-is-latest-a-string",
                    "parquet-a-column-the-schema-lacks", "parquet-bytes-changed-in-transit", "orc-mtime-year-3000"]  # fmt: skip


@pytest.mark.parametrize("attack", COLUMNAR_ATTACKS)
def test_every_field_of_a_columnar_report_row_is_checked(tmp_path: Path, attack: str) -> None:
    from ckptctl.inventory.manifest import read_manifest
    from ckptctl.inventory.report import InventoryError
    from ckptctl.inventory.rows import iter_files
    from ckptctl.storage import Storage

    attacks = _columnar_attacks()
    assert [a[0] for a in attacks] == COLUMNAR_ATTACKS
    _, fmt, data, word = next(a for a in attacks if a[0] == attack)
    rows = report_rows(["ck/a", "ck/b"], e_tag="etag-of-the-row")
    if data is None:  # ORC: a time its nanoseconds cannot hold
        rows = report_rows(["ck/a"], last_modified_date=datetime(3000, 1, 1, tzinfo=UTC))
    manifest = local_report(tmp_path, rows, fmt, data=data)
    if attack == "parquet-bytes-changed-in-transit":  # the manifest describes the bytes as written
        written = encode(rows, fmt)[0]
        described = json.loads(Path(manifest).read_text())
        described["files"][0]["MD5checksum"] = hashlib.md5(written).hexdigest()
        Path(manifest).write_text(json.dumps(described))
    storage = Storage()
    with pytest.raises(InventoryError) as broken:  # the whole bucket in scope: an empty key is in it
        list(iter_files(storage, read_manifest(storage, manifest, latest=LATEST), ["s3://src"]))
    assert word.lower() in broken.value.message.lower(), broken.value.message
    assert broken.value.path.startswith(f"file:{tmp_path}/src/cfg/data/part.")
    assert len(str(broken.value).splitlines()) == 1


def test_a_report_at_its_bounds_is_read(tmp_path: Path) -> None:
    """What is right is still read: a report created at S3 Inventory's launch whose rows are as old
    as S3 and as young as the clock's tolerance allows, of sizes 0 and S3's largest."""
    from ckptctl.inventory.manifest import read_manifest
    from ckptctl.inventory.report import INVENTORY_LAUNCH, MAX_OBJECT_SIZE, S3_LAUNCH
    from ckptctl.inventory.rows import iter_files
    from ckptctl.storage import Storage

    latest = time.time() + 300
    rows = [*report_rows(["ck/a"], size=0, last_modified_date=datetime.fromtimestamp(S3_LAUNCH, UTC)),
            *report_rows(["ck/b"], size=MAX_OBJECT_SIZE, last_modified_date=datetime.fromtimestamp(int(latest), UTC))]  # fmt: skip
    for fmt in FORMATS:
        manifest = local_report(
            tmp_path / fmt, rows, fmt, creationTimestamp=str(int(INVENTORY_LAUNCH * 1000))
        )
        storage = Storage()
        got = list(iter_files(storage, read_manifest(storage, manifest, latest=latest), ["s3://src/ck"]))
        assert [(f.uri, f.size, f.mtime) for f in got] == [("s3://src/ck/a", 0, S3_LAUNCH),
                                                           ("s3://src/ck/b", MAX_OBJECT_SIZE, float(int(latest)))]  # fmt: skip
    import pyarrow as pa

    narrow = _parquet(report_rows(["ck/a"], size=7), size=pa.array([7], pa.int32()))  # another integer type
    manifest = local_report(tmp_path / "int32", report_rows(["ck/a"]), "Parquet", data=narrow)
    got = list(iter_files(storage, read_manifest(storage, manifest, latest=latest), ["s3://src/ck"]))
    assert [(f.uri, f.size) for f in got] == [("s3://src/ck/a", 7)]


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_a_manifest_from_beyond_the_clock_is_one_line_exit_2(s3_server, engine: str) -> None:
    """The attack: ``creationTimestamp: "99999999999999999999"`` ended in ``internal error: OSError
    ... Value too large`` (exit 3). Now one line naming the manifest and the field, exit 2, on both
    planners; as for a report created tomorrow, or a row written tomorrow."""
    up = shared(s3_server)
    bucket, rows = up["bucket"], up["rows"]
    args = gc_args(bucket, up["entry"], s3_server.endpoint)
    if engine == "spark":
        # the master the other Spark tests share: a master of its own stopped the worker's session and
        # started another (and the next Spark test its own again), ~15 s of a quiet run
        args += ["--engine", "spark", "--master", "local[*]"]
    tomorrow = time.time() + 86400
    late_row = [{**rows[0], "last_modified_date": datetime.fromtimestamp(tomorrow, UTC)}, *rows[1:]]
    for fmt, report, created, word in (("CSV", rows, "99999999999999999999", "creationTimestamp"),
                                       ("Parquet", rows, str(int(tomorrow * 1000)), "creationTimestamp"),
                                       ("Parquet", late_row, None, "LastModifiedDate")):  # fmt: skip
        manifest = write_inventory(s3_server, report, fmt, source=bucket)
        if created is not None:
            data = json.loads(s3_server.filesystem().cat_file(manifest[5:]))
            s3_server.filesystem().pipe_file(
                manifest[5:], json.dumps({**data, "creationTimestamp": created}).encode()
            )
        result = ckptctl("gc", "plan", *args, "--inventory", manifest, expect=2)
        message = result.stderr.strip()
        assert len(message.splitlines()) == 1 and word in message, message
        assert "internal error" not in message
        assert (manifest if created else f"s3://{DEST}/") in message


@pytest.mark.parametrize("in_memory", [True, False])
def test_a_columnar_files_md5_is_checked_in_memory_or_streamed(
    tmp_path: Path, monkeypatch, in_memory: bool
) -> None:
    """Up to HASHED_IN_MEMORY a columnar file is read once and hashed in memory, above it hashed
    as it streams and read again: either way a good file is read and a changed one refused."""
    import ckptctl.inventory.rows as inventory_rows
    from ckptctl.inventory.manifest import read_manifest
    from ckptctl.inventory.report import InventoryError
    from ckptctl.inventory.rows import iter_files
    from ckptctl.storage import Storage

    if not in_memory:
        monkeypatch.setattr(inventory_rows, "HASHED_IN_MEMORY", 0)
    rows = report_rows(["ck/a", "ck/b"], e_tag="etag-of-the-row")
    storage = Storage()
    for fmt in ("Parquet", "ORC"):
        manifest = local_report(tmp_path / fmt, rows, fmt)
        got = list(iter_files(storage, read_manifest(storage, manifest, latest=LATEST), ["s3://src/ck"]))
        assert [f.uri for f in got] == ["s3://src/ck/a", "s3://src/ck/b"]
    written = encode(rows, "Parquet")[0]
    manifest = local_report(tmp_path / "changed", rows, "Parquet", data=_flipped_etag(rows))
    described = json.loads(Path(manifest).read_text())
    described["files"][0]["MD5checksum"] = hashlib.md5(written).hexdigest()
    Path(manifest).write_text(json.dumps(described))
    with pytest.raises(InventoryError, match="MD5checksum"):
        list(iter_files(storage, read_manifest(storage, manifest, latest=LATEST), ["s3://src/ck"]))
