"""Invariants 1 and 2 end to end: one path model (every spelling of a path is the file Flink opens)
and one directory grammar (only Flink's own directories hold candidates).

Every scenario is a private copy of a real Flink fixture; hostile ``_metadata`` is a real file
decoded, edited in the typed model and re-encoded (tests/support/hostile_metadata.py). Assertions
are outcomes: a file still exists after apply, a path is not a candidate, the reason it is kept."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from ckptctl.metadata import read_metadata
from ckptctl.metadata.handles import FileHandle
from tests.support.fixture_cases import REPO
from tests.support.gc_plans import OLD, apply, candidates, codes, plan_to_file, protected
from tests.support.gc_support import J1, J2, T0, Scenario, ckptctl, plan_json
from tests.support.hostile_metadata import edit_metadata, first_relative_handle, rewrite
from tests.support.s3_rewritten import (
    Upload,
    checkpoint_metadata,
    exists,
    fixture_entry,
    plan,
    s3_metadata,
    shared_refs,
)


@pytest.mark.parametrize(
    ("job", "chk", "relative", "target"),
    [
        (J1, "chk-8", "../shared/{name}", f"{J1}/shared/{{name}}"),
        (J2, "chk-13", f"../../{J1}/shared/{{name}}", f"{J1}/shared/{{name}}"),
        (J1, "chk-8", "../chk-10/{name}", f"{J1}/chk-10/{{name}}"),
    ],
    ids=["own-shared", "other-job-shared", "incomplete-chk-dir"],
)
def test_relative_handle_leaving_its_checkpoint_dir_stays_live(
    tmp_path: Path, job: str, chk: str, relative: str, target: str
) -> None:
    """A relative handle ``../shared/x`` of chk-N is the live file <job>/shared/x (Flink Path
    semantics); also ``../../<other job>/shared/x`` and ``../chk-10/x`` (an incomplete checkpoint).

    Tracker: row01."""
    sc = Scenario("1.20.3", "claim", tmp_path)
    meta = sc.checkpoints / job / chk / "_metadata"
    victim = first_relative_handle(meta)
    name = victim.relative_path
    hostile = relative.format(name=name)
    referenced = sc.checkpoints / target.format(name=name)
    referenced.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(meta.parent / name, referenced)  # the file the hostile path resolves to exists
    os.utime(referenced, (T0, T0))
    edit_metadata(meta, lambda h: h._replace(relative_path=hostile) if h == victim else None)

    args = (str(sc.checkpoints), *sc.rebase, *OLD, "--force")
    plan = plan_json(*args)
    assert not plan["blocked"] and not codes(plan)
    assert sc.uri(referenced) not in candidates(plan)
    assert sc.uri(referenced) not in {m["path"] for m in plan["missing"]}
    apply(plan_to_file(tmp_path, *args))
    assert referenced.exists(), f"the file {hostile} of {chk} resolves to was deleted"
    for uri in sc.referenced_by_flink():  # every other file Flink read in the fixture survives too
        assert Path(uri[5:]).exists(), uri


# ---------------------------------------------------------------------------------------------
# row 12: files outside the Flink directory grammar


def test_non_flink_files_are_never_candidates(tmp_path: Path) -> None:
    """Tracker: row12."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0].name
    outsiders = [
        sc.plant("checkpoints/team/shared/report.csv"),
        sc.plant("checkpoints/docs/chk-1/notes.txt"),
        sc.plant(f"checkpoints/{job}/notes/shared/x"),
        sc.plant(f"checkpoints/{job.upper()}/shared/x"),  # not a (lowercase) job id
    ]
    orphan = sc.plant(f"checkpoints/{job}/shared/real-orphan")
    args = [str(sc.checkpoints), *sc.rebase, *OLD, "--force"]
    plan = plan_json(*args)
    kept = protected(plan)
    for p in outsiders:
        assert sc.uri(p) not in candidates(plan)
        assert kept.get(sc.uri(p)) == "not-flink-file", p
    assert sc.uri(orphan) in candidates(plan)
    apply(plan_to_file(tmp_path, *args))
    assert all(p.exists() for p in outsiders) and not orphan.exists()


# ---------------------------------------------------------------------------------------------
# row 14: a stray _metadata inside shared/


