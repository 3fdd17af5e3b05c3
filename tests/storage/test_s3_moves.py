"""``Storage.move_many`` on S3 attacked at a proxy: throttled copies, HEADs and deletes, copies
that answer 200 but are not there (or are another object), sources changed or gone since they
were judged, keys that need escaping, and more than one DeleteObjects batch.

A move may only ever delete a source whose copy is in place with the size the source was judged
with; anything else keeps the source and says why (fail closed: ``gc apply --trash``).
"""

from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor

from ckptctl.storage import Storage, StorageOptions
from tests.support.faulty_proxy import SLOW_DOWN, FaultyProxy, Rule

# keys a URL must escape, a "..", unicode: each copied and deleted as itself, never another
ODD = ["r/a b", "r/50%", "r/1+1", "r/ünï/ç", "r/x..y", "r/q?x=1&y", "r/~tilde"]


def _client(s3_server):
    import boto3
    from botocore.config import Config

    return boto3.client("s3", endpoint_url=s3_server.endpoint, region_name="us-east-1",
                        config=Config(max_pool_connections=16))  # fmt: skip


def _put_all(s3_server, bucket: str, objects: dict[str, bytes]) -> None:
    s3_server.create_bucket(bucket)
    client = _client(s3_server)
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda kv: client.put_object(Bucket=bucket, Key=kv[0], Body=kv[1]), objects.items()))


def _digests(s3_server, bucket: str) -> dict[str, str]:
    """Each key's content MD5 as S3 lists it (its ETag: no multipart here): no GET per object."""
    pages = _client(s3_server).get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return {o["Key"]: o["ETag"].strip('"') for page in pages for o in page.get("Contents", [])}


def _md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()  # noqa: S324 - S3's ETag, not security


def test_odd_keys_move_through_throttling_with_a_copy_and_a_head_each(s3_server) -> None:
    """Sources with odd keys among them, CopyObject, HEAD and DeleteObjects throttled at first:
    every byte lands in the trash under its own key, every source is gone, and the requests are a
    copy and a HEAD per file plus one DeleteObjects, retries aside. (The same with 1,001 sources:
    two DeleteObjects, all moved -- 17 s on moto, so not run here; delete_many's batches are
    tests/gc/test_apply_executors.py's.)"""
    n = 150
    sources = {k: f"bytes of {k}".encode() for k in ODD} | {
        f"r/{i:04d}": b"x" * (i % 7) for i in range(n - len(ODD))
    }
    _put_all(s3_server, "moves-many", sources)
    copies = Rule(lambda m, p: m == "PUT" and p.startswith("/moves-many/t/"), fail=5, fault=SLOW_DOWN)
    heads = Rule(lambda m, p: m == "HEAD", fail=5, fault=SLOW_DOWN)
    deletes = Rule(lambda m, p: m == "POST" and "delete" in p, fail=2, fault=SLOW_DOWN)
    with FaultyProxy(s3_server.endpoint, fault_rate=0.0, rules=[copies, heads, deletes]) as proxy:
        storage = Storage(StorageOptions(s3_endpoint=proxy.endpoint))
        moves = [(f"s3://moves-many/{k}", f"s3://moves-many/t/{k}", len(v)) for k, v in sources.items()]
        assert storage.move_many(moves) == []
    assert _digests(s3_server, "moves-many") == {"t/" + k: _md5(v) for k, v in sources.items()}
    assert (copies.seen, heads.seen, deletes.seen) == (n + 5, n + 5, 1 + 2)
    assert proxy.requests == copies.seen + heads.seen + deletes.seen


