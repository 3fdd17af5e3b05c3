"""The same commands over a real S3 endpoint (moto server on loopback), compared with Flink's view."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from typer.testing import CliRunner

from ckptctl.cli import app
from tests.support.fixture_cases import FIXTURES, Case, cases
from tests.support.flink_view import assert_matches

CASES = cases()
runner = CliRunner()


def s3_uri(case: Case, bucket: str) -> str:
    return f"{bucket}/{case.checkpoint_dir.relative_to(FIXTURES / 'data').as_posix()}"


def to_s3(case: Case, bucket: str):
    data_root = f"{bucket}/{case.data_root.relative_to(FIXTURES / 'data').as_posix()}"

    def mapper(uri: str) -> str:
        for prefix in ("file:", ""):
            old = prefix + case.original_root
            if uri == old or uri.startswith(old + "/"):
                return data_root + uri[len(old) :]
        return uri

    return mapper


def invoke(*args: str):
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_show_and_refs_over_s3_match_flink(case: Case, s3_server, s3_fixtures: str) -> None:
    uri = s3_uri(case, s3_fixtures)
    mapper = to_s3(case, s3_fixtures)
    mapped_case = _MappedCase(case, mapper)
    view = invoke("show", "--json", "--s3-endpoint", s3_server.endpoint, uri)
    expected = case.expected()
    assert view["path"] == uri and view["checkpoint_id"] == expected["checkpoint_id"]
    by_id = {o["operator_id"]: o for o in view["operators"]}
    for op in expected["operators"]:
        assert_matches(op, by_id[op["operator_id"]], mapped_case, f"$.operators[{op['operator_id']}]")
    rows = invoke("refs", "--format", "json", "--s3-endpoint", s3_server.endpoint, uri)
    key = ("operator_id", "subtask", "slot", "local_name", "offset", "size")
    got = Counter((*(r[k] for k in key), r["path"]) for r in rows)
    want = Counter((*(r[k] for k in key), mapper(r["path"])) for r in expected["references"])
    assert got == want
    assert all(r["path"].startswith("s3://ckptctl-fixtures/") for r in rows)


class _MappedCase:
    def __init__(self, case: Case, mapper) -> None:
        self.case, self.to_current = case, mapper


def test_ls_over_s3_lists_what_local_lists(s3_server, s3_fixtures: str) -> None:
    local = invoke("ls", "--json", str(FIXTURES / "data"))
    remote = invoke("ls", "--json", "--s3-endpoint", s3_server.endpoint, s3_fixtures)

    def strip(rows, base):
        return sorted(
            (
                r["path"][len(base) :],
                r["checkpoint_id"],
                r["kind"],
                r["format_version"],
                r["files"],
                r["state_size"],
            )
            for r in rows
        )

    assert strip(remote, s3_fixtures) == strip(local, "file:" + str(FIXTURES / "data"))
    assert len(remote) >= 6


def test_s3_endpoint_from_environment(s3_server, s3_fixtures: str, monkeypatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_server.endpoint)
    rows = invoke("ls", "--json", s3_fixtures)
    assert rows and all(r["path"].startswith("s3://") for r in rows)


def test_s3a_scheme_is_the_same_object(s3_server, s3_fixtures: str) -> None:
    case = CASES[0]
    uri = s3_uri(case, s3_fixtures)
    a = invoke("refs", "--format", "json", "--s3-endpoint", s3_server.endpoint, uri)
    b = invoke(
        "refs", "--format", "json", "--s3-endpoint", s3_server.endpoint, uri.replace("s3://", "s3a://")
    )
    assert [r["path"] for r in a] == [r["path"] for r in b]


def test_missing_bucket_is_one_line_error(s3_server) -> None:
    result = runner.invoke(app, ["ls", "--s3-endpoint", s3_server.endpoint, "s3://no-such-bucket/x"])
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_concurrent_listing_equals_a_plain_listing(s3_server) -> None:
    """shared/ and taskowned/ are listed in 16 StartAfter ranges: names on the boundaries, names
    that are not hex, and more than one page per range must all come back exactly once."""
    import boto3

    from ckptctl.storage import Storage, StorageOptions

    s3_server.create_bucket("listing")
    client = boto3.client("s3", endpoint_url=s3_server.endpoint, region_name="us-east-1")
    names = ["0", "1", "1a", "9", "a", "f", "f0", "fz", "g-not-hex", "Z-upper", "-dash", "~tilde", "é-accent"]
    names += [f"{i:04x}-{j}" for i in range(0, 0x10000, 0x1000) for j in range(4)]
    keys = [f"root/{'ab' * 16}/shared/{n}" for n in names]
    keys += [f"root/{'ab' * 16}/taskowned/job_x_tm_y/{n}" for n in names[:20]]
    keys += [f"root/{'ab' * 16}/chk-{i}/_metadata" for i in range(3)] + [
        "root/top-level-file",
        "rootsibling/x",
    ]
    for k in keys:
        client.put_object(Bucket="listing", Key=k, Body=b"1")
    storage = Storage(StorageOptions(s3_endpoint=s3_server.endpoint))
    expected = sorted(f"s3://listing/{k}" for k in keys if k.startswith("root/"))
    assert sorted(f.uri for f in storage.list_files("s3://listing/root")) == expected
    # three keys a page: several pages per range and per delimiter listing
    from fsspec.asyn import sync

    from ckptctl.storage.s3list import list_prefix

    fs, _ = storage.fs("s3://listing")
    paged = sync(fs.loop, list_prefix, fs, "listing", "root/", 3)
    assert sorted(f"s3://listing/{key}" for key, _size, _mtime in paged) == expected


def test_ls_on_s3_never_lists_inside_a_jobs_shared_directory(s3_server, s3_fixtures: str) -> None:
    """Issue 23: ls listed every object of every shared/ (483 requests for 51 checkpoints), and
    failed when shared/ was unreadable. Every list request inside a shared/ or taskowned/ now gets
    an error from the proxy: ls must not notice, and costs about one request per directory."""
    from tests.support.faulty_proxy import INTERNAL, FaultyProxy, Rule, lists_inside

    root = f"{s3_fixtures}/2.2.0/basic"
    expected = invoke("ls", "--json", "--s3-endpoint", s3_server.endpoint, root)
    rules = [Rule(lists_inside(d), fail=10**6, fault=INTERNAL) for d in ("shared", "taskowned")]
    with FaultyProxy(s3_server.endpoint, fault_rate=0.0, rules=rules) as proxy:
        rows = invoke("ls", "--json", "--s3-endpoint", proxy.endpoint, root)
        lists = proxy.requests
    assert rows == expected and rows
    dirs = {r["path"].rsplit("/", 1)[0] for r in rows}  # jobs (and the root's own levels)
    assert lists <= 2 * (len(rows) + len(dirs)) + 6, lists  # a list per directory, a read per _metadata


class _RequestLog:
    """A loopback proxy in front of moto that records (method, decoded path) of every request."""

    def __init__(self, endpoint: str) -> None:
        from urllib.parse import unquote

        from tests.support.faulty_proxy import FaultyProxy

        log: list[tuple[str, str]] = []

        class Logging(FaultyProxy):
            def decide(self, method: str, path: str):
                log.append((method, unquote(path)))
                return super().decide(method, path)

        self.log = log
        self.proxy = Logging(endpoint, fault_rate=0.0)

    def __enter__(self):
        self.proxy.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.proxy.__exit__(*exc)


def test_ls_on_s3_costs_no_more_requests_than_checkpoints_and_jobs(s3_server, s3_fixtures: str) -> None:
    """Issue 23: ls made a HEAD of the root and a delimiter listing per directory level, each job's
    and a ``<job>/chk-`` listing besides (8 requests for a job of 3 checkpoints). One listing of
    the root now jumps over each job's shared/ and taskowned/: at most one request per job on top
    of the first page, one GET per _metadata, no HEAD; the rows unchanged."""
    root = f"{s3_fixtures}/2.2.0/basic"
    expected = invoke("ls", "--json", "--s3-endpoint", s3_server.endpoint, root)
    with _RequestLog(s3_server.endpoint) as requests:
        rows = invoke("ls", "--json", "--s3-endpoint", requests.proxy.endpoint, root)
    assert rows == expected
    jobs = {r["job_id"] for r in rows if r["job_id"]}
    assert len([r for r in rows if "/chk-" in r["path"]]) >= 3 and len(jobs) == 1, rows
    reads = [p for m, p in requests.log if m == "GET" and p.endswith("/_metadata")]
    assert len(reads) == len(rows)
    assert not [p for m, p in requests.log if m == "HEAD"], requests.log
    assert len(requests.log) <= len(rows) + len(jobs), requests.log


def test_a_checkpoint_path_costs_one_get_of_its_metadata(s3_server, s3_fixtures: str) -> None:
    """refs/verify of one checkpoint on S3: one GET of its _metadata, whose headers are the
    location's stat (size, mtime): no HEAD before it, no directory test (HEAD + LIST) of PATH.
    An empty _metadata (a range no GET satisfies) is found by a HEAD and refused at byte 0."""
    case = next(c for c in cases() if (c.flink_version, c.scenario) == ("2.2.0", "basic"))
    root = f"{s3_fixtures}/2.2.0/basic"
    chk = f"{root}/checkpoints/567bd59a21b856058d9e2ce07240d0f1/chk-9"
    rebase = ["--rebase", f"{case.original_root}={root}"]
    expected = invoke("refs", "--json", "--s3-endpoint", s3_server.endpoint, f"{chk}/_metadata", *rebase)
    with _RequestLog(s3_server.endpoint) as requests:
        rows = invoke("refs", "--json", "--s3-endpoint", requests.proxy.endpoint, chk, *rebase)
    assert rows == expected and rows
    assert requests.log == [("GET", chk[len("s3:/") :] + "/_metadata")], requests.log
    s3_server.create_bucket("empty-metadata")
    s3_server.filesystem().pipe_file("empty-metadata/ck/chk-1/_metadata", b"")
    with _RequestLog(s3_server.endpoint) as requests:  # was: a HEAD, then 8 GETs retried for 14 s
        result = runner.invoke(
            app, ["refs", "--s3-endpoint", requests.proxy.endpoint, "s3://empty-metadata/ck/chk-1"]
        )
    assert result.exit_code == 2 and "_metadata: byte 0: truncated" in result.stderr, result.output
    assert [m for m, _p in requests.log] == ["GET", "HEAD"], requests.log
    with _RequestLog(
        s3_server.endpoint
    ) as requests:  # a root: listed empty, not read (was: 11 s, "cannot read")
        result = runner.invoke(
            app, ["refs", "--s3-endpoint", requests.proxy.endpoint, "s3://empty-metadata/ck"]
        )
    assert result.exit_code != 0 and "chk-1/_metadata: byte 0: truncated" in result.output, result.output
    assert not [p for m, p in requests.log if p.endswith("/chk-1/_metadata")], requests.log


def test_the_checkpoint_directories_listing_yields_each_file_once(s3_server) -> None:
    """The one listing of '<job>/chk-' sees keys the job's own listing already gave (a file named
    chk-7 beside the directories) and marker objects: each file is yielded once, markers never."""
    from ckptctl.storage import Storage, StorageOptions

    s3_server.create_bucket("chkflat")
    fs = s3_server.filesystem()
    job = f"chkflat/root/{'cd' * 16}"
    keys = [f"{job}/chk-1/_metadata", f"{job}/chk-2/_metadata", f"{job}/chk-2/sub/x", f"{job}/chk-7",
            f"{job}/shared/sst", f"{job}/chk-3/"]  # fmt: skip
    for k in keys:
        fs.pipe_file(k, b"" if k.endswith("/") else b"1")
    storage = Storage(StorageOptions(s3_endpoint=s3_server.endpoint))
    areas = [f.uri for f in storage.list_checkpoint_areas("s3://chkflat/root")]
    assert sorted(areas) == sorted(f"s3://{k}" for k in keys if "/shared/" not in k and not k.endswith("/"))
    assert len(areas) == len(set(areas))
    found = sorted(f.uri for f in storage.find_metadata("s3://chkflat/root"))
    assert found == [f"s3://{job}/chk-1/_metadata", f"s3://{job}/chk-2/_metadata"]
