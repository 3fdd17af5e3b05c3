"""ckptctl.paimon.table against real Paimon tables written by pypaimon 2.1.0.

The fixtures under fixtures/paimon/tables/ and their ``<table>.expected.json`` come from
fixtures/paimon/tables/generate.py: the expected values are what pypaimon's own readers say
(SnapshotManager, TagManager, ManifestListManager/ManifestFileManager, FileStorePathFactory).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from ckptctl.errors import CkptError, StorageError
from ckptctl.paimon.reachable import live_files, orphan_candidates, used_file_names
from ckptctl.paimon.records import PaimonFormatError
from ckptctl.paimon.table import PaimonTable
from ckptctl.paimon.tablelayout import decode_partition
from ckptctl.storage import Storage, StorageOptions

TABLES = Path(__file__).resolve().parents[2] / "fixtures" / "paimon" / "tables"
NAMES = ["append_table", "pk_table", "dynamic_pk_table"]
FUTURE = time.time() + 365 * 86400.0


def expected(name: str) -> dict:
    return json.loads((TABLES / f"{name}.expected.json").read_text())


def copy_table(name: str, tmp_path: Path) -> Path:
    dest = tmp_path / name
    shutil.copytree(TABLES / name, dest, copy_function=shutil.copy)  # times of now, as a fresh clone has
    return dest


def snapshot_view(s) -> dict:
    return {
        "id": s.id, "schemaId": s.schema_id, "baseManifestList": s.base_manifest_list,
        "deltaManifestList": s.delta_manifest_list, "changelogManifestList": s.changelog_manifest_list,
        "indexManifest": s.index_manifest, "commitUser": s.commit_user, "commitIdentifier": s.commit_identifier,
        "commitKind": s.commit_kind, "timeMillis": s.time_millis, "watermark": s.watermark,
        "totalRecordCount": s.total_record_count, "deltaRecordCount": s.delta_record_count,
    }  # fmt: skip


def summary(table: PaimonTable) -> dict:
    """Everything the reader says about a table, comparable across storages."""
    return {
        "snapshots": [snapshot_view(s) for s in table.snapshots()],
        "hints": table.hints(),
        "tags": {n: t.snapshot.id for n, t in table.tags().items()},
        "data": {s.id: [f.path for f in table.manifests.data_files(s)] for s in table.snapshots()},
        "live": {k: sorted((p, tuple(sorted(v))) for p, v in getattr(live_files(table), k).items())
                 for k in ("data", "changelog", "meta", "index")},
        "orphans": [(o.path, o.size, o.reason) for o in orphan_candidates(table, older_than=FUTURE)],
        "users": table.commit_users(),
    }  # fmt: skip


# -- against pypaimon -------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_snapshots_and_tags_match_pypaimon(name: str) -> None:
    exp = expected(name)
    table = PaimonTable(str(TABLES / name))
    assert [snapshot_view(s) for s in table.snapshots()] == exp["snapshots"]
    assert table.earliest_snapshot_id() == exp["earliest"]
    assert table.latest_snapshot_id() == exp["latest"]
    tags = table.tags()
    assert {n: t.snapshot.id for n, t in tags.items()} == exp["tags"]
    assert tags["savepoint-3"].savepoint_id == 3 and tags["t1"].savepoint_id is None
    assert table.hints() == {"EARLIEST": exp["earliest"], "LATEST": exp["latest"]}
    assert table.latest_schema()["partitionKeys"] == ["dt"]
    assert table.branches() == []
    assert [c.id for c in table.changelogs()] == exp["changelogs"]
    if exp["changelogs"]:  # long-lived changelogs: the expired snapshots, as they were
        assert [snapshot_view(c) for c in table.changelogs()] != []
        assert table.changelog_ids() == [1, 2] and table.snapshot(1) is None


@pytest.mark.parametrize("name", NAMES)
def test_latest_snapshot_of_user_matches_pypaimon(name: str) -> None:
    exp = expected(name)
    table = PaimonTable(str(TABLES / name))
    got = {u: (s.id if (s := table.latest_snapshot_of_user(u)) else None) for u in exp["commit_users"]}
    assert got == exp["latest_snapshot_of_user"]
    assert table.latest_snapshot_of_user("nobody") is None
    assert set(table.commit_users()) == set(exp["commit_users"])


@pytest.mark.parametrize("name", NAMES)
def test_live_data_files_per_snapshot_and_tag_match_pypaimon(name: str) -> None:
    exp = expected(name)
    table = PaimonTable(str(TABLES / name))
    for s in table.snapshots():
        files = table.manifests.data_files(s)
        assert [f.path for f in files] == exp["live_files"][str(s.id)], f"snapshot-{s.id}"
        assert all(
            f.bucket in (0, 1) and f.partition_path in ("dt=2026-01-01", "dt=2026-01-02") for f in files
        )
    for tag_name, tag in table.tags().items():
        assert [f.path for f in table.manifests.data_files(tag.snapshot)] == exp["tag_live_files"][tag_name]
    live = live_files(table)
    everything = {p for files in exp["live_files"].values() for p in files}
    everything |= {p for files in exp["tag_live_files"].values() for p in files}
    assert set(live.data) == everything
    assert set(live.data) <= set(exp["data_files_on_disk"])
    # the overwrite (snapshot 6) deleted every file of dt=2026-01-01 the earlier snapshots had
    overwritten = set(exp["live_files"]["5"]) - set(exp["live_files"]["6"])
    assert overwritten and all(p.startswith("dt=2026-01-01/") for p in overwritten)


@pytest.mark.parametrize("name", NAMES)
def test_orphan_candidates_are_the_real_orphans(name: str) -> None:
    exp = expected(name)
    table = PaimonTable(str(TABLES / name))
    orphans = orphan_candidates(table, older_than=FUTURE)
    paths = [o.path for o in orphans]
    assert paths == exp["orphans"]
    # the data files of the never-committed checkpoint 5 are among them ...
    assert set(exp["uncommitted_files"]) <= set(paths)
    assert {o.reason for o in orphans} == {"unreferenced"}
    # ... and nothing any snapshot or tag references
    live = live_files(table)
    assert not set(paths) & live.all_paths()
    assert all(o.size > 0 and o.uri.startswith("file:") for o in orphans)


@pytest.mark.parametrize("name", NAMES)
def test_changelog_and_index_files_match_pypaimon(name: str) -> None:
    exp = expected(name)
    table = PaimonTable(str(TABLES / name))
    everything = {s.id: s for s in [*table.snapshots(), *table.changelogs()]}
    got = {str(i): sorted(f.path for f in table.manifests.changelog_files(s)) for i, s in everything.items()}
    assert got == exp["changelog_files"]
    assert {
        str(s.id): sorted(f.path for f in table.manifests.index_files(s)) for s in table.snapshots()
    } == exp["index_files"]
    live = live_files(table)
    assert set(live.changelog) == {p for files in exp["changelog_files"].values() for p in files}
    assert set(live.index) >= {p for files in exp["index_files"].values() for p in files}
    if name == "dynamic_pk_table":
        assert live.changelog and live.index
        # a changelog-N keeps what its expired snapshot reached: its manifest lists are no orphans
        first = table.changelogs()[0]
        assert live.meta[f"manifest/{first.base_manifest_list}"] == {"changelog-1"}
        assert any(s == {"changelog-1"} or s == {"changelog-2"} for s in live.changelog.values())


# -- latest_snapshot_of_user: Paimon's walk stops at the first missing snapshot ---------------


def test_latest_snapshot_of_user_stops_at_an_expired_snapshot(tmp_path: Path) -> None:
    exp = expected("append_table")
    path = copy_table("append_table", tmp_path)
    users = {s["id"]: s["commitUser"] for s in exp["snapshots"]}
    a, b, overwriter = users[7], users[5], users[6]
    assert users[4] == b and users[3] == a
    # a gap: snapshot-6 gone. The walk from 7 finds A at once; B (at 5) is behind the gap
    (path / "snapshot" / "snapshot-6").unlink()
    table = PaimonTable(str(path))
    assert table.latest_snapshot_of_user(a).id == 7
    assert table.latest_snapshot_of_user(b) is None
    assert table.latest_snapshot_of_user(overwriter) is None
    # Hazard A: a restore of B's committables would re-commit everything
    assert not table.is_committed(b, 1)
    assert table.is_committed(a, 4) and not table.is_committed(a, 5)


def test_latest_snapshot_of_user_after_expiring_the_older_snapshots(tmp_path: Path) -> None:
    exp = expected("pk_table")
    path = copy_table("pk_table", tmp_path)
    users = {s["id"]: s["commitUser"] for s in exp["snapshots"]}
    for i in (3, 4, 5):
        (path / "snapshot" / f"snapshot-{i}").unlink()
    table = PaimonTable(str(path))
    assert table.snapshot_ids() == [6, 7]
    assert table.latest_snapshot_of_user(users[7]).id == 7
    assert table.latest_snapshot_of_user(users[6]).id == 6
    assert table.latest_snapshot_of_user(users[5]) is None  # B's snapshots all expired
    # the hints still say 3: never trusted over the listing
    assert table.hints()["EARLIEST"] == 3 and table.earliest_snapshot_id() == 6


def test_latest_comes_from_the_listing_not_the_hint(tmp_path: Path) -> None:
    exp = expected("append_table")
    path = copy_table("append_table", tmp_path)
    (path / "snapshot" / "LATEST").write_text("3")
    (path / "snapshot" / "EARLIEST").write_text("garbage")
    table = PaimonTable(str(path))
    assert table.hints() == {"EARLIEST": None, "LATEST": 3}
    assert table.latest_snapshot_id() == 7
    users = {s["id"]: s["commitUser"] for s in exp["snapshots"]}
    assert table.latest_snapshot_of_user(users[7]).id == 7


def test_no_snapshots_at_all(tmp_path: Path) -> None:
    path = copy_table("append_table", tmp_path)
    shutil.rmtree(path / "snapshot")
    table = PaimonTable(str(path))
    assert table.snapshots() == [] and table.latest_snapshot_of_user("x") is None
    assert table.latest_snapshot_id() is None


# -- files only a tag keeps, and what orphan cleaning must never take -------------------------


def test_files_only_a_tag_references_are_live_not_orphans(tmp_path: Path) -> None:
    exp = expected("append_table")
    path = copy_table("append_table", tmp_path)
    for i in (3, 4, 5):  # expire up to the overwrite: dt=2026-01-01's old files live on in the tags only
        (path / "snapshot" / f"snapshot-{i}").unlink()
    table = PaimonTable(str(path))
    live = live_files(table)
    tag_only = {p for p, sources in live.data.items() if all(s.startswith("tag-") for s in sources)}
    overwritten = set(exp["live_files"]["5"]) - set(exp["live_files"]["6"])
    assert tag_only and tag_only <= overwritten
    assert tag_only == (set(exp["tag_live_files"]["t1"]) | set(exp["tag_live_files"]["savepoint-3"])) - set(
        exp["live_files"]["6"]
    ) - set(exp["live_files"]["7"])
    orphans = {o.path for o in orphan_candidates(table, older_than=FUTURE)}
    assert not orphans & tag_only
    assert set(exp["uncommitted_files"]) <= orphans
    # without the tags they are live no more, yet no orphans either: the overwrite's DELETE entries
    # (still in snapshot 6 and 7's manifests) name them, and OrphanFilesClean keeps every file a
    # manifest entry of any kind names; it is snapshot expiration that deletes such files
    shutil.rmtree(path / "tag")
    table = PaimonTable(str(path))
    assert not tag_only & set(live_files(table).data)
    orphans = {o.path for o in orphan_candidates(table, older_than=FUTURE)}
    assert not tag_only & orphans
    assert {p.rpartition("/")[2] for p in tag_only} <= used_file_names(table)


def test_orphan_rules_dirs_names_and_age(tmp_path: Path) -> None:
    exp = expected("pk_table")
    path = copy_table("pk_table", tmp_path)
    bucket_dir = path / "dt=2026-01-02" / "bucket-0"
    strays = {
        "snapshot/stray.tmp": "not-a-snapshot",
        "changelog/stray": "not-a-changelog",
        "manifest/manifest-stray": "unreferenced",
        "index/index-stray": "unreferenced",
        "statistics/stat-stray": "unreferenced",
        "dt=2026-01-02/bucket-0/data-stray.parquet": "unreferenced",
    }
    never = [
        "schema/schema-1.tmp", "tag/stray", "snapshot/snapshot-7.tmp", "changelog/changelog-x", "consumer/consumer-x", "dt=2026-01-02/bucket-0/x.managed.blob",
        "dt=2026-01-02/stray-in-partition", "not_a_partition/bucket-0/data-x.parquet", "bucket-0/data-y.parquet",
        "dt=2026-01-02/bucket-0/sub/data-z.parquet", "manifest/sub/manifest-deep",
    ]  # fmt: skip
    for rel in [*strays, *never]:
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_bytes(b"x")
    table = PaimonTable(str(path))
    got = {o.path: o.reason for o in orphan_candidates(table, older_than=FUTURE)}
    assert got == {**strays, **dict.fromkeys(exp["orphans"], "unreferenced")}
    # age: only files older than the cut-off
    old = time.time() - 10 * 86400
    for rel in ("manifest/manifest-stray", "snapshot/stray.tmp"):
        os.utime(path / rel, (old, old))
    got = {o.path for o in orphan_candidates(table, older_than=time.time() - 86400)}
    assert got == {"manifest/manifest-stray", "snapshot/stray.tmp"}
    assert orphan_candidates(table) == [o for o in orphan_candidates(table, older_than=time.time() - 86400)]
    assert bucket_dir.is_dir()


def test_a_file_named_like_a_used_one_is_not_an_orphan(tmp_path: Path) -> None:
    # OrphanFilesClean matches used files by name: a copy of a live data file in another bucket stays
    exp = expected("append_table")
    path = copy_table("append_table", tmp_path)
    live = exp["live_files"]["7"][0]
    other = (
        live.replace("bucket-0", "bucket-1") if "bucket-0" in live else live.replace("bucket-1", "bucket-0")
    )
    shutil.copy(path / live, path / other)
    got = [o.path for o in orphan_candidates(PaimonTable(str(path)), older_than=FUTURE)]
    assert got == exp["orphans"]


def test_a_branch_without_schema_aborts_orphan_cleaning(tmp_path: Path) -> None:
    path = copy_table("append_table", tmp_path)
    (path / "branch" / "branch-dev" / "snapshot").mkdir(parents=True)
    (path / "branch" / "branch-dev" / "snapshot" / "LATEST").write_text("1")
    table = PaimonTable(str(path))
    assert table.branches() == ["dev"]
    with pytest.raises(CkptError, match="branches dev have no schema"):
        orphan_candidates(table, older_than=FUTURE)


def test_a_branch_keeps_the_files_its_snapshots_reference(tmp_path: Path) -> None:
    exp = expected("append_table")
    path = copy_table("append_table", tmp_path)
    branch = path / "branch" / "branch-dev"
    (branch / "schema").mkdir(parents=True)
    shutil.copy(path / "schema" / "schema-0", branch / "schema" / "schema-0")
    (branch / "snapshot").mkdir()
    # a branch made from tag t1 (what create_branch does: the tag's snapshot as the branch's own)
    shutil.copy(path / "tag" / "tag-t1", branch / "snapshot" / "snapshot-2")
    shutil.rmtree(path / "tag")
    for i in (3, 4, 5):
        (path / "snapshot" / f"snapshot-{i}").unlink()
    table = PaimonTable(str(path))
    live = live_files(table)
    branch_only = {p for p, s in live.data.items() if s == {"branch-dev/snapshot-2"}}
    assert branch_only and all(p.startswith("dt=2026-01-01/") for p in branch_only)
    orphans = [o.path for o in orphan_candidates(table, older_than=FUTURE)]
    assert not set(orphans) & live.all_paths()
    assert set(exp["uncommitted_files"]) <= set(orphans)
    dev = table.with_branch("dev")
    assert [f.path for f in dev.manifests.data_files(dev.snapshot(2))] == exp["tag_live_files"]["t1"]


# -- errors: one line naming the file ---------------------------------------------------------


def one_line(error: Exception, file: Path) -> str:
    text = str(error)
    assert "\n" not in text and str(file) in text and "Traceback" not in text
    return text


def test_corrupt_snapshot_json(tmp_path: Path) -> None:
    path = copy_table("append_table", tmp_path)
    bad = path / "snapshot" / "snapshot-7"
    bad.write_text('{"id": 7, "schemaId": 0, ')
    with pytest.raises(PaimonFormatError) as e:
        PaimonTable(str(path)).snapshots()
    text = one_line(e.value, bad)
    assert "byte 25" in text and "invalid JSON" in text and e.value.exit_code == 2
    bad.write_text('{"id": 7}')
    with pytest.raises(PaimonFormatError, match="no 'schemaId'") as e:
        PaimonTable(str(path)).snapshots()
    one_line(e.value, bad)
    bad.write_text('{"id": "7"}')
    with pytest.raises(PaimonFormatError, match="'id' is '7', not a int"):
        PaimonTable(str(path)).snapshot(7)
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(PaimonFormatError, match="not UTF-8"):
        PaimonTable(str(path)).snapshot(7)


def test_corrupt_tag_and_schema(tmp_path: Path) -> None:
    path = copy_table("pk_table", tmp_path)
    (path / "tag" / "tag-t1").write_text("[]")
    with pytest.raises(PaimonFormatError, match="a JSON list, not an object") as e:
        PaimonTable(str(path)).tags()
    one_line(e.value, path / "tag" / "tag-t1")
    (path / "schema" / "schema-0").write_text("{")
    with pytest.raises(PaimonFormatError) as e:
        orphan_candidates(PaimonTable(str(path)), older_than=FUTURE)
    one_line(e.value, path / "schema" / "schema-0")


def test_truncated_avro_manifest(tmp_path: Path) -> None:
    path = copy_table("append_table", tmp_path)
    table = PaimonTable(str(path))
    snapshot = table.snapshot(7)
    manifest = table.manifests.manifest_list(snapshot.delta_manifest_list)[0].file_name
    target = path / "manifest" / manifest
    data = target.read_bytes()
    target.write_bytes(data[: len(data) - 40])
    with pytest.raises(PaimonFormatError) as e:
        PaimonTable(str(path)).manifests.data_files(snapshot)
    text = one_line(e.value, target)
    assert "byte " in text and "Avro" in text
    target.write_bytes(data[:10])
    with pytest.raises(PaimonFormatError) as e:
        PaimonTable(str(path)).manifests.data_files(snapshot)
    one_line(e.value, target)
    target.write_bytes(b"not a manifest at all")
    with pytest.raises(PaimonFormatError, match="byte 0: not an Avro, Parquet or ORC manifest") as e:
        PaimonTable(str(path)).manifests.data_files(snapshot)
    one_line(e.value, target)


def test_truncated_manifest_list_and_missing_manifest(tmp_path: Path) -> None:
    path = copy_table("pk_table", tmp_path)
    table = PaimonTable(str(path))
    snapshot = table.snapshot(7)
    lst = path / "manifest" / snapshot.base_manifest_list
    lst.write_bytes(lst.read_bytes()[:-25])
    with pytest.raises(PaimonFormatError) as e:
        PaimonTable(str(path)).manifests.data_files(snapshot)
    one_line(e.value, lst)
    shutil.copytree(TABLES / "pk_table", tmp_path / "again")
    manifest = (
        PaimonTable(str(tmp_path / "again")).manifests.manifest_list(snapshot.base_manifest_list)[0].file_name
    )
    (tmp_path / "again" / "manifest" / manifest).unlink()
    with pytest.raises(StorageError, match="file not found") as e:
        PaimonTable(str(tmp_path / "again")).manifests.data_files(snapshot)
    one_line(e.value, tmp_path / "again" / "manifest" / manifest)


def test_a_manifest_of_another_kind(tmp_path: Path) -> None:
    path = copy_table("append_table", tmp_path)
    table = PaimonTable(str(path))
    snapshot = table.snapshot(7)
    # a manifest list where a manifest is expected: Avro, but not ManifestEntry records
    manifest = table.manifests.manifest_list(snapshot.delta_manifest_list)[0].file_name
    shutil.copy(path / "manifest" / snapshot.base_manifest_list, path / "manifest" / manifest)
    with pytest.raises(PaimonFormatError, match="no field '_KIND'") as e:
        PaimonTable(str(path)).manifests.data_files(snapshot)
    one_line(e.value, path / "manifest" / manifest)


def test_oversized_snapshot_is_not_read(tmp_path: Path, monkeypatch) -> None:
    import ckptctl.paimon.table as mod

    path = copy_table("append_table", tmp_path)
    monkeypatch.setattr(mod, "JSON_LIMIT", 100)
    with pytest.raises(PaimonFormatError, match="more than the 100 a Paimon snapshot may have") as e:
        PaimonTable(str(path)).snapshot(7)
    one_line(e.value, path / "snapshot" / "snapshot-7")


def test_partition_decoding() -> None:
    # what Paimon wrote for dt='2026-01-02' (one STRING field, 10 bytes: not inline)
    row = bytes.fromhex("0000000100000000000000000a00000010000000323032362d30312d3032000000000000")
    assert decode_partition(row, ["STRING NOT NULL"], True, "x") == ["2026-01-02"]
    # an inline string (<= 7 bytes): length in the top byte, high bit set
    inline = (1).to_bytes(4, "big") + bytes(8) + b"abc" + bytes(4) + bytes([0x80 | 3])
    assert decode_partition(inline, ["VARCHAR(5)"], True, "x") == ["abc"]
    two = (2).to_bytes(4, "big") + bytes([0, 0b10, 0, 0, 0, 0, 0, 0]) + (7).to_bytes(8, "little") + bytes(8)
    assert decode_partition(two, ["INT", "STRING"], True, "x") == ["7", None]
    day = (1).to_bytes(4, "big") + bytes(8) + (20454).to_bytes(4, "little") + bytes(4)
    assert decode_partition(day, ["DATE"], True, "x") == ["20454"]
    assert decode_partition(day, ["DATE"], False, "x") == ["2026-01-01"]
    with pytest.raises(PaimonFormatError, match="partition type MAP<INT, INT> is not decoded"):
        decode_partition(day, ["MAP<INT, INT>"], True, "x")
    with pytest.raises(PaimonFormatError, match="2 partition keys"):
        decode_partition(day, ["INT", "INT"], True, "x")


# -- the same tables over S3 (moto server on loopback) ----------------------------------------


@pytest.fixture(scope="module")
def s3_tables(s3_server) -> str:
    s3_server.create_bucket("ckptctl-paimon")
    s3_server.put_many({f"ckptctl-paimon/tables/{p.relative_to(TABLES).as_posix()}": p.read_bytes()
             for p in sorted(TABLES.rglob("*")) if p.is_file() and p.suffix != ".py"})  # fmt: skip
    return "s3://ckptctl-paimon/tables"


@pytest.mark.parametrize("name", NAMES)
def test_s3_gives_identical_results(name: str, s3_server, s3_tables: str) -> None:
    storage = Storage(StorageOptions.from_env(s3_endpoint=s3_server.endpoint))
    remote = PaimonTable(f"{s3_tables}/{name}", storage)
    local = PaimonTable(str(TABLES / name))
    assert summary(remote) == summary(local)
    exp = expected(name)
    assert [o.path for o in orphan_candidates(remote, older_than=FUTURE)] == exp["orphans"]
    assert all(o.uri.startswith(f"{s3_tables}/{name}/") for o in orphan_candidates(remote, older_than=FUTURE))
    users = {u: (s.id if (s := remote.latest_snapshot_of_user(u)) else None) for u in exp["commit_users"]}
    assert users == exp["latest_snapshot_of_user"]
    # the storage's clock: everything was just uploaded, nothing is a day old
    assert orphan_candidates(remote) == []


def test_s3_corrupt_manifest_names_the_object(s3_server, s3_tables: str) -> None:
    fs = s3_server.filesystem()
    src = "ckptctl-paimon/tables/pk_table"
    dst = "ckptctl-paimon/broken/pk_table"
    for key in fs.find(src):
        fs.pipe_file(dst + key[len(src) :], fs.cat_file(key))
    storage = Storage(StorageOptions.from_env(s3_endpoint=s3_server.endpoint))
    table = PaimonTable(f"s3://{dst}", storage)
    snapshot = table.snapshot(7)
    key = f"{dst}/manifest/{snapshot.delta_manifest_list}"
    fs.pipe_file(key, fs.cat_file(key)[:-30])
    with pytest.raises(PaimonFormatError) as e:
        PaimonTable(f"s3://{dst}", storage).manifests.data_files(snapshot)
    assert "\n" not in str(e.value) and str(e.value).startswith(f"s3://{key}: byte ")


def no_null_type(t):
    """ORC has no column of type null (a field that is None in every record): make it a string."""
    import pyarrow as pa

    if pa.types.is_null(t):
        return pa.string()
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, no_null_type(f.type)) for f in t])
    if pa.types.is_list(t):
        return pa.list_(no_null_type(t.value_type))
    return t


def test_parquet_and_orc_manifests_read_like_avro(tmp_path: Path) -> None:
    # pypaimon writes Avro only: the same records rewritten as Parquet / ORC (manifest.format)
    import fastavro
    import pyarrow as pa
    import pyarrow.orc as orc
    import pyarrow.parquet as pq

    exp = expected("pk_table")
    for fmt in ("parquet", "orc"):
        path = copy_table("pk_table", tmp_path / fmt)
        for manifest in (path / "manifest").iterdir():
            with manifest.open("rb") as f:
                records = list(fastavro.reader(f))
            table = pa.Table.from_pylist(records)
            table = table.cast(pa.schema([pa.field(f.name, no_null_type(f.type)) for f in table.schema]))
            if fmt == "parquet":
                pq.write_table(table, manifest)
            else:
                orc.write_table(table, manifest)
        table = PaimonTable(str(path))
        assert {str(s.id): [f.path for f in table.manifests.data_files(s)] for s in table.snapshots()} == exp[
            "live_files"
        ]
        assert [o.path for o in orphan_candidates(table, older_than=FUTURE)] == exp["orphans"]


def test_a_partition_type_ckptctl_does_not_decode(tmp_path: Path) -> None:
    exp = expected("append_table")
    path = copy_table("append_table", tmp_path)
    schema = path / "schema" / "schema-0"
    schema.write_text(schema.read_text().replace('"type": "STRING"', '"type": "TIMESTAMP(3)"', 1))
    table = PaimonTable(str(path))
    files = table.manifests.data_files(table.snapshot(7))
    assert files and all(f.path.startswith("<partition 0x00000001") for f in files)
    assert [o.path for o in orphan_candidates(table, older_than=FUTURE)] == exp["orphans"]
