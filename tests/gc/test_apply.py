"""``gc apply --trash`` across storages, and plan files validated whole (issue 19 rows 4, 12, 14).

A move is a copy, a check that the copy is there, then a delete of the source, and the source is
reached the way a delete reaches it: from the root through ``O_NOFOLLOW`` directory descriptors.
A destination that cannot be written (no such bucket, a missing local directory) is a failure
naming it, never "moved". S3 is a moto server on loopback.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from tests.support.gc_support import Scenario, ckptctl
from tests.support.s3_copied import exists, gc_args, upload_scenario

OLD = ["--older-than", "1d", "--margin", "10m"]


def local_plan(sc: Scenario, tmp_path: Path, n: int = 3) -> tuple[Path, list[Path]]:
    job = sc.jobs()[0].name
    orphans = [sc.plant(f"checkpoints/{job}/shared/orphan-{i}", size=100 + i) for i in range(n)]
    plan_file = tmp_path / "plan.json"
    ckptctl("gc", "plan", str(sc.checkpoints), *sc.rebase, *OLD, "--force", "-o", str(plan_file))
    return plan_file, orphans


# ---------------------------------------------------------------------------------------------
# row 4: a local root, --trash on S3, shared/ swapped for a symlink while apply runs


def test_a_local_to_s3_move_never_follows_a_swapped_in_symlink(
    s3_server, tmp_path: Path, monkeypatch
) -> None:
    """Tracker: row4."""
    from ckptctl.storage import Storage

    s3_server.create_bucket("trash-row4")
    sc = Scenario("2.2.0", "basic", tmp_path)
    plan_file, orphans = local_plan(sc, tmp_path)
    shared = orphans[0].parent
    outside = tmp_path / "outside"  # what the link points at: same names, not ours
    outside.mkdir()
    for o in orphans:
        (outside / o.name).write_bytes(b"not yours")
    real_stat = Storage.stat
    swapped = []

    def swap_then_stat(self, uri):
        # the first look at the trash: after the plan was re-validated, before the first file goes
        if uri.startswith("s3://trash-row4/") and not swapped:
            os.rename(shared, tmp_path / "shared-moved-away")
            shared.symlink_to(outside, target_is_directory=True)
            swapped.append(uri)
        return real_stat(self, uri)

    monkeypatch.setattr(Storage, "stat", swap_then_stat)
    result = ckptctl("gc", "apply", str(plan_file), "--yes", "--json", "--trash", "s3://trash-row4/t",
                     "--s3-endpoint", s3_server.endpoint, expect=None)  # fmt: skip
    assert swapped, "the swap must have happened during apply"
    assert all((outside / o.name).read_bytes() == b"not yours" for o in orphans)
    # what went to the trash is the orphans' own bytes (read through the directory it opened)
    fs = s3_server.filesystem()
    trashed = {p.rpartition("/")[2]: fs.cat_file(p) for p in fs.find("trash-row4/t")}
    moved = json.loads(result.stdout)["deleted"] if result.exit_code == 0 else []
    assert all(trashed.get(Path(d["path"]).name) != b"not yours" for d in moved)
    assert not any((tmp_path / "shared-moved-away" / o.name).exists() for o in orphans if o.name in trashed)


# ---------------------------------------------------------------------------------------------
# row 12: an S3 root moved to a local trash, or to a bucket that does not exist


def test_s3_to_a_local_trash_really_moves(s3_server, tmp_path: Path) -> None:
    """Tracker: row12."""
    up = upload_scenario(s3_server, "trash-row12-local")
    args = gc_args("trash-row12-local", up["entry"], s3_server.endpoint)
    plan_file = tmp_path / "plan.json"
    ckptctl("gc", "plan", *args, "-o", str(plan_file))
    trash = tmp_path / "not" / "yet" / "there"
    result = json.loads(ckptctl("gc", "apply", str(plan_file), "--yes", "--json", "--trash", str(trash),
                                "--s3-endpoint", s3_server.endpoint).stdout)  # fmt: skip
    assert {d["path"] for d in result["deleted"]} == up["orphans"] and not result["failed"]
    in_trash = {p.name for p in trash.rglob("*") if p.is_file()}
    assert in_trash == {u.rpartition("/")[2] for u in up["orphans"]}
    assert not any(exists(up["fs"], u) for u in up["orphans"])


def test_a_mistyped_trash_bucket_moves_nothing_and_says_so(s3_server, tmp_path: Path) -> None:
    """Tracker: row12."""
    up = upload_scenario(s3_server, "trash-row12-bucket")
    args = gc_args("trash-row12-bucket", up["entry"], s3_server.endpoint)
    plan_file = tmp_path / "plan.json"
    ckptctl("gc", "plan", *args, "-o", str(plan_file))
    result = ckptctl("gc", "apply", str(plan_file), "--yes", "--json", "--trash", "s3://no-such-trash-bucket/t",
                     "--s3-endpoint", s3_server.endpoint, expect=None)  # fmt: skip
    assert result.exit_code != 0
    report = json.loads(result.stdout)
    assert not report["deleted"] and {f["path"] for f in report["failed"]} == up["orphans"]
    assert "no-such-trash-bucket" in json.dumps(report["failed"])
    assert all(exists(up["fs"], u) for u in up["orphans"])


def test_an_s3_trash_in_the_same_store_copies_server_side_a_request_or_two_per_file(
    s3_server, tmp_path: Path
) -> None:
    """Issue 23: a move to an S3 trash was five sequential requests per file (a HEAD of the source,
    s3fs's HEAD before its copy, the copy, a HEAD of the copy, a delete of one key). Now the size
    the re-validation listed is the source's, the copies run concurrently, each checked by one HEAD,
    and the sources go 1,000 per DeleteObjects. A copy the store refuses keeps its source and is
    reported; the others move: the bytes in the trash are the orphans' own."""
    from tests.support.faulty_proxy import FaultyProxy, Rule

    up = upload_scenario(s3_server, "trash-same-store")
    s3_server.create_bucket("trash-same-store-t")
    args = gc_args("trash-same-store", up["entry"], s3_server.endpoint)
    plan_file = tmp_path / "plan.json"
    ckptctl("gc", "plan", *args, "-o", str(plan_file))
    before = {u: up["fs"].cat_file(u[5:]) for u in up["orphans"]}
    refused = sorted(up["orphans"])[0]
    refused_key = refused.split("/", 3)[3]

    def copy_of(method: str, path: str, key: str | None = None) -> bool:
        return method == "PUT" and "/trash-same-store-t/" in path and (key is None or path.endswith(key))

    seen: list[tuple[str, str]] = []
    every = Rule(lambda m, p: seen.append((m, p)) or False)
    deny = Rule(lambda m, p: copy_of(m, p, refused_key), fail=10**6, fault=(403, b"<Error><Code>AccessDenied</Code>"
                b"<Message>Access Denied</Message></Error>"))  # fmt: skip
    with FaultyProxy(s3_server.endpoint, fault_rate=0.0, rules=[deny, every]) as proxy:
        result = ckptctl("gc", "apply", str(plan_file), "--yes", "--json", "--trash", "s3://trash-same-store-t/t",
                         "--s3-endpoint", proxy.endpoint, expect=None)  # fmt: skip
    report = json.loads(result.stdout)
    assert result.exit_code != 0 and [f["path"] for f in report["failed"]] == [refused]
    assert {d["path"] for d in report["deleted"]} == up["orphans"] - {refused}
    assert exists(up["fs"], refused) and not any(exists(up["fs"], u) for u in up["orphans"] - {refused})
    trashed = {p.rpartition("/")[2]: up["fs"].cat_file(p) for p in up["fs"].find("trash-same-store-t/t")}
    assert trashed == {u.rpartition("/")[2]: before[u] for u in up["orphans"] - {refused}}
    moved = len(up["orphans"]) - 1
    copies = [p for m, p in seen if copy_of(m, p)]
    heads = [p for m, p in seen if m == "HEAD"]
    deletes = [p for m, p in seen if m == "POST" and "delete" in p]
    assert len(copies) == moved and len(heads) == moved and all("/trash-same-store-t/" in p for p in heads), (
        seen
    )
    assert len(deletes) == 1, deletes


# ---------------------------------------------------------------------------------------------
# row 14: a plan whose candidates lack a field


def test_a_candidate_without_mtime_is_an_invalid_plan(tmp_path: Path) -> None:
    """Tracker: row14."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    plan_file, orphans = local_plan(sc, tmp_path)
    data = json.loads(plan_file.read_text())
    assert data["candidates"]
    del data["candidates"][0]["mtime"]
    plan_file.write_text(json.dumps(data))
    result = ckptctl("gc", "apply", str(plan_file), "--yes", expect=2)
    err = result.stderr.strip()
    assert "not a valid plan" in err and "Traceback" not in err and len(err.splitlines()) == 1
    assert all(o.exists() for o in orphans)
    shutil.rmtree(tmp_path / "unused", ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# trash names on S3: never one for two files, never one already taken


def test_s3_trash_names_never_meet_nor_overwrite_also_after_an_interrupted_run(
    s3_server, monkeypatch
) -> None:
    """``x``'s trash name is taken, so it would get ``x.~1~`` -- the very name of the candidate
    ``x.~1~``: both copies went to one key, both sources were deleted, one file was lost. Every
    candidate gets a name of its own, none taken before. A run whose DeleteObjects never go
    through keeps every source (its copies stay in the trash), and running it again -- its trash
    listing refused this time, so each name is asked for -- moves each source to a new name,
    leaving everything earlier in the trash as it was."""
    import hashlib

    import boto3

    from ckptctl.gc.apply import Remover, trash_targets
    from ckptctl.storage import Storage, StorageOptions
    from tests.support.faulty_proxy import FaultyProxy, Rule, lists_inside

    def md5s() -> dict[str, str]:
        pages = client.get_paginator("list_objects_v2").paginate(Bucket="trash-names")
        return {o["Key"]: o["ETag"].strip('"') for page in pages for o in page.get("Contents", [])}

    s3_server.create_bucket("trash-names")
    client = boto3.client("s3", endpoint_url=s3_server.endpoint, region_name="us-east-1")
    sources = {"r/x": b"AAAA", "r/x.~1~": b"BBBB", "r/y": b"CCCC"}
    for key, body in {**sources, "t/s3/trash-names/r/x": b"old!"}.items():
        client.put_object(Bucket="trash-names", Key=key, Body=body)
    judged = {f"s3://trash-names/{k}": (len(v), None) for k, v in sources.items()}
    denied = (403, b"<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>")

    def run(rules: list[Rule]) -> tuple[dict[str, str], dict[str, str]]:
        with FaultyProxy(s3_server.endpoint, fault_rate=0.0, rules=rules) as proxy:
            storage = Storage(StorageOptions(s3_endpoint=proxy.endpoint))
            targets = trash_targets(storage, "s3://trash-names/t", judged)
            return targets, dict(Remover(storage, ["s3://trash-names/r"]).move(targets, judged))

    # DeleteObjects refused for good: given up within seconds (not 1 s: the deadline also bounds the
    # wait for each answer, more than 1 s on a loaded machine)
    monkeypatch.setenv("CKPTCTL_S3_DEADLINE", "5")
    first, errors = run([Rule(lambda m, p: m == "POST" and "delete" in p, fail=10**6)])
    assert len(set(first.values())) == 3 and "s3://trash-names/t/s3/trash-names/r/x" not in first.values()
    assert sorted(errors) == sorted(judged) and all("could not delete" in why for why in errors.values())
    after_first = md5s()
    assert all(after_first[k] == hashlib.md5(v).hexdigest() for k, v in sources.items())  # noqa: S324
    assert after_first["t/s3/trash-names/r/x"] == hashlib.md5(b"old!").hexdigest()  # noqa: S324
    assert {after_first[t[len("s3://trash-names/") :]] for t in first.values()} == {
        hashlib.md5(v).hexdigest()
        for v in sources.values()  # noqa: S324
    }

    refused = Rule(lists_inside("t"), fail=1, fault=denied)
    second, errors = run([refused])
    assert refused.failed == 1 and errors == {}
    assert not set(second.values()) & set(first.values()) and len(set(second.values())) == 3
    now = md5s()
    assert {k: now.get(k) for k in after_first if k.startswith("t/")} == {
        k: v for k, v in after_first.items() if k.startswith("t/")
    }
    assert not any(k.startswith("r/") for k in now)
    assert {now[t[len("s3://trash-names/") :]] for t in second.values()} == {
        hashlib.md5(v).hexdigest()
        for v in sources.values()  # noqa: S324
    }


def test_s3_trash_names_of_concurrent_batches_never_meet(s3_server) -> None:
    """The executors' batches name their trash files concurrently, each knowing only its own
    candidates: ``x`` (its trash name taken) in one batch and ``x.~1~`` in another both chose
    ``x.~1~``. A suffixed name is never one whose own file exists, so they cannot meet."""
    import boto3

    from ckptctl.gc.apply import trash_targets
    from ckptctl.storage import Storage, StorageOptions

    s3_server.create_bucket("trash-batches")
    client = boto3.client("s3", endpoint_url=s3_server.endpoint, region_name="us-east-1")
    for key in ("r/x", "r/x.~1~", "t/s3/trash-batches/r/x"):
        client.put_object(Bucket="trash-batches", Key=key, Body=key.encode())
    storage = Storage(StorageOptions(s3_endpoint=s3_server.endpoint))
    one = trash_targets(storage, "s3://trash-batches/t", ["s3://trash-batches/r/x"])
    other = trash_targets(storage, "s3://trash-batches/t", ["s3://trash-batches/r/x.~1~"])
    assert other == {"s3://trash-batches/r/x.~1~": "s3://trash-batches/t/s3/trash-batches/r/x.~1~"}
    assert one == {"s3://trash-batches/r/x": "s3://trash-batches/t/s3/trash-batches/r/x.~2~"}
