"""``check`` scans a root once: one listing of the root, one read of each ``_metadata``.

The storage handed to :func:`ckptctl.check.run_check` is a :class:`Storage` subclass that counts
what is asked of it (nothing in ckptctl or a library is patched); the counts are compared with the
layout of the real fixture (its ``_metadata`` files found on disk), and the report with Flink's
own reading of it (the manifest's orphans).
"""

from __future__ import annotations

import collections
import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from ckptctl.checkpoint.rebase import Rebase
from ckptctl.errors import StorageError
from ckptctl.gc import GcOptions, build_plan
from ckptctl.storage import Storage, StorageOptions
from tests.support.faulty_proxy import FaultyProxy, Rule, is_clock_request, is_list
from tests.support.fixture_cases import manifest
from tests.support.gc_support import Scenario


class CountingStorage(Storage):
    """A real storage that counts listings and whole-file reads by URI."""

    def __init__(self, options: StorageOptions | None = None) -> None:
        super().__init__(options)
        self.listings: collections.Counter[str] = collections.Counter()
        self.metadata_listings: collections.Counter[str] = collections.Counter()
        self.reads: collections.Counter[str] = collections.Counter()

    def list_files(self, uri, notes=None):
        self.listings[uri] += 1
        return super().list_files(uri, notes)

    def find_metadata(self, uri):
        self.metadata_listings[uri] += 1
        return super().find_metadata(uri)

    def read_bytes(self, uri, limit=None, size=None):
        self.reads[uri] += 1
        return super().read_bytes(uri, limit, size)


def _check(storage: Storage, root: str, rebase: Rebase, limit: int | None = None) -> dict:
    from ckptctl.check import run_check

    return run_check(storage, root, rebase, limit).to_json()


def _metadata_reads(storage: CountingStorage) -> dict[str, int]:
    return {u: n for u, n in storage.reads.items() if u.endswith("/_metadata")}


def test_check_lists_the_root_once_and_reads_each_metadata_once(tmp_path: Path) -> None:
    sc = Scenario("1.20.3", "claim", tmp_path)  # two jobs, six checkpoints, real orphans
    storage = CountingStorage()
    root = sc.uri(sc.checkpoints)
    report = _check(storage, root, Rebase.parse([f"{sc.original}={sc.root}"]))

    on_disk = {sc.uri(p) for p in sc.checkpoints.rglob("_metadata")}
    assert len(on_disk) == len(report["checkpoints"]) == 6
    assert storage.listings == {root: 1}  # verify, the diagnosis and gc's plan all used this one
    assert storage.metadata_listings == {}  # gc's planner found the _metadata files in the scan
    assert _metadata_reads(storage) == dict.fromkeys(on_disk, 1)
    # and the scan answered what a fresh gc plan answers: Flink's orphans, every file checked
    orphans = sc.unreferenced_by_flink()
    assert report["ok"] and report["orphans"]["files"] == len(orphans) > 0
    assert report["orphans"]["bytes"] == sum(Path(u[5:]).stat().st_size for u in orphans)
    assert report["checked"]["exists"] == report["checked"]["files"] > 0


