"""Attacks on the S3 listings that skip what they need not see (``ckptctl.storage.s3list``).

A checkpoint the walk misses is one whose files gc would take for orphans (gc refuses when the
walk and the full listing disagree, so a miss costs a refusal, and ``ls``/``check`` lose it); a
referenced file ``present`` shows that is not there would let a broken checkpoint pass verify.
Each listing here is compared with the ground truth: a plain listing of the bucket filtered by
the directory grammar, over keys built to fall at the edges of the "/shared/" delimiter, of
``StartAfter`` and of pages (names sorting next to ``shared/``, areas under tenant directories,
unicode and long keys, markers, siblings sharing the root's name), at every small page size.
"""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

from ckptctl.checkpoint.layout import is_checkpoint_metadata
from ckptctl.storage import JOB_AREAS, Storage, StorageOptions, is_job_dir_name

A, B, T = "a" * 32, "b" * 32, "d" * 32  # two jobs and a tenant directory named like a job
SP = "savepoint-abcdef-0123456789ab"
LONG = "l" * 900

TREE = [
    f"root/{A}/chk-1/_metadata", f"root/{A}/chk-1/f", f"root/{A}/chk-5/_metadata",
    *(f"root/{A}/shared/x{i}" for i in range(7)), *(f"root/{A}/taskowned/t{i}" for i in range(4)),
    f"root/{A}/shared/" + "s" * 900, f"root/{A}/taskowned/\U0010ffffz", f"root/{A}/shared/{B}/chk-9/_metadata",
    # names sorting around "shared/" and "taskowned/": before ("-", ".", " ", "!") and after ("0", "é")
    f"root/{A}/shared-x/chk-2/_metadata", f"root/{A}/shared.bak/chk-1/_metadata", f"root/{A}/shared0",
    f"root/{A}/shared", f"root/{A}/taskowned", f"root/{A}/taskowned0/_metadata", f"root/{A}/taskowned-/x",
    f"root/{A}/shared /_metadata", f"root/{A}/shared!x", f"root/{A}/sharedé/_metadata", f"root/{A}/chk-6/é",
    # areas at any depth, tenant directories named shared/taskowned, "/shared/" twice
    f"root/team/shared/{B}/chk-3/_metadata", f"root/team/shared/{B}/shared/s1", f"root/team/shared/{B}/shared/s2",
    f"root/team/taskowned/{B}/chk-4/_metadata", "root/team/shared/\U0010ffffz/_metadata",
    f"root/{T}/shared/{B}/chk-3/_metadata", f"root/{T}/taskowned/{B}/chk-3/_metadata", f"root/{T}/shared/{SP}/_metadata",
    "root/x/shared/y/shared/z/_metadata", f"root/{A}/chk-5/shared/{B}/shared/q", f"root/{A}/chk-5/{B}/chk-2/_metadata",
    f"root/shared/{SP}/_metadata", f"root/shared/{A}/shared/x", f"root/shared/{A}/chk-1/_metadata",
    # unicode, blanks, percent signs, a long key
    "root/é/chk-1/_metadata", "root/a b/shared/c%20d/_metadata", "root/\u00ff/x", "root/\U0001f600/shared/_metadata",
    f"root/long/{LONG}/_metadata",
    # markers, a _metadata that is a marker
    f"root/{A}/chk-7/", f"root/{A}/shared/", "root/team/shared/", f"root/{A}/chk-8/_metadata/", f"root/{A}/taskowned/",
    # siblings that share the root's (or the job directory's) name
    "root2/x/_metadata", "rootx", "root", f"root/{A}x/shared/y", f"root/{A}-old/chk-1/_metadata", f"root/{A}0/shared/z",
    f"root/{A}", f"root/{A}-old/taskowned/t",
]  # fmt: skip
ROOTS = ("root", f"root/{A}", "root/team/shared", f"root/{A}/chk-5", "")


def _put(s3_server, bucket: str, keys: list[str]) -> None:
    import boto3

    s3_server.create_bucket(bucket)
    client = boto3.client("s3", endpoint_url=s3_server.endpoint, region_name="us-east-1")
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda k: client.put_object(Bucket=bucket, Key=k, Body=_body(k)), keys))


def _body(key: str) -> bytes:
    return b"" if key.endswith("/") else b"x" * (1 + len(key) % 5)


def _outside_areas(root: str, keys: list[str]) -> list[str]:
    """The ground truth: the keys below ``root`` that no ``<job-id>/shared/`` or
    ``<job-id>/taskowned/`` directory holds (the root's own name counting as a job's)."""
    prefix = root + "/" if root else ""
    top = root.rpartition("/")[2] if root else "attack"
    out = []
    for k in keys:
        if not k.startswith(prefix):
            continue
        parts = [top, *k[len(prefix) :].split("/")]
        if not any(parts[i] in JOB_AREAS and is_job_dir_name(parts[i - 1]) for i in range(1, len(parts) - 1)):
            out.append(k)
    return out


def _run(storage: Storage, coro, *args):
    """``coro(fs, *args)``, failed after 20 s: a listing that asks for the same page forever."""
    import asyncio

    from fsspec.asyn import sync

    fs, _ = storage.fs("s3://x")

    async def bounded():
        return await asyncio.wait_for(coro(fs, *args), 20)

    return sync(fs.loop, bounded)


