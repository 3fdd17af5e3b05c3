"""``ckptctl relocate`` on the real Flink fixtures: local -> local, local -> S3 (moto) -> local, and
real Flink restoring the copies with the sources moved away."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ckptctl.metadata import read_metadata, write_metadata
from ckptctl.metadata.handles import FileHandle, RelativeFileHandle, SegmentFileHandle
from ckptctl.metadata.transform import map_file_handles
from tests.support.gc_support import Scenario, ckptctl

SCENARIOS = ["basic", "filemerging", "changelog", "savepoints", "claim"]
VERSIONS = ["1.20.3", "2.2.0"]


def run_json(*args: str, expect: int = 0) -> dict:
    return json.loads(ckptctl(*args, "--json", expect=expect).stdout)


def metadata_files(root: Path) -> dict[str, Path]:
    """Checkpoint/savepoint dir (relative to root) -> its _metadata."""
    return {str(p.parent.relative_to(root)): p for p in root.rglob("_metadata")}


def without_paths(md):
    """The model with every absolute path blanked: what must not change in a relocation."""

    def blank(h, _where):
        return h._replace(path="") if type(h) in (FileHandle, SegmentFileHandle) else h

    return map_file_handles(md, blank, lambda d, _w: "" if d else d)


def absolute_paths(md) -> list[str]:
    out = []

    def collect(h, _where):
        if type(h) in (FileHandle, SegmentFileHandle):
            out.append(h.path)
        return h

    map_file_handles(md, collect, lambda d, _w: out.append(d) or d if d else d)
    return out


def relative_handles(md) -> list[RelativeFileHandle]:
    out = []
    map_file_handles(md, lambda h, _w: out.append(h) or h if type(h) is RelativeFileHandle else h)
    return out


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tree(root: Path) -> dict[str, tuple[int, int, str]]:
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns, sha(p))
        for p in root.rglob("*")
        if p.is_file()
    }


# ---------------------------------------------------------------------------------------------
# local -> local


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("version", VERSIONS)
def test_relocated_metadata_differs_only_in_paths(version: str, scenario: str, tmp_path: Path) -> None:
    sc = Scenario(version, scenario, tmp_path)
    dst = tmp_path / "relocated"
    before = tree(sc.root)
    plan = run_json(
        "relocate", str(sc.root), str(dst), "--all", "-o", str(tmp_path / "plan.json"), *sc.rebase
    )
    assert not dst.exists() and plan["applied"] is False  # the plan writes nothing
    view = run_json("relocate", str(sc.root), str(dst), "--all", "--apply", *sc.rebase)
    assert view["verify"]["ok"], view["verify"]["problems"][:3]
    assert tree(sc.root) == before  # the source is never modified
    copies = json.loads((tmp_path / "plan.json").read_text())["copies"]
    by_src = {c["src"]: c["dst"] for c in copies}
    assert len(by_src) == len(copies) == view["files"]  # every file copied once
    for c in copies:
        assert c["dst"].startswith(f"file:{dst}/")
        assert sha(Path(c["dst"][5:])) == sha(Path(c["src"][5:]))
    new_dirs = {c["source"]: c["destination"] for c in view["checkpoints"]}
    assert len(new_dirs) == len(metadata_files(sc.root))
    for src_dir, dst_dir in new_dirs.items():
        old_bytes = (Path(src_dir[5:]) / "_metadata").read_bytes()
        new_bytes = (Path(dst_dir[5:]) / "_metadata").read_bytes()
        old, new = read_metadata(old_bytes), read_metadata(new_bytes)
        assert without_paths(new) == without_paths(old)  # the same model but for paths
        assert (
            write_metadata(new) == new_bytes
        )  # and it is a _metadata ckptctl (and Flink) reads back exactly
        assert all(p.startswith(f"file:{dst}/") for p in absolute_paths(new))
        # each absolute path is the copy of the file the old handle named
        for p_old, p_new in zip(absolute_paths(old), absolute_paths(new), strict=True):
            if "/shared/" in p_old and p_old.rsplit("/", 1)[1].startswith("job_"):
                continue  # a file-merging directory, not a file
            src = "file:" + str(sc.root) + p_old.removeprefix("file:")[len(sc.original) :]
            if src in by_src:
                assert by_src[src] == p_new
        # relative handles still resolve inside the new directory
        rel = relative_handles(new)
        assert all((Path(dst_dir[5:]) / h.relative_path).stat().st_size == h.size for h in rel)


def test_refuses_a_different_checkpoint_at_dst_and_a_dst_inside_src(tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    chk = sorted(metadata_files(sc.root).items())[-1][1].parent
    other = sorted(metadata_files(sc.root).items())[0][1]
    dst = tmp_path / "dst"
    target = dst / chk.parent.name / chk.name
    target.mkdir(parents=True)
    shutil.copy(other, target / "_metadata")
    err = ckptctl("relocate", str(chk), str(dst), "--apply", *sc.rebase, expect=1).stderr
    assert "different checkpoint" in err and "Traceback" not in err
    assert sorted(p.name for p in dst.rglob("*") if p.is_file()) == ["_metadata"]  # nothing copied
    for inside in (sc.root, chk.parent / "elsewhere"):
        err = ckptctl("relocate", str(chk), str(inside), "--apply", *sc.rebase, expect=2).stderr
        assert "source" in err and "Traceback" not in err
    # the same, named through a symlink into another checkpoint of the source job (a red-team
    # helper: the (device, inode) check matched a source directory only exactly, not its inside)
    sibling = sorted(metadata_files(sc.root).items())[0][1].parent
    link = tmp_path / "drlink"
    link.symlink_to(sibling, target_is_directory=True)
    before = sorted(p for p in sibling.rglob("*"))
    err = ckptctl("relocate", str(chk), str(link), "--apply", *sc.rebase, expect=None).stderr
    assert "inside a source directory" in err and "Traceback" not in err
    assert sorted(p for p in sibling.rglob("*")) == before
    # a single checkpoint, the same checkpoint there already: a no-op
    dst2 = tmp_path / "dst2"
    ckptctl("relocate", str(chk), str(dst2), "--apply", *sc.rebase)
    again = run_json("relocate", str(chk), str(dst2), "--apply", *sc.rebase)
    assert again["result"]["copied_files"] == 0 and again["already_relocated"]


def _files_in(d: Path) -> int:
    """Files under ``d`` now; 0 while it does not exist. The dry-run's write probe creates and
    removes ``d`` before the copies start, so it may vanish between a check and the walk."""
    try:
        return sum(1 for p in d.rglob("*") if p.is_file())
    except FileNotFoundError:
        return 0


def test_kill_9_during_apply_then_rerun_converges(tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "filemerging", tmp_path)
    dst = tmp_path / "dst"
    exe = Path(sys.executable).with_name("ckptctl")
    cmd = [str(exe), "relocate", str(sc.root), str(dst), "--all", "--apply", "--workers", "1",
           "--bwlimit", "300KiB", *sc.rebase]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and _files_in(dst) < 3:
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    copied = [p for p in dst.rglob("*") if p.is_file()]
    assert copied, "killed before anything was copied"
    assert not list(dst.rglob("_metadata")), "a _metadata was written before all files were there"
    plan = run_json("relocate", str(sc.root), str(dst), "--all", *sc.rebase)
    assert plan["files"] > len([p for p in copied if ".ckptctl-tmp-" not in p.name])  # it was interrupted
    done = run_json("relocate", str(sc.root), str(dst), "--all", "--apply", *sc.rebase)
    assert done["verify"]["ok"] and done["result"]["already_there"] > 0
    clean = tmp_path / "clean"
    ckptctl("relocate", str(sc.root), str(clean), "--all", "--apply", *sc.rebase)
    final = {
        str(p.relative_to(dst)): sha(p)
        for p in dst.rglob("*")
        if p.is_file() and ".ckptctl-tmp-" not in p.name
    }
    reference = {str(p.relative_to(clean)): sha(p) for p in clean.rglob("*") if p.is_file()}
    # the same files with the same bytes; the _metadata differ only by the DST they name
    assert set(final) == set(reference)
    assert all(final[k] == reference[k] for k in final if not k.endswith("_metadata"))


def test_relocate_apply_plan_replans_and_refuses_a_changed_source(tmp_path: Path) -> None:
    sc = Scenario("1.20.3", "basic", tmp_path)
    dst, plan_file = tmp_path / "dst", tmp_path / "plan.json"
    ckptctl("relocate", str(sc.checkpoints), str(dst), "--all", "-o", str(plan_file), *sc.rebase)
    newest = max((p for p in sc.checkpoints.rglob("_metadata")), key=lambda p: int(p.parent.name[4:]))
    shared = next(p for p in (newest.parent.parent / "shared").iterdir())
    data = shared.read_bytes()
    shared.write_bytes(data + b"x")  # the source changed after the review
    err = ckptctl("relocate", "apply", str(plan_file), expect=1).stderr
    assert "changed since this plan" in err and not dst.exists()
    shared.write_bytes(data)
    view = run_json("relocate", "apply", str(plan_file))
    assert view["verify"]["ok"] and view["result"]["copied_files"] == view["files"]


def test_flink_39964_checkpoints_are_refused_with_the_fix(tmp_path: Path) -> None:
    sc = Scenario("2.2.0", "claim_native", tmp_path)
    err = ckptctl("relocate", str(sc.root), str(tmp_path / "dst"), "--all", *sc.rebase, expect=2).stderr
    assert "ckptctl repair" in err and "FLINK-39964" in err


# ---------------------------------------------------------------------------------------------
# local -> S3 (moto) -> local


def s3_relocation(
    version: str, scenario: str, tmp_path: Path, s3_server, bucket: str
) -> tuple[Scenario, Path, str]:
    """Relocate a scenario to S3, move the source away, relocate the S3 copy back to local disk."""
    sc = Scenario(version, scenario, tmp_path)
    s3_server.create_bucket(bucket)
    remote = f"s3://{bucket}/flink/checkpoints"
    ep = ["--s3-endpoint", s3_server.endpoint]
    up = run_json("relocate", str(sc.root), remote, "--all", "--apply", *ep, *sc.rebase)
    assert up["verify"]["ok"], up["verify"]["problems"][:3]
    moved = tmp_path / "source-moved-away"
    os.rename(sc.root, moved)
    # every path in the S3 copies is on S3
    fs = s3_server.filesystem()
    for c in up["checkpoints"]:
        md = read_metadata(fs.cat_file(c["destination"][5:] + "/_metadata"))
        assert all(p.startswith(remote + "/") for p in absolute_paths(md))
    back = tmp_path / "back"
    down = run_json("relocate", remote, str(back), "--all", "--apply", *ep)
    assert down["verify"]["ok"], down["verify"]["problems"][:3]
    for c in down["checkpoints"]:
        new = read_metadata((Path(c["destination"][5:]) / "_metadata").read_bytes())
        assert all(p.startswith(f"file:{back}/") for p in absolute_paths(new))
    return sc, back, remote


def test_a_relocation_to_s3_asks_no_head_per_file_and_still_finds_a_copy_that_is_not_there(
    tmp_path: Path, s3_server
) -> None:
    """Issue 23: relocate --apply to S3 asked, for every file, whether the destination held it
    already (a HEAD, then s3fs's listing when it did not) and whether the copy arrived (a HEAD): 129
    requests for the 24 files of the 2.2.0 checkpoint. The destination directories are listed
    once before and once after the copies. A PUT answered 200 that stored nothing is still found:
    nothing is said to be copied and no _metadata is written; the repeated run copies it."""
    from tests.support.faulty_proxy import FaultyProxy, Rule

    sc = Scenario("2.2.0", "basic", tmp_path)
    chk = str(sorted(sc.checkpoints.rglob("_metadata"))[-1].parent)
    s3_server.create_bucket("reloc-requests")
    dest = "s3://reloc-requests/ck"
    seen: list[tuple[str, str]] = []
    every = Rule(lambda m, p: seen.append((m, p)) or False)
    lost = Rule(lambda m, p: m == "PUT" and "/shared/" in p, fail=1, fault=(200, b""))  # answered, not stored
    with FaultyProxy(s3_server.endpoint, fault_rate=0.0, rules=[lost, every]) as proxy:
        failed = ckptctl("relocate", chk, dest, "--apply", "--json", "--s3-endpoint", proxy.endpoint, *sc.rebase,
                         expect=None)  # fmt: skip
    assert failed.exit_code != 0 and "the copy is not there" in failed.stderr, failed.stderr
    fs = s3_server.filesystem()
    assert not [k for k in fs.find("reloc-requests/ck") if k.endswith("/_metadata")]
    seen.clear()
    with FaultyProxy(s3_server.endpoint, fault_rate=0.0, rules=[every]) as proxy:
        done = run_json(
            "relocate", chk, dest, "--apply", "--no-verify", "--s3-endpoint", proxy.endpoint, *sc.rebase
        )
    result = done["result"]
    files = result["copied_files"] + result["already_there"]
    assert result["copied_files"] == 1 and files > 20, done
    heads = [p for m, p in seen if m == "HEAD"]
    assert len(heads) <= len(done["checkpoints"]), heads  # the conflict check of each _metadata
    assert len(seen) <= files // 2, (len(seen), files)
    assert [k for k in fs.find("reloc-requests/ck") if k.endswith("/_metadata")]


def test_a_relocation_to_an_endpoint_that_holds_every_write_stops_at_the_first(
    tmp_path: Path, s3_server, monkeypatch
) -> None:
    """The destination answers listings, and the write probe, but holds every PUT below shared/ (a
    gateway whose backend for those keys hung). The thread pool's other copies went on after the
    first one failed, each waiting out the deadline in turn (two at a time). The copies not begun
    are not begun: one line, exit 2, after about one deadline; no _metadata written."""
    from tests.support.faulty_proxy import HANG, FaultyProxy, Rule

    # the endpoint answers what it does not hold (through the proxy) within the read timeout, however
    # loaded the machine is: 0.5 s was not enough there
    monkeypatch.setenv("CKPTCTL_S3_READ_TIMEOUT", "3")
    monkeypatch.setenv("CKPTCTL_S3_DEADLINE", "6")
    sc = Scenario("2.2.0", "basic", tmp_path)
    chk = str(sorted(sc.checkpoints.rglob("_metadata"))[-1].parent)
    s3_server.create_bucket("reloc-held")
    held = Rule(lambda m, p: m == "PUT" and "/shared/" in p, fail=10**9, fault=HANG)
    with FaultyProxy(s3_server.endpoint, fault_rate=0.0, rules=[held]) as proxy:
        failed = ckptctl("relocate", chk, "s3://reloc-held/ck", "--apply", "--workers", "2", "--s3-endpoint",
                         proxy.endpoint, *sc.rebase, expect=None)  # fmt: skip
    lines = failed.stderr.strip().splitlines()
    assert failed.exit_code == 2 and len(lines) == 1 and "/shared/" in lines[0], failed.stderr
    assert "Read timeout" in lines[0] or "did not answer in time" in lines[0], lines[0]
    # the copies under way when the first one's deadline passed (two workers; botocore tries a
    # timed-out PUT again), not every file in turn, each waiting out the deadline
    files = {path for _method, path in proxy.held}
    assert len(files) <= 2, files
    assert not [k for k in s3_server.filesystem().find("reloc-held/ck") if k.endswith("/_metadata")]


def test_a_relocation_whose_writes_are_refused_begins_no_copy_after_the_first_refusal(
    tmp_path: Path, s3_server
) -> None:
    """Every PUT below shared/ is refused at once (403 AccessDenied: final, not tried again). A
    worker freed by the refused copy took the next one from the pool's queue before the main
    thread, woken late on a loaded machine, cancelled the rest: 4 files held where 2 workers were
    copying (test above, under load). Only the copies begun together, one per worker, are tried."""
    from tests.support.faulty_proxy import FaultyProxy, Rule

    denied = (403, b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code>'
                   b"<Message>Access Denied</Message></Error>")  # fmt: skip
    tried: set[str] = set()

    def refused(method: str, path: str) -> bool:
        if method == "PUT" and "/shared/" in path:
            tried.add(path.split("?", 1)[0])
            return True
        return False

    sc = Scenario("2.2.0", "basic", tmp_path)
    chk = str(sorted(sc.checkpoints.rglob("_metadata"))[-1].parent)
    s3_server.create_bucket("reloc-refused")
    with FaultyProxy(
        s3_server.endpoint, fault_rate=0.0, rules=[Rule(refused, fail=10**9, fault=denied)]
    ) as proxy:
        failed = ckptctl("relocate", chk, "s3://reloc-refused/ck", "--apply", "--workers", "2", "--s3-endpoint",
                         proxy.endpoint, *sc.rebase, expect=None)  # fmt: skip
    lines = failed.stderr.strip().splitlines()
    assert failed.exit_code == 2 and len(lines) == 1 and "/shared/" in lines[0], failed.stderr
    assert 1 <= len(tried) <= 2, sorted(tried)
    assert not [k for k in s3_server.filesystem().find("reloc-refused/ck") if k.endswith("/_metadata")]


@pytest.mark.parametrize("scenario", ["filemerging", "changelog"])
def test_local_to_s3_and_back_keeps_the_model(scenario: str, tmp_path: Path, s3_server) -> None:
    sc, back, remote = s3_relocation("2.2.0", scenario, tmp_path, s3_server, f"reloc-{scenario}")
    # S3 -> S3 within one endpoint (server-side copies), also an s3a:// spelling Flink's Hadoop plugin reads
    second = f"s3a://reloc-{scenario}/second"
    view = run_json("relocate", remote, second, "--all", "--apply", "--s3-endpoint", s3_server.endpoint)
    assert view["verify"]["ok"] and view["written_destination"] == second
    fs = s3_server.filesystem()
    for c in view["checkpoints"]:
        md = read_metadata(fs.cat_file(c["destination"][5:] + "/_metadata"))
        assert all(p.startswith(second + "/") for p in absolute_paths(md))
    moved = tmp_path / "source-moved-away"
    originals = {k: read_metadata(p.read_bytes()) for k, p in metadata_files(moved / "checkpoints").items()}
    copies = {k: read_metadata(p.read_bytes()) for k, p in metadata_files(back).items()}
    assert {without_paths(m) for m in originals.values()} == {without_paths(m) for m in copies.values()}


# ---------------------------------------------------------------------------------------------
# proof with real Flink


def newest_checkpoint(root: Path) -> Path:
    chks = [p.parent for p in root.rglob("_metadata") if p.parent.name.startswith("chk-")]
    return max(chks, key=lambda p: int(p.name[4:]))


@pytest.mark.flink
@pytest.mark.parametrize("scenario", ["basic", "filemerging"])
@pytest.mark.parametrize("version", VERSIONS)
def test_flink_restores_a_local_relocation_with_the_source_moved_away(
    version, scenario, tmp_path, flink_sessions
) -> None:
    restore = flink_sessions.restore

    sc = Scenario(version, scenario, tmp_path)
    dst = tmp_path / "relocated"
    ckptctl("relocate", str(sc.checkpoints), str(dst), "--all", "--apply", *sc.rebase)
    os.rename(sc.root, tmp_path / "source-moved-away")
    chk = newest_checkpoint(dst)
    # every file path points into the copy (inline ByteStreamStateHandles keep their names: no file)
    assert all(
        p.startswith(f"file:{dst}/") for p in absolute_paths(read_metadata((chk / "_metadata").read_bytes()))
    )
    report = restore(version, scenario, chk, timeout=60, log_out=tmp_path / "restore.log")
    assert report["ok"] and report["new_checkpoint"], report


@pytest.mark.flink
@pytest.mark.parametrize(("version", "scenario"), [("1.20.3", "basic"), ("2.2.0", "filemerging")])
def test_flink_restores_the_local_copy_of_an_s3_relocation(
    version, scenario, tmp_path, s3_server, flink_sessions
) -> None:
    restore = flink_sessions.restore

    _sc, back, _remote = s3_relocation(
        version, scenario, tmp_path, s3_server, f"flink-{version.replace('.', '-')}"
    )
    report = restore(version, scenario, newest_checkpoint(back), timeout=60, log_out=tmp_path / "restore.log")
    assert report["ok"] and report["new_checkpoint"], report


def _restore_target(sc: Scenario, dst: Path) -> Path:
    """What to restore from a relocated scenario: a NATIVE savepoint if there is one, for a CLAIM
    scenario the oldest checkpoint of the restored job (it still names the first job's files),
    else the newest checkpoint."""
    jobs = sc.entry["jobs"]
    natives = [s for j in jobs for s in j.get("savepoints", []) if s["format"] == "NATIVE"]
    if natives and sc.entry["scenario"] == "savepoints":
        return dst / natives[0]["path"].rsplit("/", 1)[1]
    if len(jobs) > 1:
        job2 = dst / jobs[1]["job_id"]
        chks = [p for p in job2.iterdir() if p.name.startswith("chk-") and (p / "_metadata").exists()]
        return min(chks, key=lambda p: int(p.name[4:]))
    return newest_checkpoint(dst)


@pytest.mark.flink
@pytest.mark.parametrize(
    ("version", "scenario"),
    [("2.2.0", "changelog"), ("1.20.3", "claim"), ("2.2.0", "claim_native"), ("1.20.3", "claim_native")],
)
def test_flink_restores_more_kinds_of_relocated_state(version, scenario, tmp_path, flink_sessions) -> None:
    """Changelog (DSTL files), a CLAIM-restored job (the first job's shared files), and a
    FLINK-39964 checkpoint repaired in place (its savepoint's files), then relocated."""
    restore = flink_sessions.restore

    sc = Scenario(version, scenario, tmp_path)
    if scenario == "claim_native":
        broken = [p.parent for p in sc.checkpoints.rglob("_metadata") if run_json(
            "verify", "--engine", "local", str(p.parent), *sc.rebase, expect=None)["repairable"]]  # fmt: skip
        assert broken
        for chk in broken:
            ckptctl("repair", str(chk), "--in-place", *sc.rebase)
        # Flink deleted the claimed savepoint's unused SSTs: relocate what a restore needs, job 2
        src = sc.checkpoints / sc.entry["jobs"][1]["job_id"]
    else:
        src = sc.root
    dst = tmp_path / "relocated"
    ckptctl("relocate", str(src), str(dst), "--all", "--apply", *sc.rebase)
    os.rename(sc.root, tmp_path / "source-moved-away")
    target = _restore_target(sc, dst)
    assert all(
        p.startswith(f"file:{dst}/")
        for p in absolute_paths(read_metadata((target / "_metadata").read_bytes()))
    )
    # the changelog backend cannot take the full snapshot a NO_CLAIM restore starts with
    mode = "CLAIM" if scenario == "changelog" else "NO_CLAIM"
    report = restore(version, scenario, target, timeout=60, log_out=tmp_path / "restore.log", claim_mode=mode)
    assert report["ok"] and report["new_checkpoint"], report


@pytest.mark.flink
@pytest.mark.parametrize("fmt", ["NATIVE", "CANONICAL"])
@pytest.mark.parametrize("version", VERSIONS)
def test_flink_restores_a_relocated_savepoint(version: str, fmt: str, tmp_path: Path, flink_sessions) -> None:
    """The savepoints scenario (uid-ed operators) relocated with --all, the source moved away:
    Flink restores its NATIVE (and its CANONICAL) savepoint from the copy."""
    restore = flink_sessions.restore

    sc = Scenario(version, "savepoints", tmp_path)
    (saved,) = [s for s in sc.entry["jobs"][0]["savepoints"] if s["format"] == fmt]
    dst = tmp_path / "relocated"
    view = run_json("relocate", str(sc.root), str(dst), "--all", "--apply", *sc.rebase)
    assert view["verify"]["ok"], view["verify"]["problems"][:3]
    target = dst / saved["path"].rsplit("/", 1)[1]
    assert f"file:{target}" in {c["destination"] for c in view["checkpoints"]}
    os.rename(sc.root, tmp_path / "source-moved-away")
    md = read_metadata((target / "_metadata").read_bytes())
    assert all(p.startswith(f"file:{dst}/") for p in absolute_paths(md))
    rel = relative_handles(md)
    assert rel and all((target / h.relative_path).stat().st_size == h.size for h in rel)
    log = tmp_path / "restore.log"
    report = restore(version, "savepoints", target, timeout=60, log_out=log)
    assert report["ok"] and report["new_checkpoint"], report
    # Flink restored the copy's state (not an empty start): it says so, and counts on from its id
    # (a new job counts checkpoints from 1; a restored one from the savepoint's id on)
    assert report["new_checkpoint_id"] > md.checkpoint_id, report
    text = log.read_text()
    if text.strip():  # and Flink says where it restored from (when the harness kept its log)
        said = [ln for ln in text.splitlines() if "Restoring job" in ln]
        restored = f"from Savepoint {md.checkpoint_id} "
        assert any(restored in ln and f"at file:{target}." in ln for ln in said), said


def test_spark_engine_copies_on_executors(tmp_path: Path) -> None:
    """--engine spark: executors copy partitions of the files (embedded local[*], the worker's session); same result."""
    sc = Scenario("2.2.0", "changelog", tmp_path)
    view = run_json("relocate", str(sc.root), str(tmp_path / "spark"), "--all", "--apply",
                    "--engine", "spark", "--master", "local[*]", *sc.rebase)  # fmt: skip
    assert view["verify"]["ok"] and view["result"]["copied_files"] == view["files"]
    ckptctl("relocate", str(sc.root), str(tmp_path / "local"), "--all", "--apply", *sc.rebase)
    spark = {
        str(p.relative_to(tmp_path / "spark")): sha(p) for p in (tmp_path / "spark").rglob("*") if p.is_file()
    }
    local = {
        str(p.relative_to(tmp_path / "local")): sha(p) for p in (tmp_path / "local").rglob("*") if p.is_file()
    }
    assert spark.keys() == local.keys()
    assert all(spark[k] == local[k] for k in spark if not k.endswith("_metadata"))


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    trunc = tmp_path / "chk-1"
    trunc.mkdir()
    src = next((Path(__file__).parents[2] / "fixtures" / "data" / "2.2.0" / "basic").rglob("_metadata"))
    (trunc / "_metadata").write_bytes(src.read_bytes()[:50])
    (tmp_path / "bad.json").write_text('{"format": "nope"}')
    for args, needle in (
        (["relocate", str(tmp_path / "missing"), str(tmp_path / "d")], "no such checkpoint directory"),
        (["relocate", str(trunc), str(tmp_path / "d")], "_metadata: byte "),
        (["repair", str(trunc), "--dry-run"], "_metadata: byte "),
        (["relocate", "apply", str(tmp_path / "bad.json")], "not a relocate plan"),
        (["repair", str(trunc)], "-o DEST"),
    ):
        err = ckptctl(*args, expect=2).stderr
        assert needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


@pytest.mark.parametrize("how", ["symlink", "bind-mount"])
def test_a_dst_that_is_the_source_job_under_another_name_is_refused(tmp_path: Path, how: str) -> None:
    """Issue 19 row 10: "never writes under SRC" compared strings; DST a symlink or a bind mount
    of the source's job directory wrote the copies into it."""
    import subprocess

    sc = Scenario("2.2.0", "basic", tmp_path)
    chk = sorted(metadata_files(sc.root).items())[-1][1].parent
    job = chk.parent
    dst = tmp_path / "dst"
    if how == "symlink":
        dst.symlink_to(job, target_is_directory=True)
    else:
        dst.mkdir()
        if subprocess.run(["mount", "--bind", str(job), str(dst)], capture_output=True).returncode:
            pytest.skip("bind mounts need privileges this machine does not give")
    before = sorted(str(p) for p in job.rglob("*"))
    try:
        result = ckptctl("relocate", str(chk), str(dst), "--apply", *sc.rebase, expect=2)
        assert "source directory" in result.stderr and "Traceback" not in result.stderr
        assert sorted(str(p) for p in job.rglob("*")) == before  # nothing written inside the source
    finally:
        if how == "bind-mount":
            subprocess.run(["umount", str(dst)], check=False)


def test_an_unwritable_destination_is_named_by_the_dry_run(tmp_path: Path, s3_server) -> None:
    """Issue 22 row 5: `relocate SRC s3://no-such-bucket/x --apply` said a *source* file was not
    found. The dry run now writes (and removes) a probe at DST and names DST when it cannot."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    for apply in ([], ["--apply"]):
        result = ckptctl(
            "relocate", str(sc.checkpoints), "s3://no-such-bucket-here/x", "--all", *apply, *sc.rebase,
            "--s3-endpoint", s3_server.endpoint, expect=2,
        )  # fmt: skip
        line = result.stderr.strip()
        assert "no-such-bucket-here" in line and "destination" in line and len(line.splitlines()) == 1, line
        assert str(sc.checkpoints) not in line
    # a local DST that does not exist yet is fine, and the dry run leaves nothing there
    fresh = tmp_path / "new" / "dst"
    ckptctl("relocate", str(sc.checkpoints), str(fresh), "--all", *sc.rebase)
    assert not (tmp_path / "new").exists()
