"""Issue 23: S3 listings that skip what they need not see, counted in requests at a proxy.

``ls`` (and gc's discovery) lists a root in one pass that jumps over each job's ``shared/`` and
``taskowned/``; ``verify`` lists each directory of referenced files from just before the next one.
Both must see exactly what a full listing filtered by the directory grammar sees, with at most the
requests their cost models promise (``ckptctl.storage.s3list``).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

from ckptctl.storage import JOB_AREAS, Storage, StorageOptions, is_job_dir_name
from tests.support.faulty_proxy import FaultyProxy, Rule, is_list, query
from tests.support.fixture_cases import REPO, manifest
from tests.support.gc_support import ckptctl

JOB_A, JOB_B, JOB_C, TENANT = "a" * 32, "b" * 32, "c" * 32, "d" * 32


def _put(s3_server, bucket: str, keys) -> None:
    import boto3
    from botocore.config import Config

    s3_server.create_bucket(bucket)
    client = boto3.client("s3", endpoint_url=s3_server.endpoint, region_name="us-east-1",
                          config=Config(max_pool_connections=16))  # fmt: skip
    with ThreadPoolExecutor(16) as pool:
        list(
            pool.map(
                lambda k: client.put_object(Bucket=bucket, Key=k, Body=b"" if k.endswith("/") else b"1"), keys
            )
        )


def _uploaded(s3_server, bucket: str, version: str, scenario: str):
    """A fixture scenario copied into a new bucket: (its manifest entry, its data directory)."""
    e = next(x for x in manifest()["entries"] if (x["flink_version"], x["scenario"]) == (version, scenario))
    data = REPO / e["data_dir"]
    s3_server.create_bucket(bucket)
    s3_server.put_many(
        {f"{bucket}/{p.relative_to(data).as_posix()}": p.read_bytes() for p in data.rglob("*") if p.is_file()}
    )
    return e, data


def _area(key: str, top: str) -> str | None:
    rel = key[len(top) + 1 :]
    parts = [top, *rel.split("/")]
    for i in range(1, len(parts) - 1):
        if parts[i] in JOB_AREAS and is_job_dir_name(parts[i - 1]):
            return top + "/" + "/".join(parts[1 : i + 1]) + "/"
    return None


def _run(storage: Storage, coro, *args):
    from fsspec.asyn import sync

    fs, _ = storage.fs("s3://x")
    return sync(fs.loop, coro, fs, *args)


def test_the_root_listing_leaves_job_areas_out_and_sees_everything_else(s3_server) -> None:
    """Everything outside ``<job-id>/shared`` and ``<job-id>/taskowned`` comes back exactly once --
    a ``shared`` directory holding a fleet's jobs, names next to the areas (``shared0``, a file
    named ``shared``), a savepoint, markers left out -- with the "/shared/" delimiter in one
    request plus one per ``shared`` directory that is no job's; without it (page by page, or from
    a server that refuses it) the same, in at most the pages of those keys plus one request per
    area a page ran into, where paging through the areas took 60 pages more."""
    from ckptctl.storage.s3list import list_outside

    areas = [f"root/{JOB_A}/shared/{i:03d}" for i in range(60)] + [
        f"root/{JOB_A}/taskowned/t{i}" for i in range(20)
    ]
    areas += [f"root/{JOB_B}/shared/{i:03d}" for i in range(30)] + [
        f"root/{JOB_A}/shared/",
        f"root/{JOB_B}/taskowned/",
    ]
    areas += [f"root/fleet/shared/{JOB_C}/shared/{i}" for i in range(20)]
    visible = [
        f"root/{JOB_A}/chk-1/_metadata", f"root/{JOB_A}/chk-1/x", f"root/{JOB_A}/chk-2/_metadata",
        f"root/{JOB_A}/shared0", f"root/{JOB_A}/shared", f"root/{JOB_A}/shared.d/_metadata",
        f"root/{JOB_A}/zz/_metadata", f"root/{JOB_A}-old/chk-1/_metadata", f"root/{JOB_A}-old/shared/x",
        f"root/{JOB_B}/chk-5/_metadata", f"root/fleet/shared/{JOB_C}/chk-3/_metadata", "root/team/shared/report.csv",
        f"root/{TENANT}x/shared/y", "root/savepoint-abcdef-0123456789ab/_metadata", "root/é-accent",
    ]  # fmt: skip
    markers = [f"root/{JOB_A}/chk-3/", "root/team/"]
    _put(s3_server, "jumps", areas + visible + markers + ["rootsibling/x", f"other/{JOB_A}/chk-9/_metadata"])
    assert all(_area(k, "root") for k in areas) and not any(_area(k, "root") for k in visible)
    refused = Rule(lambda _m, p: "shared" in query(p).get("delimiter", ""), fail=10**6,
                   fault=(400, b"<Error><Code>InvalidArgument</Code><Message>delimiter</Message></Error>"))  # fmt: skip
    for rules, expected in (([], 1 + 4), ([refused], 1 + 1)):  # 4 shared/ that are no job's; 1 refused
        with FaultyProxy(s3_server.endpoint, fault_rate=0.0, rules=rules) as proxy:
            storage = Storage(StorageOptions(s3_endpoint=proxy.endpoint))
            found = [f.uri for f in storage.list_checkpoint_areas("s3://jumps/root")]
            assert sorted(found) == sorted(f"s3://jumps/{k}" for k in visible), rules
            assert proxy.requests == expected, (proxy.requests, rules)
    assert refused.seen == 1  # not retried: a refusal is final
    with FaultyProxy(s3_server.endpoint, fault_rate=0.0) as proxy:
        storage = Storage(StorageOptions(s3_endpoint=proxy.endpoint))
        for delimiter in ("/shared/", None):
            before = proxy.requests
            kept = _run(
                storage, list_outside, "jumps", "root/", lambda k: _area(k, "root"), 2, None, None, delimiter
            )
            assert sorted(k for k, _s, _m in kept) == sorted(visible + markers), delimiter
        paged = proxy.requests - before
        # a job directory as the root: its own shared/ is an area too, a sibling named like it is not in it
        before = proxy.requests
        only_a = [f.uri for f in storage.find_metadata(f"s3://jumps/root/{JOB_A}")]
        assert sorted(only_a) == [
            f"s3://jumps/root/{JOB_A}/{d}/_metadata" for d in ("chk-1", "chk-2", "shared.d", "zz")
        ]
        assert proxy.requests - before == 1
    entered = 5  # JOB_A's shared/ and taskowned/, JOB_B's two, JOB_C's shared/ below the fleet's shared/
    assert paged <= -(-len(visible + markers) // 2) + entered + 1, paged


def test_present_files_cost_no_more_than_their_pages_or_a_request_each(s3_server) -> None:
    """Referenced names among orphans: found exactly (absent ones absent, sub-directories and
    names sharing all but a last character not confused), with at most min(n, P + runs) requests
    -- few when the names lie together, P when they interleave with orphans throughout."""
    from ckptctl.storage.s3list import list_present

    orphans = [f"d/{i:04d}-orphan" for i in range(0, 400)]
    together = [f"d/2000-ref-{i:02d}" for i in range(12)]  # side by side, between the orphans
    spread = [f"d/{i:04d}-ref" for i in range(0, 400, 25)]  # one every 25 orphans
    others = ["d/2000-ref-0", "d/2000-ref-00x", "d/sub/2000-ref-01", "d/2000-ref-0/", "e/2000-ref-01"]
    _put(s3_server, "present", orphans + together + spread + others)
    absent = ["2000-ref-0z", "9999-missing", "0001-ref", "!first"]
    with FaultyProxy(s3_server.endpoint, fault_rate=0.0) as proxy:
        storage = Storage(StorageOptions(s3_endpoint=proxy.endpoint))
        counts = {}
        for label, names, runs in (
            ("together", together, 1),
            ("spread", spread, 1),
            ("spread in 3", spread, 3),
        ):
            before = proxy.requests
            asked = [n[2:] for n in names] + absent
            got = _run(storage, list_present, "present", "d/", asked, runs, 10)
            counts[label] = proxy.requests - before
            assert sorted(k for k, _s, _m in got) == sorted(names), label
        pages = -(-len(orphans + together + spread + others[:3]) // 10)  # a full listing, 10 keys a page
    assert counts["together"] <= 3, counts  # the absent names' pages, and one for the twelve
    assert counts["spread"] <= min(len(spread) + len(absent), pages + 1), (counts, pages)
    assert counts["spread in 3"] <= pages + 3, (counts, pages)


def test_verify_on_s3_lists_only_around_the_referenced_files(s3_server) -> None:
    """Issue 23: verify listed all of a directory once it held 64 referenced files (every orphan
    in shared/: a page per 1,000) and made a HEAD per file in the others. With 1,100 orphans
    around a checkpoint's files it now costs one listing per referenced directory (and the
    _metadata's GET), no HEAD; the report is the one a HEAD per file gives."""
    import ckptctl.verify.run as run

    e = next(x for x in manifest()["entries"] if (x["flink_version"], x["scenario"]) == ("2.2.0", "basic"))
    data = REPO / e["data_dir"]
    files = {p.relative_to(data).as_posix(): p.read_bytes() for p in data.rglob("*") if p.is_file()}
    job = next(k.split("/")[1] for k in files if k.startswith("checkpoints/") and "/chk-" in k)
    shared = f"checkpoints/{job}/shared"
    orphans = [f"{shared}/{c}orphan-{i:04d}" for c in "!~" for i in range(550)]  # before and after the UUIDs
    _put(s3_server, "verify-orphans", orphans)
    fs = s3_server.filesystem()
    for key, body in files.items():
        fs.pipe_file(f"verify-orphans/{key}", body)
    chk = f"s3://verify-orphans/checkpoints/{job}/chk-9"
    rebase = ["--rebase", f"{e['original_root']}=s3://verify-orphans"]

    def verify_through_proxy():
        """(list and HEAD requests, the report): what finds the files and their sizes; the reads of
        SST footers and metadata files that follow are the checks themselves."""
        lists, heads = Rule(lambda _m, p: is_list(p)), Rule(lambda m, _p: m == "HEAD")
        with FaultyProxy(s3_server.endpoint, fault_rate=0.0, rules=[lists, heads]) as proxy:
            report = json.loads(ckptctl("verify", chk, "--engine", "local", "--json", "--s3-endpoint",
                                        proxy.endpoint, *rebase).stdout)  # fmt: skip
        return (lists.seen, heads.seen), report

    requests, report = verify_through_proxy()
    run.LIST_FROM_FILES, saved = 10**9, run.LIST_FROM_FILES
    try:
        per_file, baseline = verify_through_proxy()
    finally:
        run.LIST_FROM_FILES = saved
    referenced = {p.rsplit("/", 1)[0] for p in _referenced(chk, rebase, s3_server.endpoint)}
    assert report["ok"] and report["checked"] == baseline["checked"], report["problems"][:3]
    assert report["checked"]["files"] >= 20 and len(referenced) >= 2
    assert requests[0] <= len(referenced) and requests[1] == 0, (requests, per_file)
    assert per_file == (0, report["checked"]["files"])