def test_an_unreadable_metadata_is_read_once_too(tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    broken = sorted(sc.checkpoints.rglob("_metadata"))[0]
    broken.write_bytes(b"\0garbage")
    storage = CountingStorage()
    report = _check(storage, sc.uri(sc.checkpoints), Rebase.parse([f"{sc.original}={sc.root}"]))

    assert not report["ok"]
    assert [p["path"] for p in report["problems"] if p["check"] == "metadata"] == [sc.uri(broken)]
    # gc planned on the scan; what the unreadable checkpoint references is unknown, so its files are
    # not counted as orphans: the count says why it was not measured
    assert report["orphans"]["files"] == 0 and "unreadable _metadata" in report["orphans"]["error"]
    assert storage.listings == {sc.uri(sc.checkpoints): 1}
    assert _metadata_reads(storage) == {sc.uri(p): 1 for p in sc.checkpoints.rglob("_metadata")}


def test_check_over_s3_lists_once_and_reads_each_metadata_once(s3_server, s3_fixtures: str) -> None:
    e = next(x for x in manifest()["entries"] if x["flink_version"] == "1.20.3" and x["scenario"] == "claim")
    base = f"{s3_fixtures}/1.20.3/claim"
    storage = CountingStorage(StorageOptions.from_env(s3_server.endpoint))
    root = f"{base}/checkpoints"
    report = _check(storage, root, Rebase.parse([f"{e['original_root']}={base}"]))

    listed = [f.uri for f in Storage(StorageOptions.from_env(s3_server.endpoint)).list_files(root)]
    on_s3 = {u for u in listed if u.endswith("/_metadata")}
    assert report["ok"] and len(on_s3) == len(report["checkpoints"]) == 6
    assert storage.listings == {root: 1} and storage.metadata_listings == {}
    assert _metadata_reads(storage) == dict.fromkeys(on_s3, 1)
    # what a fresh gc plan (its own listings and reads) measures; here 0: the upload made every
    # file as young as the newest _metadata, so gc's in-flight guard protects them all
    fresh = build_plan(
        Storage(StorageOptions.from_env(s3_server.endpoint)),
        GcOptions((root,), older_than=0.0, margin=0.0, force=True, allow_external=True,
                  rebase=Rebase.of([(e["original_root"], base)])),
    )  # fmt: skip
    orphans = report["orphans"]
    assert (orphans["files"], orphans["bytes"]) == (len(fresh.candidates), fresh.candidate_bytes)


def _metadata_get(method: str, path: str) -> bool:
    return method == "GET" and urlsplit(path).path.endswith("/_metadata")


def _root_listing(method: str, path: str) -> bool:
    return is_list(path) and not is_clock_request(method, path)


@pytest.mark.parametrize("gc_worker", [False, True], ids=["in-process", "gc-worker-process"])
def test_check_over_s3_on_the_wire(s3_server, s3_fixtures: str, monkeypatch, gc_worker: bool) -> None:
    """The same, counted as HTTP requests at a proxy in front of the S3 server, so that a read
    by any process (gc decodes large sets of _metadata in a worker process) is seen."""
    import ckptctl.gc.plan

    if gc_worker:  # as when the _metadata files add up to more than PARALLEL_METADATA_BYTES
        monkeypatch.setattr(ckptctl.gc.plan, "PARALLEL_METADATA_BYTES", 0)
    e = next(x for x in manifest()["entries"] if x["flink_version"] == "1.20.3" and x["scenario"] == "claim")
    base = f"{s3_fixtures}/1.20.3/claim"
    root = f"{base}/checkpoints"
    gets, lists = Rule(_metadata_get), Rule(_root_listing)
    with FaultyProxy(s3_server.endpoint, fault_rate=0.0, rules=[gets, lists]) as proxy:
        storage = Storage(StorageOptions.from_env(proxy.endpoint))
        on_s3 = [f.uri for f in storage.list_files(root) if f.uri.endswith("/_metadata")]
        one_listing = lists.seen
        report = _check(storage, root, Rebase.parse([f"{e['original_root']}={base}"]))
    assert report["ok"] and len(on_s3) == len(report["checkpoints"]) == 6
    assert lists.seen == 2 * one_listing  # the listing above, and check's one
    assert gets.seen == len(on_s3)  # one GET per _metadata, in whichever process


def test_the_scan_storage_refuses_to_write(tmp_path: Path) -> None:
    from ckptctl.checkpoint.scan import RootScan

    sc = Scenario("1.20.3", "basic", tmp_path)
    scan = RootScan.of(Storage(), str(sc.checkpoints), Rebase.parse([f"{sc.original}={sc.root}"]))
    victim = sorted(sc.checkpoints.rglob("_metadata"))[0]
    with pytest.raises(StorageError, match="read-only"):
        scan.storage.delete_many([sc.uri(victim)])
    with pytest.raises(StorageError, match="read-only"):
        scan.storage.write_bytes(sc.uri(victim), b"")
    assert victim.stat().st_size > 0
    # and what it lists below the root is what the storage lists there
    job = sc.uri(sc.jobs()[0])
    assert [f.uri for f in scan.storage.list_files(job)] == [f.uri for f in Storage().list_files(job)]


def test_the_scan_storage_overrides_match_the_storage_they_replace() -> None:
    """Every method the scan overrides takes what Storage's takes: callers hold either one."""
    import inspect

    from ckptctl.checkpoint.scan import ScanStorage

    overridden = [n for n, f in vars(ScanStorage).items() if callable(f) and not n.startswith("__")]
    shared = [n for n in overridden if hasattr(Storage, n)]
    assert {"now", "delete_many", "read_bytes", "list_files"} <= set(shared)
    for name in shared:
        assert inspect.signature(getattr(ScanStorage, name)) == inspect.signature(getattr(Storage, name)), (
            name
        )


def test_check_quick_over_s3_reads_nothing_but_the_metadata(s3_server, s3_fixtures: str) -> None:
    """``check --quick``: the gate's one listing answers existence and sizes; no file is read but
    each ``_metadata`` (the full check reads every SST's footer and each metadata file)."""
    from ckptctl.check import run_check

    e = next(x for x in manifest()["entries"] if x["flink_version"] == "1.20.3" and x["scenario"] == "claim")
    base = f"{s3_fixtures}/1.20.3/claim"
    root = f"{base}/checkpoints"
    rebase = Rebase.parse([f"{e['original_root']}={base}"])
    seen = {}
    for quick in (False, True):
        reads = Rule(
            lambda m, p: m == "GET" and not is_list(p) and not urlsplit(p).path.endswith("/_metadata")
        )
        heads = Rule(lambda m, _p: m == "HEAD")
        with FaultyProxy(s3_server.endpoint, fault_rate=0.0, rules=[reads, heads]) as proxy:
            report = run_check(
                Storage(StorageOptions.from_env(proxy.endpoint)), root, rebase, None, (), quick
            ).to_json()
        assert report["ok"], report["problems"][:3]
        assert report["reads"].startswith("none") == quick
        seen[quick] = (reads.seen + heads.seen, report["checked"])
    (full_reads, full), (quick_reads, quick) = seen[False], seen[True]
    assert full_reads > 0 and full["sst_magic"] > 0 and quick_reads == 0 and quick["sst_magic"] == 0
    assert (
        quick["files"] == full["files"]
        and quick["exists"] == full["exists"]
        and quick["size"] == full["size"]
    )


def test_check_quick_fails_the_gate_on_a_missing_and_a_truncated_file(tmp_path: Path) -> None:
    from ckptctl.check import run_check

    sc = Scenario("1.20.3", "claim", tmp_path)
    victims = sorted(p for p in sc.referenced_by_flink() if "/shared/" in p)
    Path(victims[0][5:]).unlink()
    Path(victims[-1][5:]).write_bytes(Path(victims[-1][5:]).read_bytes()[:-1])
    rebase = Rebase.parse([f"{sc.original}={sc.root}"])
    full = run_check(Storage(), str(sc.checkpoints), rebase, None).to_json()
    quick = run_check(Storage(), str(sc.checkpoints), rebase, None, (), True).to_json()
    assert not quick["ok"] and quick["checked"]["sst_magic"] == 0
    found = {(p["path"], p["check"]) for p in quick["problems"]}
    assert {(victims[0], "exists"), (victims[-1], "size")} <= found
    assert found == {
        (p["path"], p["check"]) for p in full["problems"] if p["check"] in ("exists", "size", "metadata")
    }
    from tests.support.gc_support import ckptctl

    cli = json.loads(ckptctl("check", str(sc.checkpoints), "--quick", "--json", *sc.rebase, expect=1).stdout)
    assert cli["checked"] == quick["checked"] and {(p["path"], p["check"]) for p in cli["problems"]} == found