def test_the_walk_sees_what_the_grammar_sees_at_every_page_size(s3_server) -> None:
    """``ls``/``check``'s walk and gc's ``_metadata`` search from five roots (a root, a job directory
    with siblings named like it, a tenant ``shared`` directory, a chk-N, the bucket) see exactly the
    grammar's files and sizes; ``list_outside`` at pages of 1-5 keys, with and without the
    delimiter, too. A page that ended inside ``taskowned/`` among keys past ``taskowned/`` +
    U+10FFFF jumped back to the same page forever (the walk hung)."""
    from ckptctl.storage.s3list import list_outside

    _put(s3_server, "attack", TREE)
    storage = Storage(StorageOptions(s3_endpoint=s3_server.endpoint))
    for root in ROOTS:
        uri = "s3://attack/" + root if root else "s3://attack"
        truth = _outside_areas(root, TREE)
        files = [k for k in truth if not k.endswith("/")]
        assert sorted(f.uri for f in storage.list_checkpoint_areas(uri)) == sorted(
            "s3://attack/" + k for k in files
        ), root
        metadata = sorted(u for u in ("s3://attack/" + k for k in files) if is_checkpoint_metadata(uri, u))
        assert sorted(f.uri for f in storage.find_metadata(uri)) == metadata, root
        sizes = {f.uri: f.size for f in storage.list_files(uri)}
        assert all(sizes[f.uri] == f.size for f in storage.list_checkpoint_areas(uri))
        within = root + "/" if root else ""
        top = root.rpartition("/")[2] or "attack"
        prefix = root if is_job_dir_name(top) else within

        def area_of(k: str, within=within, top=top) -> str | None:
            parts = [top, *k[len(within) :].split("/")]
            for i in range(1, len(parts) - 1):
                if parts[i] in JOB_AREAS and is_job_dir_name(parts[i - 1]):
                    return within + "/".join(parts[1 : i + 1]) + "/"
            return None

        for page in (1, 2, 3, 5):
            for delimiter in ("/shared/", None):
                got = _run(storage, list_outside, "attack", prefix, area_of, page, None, within, delimiter)
                assert sorted(k for k, _s, _m in got) == sorted(truth), (root, page, delimiter)


PRESENT = [
    "a.sst",
    "a.sst.1",
    "a.ss",
    "a.sst/",
    "a.sst/x",
    "b",
    "b0",
    "b/",
    "b/\U0010ffffz",
    "é",
    "a b",
    "a%20b",
    "\U0001f600",
    "z" * 900,
    *(f"m{i:02d}" for i in range(12)),
    "sub/",
    "sub/\U0010ffff",
    "sub0",
]
ABSENT = ["a.sst.2", "a.s", "c", "b.", "bz", "m05x", "m1", "sub", "\U0010ffff", "!"]


def test_present_shows_exactly_the_existing_names_and_their_sizes(s3_server) -> None:
    """Referenced names next to names that differ in a last character or a suffix, to sub-directories
    named like them (whose keys sort past ``name/`` + U+10FFFF), absent names between present ones:
    at every small page size and number of runs, exactly the existing ones with their sizes."""
    from ckptctl.storage.s3list import list_present

    _put(s3_server, "present-attack", [f"d/{n}" for n in PRESENT] + ["d", "e/a.sst", "d0/b"])
    storage = Storage(StorageOptions(s3_endpoint=s3_server.endpoint))
    files = [n for n in PRESENT if "/" not in n]
    rng = random.Random(7)
    for trial in range(12):
        asked = rng.sample(files + ABSENT, rng.randint(1, len(files + ABSENT)))
        for page in (1, 2, 3):
            for runs in (1, 3):
                got = _run(storage, list_present, "present-attack", "d/", asked, runs, page)
                assert {k: s for k, s, _m in got} == {f"d/{n}": len(_body(f"d/{n}")) for n in asked if n in files}, (
                    trial, page, runs, asked,
                )  # fmt: skip
    # through Storage.present: one referenced file per directory, many directories
    uris = [f"s3://present-attack/d/{n}" for n in ("a.sst", "a.sst.2")] + ["s3://present-attack/e/a.sst"]
    uris += ["s3://present-attack/d0/b", "s3://present-attack/d0/c", "s3://present-attack/d/a.sst/x"]
    found = storage.present(uris)
    assert {u: f.size for u, f in found.items()} == {
        u: len(_body(u[len("s3://present-attack/") :])) for u in uris if not u.endswith(("a.sst.2", "/c"))
    }


def test_a_full_page_of_an_area_past_the_jump_ends_at_s3s_page_size(s3_server) -> None:
    """At S3's own page size (1000 keys): a page that ends among 1,000 keys of ``taskowned/`` lying
    past the jump point took the walk back to that page forever; the checkpoint after it is found."""
    from ckptctl.storage.s3list import list_outside

    keys = [
        f"{A}/chk-1/_metadata",
        *(f"{A}/taskowned/\U0010ffff{i:04d}" for i in range(1001)),
        f"{A}/zz/_metadata",
    ]
    _put(s3_server, "full-page", keys)
    storage = Storage(StorageOptions(s3_endpoint=s3_server.endpoint))

    def area_of(k: str) -> str | None:
        return f"{A}/taskowned/" if k.startswith(f"{A}/taskowned/") else None

    got = _run(storage, list_outside, "full-page", "", area_of, None, None, "", None)
    assert sorted(k for k, _s, _m in got) == [f"{A}/chk-1/_metadata", f"{A}/zz/_metadata"]