def test_verify_quick_reads_no_file_and_finds_what_sizes_show(s3_server, monkeypatch) -> None:
    """Issue 23's target for verify on S3: about one request per 1,000 referenced files plus the
    _metadata. The footer of each SST (a ranged GET per file) is what kept verify above it:
    --quick reads no byte of any file but the _metadata, lists each referenced directory once, asks
    a HEAD only of what no listing shows, and still reports every missing and every truncated file a full verify reports."""
    e, data = _uploaded(s3_server, "verify-quick", "2.2.0", "basic")
    fs = s3_server.filesystem()
    job = next(p.parent.name for p in data.glob("checkpoints/*/chk-9"))
    chk = f"s3://verify-quick/checkpoints/{job}/chk-9"
    rebase = ["--rebase", f"{e['original_root']}=s3://verify-quick"]
    referenced = sorted(
        p for p in _referenced(chk, rebase, s3_server.endpoint) if not p.endswith("/_metadata")
    )
    fs.rm_file(referenced[0][5:])  # one file gone, one cut short
    fs.pipe_file(referenced[-1][5:], fs.cat_file(referenced[-1][5:])[:-1])

    def verify(*extra: str, engine: str = "local") -> tuple[dict, tuple[int, int, int]]:
        lists, heads = Rule(lambda _m, p: is_list(p)), Rule(lambda m, _p: m == "HEAD")
        reads = Rule(
            lambda m, p: m == "GET" and not is_list(p) and not urlsplit(p).path.endswith("/_metadata")
        )
        with FaultyProxy(s3_server.endpoint, fault_rate=0.0, rules=[lists, heads, reads]) as proxy:
            r = ckptctl("verify", chk, "--engine", engine, "--json", "--s3-endpoint", proxy.endpoint, *rebase,
                        *extra, expect=1)  # fmt: skip
        return json.loads(r.stdout), (lists.seen, heads.seen, reads.seen)

    full, (_lists, _heads, full_reads) = verify()
    quick, (lists, heads, reads) = verify("--quick")
    dirs: dict[str, int] = {}
    for p in referenced:
        dirs[p.rsplit("/", 1)[0]] = dirs.get(p.rsplit("/", 1)[0], 0) + 1
    alone = sum(
        1 for n in dirs.values() if n < 2
    )  # a directory of one referenced file: a HEAD, not a listing
    # one more HEAD: the file no listing shows is asked for itself (a listing may lag behind the
    # store); one more listing looks for it elsewhere (the FLINK-39964 diagnosis)
    assert full_reads >= 10 and reads == 0 and heads == 1 + alone, (full_reads, reads, heads, alone)
    assert lists <= len(dirs) - alone + 1, (lists, dirs)
    assert quick["checked"]["sst_magic"] == quick["checked"]["readable"] == 0
    problems = [(p["path"], p["check"]) for p in full["problems"] if p["check"] in ("exists", "size")]
    assert problems == [(p["path"], p["check"]) for p in quick["problems"]]
    assert {(referenced[0], "exists"), (referenced[-1], "size")} <= set(problems)
    assert quick["reads"].startswith("none") and not full["reads"].startswith("none")
    # what a listing answered costs nothing towards starting Spark: auto stays in-process
    monkeypatch.setattr("ckptctl.engine.AUTO_SPARK_TASKS", 3)
    again, _requests = verify("--quick", engine="auto")
    assert again["engine"] == "local" and again["problems"] == quick["problems"]