def test_a_source_is_kept_unless_its_copy_is_there_as_judged(s3_server, monkeypatch) -> None:
    """Each move goes wrong differently; every source but the one already gone stays as it was:
    a copy answered 200 then gone; a copy replaced (another size, or the same size: its ETag is
    not the copy's) before its HEAD; a source that grew since it was judged (its copy has the new
    size); a HEAD that never answers; two sources given one destination (the later copy would
    replace the earlier, both HEADs pass); a source gone (nothing to do, no error, nothing made)."""
    # a HEAD throttled for good gives up within seconds; the deadline is also the longest a request
    # waits for an answer (the read timeout), which a loaded machine's moto needs more than 1 s of
    monkeypatch.setenv("CKPTCTL_S3_DEADLINE", "5")
    names = ("vanished", "replaced", "same-size", "grown", "unanswered", "twin-1", "twin-2", "kept-ok")
    sources = {f"r/{n}": n.encode() * 3 for n in names}
    _put_all(s3_server, "moves-wrong", sources)
    client = _client(s3_server)
    client.put_object(Bucket="moves-wrong", Key="r/grown", Body=b"grown" * 9)  # after it was judged

    def after_copy_of(name: str):
        return lambda m, p, _body: m == "PUT" and p.split("?")[0] == f"/moves-wrong/t/{name}"

    rules = [
        Rule(lambda m, p: False, after_response=after_copy_of("vanished"),
             before=lambda: client.delete_object(Bucket="moves-wrong", Key="t/vanished")),
        Rule(lambda m, p: False, after_response=after_copy_of("replaced"),
             before=lambda: client.put_object(Bucket="moves-wrong", Key="t/replaced", Body=b"other")),
        Rule(lambda m, p: False, after_response=after_copy_of("same-size"),
             before=lambda: client.put_object(Bucket="moves-wrong", Key="t/same-size", Body=b"x" * 27)),
        Rule(lambda m, p: m == "HEAD" and p.endswith("/t/unanswered"), fail=1000, fault=SLOW_DOWN),
    ]  # fmt: skip
    with FaultyProxy(s3_server.endpoint, fault_rate=0.0, rules=rules) as proxy:
        storage = Storage(StorageOptions(s3_endpoint=proxy.endpoint))
        moves = [(f"s3://moves-wrong/{k}", f"s3://moves-wrong/t/{k[2:]}".rstrip("-12"), len(v))
                 for k, v in sources.items()]  # fmt: skip
        moves.append(("s3://moves-wrong/r/gone", "s3://moves-wrong/t/gone", 4))
        errors = dict(storage.move_many(moves))
    assert all(rule.fired or rule.failed for rule in rules)
    wrong = ("vanished", "replaced", "same-size", "grown", "unanswered", "twin-1", "twin-2")
    assert sorted(errors) == [f"s3://moves-wrong/r/{n}" for n in sorted(wrong)]
    assert all("source kept" in why for why in errors.values()), errors
    assert "replaced by another object" in errors["s3://moves-wrong/r/same-size"]
    now = _digests(s3_server, "moves-wrong")
    assert {k: now.get(k) for k in sources if k != "r/kept-ok"} == {
        k: _md5(b"grown" * 9 if k == "r/grown" else v) for k, v in sources.items() if k != "r/kept-ok"
    }
    assert "r/kept-ok" not in now and now["t/kept-ok"] == _md5(sources["r/kept-ok"])
    assert "t/gone" not in now and "t/twin" not in now


def test_stat_many_asks_for_what_a_listing_does_not_show(s3_server) -> None:
    """relocate's plan, repair's missing files and FLINK-39964's diagnose trust a listing for what
    it shows and ask (HEAD) for the rest: a file written just after its directory was listed (a
    lagging listing) is found, a listing refused (403) is answered file by file, and a file that
    is nowhere is missing -- the sizes all the store's own."""
    sizes = {f"d/{i:03d}": i % 5 for i in range(70)}
    _put_all(s3_server, "stat-lag", {k: b"1" * n for k, n in sizes.items()})
    client = _client(s3_server)
    late = Rule(lambda m, p: False, after_response=lambda m, p, _b: m == "GET" and "list-type=2" in p,
                before=lambda: client.put_object(Bucket="stat-lag", Key="d/late", Body=b"late"))  # fmt: skip
    denied = (403, b"<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>")
    asked = [f"s3://stat-lag/{k}" for k in sizes] + ["s3://stat-lag/d/late", "s3://stat-lag/d/nowhere"]
    expected = {f"s3://stat-lag/{k}": n for k, n in sizes.items()} | {
        "s3://stat-lag/d/late": 4,
        "s3://stat-lag/d/nowhere": None,
    }
    for rules in ([late], [Rule(lambda m, p: "list-type=2" in p, fail=1, fault=denied)]):
        with FaultyProxy(s3_server.endpoint, fault_rate=0.0, rules=rules) as proxy:
            got = Storage(StorageOptions(s3_endpoint=proxy.endpoint)).stat_many(asked)
        assert {u: (i.size if i else None) for u, i in got.items()} == expected
        assert rules[0].fired or rules[0].failed
        if rules[0] is late:
            assert proxy.requests <= 2 + 2, (
                proxy.requests
            )  # the listing, and a HEAD each for the two it missed
