"""``ckptctl states``: the catalog and the deep scan, against the ``states`` fixtures whose state is
known by construction (fixtures/states/StatesJob.java; expectations from the manifest entry).

Job 1 of the scenario declared its states (``declared_states``) with the RocksDB entries, list
elements and phase-1 ("aged") elements each must hold; the phase times are in ``phases``. Job 2 is
the SQL job with ``table.exec.state.ttl``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ckptctl.checkpoint.loading import load_checkpoint
from ckptctl.storage import Storage, StorageOptions
from tests.support.fixture_cases import REPO, manifest
from tests.support.gc_support import Scenario, ckptctl

VERSIONS = ("1.20.3", "2.2.0")
MASTER = "local[*]"  # the session the other Spark tests use: another master stops it and starts another


def entry(version: str, scenario: str = "states") -> dict:
    return next(
        e for e in manifest()["entries"] if e["flink_version"] == version and e["scenario"] == scenario
    )


def completed(e: dict, job: int) -> list[Path]:
    """Completed checkpoint/savepoint dirs of job ``job`` (0: DataStream, 1: SQL), in the repo copy."""
    jid = e["jobs"][job]["job_id"]
    out = []
    for c in e["checkpoints"]:
        if not c["has_metadata"]:
            continue
        if c["kind"] == "checkpoint" and c["job_id"] != jid:
            continue
        if c["kind"] == "savepoint" and f"savepoint-{jid[:6]}-" not in c["dir"]:
            continue
        out.append(REPO / e["data_dir"] / c["dir"])
    return out


def after_phase2(e: dict) -> list[Path]:
    """Checkpoints of job 1 that certainly hold every phase-2 key, and its savepoint."""
    job = e["jobs"][0]
    first = job["checkpoint_at_phase2_end"] + 2
    out = []
    for c in e["checkpoints"]:
        if not c["has_metadata"]:
            continue
        if c["kind"] == "savepoint" or (c["job_id"] == job["job_id"] and c["checkpoint_id"] >= first):
            out.append(REPO / e["data_dir"] / c["dir"])
    return out


def states_json(*args: str, expect: int = 0) -> dict:
    result = ckptctl("states", "--json", *args, expect=expect)
    return json.loads(result.stdout)


def by_name(op: dict) -> dict[str, dict]:
    return {s["name"]: s for s in op["states"]}


def operator(report: dict, operator_id: str) -> dict:
    return next(op for op in report["operators"] if op["operator_id"] == operator_id)


def ttl_threshold(job: dict, now_ms: int) -> int:
    """A TTL between the phases: phase-2 entries were stamped at or after phase2_start, phase-1
    entries (processed with at most a few seconds' lag) long before it."""
    return now_ms - job["phases"]["phase2_start_ms"] + 1


# ---------------------------------------------------------------------------------------------
# the catalog


@pytest.mark.parametrize("version", VERSIONS)
def test_catalog_matches_what_the_job_declared(version: str) -> None:
    e = entry(version)
    job = e["jobs"][0]
    declared = {d["name"]: d for d in job["declared_states"]}
    dirs = completed(e, 0)
    assert len(dirs) >= 3 and any("savepoint" in str(d) for d in dirs)
    for d in dirs:
        report = states_json(str(d))
        keyed = operator(report, job["operators"]["stateful"])
        opstate = operator(report, job["operators"]["opstate"])
        states = {**by_name(keyed), **by_name(opstate)}
        assert set(states) == set(declared), d
        for name, want in declared.items():
            got = states[name]
            assert got["kind"] == want["kind"], (d, name)
            assert got["ttl"] is want["ttl"], (d, name)
            assert got["timers"] is (want["kind"] == "TIMERS"), (d, name)
        assert keyed["key_serializer"]["class"].endswith("LongSerializer$LongSerializerSnapshot")
        assert keyed["keyed_handles"] == 2 and keyed["keyed_bytes"] > 0
        assert keyed["keyed_backend"] == ("full-snapshot" if "savepoint" in str(d) else "rocksdb-incremental")
        # TTL states: Flink's TtlSerializer wraps the user's serializer (nested for map and list)
        ttl_value = states["ttl-value"]["serializers"]["VALUE_SERIALIZER"]
        assert ttl_value["class"].endswith("TtlStateFactory$TtlSerializerSnapshot")
        assert states["ttl-map"]["serializers"]["VALUE_SERIALIZER"]["class"].endswith("MapSerializerSnapshot")
        assert any(
            "TtlSerializerSnapshot" in c
            for c in states["ttl-map"]["serializers"]["VALUE_SERIALIZER"]["nested"]
        )
        assert states["ttl-list"]["ttl_element_length"] == 16  # timestamp + Long
        assert states["ttl-list-str"]["ttl_element_length"] is None  # String: variable length
        plain = states["plain-map"]["serializers"]["VALUE_SERIALIZER"]
        assert not any("Ttl" in c for c in [plain["class"], *plain["nested"]])
        # operator state: two subtasks, op-list holds 2 elements each, the union list 1 each
        assert states["op-list"]["elements"] == 4 and states["op-union"]["elements"] == 2
        assert states["op-list"]["bytes"] > 0 and states["op-union"]["subtasks"] == 2


@pytest.mark.parametrize("version", VERSIONS)
def test_sql_table_exec_state_ttl_states_are_ttl_states(version: str) -> None:
    e = entry(version)
    assert e["jobs"][1]["config"]["table.exec.state.ttl"] == "1d"
    for d in completed(e, 1):
        report = states_json(str(d))
        states = {s["name"]: s for op in report["operators"] for s in op["states"]}
        assert states["accState"]["ttl"] is True and states["agg2$map"]["ttl"] is True
        assert states["_timer_state/processing_user-timers"]["ttl"] is False


@pytest.mark.parametrize("version", VERSIONS)
def test_sql_fixtures_without_state_ttl_have_no_ttl_states(version: str) -> None:
    # the existing SQL scenarios do not set table.exec.state.ttl
    e = entry(version, "basic")
    assert "table.exec.state.ttl" not in e["config"]
    d = completed(e, 0)[-1]
    report = states_json(str(d))
    states = [s for op in report["operators"] for s in op["states"]]
    assert {s["name"] for s in states} >= {"accState", "agg2$map"}
    assert not any(s["ttl"] for s in states)


def test_every_fixture_catalog_reads() -> None:
    from ckptctl.states import catalog

    storage = Storage(StorageOptions())
    n = 0
    for e in manifest()["entries"]:
        for c in e["checkpoints"]:
            if c["has_metadata"]:
                ck = load_checkpoint(storage, str(REPO / e["data_dir"] / c["dir"]))
                cat = catalog(storage, ck)
                keyed = [s for oc in cat for s in oc.states.values() if s.scope == "keyed"]
                assert keyed, c["dir"]
                n += 1
    assert n > 60


def test_show_json_lists_states_under_each_operator() -> None:
    e = entry("2.2.0")
    job = e["jobs"][0]
    d = after_phase2(e)[0]
    view = json.loads(ckptctl("show", "--json", str(d)).stdout)
    ops = {op["operator_id"]: op for op in view["operators"]}
    assert {s["name"] for s in ops[job["operators"]["stateful"]]["states"]} == {
        x["name"] for x in job["declared_states"] if x["operator"] == "stateful"
    }
    assert all("states" in op for op in view["operators"])
    assert "subtasks" in ops[job["operators"]["stateful"]]  # the existing keys stay


def test_human_output_fits_80_columns(monkeypatch) -> None:
    e = entry("2.2.0")
    d = after_phase2(e)[0]
    monkeypatch.setenv("COLUMNS", "80")
    now = e["jobs"][0]["phases"]["phase2_end_ms"] + 1000
    for extra in ([], ["--deep", "--engine", "local", "--now", str(now), "--ttl", "5s"]):
        out = ckptctl("states", str(d), *extra).stdout
        lines = out.splitlines()
        assert max(len(x.rstrip()) for x in lines) <= 80, out
        assert "ttl-map" in out and "op-union" in out
        if extra:
            assert "60%" in out and "not decodable" in out


def test_bad_meta_bytes_are_one_line_naming_file_and_offset(tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "states", tmp_path)
    e = sc.entry
    job = e["jobs"][0]
    chk = next(d for d in after_phase2(e) if "chk-" in str(d))
    copy = sc.root / chk.relative_to(REPO / e["data_dir"])
    exp = json.loads(
        (REPO / e["expected_dir"] / (str(chk.relative_to(REPO / e["data_dir"])) + ".json")).read_text()
    )
    metas = [
        r for r in exp["references"]
        if r["role"] == "meta" and r["operator_id"] == job["operators"]["stateful"]
    ]  # fmt: skip
    victim = copy / Path(metas[0]["path"]).name
    assert victim.exists()
    data = victim.read_bytes()
    victim.write_bytes(data[: len(data) // 2])
    result = ckptctl("states", str(copy), *sc.rebase, expect=2)
    err = " ".join(result.stderr.split())
    assert str(victim) in err and "byte" in err and "states" in err
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    victim.write_bytes(b"\xff\xff\xff\xff" + data[4:])
    result = ckptctl("states", str(copy), *sc.rebase, expect=2)
    assert f"{victim}: byte 0:" in " ".join(result.stderr.split())


def test_files_of_another_size_or_kind_are_refused_before_they_are_read(tmp_path: Path) -> None:
    """Files a checkpoint records with a size are read only as regular files of that size: a FIFO
    in place of an SST kept ``states --deep`` waiting forever, one in place of a handle's meta file
    plain ``states``; a 28 KB SST padded to 50 GB (sparse) was read whole until MemoryError, after
    eight retries. Found by a red-team helper; now one line each, at once."""
    sc = Scenario("2.2.0", "states", tmp_path)
    e = sc.entry
    op = e["jobs"][0]["operators"]["stateful"]
    chk = next(d for d in after_phase2(e) if "chk-" in str(d))
    copy = sc.root / chk.relative_to(REPO / e["data_dir"])
    exp = json.loads(
        (REPO / e["expected_dir"] / (str(chk.relative_to(REPO / e["data_dir"])) + ".json")).read_text()
    )
    refs = [r for r in exp["references"] if r["operator_id"] == op]
    meta = copy / Path(next(r for r in refs if r["role"] == "meta")["path"]).name
    written = next(r["path"] for r in refs if r["role"] == "shared").removeprefix("file:")
    sst = sc.root / Path(written).relative_to(sc.original)
    assert meta.is_file() and sst.is_file()

    data = meta.read_bytes()
    meta.unlink()
    os.mkfifo(meta)
    err = " ".join(ckptctl("states", str(copy), *sc.rebase, expect=2).stderr.split())
    assert f"{meta}: not a regular file" in err
    meta.unlink()
    meta.write_bytes(data)
    with open(meta, "r+b") as f:
        f.truncate(50 << 30)
    result = ckptctl("states", str(copy), *sc.rebase, expect=2)
    err = " ".join(result.stderr.split())
    assert f"{meta}: ends at byte 53,687,091,200, the checkpoint records {len(data):,} bytes" in err
    assert len(result.stderr.strip().splitlines()) == 1
    meta.write_bytes(data)

    for broken in ("fifo", "padded"):
        original = sst.read_bytes()
        sst.unlink()
        if broken == "fifo":
            os.mkfifo(sst)
        else:
            sst.write_bytes(original)
            with open(sst, "r+b") as f:
                f.truncate(50 << 30)
        out = ckptctl("states", str(copy), "--deep", "--engine", "local", "--json", *sc.rebase, expect=1)
        problems = json.dumps(json.loads(out.stdout))
        assert (
            str(sst) in problems
            and ("not a regular file" if broken == "fifo" else "ends at byte") in problems
        )
        sst.unlink()
        sst.write_bytes(original)


def test_option_errors() -> None:
    d = after_phase2(entry("2.2.0"))[0]
    assert "needs --deep" in ckptctl("states", str(d), "--ttl", "7d", expect=2).stderr
    err = ckptctl("states", str(d), "--deep", "--engine", "local", "--ttl", "7x", expect=2).stderr
    assert "unknown unit" in err and "7x" in err
    err = ckptctl("states", str(d), "--deep", "--engine", "local", "--ttl", "nope=7d", expect=2).stderr
    assert "nope" in err
    err = ckptctl("states", str(d), "--deep", "--engine", "local", "--ttl", "plain-map=7d", expect=2).stderr
    assert "without TTL" in err and "plain-map" in err
    # a named TTL overrides the default for that state only
    now = entry("2.2.0")["jobs"][0]["phases"]["phase2_end_ms"]
    r = states_json(
        str(d), "--deep", "--engine", "local", "--now", str(now), "--ttl", "1d", "--ttl", "ttl-map=0ms"
    )
    states = {s["name"]: s for op in r["operators"] for s in op["states"]}
    assert states["ttl-map"]["usage"]["ttl_ms"] == 0 and states["ttl-value"]["usage"]["ttl_ms"] == 86_400_000
    assert states["ttl-value"]["usage"]["expired_elements"] == 0
    # every element with a last access at or before "now" is expired at TTL 0
    u = states["ttl-map"]["usage"]
    assert u["expired_elements"] == u["ttl_elements_decoded"] - sum(
        b["elements"] for b in u["age_histogram"] if b["bucket"] == "future"
    )


# ---------------------------------------------------------------------------------------------
# the deep scan


@pytest.mark.parametrize("version", VERSIONS)
def test_deep_counts_match_the_keys_written_and_ttl_ages_split_the_phases(
    version: str, tmp_path: Path
) -> None:
    e = entry(version)
    job = e["jobs"][0]
    declared = {d["name"]: d for d in job["declared_states"] if d["operator"] == "stateful"}
    now = job["phases"]["phase2_end_ms"] + 1000
    threshold = ttl_threshold(job, now)
    chks = [d for d in after_phase2(e) if "chk-" in str(d)]
    assert chks
    for d in chks:
        hist = tmp_path / f"{d.name}.parquet"
        report = states_json(str(d), "--deep", "--engine", "local", "--now", str(now), "--ttl", f"{threshold}ms",
                             "--histogram", str(hist))  # fmt: skip
        assert report["deep"]["problems"] == [] and report["deep"]["handles"] == 2
        states = by_name(operator(report, job["operators"]["stateful"]))
        for name, want in declared.items():
            u = states[name]["usage"]
            assert u["entries"] == want["entries"], (d, name, u["entries"])
            assert sum(kg["entries"] for kg in u["key_groups"].values()) == want["entries"]
            assert all(0 <= int(kg) <= 127 for kg in u["key_groups"])
            if not want["ttl"]:
                assert u["expired_elements"] is None and u["ttl_elements_decoded"] == 0
            elif want["ttl_decodable"]:
                assert u["ttl_elements_decoded"] == want["elements"], (d, name)
                assert u["expired_elements"] == want["aged_elements"], (d, name)  # exactly phase 1
                assert sum(b["elements"] for b in u["age_histogram"]) == want["elements"]
                assert u["oldest_age_ms"] >= threshold > u["newest_age_ms"] >= 0
            else:  # ListState<String>: variable-length elements
                assert u["ttl_entries_not_decodable"] == want["entries"] and u["ttl_elements_decoded"] == 0
        # list state appended with merge operands is read from the SST files, the rest via RocksDB
        assert states["ttl-list"]["usage"]["read_with"] == ["sst"]
        assert states["ttl-value"]["usage"]["read_with"] == ["rocksdb"]
        rows = pq.read_table(hist).to_pylist()
        totals: dict[str, int] = {}
        for r in rows:
            if r["age_bucket"] is None:
                totals[r["state"]] = totals.get(r["state"], 0) + r["entries"]
        assert totals == {n: w["entries"] for n, w in declared.items()}
        assert {r["state"] for r in rows if r["age_bucket"]} == {
            n for n, w in declared.items() if w["ttl"] and w["ttl_decodable"]
        }


@pytest.mark.parametrize("version", VERSIONS)
def test_deep_scan_of_the_canonical_savepoint_counts_what_the_checkpoints_hold(version: str) -> None:
    e = entry(version)
    job = e["jobs"][0]
    dirs = after_phase2(e)
    sp = next(d for d in dirs if "savepoint" in str(d))
    chk = [d for d in dirs if "chk-" in str(d)][-1]
    now = job["phases"]["phase2_end_ms"] + 1000
    args = ["--deep", "--engine", "local", "--now", str(now), "--ttl", f"{ttl_threshold(job, now)}ms"]
    a = states_json(str(sp), *args)
    b = states_json(str(chk), *args)
    assert a["deep"]["problems"] == [] and a["deep"]["handles"] == 2 and a["deep"]["not_scanned"] == []
    sa = by_name(operator(a, job["operators"]["stateful"]))
    sb = by_name(operator(b, job["operators"]["stateful"]))
    for d in job["declared_states"]:
        if d["operator"] != "stateful":
            continue
        ua, ub = sa[d["name"]]["usage"], sb[d["name"]]["usage"]
        assert ua["read_with"] == ["snapshot"]
        assert ua["entries"] == d["entries"]
        # the same key/value bytes as the RocksDB instances of the checkpoints
        for k in ("entries", "bytes", "key_groups", "expired_elements", "ttl_elements_decoded"):
            assert ua[k] == ub[k], (d["name"], k)


def test_spark_and_local_engines_give_the_same_numbers() -> None:
    e = entry("1.20.3")
    job = e["jobs"][0]
    d = [x for x in after_phase2(e) if "chk-" in str(x)][-1]
    now = job["phases"]["phase2_end_ms"] + 1000
    args = [str(d), "--deep", "--now", str(now), "--ttl", f"{ttl_threshold(job, now)}ms"]
    local = states_json(*args, "--engine", "local")
    spark = states_json(*args, "--master", MASTER)
    assert spark["deep"]["engine"] == "spark" and local["deep"]["engine"] == "local"
    strip = lambda r: [{**op, "states": op["states"]} for op in r["operators"]]  # noqa: E731
    assert strip(spark) == strip(local)


def test_sst_reader_agrees_with_rocksdb_on_every_column_family_it_can_read(tmp_path: Path) -> None:
    """The fallback reader for merge operands, cross-checked against RocksDB itself."""
    from rocksdict import AccessType, Options, Rdict

    from ckptctl.rocksdb.handledir import rebuild_handle_dir
    from ckptctl.rocksdb.sst import MergeOperandsError, iterate_cf, read_column_family
    from ckptctl.verify import handle_refs

    storage = Storage(StorageOptions())
    checked = merged = 0
    for version in VERSIONS:
        e = entry(version)
        for d in after_phase2(e):
            if "chk-" not in str(d):
                continue
            for h in handle_refs([load_checkpoint(storage, str(d))]):
                work = tmp_path / f"{version}-{d.name}-{h.index}"
                work.mkdir()
                rebuild_handle_dir(storage, h.files, str(work))
                cfs = Rdict.list_cf(str(work))
                db = Rdict(str(work), options=Options(raw_mode=True),
                           column_families={cf: Options(raw_mode=True) for cf in cfs},
                           access_type=AccessType.read_only())  # fmt: skip
                try:
                    for cf in cfs:
                        mine = read_column_family(str(work), cf)
                        try:
                            theirs = list(iterate_cf(db, cf))
                        except MergeOperandsError:
                            merged += 1
                            assert cf in ("ttl-list", "ttl-list-str") and mine
                            continue
                        assert mine == theirs, (d, cf)
                        checked += 1
                finally:
                    db.close()
    assert checked > 20 and merged > 0
    assert os.path.exists(tmp_path)


def test_deep_scan_over_s3_gives_the_local_numbers(s3_server, s3_fixtures: str) -> None:
    e = entry("2.2.0")
    job = e["jobs"][0]
    now = job["phases"]["phase2_end_ms"] + 1000
    args = ["--deep", "--engine", "local", "--now", str(now), "--ttl", f"{ttl_threshold(job, now)}ms"]
    for d in after_phase2(e)[-2:]:  # a checkpoint and the canonical savepoint
        uri = f"{s3_fixtures}/{d.relative_to(REPO / 'fixtures' / 'data').as_posix()}"
        remote = states_json(uri, "--s3-endpoint", s3_server.endpoint, *args)
        local = states_json(str(d), *args)
        assert remote["deep"]["problems"] == [] and remote["deep"]["handles"] == 2
        assert remote["operators"] == local["operators"]


def test_snappy_blocks_of_real_ssts_decode_the_same_with_pyarrow_and_the_reference_decoder() -> None:
    """The SST reader decodes snappy with PyArrow's codec (issue 22: the pure-Python decoder ran at
    ~30 MB/s); every compressed block of the SSTs Flink wrote in the fixtures must decode to the
    same bytes as the reference decoder, and a corrupt length is an error, not an allocation."""
    from ckptctl.rocksdb.sst import SstFile, SstFormatError, snappy_decompress, snappy_decompress_python

    blocks = ssts = 0
    for sst in sorted((REPO / "fixtures" / "data").rglob("*")):  # shared SSTs are named by UUID
        if ssts >= 300 or not sst.is_file() or sst.stat().st_size < 64:
            continue
        try:
            f = SstFile(str(sst))
        except SstFormatError:
            continue  # not an SST (metadata, private files, other state)
        ssts += 1
        delta = f.properties.get(b"rocksdb.index.value.is.delta.encoded", b"\x00") not in (b"\x00", b"")
        handles = [f.index, f.metaindex]
        handles += [h for _k, h in f._entries(f.block(f.index), handle_values=not delta, delta=delta)]
        for off, size in handles:
            if f.data[off + size] == 1:  # snappy
                raw = f.data[off : off + size]
                assert snappy_decompress(raw) == snappy_decompress_python(raw), sst
                blocks += 1
    assert blocks > 0
    with pytest.raises(ValueError, match="announced"):
        snappy_decompress(b"\xff\xff\xff\xff\x0f" + b"x" * 10)


@pytest.mark.parametrize(
    ("version", "scenario", "kind"), [("1.20.3", "basic", "file"), ("2.2.0", "filemerging", "range")]
)
def test_a_corrupt_sst_is_named_by_the_checkpoints_file_and_byte(
    version, scenario, kind, tmp_path: Path
) -> None:
    """RocksDB reports a corrupt table by the copy in the directory rebuilt for it (deleted when
    the handle is done) and, for a merged file's segment, by an offset within the segment; the
    error names the checkpoint's file and the byte of it instead (found by a red-team helper:
    the temp file, and a MANIFEST that was intact, were all the operator was told)."""
    from ckptctl.checkpoint.refs import file_resolver
    from ckptctl.metadata.walk import file_groups

    sc = Scenario(version, scenario, tmp_path)
    chk = max(sc.root.rglob("chk-*/_metadata"), key=lambda p: int(p.parent.name[4:])).parent
    ck = load_checkpoint(Storage(), str(chk))
    resolve = file_resolver(ck)
    source = next(h.source(resolve) for *_, items in file_groups(ck.metadata) for name, h in items
                  if name and name.endswith(".sst") and h.source(resolve)[0] == kind)  # fmt: skip
    path = Path(source[1].removeprefix("file:"))
    start, length = (0, source[2]) if kind == "file" else (source[2], source[3])
    original = path.read_bytes()

    def problem(at: int) -> str:
        data = bytearray(original)
        data[at] ^= 0xFF
        path.write_bytes(data)
        out = ckptctl("states", str(chk), "--deep", "--engine", "local", "--json", *sc.rebase, expect=1)
        path.write_bytes(original)
        text = json.dumps(json.loads(out.stdout), ensure_ascii=False)
        assert "ckptctl-states-" not in text and "MANIFEST" not in text, text
        return text

    # a data block's byte: the block, at its byte of the checkpoint's file
    assert f"{source[1]}" in problem(start + 10)
    assert f"at byte {start:,} (a block of " in problem(start + 10)
    # the footer's magic number, which RocksDB names without an offset
    assert f"at byte {start + length - 8:,} (the footer's magic number)" in problem(start + length - 1)


def test_the_sst_reader_fails_on_a_flipped_byte_with_the_file_and_offset(tmp_path: Path) -> None:
    """ckptctl's own SST reader (column families of unmerged list-state operands) checks no block
    checksum: a flipped length or restart count read past a block as a bare IndexError or
    struct.error, naming no file (a red-team helper's reading). Every byte of real SSTs flipped
    in turn: the table reads, or fails as SstFormatError naming the file and a byte."""
    from ckptctl.rocksdb.sst import SstFile, SstFormatError

    ssts = []
    for sst in sorted((REPO / "fixtures" / "data" / "2.2.0" / "states").rglob("*")):
        if len(ssts) < 2 and sst.is_file() and 2_000 < sst.stat().st_size < 40_000:
            try:
                SstFile(str(sst))
            except SstFormatError:
                continue  # not an SST
            ssts.append(sst)
    assert ssts
    failed = 0
    for sst in ssts:
        original = sst.read_bytes()
        copy = tmp_path / sst.name
        for at in range(0, len(original), 7):
            data = bytearray(original)
            data[at] ^= 0xFF
            copy.write_bytes(data)
            try:
                list(SstFile(str(copy)).internal_entries())
            except SstFormatError as e:
                failed += 1
                assert str(e).startswith(f"{copy}: byte "), e
    assert failed > 0
    # told by the checkpoint's file: a segment's start added to the byte the reader names
    from ckptctl.rocksdb.handledir import explain

    told = explain(
        SstFormatError(str(copy), 12, "x"),
        str(tmp_path),
        ((copy.name, ("range", "file:/j/shared/m", 1_000, 50)),),
    )
    assert told == "file:/j/shared/m (its segment at byte 1,000) at byte 1,012: x"