def test_verify_quick_and_deep_are_one_line_error() -> None:
    r = ckptctl("verify", str(REPO / "fixtures"), "--quick", "--deep", expect=2)
    assert r.stderr.strip().count("\n") == 0 and "--quick" in r.stderr and "--deep" in r.stderr, r.stderr


def _referenced(chk: str, rebase: list[str], endpoint: str) -> set[str]:
    rows = json.loads(ckptctl("refs", "--json", chk, "--s3-endpoint", endpoint, *rebase).stdout)
    return {r["path"] for r in rows if r.get("path")}


def test_no_listing_request_when_nothing_needs_one(s3_server) -> None:
    """A bucket as ROOT costs no request before its listing (a bucket is never a file)."""
    _put(s3_server, "bucketroot", [f"{JOB_A}/chk-1/x"])
    with FaultyProxy(s3_server.endpoint, fault_rate=0.0) as proxy:
        storage = Storage(StorageOptions(s3_endpoint=proxy.endpoint))
        assert not storage.is_file("s3://bucketroot") and proxy.requests == 0
        assert not storage.is_file(f"s3://bucketroot/{JOB_A}") and proxy.requests == 1
        assert storage.is_file(f"s3://bucketroot/{JOB_A}/chk-1/x") and proxy.requests == 2