def test_stray_metadata_in_shared_is_just_a_file(tmp_path: Path) -> None:
    """Tracker: row14."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0]
    stray = job / "shared" / "_metadata"
    shutil.copy2(next(job.glob("chk-*/_metadata")), stray)
    os.utime(stray, (T0 - 3600, T0 - 3600))
    args = [str(sc.checkpoints), *sc.rebase, *OLD, "--force"]
    plan = plan_json(*args)
    assert not plan["blocked"] and not codes(plan)
    # Flink never writes a _metadata into shared/: not a Flink file, so kept and said why
    assert sc.uri(stray) not in candidates(plan)
    assert protected(plan).get(sc.uri(stray)) == "not-flink-file"
    apply(plan_to_file(tmp_path, *args))
    assert stray.exists()
    for uri in sc.referenced_by_flink():
        assert Path(uri[5:]).exists(), uri


# ---------------------------------------------------------------------------------------------
# row 2: S3 references with //, /./ and /../ are the same objects as their normal form


def test_s3_paths_are_normalised_and_abnormal_keys_kept(s3_server, tmp_path: Path) -> None:
    """Tracker: row02."""
    bucket = "attack-row2"
    entry_job = fixture_entry()["job_ids"][0]
    job = f"s3://{bucket}/checkpoints/{entry_job}"
    spell = {
        "o1": f"{job}/shared/sub/../o1",
        "o2": f"s3://{bucket}/checkpoints//{entry_job}/shared/o2",
        "o3": f"{job}/./shared/o3",
        "o7": f"{job}/shared//o7",
    }
    # the newest checkpoint's first shared files get those spellings; a copy of each original
    # object lies at the normal form of the hostile path, so that object is the live one
    data = REPO / fixture_entry()["data_dir"]
    originals = shared_refs(checkpoint_metadata()[-1], bucket)[: len(spell)]
    assert len(originals) == len(spell)
    hostile = dict(zip(originals, spell.values(), strict=True))
    extra = {
        f"checkpoints/{entry_job}/shared/{name}": (data / path[len(f"s3://{bucket}/") :]).read_bytes()
        for path, name in zip(originals, spell, strict=True)
    }
    abnormal = f"checkpoints/{entry_job}/shared//o8"  # a listed key that is not in normal form
    extra[abnormal] = b"abnormal key, unreferenced"
    up = Upload(s3_server, bucket, hostile, extra)
    live_copies = {up.uri(k) for k in extra if k != abnormal}

    plan_file = tmp_path / "plan.json"
    p = plan(s3_server.endpoint, up.root, out=plan_file)
    assert not p["blocked"] and not codes(p)
    assert not live_copies & candidates(p), "a hostile spelling of a live object made it a candidate"
    assert up.uri(abnormal) not in candidates(p)
    assert protected(p).get(up.uri(abnormal)) == "abnormal-path"
    ckptctl("gc", "apply", str(plan_file), "--yes", "--s3-endpoint", s3_server.endpoint)
    for uri in live_copies | {up.uri(abnormal)}:
        assert exists(up.s3, uri), f"deleted: {uri}"
    # the four originals were re-spelled in the newest checkpoint: unless an older retained
    # checkpoint references one too, it is unreferenced now and may rightly go
    for uri in up.referenced - set(originals):
        assert exists(up.s3, uri), f"live object deleted: {uri}"


# ---------------------------------------------------------------------------------------------
# row 14 on S3: a stray _metadata inside shared/ is just a file there (the second, pruned listing
# of _metadata keys skips shared/, so it must not count as a checkpoint that appeared)


def test_s3_stray_metadata_in_shared_is_just_a_file(s3_server, tmp_path: Path) -> None:
    """Tracker: row14."""
    job = fixture_entry()["job_ids"][0]
    stray = f"checkpoints/{job}/shared/_metadata"
    bucket = "attack-row14"
    up = Upload(s3_server, bucket, extra={stray: s3_metadata(checkpoint_metadata()[0], bucket)})
    plan_file = tmp_path / "plan.json"
    p = plan(s3_server.endpoint, up.root, out=plan_file)
    assert not p["blocked"] and not codes(p)
    # Flink never writes a _metadata into shared/: not a Flink file, so kept and said why
    assert up.uri(stray) not in candidates(p)
    assert protected(p).get(up.uri(stray)) == "not-flink-file"
    ckptctl("gc", "apply", str(plan_file), "--yes", "--s3-endpoint", s3_server.endpoint)
    assert exists(up.s3, up.uri(stray))
    for uri in up.referenced:
        assert exists(up.s3, uri), f"live object deleted: {uri}"


def test_an_empty_metadata_below_shared_on_s3_is_just_a_file(s3_server, tmp_path: Path) -> None:
    """A review: a ``_metadata`` below a job's shared/ is asked for Flink's magic number; S3
    answers the range of an empty object with an error, which counted as "unreadable: read it as
    a checkpoint" and blocked the plan, where a local read simply says no. Fewer than 4 bytes hold
    no magic: just a file, on S3 as locally."""
    job = fixture_entry()["job_ids"][0]
    empty = f"checkpoints/{job}/shared/savepoints/empty/_metadata"
    up = Upload(s3_server, "attack-empty-metadata", extra={empty: b""})
    p = plan(s3_server.endpoint, up.root)
    assert not p["blocked"] and not codes(p)
    assert protected(p).get(up.uri(empty)) == "not-flink-file"


# ---------------------------------------------------------------------------------------------
# a savepoint written inside a job's shared/ (state.savepoints.dir pointed there): ls's S3 walk rolls
# job areas up, gc's discovery must still find it and keep every file it needs

SAVEPOINT = REPO / "fixtures/data/2.2.0/savepoints/savepoints/savepoint-2cadc2-3ac213755ad4"


def test_a_savepoint_inside_a_jobs_shared_dir_is_retained(tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "savepoints", tmp_path)
    inside = sc.jobs()[0] / "shared" / SAVEPOINT.name
    shutil.move(str(sc.root / "savepoints" / SAVEPOINT.name), inside)
    p = plan_json(str(sc.checkpoints), *sc.rebase, *OLD, "--force")
    assert not p["blocked"], p["refusals"]
    assert sc.uri(inside) in {r["path"] for r in p["retained"]}
    assert not {c for c in candidates(p) if SAVEPOINT.name in c}


def test_s3_a_savepoint_inside_a_jobs_shared_dir_is_retained(s3_server) -> None:
    job = fixture_entry()["job_ids"][0]
    inside = f"checkpoints/{job}/shared/{SAVEPOINT.name}"
    up = Upload(
        s3_server,
        "savepoint-in-shared",
        extra={f"{inside}/{f.name}": f.read_bytes() for f in SAVEPOINT.iterdir()},
    )
    p = plan(
        s3_server.endpoint, up.root, "--older-than", "0s", "--margin", "0s", "--force", "--clock", "local"
    )
    assert not p["blocked"], p["refusals"]
    assert up.uri(inside) in {r["path"] for r in p["retained"]}
    assert not {c for c in candidates(p) if SAVEPOINT.name in c}


def first_shared_file_handle_path(meta: Path) -> str:
    found: list[str] = []

    def look(h):
        if type(h) is FileHandle and "/shared/" in h.path and not found:
            found.append(h.path)
        return None

    rewrite(read_metadata(meta.read_bytes(), str(meta)), look)
    return found[0]


# --- F2: Flink's Path trims the written string; ckptctl's fast path does not ------------------


@pytest.mark.parametrize("pad", [" ", "\t", "\x01"], ids=["space", "tab", "ctrl-a"])
def test_trailing_whitespace_in_a_written_path(tmp_path: Path, pad: str) -> None:
    """Flink reads a FileStateHandle as ``new Path(readUTF())`` and Path(String) calls
    String.trim() (drops every char <= U+0020 at both ends). ckptctl's canonical() returns an
    already-normal path unchanged, so 'shared/x ' is live for ckptctl, and the file Flink opens,
    'shared/x', is an orphan. A decoy 'x ' keeps missing-live-files quiet.

    Tracker: f2."""
    sc = Scenario("1.20.3", "basic", tmp_path)
    (job,) = sc.jobs()
    metas = sorted(job.glob("chk-*/_metadata"))
    written = first_shared_file_handle_path(metas[-1])
    for meta in metas:
        edit_metadata(
            meta,
            lambda h: h._replace(path=written + pad) if type(h) is FileHandle and h.path == written else None,
        )
    real = sc.root / written[len("file:" + sc.original) + 1 :]
    assert "file:" + str(real) in sc.referenced_by_flink()
    shutil.copy2(real, real.with_name(real.name + pad))  # the decoy

    args = (str(sc.checkpoints), *sc.rebase, *OLD, "--force")
    plan = plan_json(*args)
    assert not plan["refusals"]
    apply(plan_to_file(tmp_path, *args))
    assert real.exists(), "the file Flink opens (the trimmed path) was deleted"


# --- F5: ForSt in-use detection by substring ----------------------------------------------------


def test_forst_working_files_kept_when_the_root_path_contains_shared_op(tmp_path: Path) -> None:
    """A root below /data/shared/op_team/...: 'in use' must be decided by the grammar below the
    root, not by the first '/shared/op_' in the path, or the working files of live ForSt DBs go.

    Tracker: f5."""
    base = tmp_path / "shared" / "op_team"
    base.mkdir(parents=True)
    sc = Scenario("2.2.0", "forst", base)
    prefix = "file:" + str(sc.root)
    used_dirs = {Path(u[5:]).parent for u in sc.referenced_by_flink() if "/shared/op_" in u[len(prefix) :]}
    working = [p for d in used_dirs for p in d.iterdir() if p.is_file()]
    args = (str(sc.checkpoints), *sc.rebase, *OLD, "--force")
    apply(plan_to_file(tmp_path, *args))
    gone = [p for p in working if not p.exists()]
    assert not gone, f"{len(gone)} files of in-use ForSt working directories deleted"


# --- F7: directory grammar wider than Flink's --------------------------------------------------


@pytest.mark.parametrize("dirname", ["chk-03", "chk-\u0663", "chk-\uff13", "chk-3\n"],
                         ids=["leading-zero", "arabic-indic-3", "fullwidth-3", "trailing-newline"])  # fmt: skip
def test_directories_flink_never_names_are_not_checkpoints(tmp_path: Path, dirname: str) -> None:
    """Flink names them 'chk-' + Long.toString(id). CHK_RE = ^chk-(\\d+)$ accepts any Unicode
    decimal digit, leading zeros, and (with $) a trailing newline (JOB_ID_RE has the same $).

    Tracker: f7."""
    sc = Scenario("1.20.3", "basic", tmp_path)
    (job,) = sc.jobs()
    mine = sc.plant(f"checkpoints/{job.name}/{dirname}/notes.txt")
    args = (str(sc.checkpoints), *sc.rebase, *OLD, "--force")
    assert "file:" + str(mine) not in candidates(plan_json(*args))