def test_listings_report_a_running_count_and_their_end(s3_server) -> None:
    """Storage.on_listed hears each page of the walk, of the full listing and of verify's listings
    (objects so far, never decreasing), then ``None`` when the listing is done: what the CLI's
    running count shows."""
    keys = (
        [f"{JOB_A}/chk-1/_metadata"]
        + [f"{JOB_A}/chk-1/f{i}" for i in range(3)]
        + [f"{JOB_A}/shared/{i}" for i in range(5)]
    )
    _put(s3_server, "counted", keys)
    storage = Storage(StorageOptions(s3_endpoint=s3_server.endpoint))
    heard: list[tuple[str, int | None]] = []
    storage.on_listed = lambda what, n: heard.append((what, n))
    for listing, objects in (
        (lambda: list(storage.list_checkpoint_areas("s3://counted")), {4}),  # shared/ rolled up
        (lambda: list(storage.list_files("s3://counted")), {9}),
        (lambda: storage.present([f"s3://counted/{k}" for k in keys[1:3] + keys[-2:]]), set(range(4, 10))),
    ):
        heard.clear()
        listing()
        counts = [n for _what, n in heard]
        assert counts[-1] is None and None not in counts[:-1] and len({w for w, _n in heard}) == 1, heard
        assert counts[:-1] == sorted(counts[:-1]) and counts[-2] in objects, heard


def test_commands_on_one_checkpoint_ask_s3_for_each_object_once(s3_server, tmp_path) -> None:
    """Issue 23: show, diff, states, plan-rescale, repair and relocate opened a checkpoint with a
    HEAD of its ``_metadata`` (two for relocate) before the GET, read each backend meta file with a
    HEAD and a GET (s3fs asks for the size of a whole-object read), and repair and relocate made a
    HEAD per file the checkpoint names (25 requests for relocate's plan of this checkpoint, 43 for
    repair). Now: no HEAD at all, no object asked for twice, one GET per ``_metadata``; the files
    a checkpoint names are found by one listing per directory."""
    e, data = _uploaded(s3_server, "one-checkpoint", "2.2.0", "basic")
    older, newer = (f"s3://one-checkpoint/{p.parent.relative_to(data).as_posix()}"
                    for p in sorted(data.rglob("_metadata"))[-2:])  # fmt: skip
    rebase = ["--rebase", f"{e['original_root']}=s3://one-checkpoint"]
    referenced_dirs = {p.rsplit("/", 1)[0] for p in _referenced(newer, rebase, s3_server.endpoint)}
    commands = [  # (arguments, _metadata files read, at most this many requests in all)
        (["show", newer], 1, None),
        (["show", f"{newer}/_metadata"], 1, None),
        (["diff", older, newer], 2, 2),
        (["plan-rescale", newer, "-p", "3"], 1, 1),
        (["states", newer], 1, None),
        (["repair", newer, "--dry-run"], 1, None),
        (["relocate", newer, f"file://{tmp_path}/copy"], 1, 1 + len(referenced_dirs)),
    ]
    for args, checkpoints, most in commands:
        seen: list[tuple[str, str]] = []
        everything = Rule(lambda m, p, seen=seen: seen.append((m, p)) or False)
        with FaultyProxy(s3_server.endpoint, fault_rate=0.0, rules=[everything]) as proxy:
            ckptctl(*args, "--json", "--s3-endpoint", proxy.endpoint, *rebase)
        reads = [urlsplit(p).path for m, p in seen if not is_list(p)]
        assert not [p for m, p in seen if m == "HEAD"], (args, seen)
        assert len(reads) == len(set(reads)), (args, reads)
        assert sum(p.endswith("/_metadata") for p in reads) == checkpoints, (args, reads)
        assert most is None or len(seen) <= most, (args, seen)
