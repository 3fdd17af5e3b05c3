"""The live set: every file a retained checkpoint references stays, whatever handle holds it and
however its path is spelled (attacks on the model-owned handle walk: HandleWalk, refs).

Every hostile ``_metadata`` is a real fixture decoded with ckptctl's reader, changed in the typed
model and re-encoded with its writer (never hand-made bytes). Each test asserts outcomes: the
files a retained checkpoint needs still exist after ``gc apply``, or the plan is refused.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ckptctl.checkpoint.loading import canonical
from ckptctl.checkpoint.rebase import Rebase
from ckptctl.checkpoint.refs import _resolver
from ckptctl.metadata import read_metadata, write_metadata
from ckptctl.metadata.handles import (
    ChangelogBackendHandle,
    FileHandle,
    IncrementalHandle,
    KeyGroupRange,
    KeyGroupsHandle,
    RelativeFileHandle,
    SegmentFileHandle,
)
from ckptctl.metadata.operators import SubtaskState
from ckptctl.metadata.transform import map_file_handles
from ckptctl.metadata.walk import file_handles
from tests.support.fixture_cases import REPO
from tests.support.gc_plans import OLD, apply, plan_to_file
from tests.support.gc_support import T0, Scenario, ckptctl
from tests.support.hostile_metadata import edit_metadata

# (version, scenario): one fixture per handle family the walk recurses through
FAMILIES = [
    ("1.20.3", "filemerging"),  # segment handles, FileMergingOperatorHandle managed dirs
    ("2.2.0", "filemerging"),
    ("1.20.3", "changelog"),  # changelog backend: materialized + DSTL file pieces
    ("1.15.4", "datastream_changelog"),  # V3 changelog layout
    ("2.3.0", "datastream_unaligned"),  # merged channel state (several channels, one file)
    ("1.20.3", "unaligned"),
    ("2.2.0", "forst"),  # ForSt working directory in shared/op_*
    ("1.20.3", "claim"),  # CLAIM: references into another job's shared/
]


def _respell(path: str, n: int) -> str:
    """Another spelling of the same file, as Flink's ``Path`` normalises it (n picks which)."""
    body = path.removeprefix("file:")
    head, _, name = body.rpartition("/")
    forms = [
        "file://" + body,  # file:///x
        "file:" + head + "//" + name,  # a doubled slash before the name
        "file:" + head + "/./" + name,  # a ``.`` segment
        "file:" + head + "/zz/../" + name,  # a resolvable ``..``
        body + " ",  # trailing blank (Path(String) trims it)
        "file:" + head.replace("/checkpoints/", "/checkpoints//") + "/" + name,  # doubled slash higher up
    ]
    return forms[n % len(forms)]


def _dirs(sc: Scenario) -> list[str]:
    extra = []
    dstl = sc.root / "dstl"
    if dstl.is_dir():
        extra += ["--changelog-dir", str(dstl)]
    return extra


@pytest.mark.parametrize(("version", "scenario"), FAMILIES)
def test_every_path_respelled_keeps_every_referenced_file(
    tmp_path: Path, version: str, scenario: str
) -> None:
    """Every absolute path of every handle (files, segments, DSTL pieces, channel state) written in
    another spelling of the same file: nothing Flink references may be deleted, orphans still go.

    Tracker: a1."""
    sc = Scenario(version, scenario, tmp_path)
    counter = [0]

    def respell(h):
        t = type(h)
        if t is FileHandle or t is SegmentFileHandle:
            counter[0] += 1
            return h._replace(path=_respell(h.path, counter[0]))
        return None

    for meta in sc.checkpoints.rglob("_metadata"):
        edit_metadata(meta, respell)
    assert counter[0] > 0 or scenario.endswith("unaligned"), "the attack changed nothing"
    needed = sc.referenced_by_flink()
    orphan = sc.plant(f"checkpoints/{sc.jobs()[0].name}/shared/orphan-{version}")
    plan = plan_to_file(tmp_path, str(sc.checkpoints), *_dirs(sc), *sc.rebase, *OLD, "--force")
    data = json.loads(plan.read_text())
    assert not data["refusals"], data["refusals"]
    apply(plan)
    gone = sorted(p for p in needed if not Path(p.removeprefix("file:")).exists())
    assert not gone, f"gc deleted files a retained checkpoint references: {gone[:3]}"
    assert not orphan.exists(), "the plan deleted nothing: the attack proves nothing"


def _flink_references(sc: Scenario, chks) -> set[str]:
    """Files Flink's own reader says the checkpoint directories ``chks`` reference, as URIs here."""
    out = set()
    expected = REPO / sc.entry["expected_dir"]
    for chk in chks:
        exp = expected / chk.relative_to(sc.root).with_suffix(".json")
        for r in json.loads(exp.read_text())["references"]:
            path = r["path"].removeprefix("file:")
            if path.startswith(sc.original):
                out.add("file:" + str(sc.root) + path[len(sc.original) :])
    return out


@pytest.mark.parametrize(("version", "scenario"), FAMILIES)
def test_keep_last_one_keeps_what_the_newest_checkpoint_needs(
    tmp_path: Path, version: str, scenario: str
) -> None:
    """``--keep-last 1`` expires all but the newest checkpoint of each job: every file Flink's own
    reading of the kept checkpoints references survives apply, whatever handle holds it.

    Tracker: a2."""
    sc = Scenario(version, scenario, tmp_path)
    keep: dict[Path, Path] = {}
    for job in sc.jobs():
        chks = sorted(
            (p for p in job.glob("chk-*") if (p / "_metadata").exists()), key=lambda p: int(p.name[4:])
        )
        if chks:
            keep[job] = chks[-1]
    # newest _metadata of each job newest in time too (the fixture mtimes are flat)
    for n, meta in enumerate(
        sorted(sc.checkpoints.rglob("chk-*/_metadata"), key=lambda p: int(p.parent.name[4:]))
    ):
        os.utime(meta, (T0 + 3600 + n, T0 + 3600 + n))
    needed = _flink_references(sc, keep.values())
    assert needed, "Flink's reading of the kept checkpoints references nothing"
    plan = plan_to_file(
        tmp_path,
        str(sc.checkpoints),
        *_dirs(sc),
        *sc.rebase,
        *OLD,
        "--force",
        "--keep-last",
        "1",
        expect=None,
    )
    data = json.loads(plan.read_text())
    if data["refusals"]:
        return  # failing closed is an acceptable answer
    apply(plan)
    gone = sorted(p for p in needed if not Path(p.removeprefix("file:")).exists())
    assert not gone, f"gc deleted files a kept checkpoint references: {gone[:3]}"


def test_a_file_level_rebase_is_applied_to_every_handle_in_its_directory() -> None:
    """``--rebase OLD=NEW`` where OLD is one file: the resolver normalises and rebases each
    directory once (``dir/_`` as a probe), so a mapping below the directory was never applied.
    gc then kept the old spelling live and saw the file the user named as unreferenced.

    Tracker: a3."""
    rb = Rebase.of([("/r/job/shared/a", "/n/job/shared/b")])
    resolve = _resolver(rb)
    assert (
        resolve("file:/r/job/shared/a")
        == rb.apply(canonical("file:/r/job/shared/a"))
        == "file:/n/job/shared/b"
    )
    assert resolve("file:/r/job/shared/c") == "file:/r/job/shared/c"
    # a mapping whose OLD happens to be the probe name must not move the whole directory
    rb = Rebase.of([("/r/job/shared/_", "/elsewhere/zz")])
    resolve = _resolver(rb)
    assert resolve("file:/r/job/shared/c") == "file:/r/job/shared/c"
    assert resolve("file:/r/job/shared/_") == "file:/elsewhere/zz"


def test_file_level_rebase_never_deletes_the_file_it_names(tmp_path: Path) -> None:
    """End to end: an SST restored under another name and mapped with a file-level ``--rebase``
    (the stale copy still lying at the old name) must stay; before the fix it was deleted.

    Tracker: a3."""
    sc = Scenario("1.20.3", "basic", tmp_path)
    metas = sorted(sc.checkpoints.rglob("chk-*/_metadata"))
    shared = None
    for meta in metas:
        md = read_metadata(meta.read_bytes(), str(meta))
        for scope, h in file_handles(md):
            if scope == "shared" and type(h) is FileHandle:
                shared = h.path
                break
        if shared:
            break
    assert shared, "no shared file in the fixture"
    rel = shared.removeprefix("file:").removeprefix(sc.original).lstrip("/")
    old_file = sc.root / rel
    assert old_file.exists()
    moved = old_file.with_name(old_file.name + ".restored")
    moved.write_bytes(old_file.read_bytes())
    os.utime(moved, (T0, T0))
    plan = plan_to_file(
        tmp_path,
        str(sc.checkpoints),
        *sc.rebase,
        "--rebase",
        f"{shared}={moved}",
        *OLD,
        "--force",
        expect=None,
    )
    data = json.loads(plan.read_text())
    if not data["refusals"]:
        apply(plan)
    assert moved.exists(), "gc deleted the file a --rebase mapping names as a retained checkpoint's"


# ---------------------------------------------------------------------------------------------
# a4: the same files held through other (legal) nestings of handles


def _in_changelog(h):
    """An incremental snapshot as the materialized part of a changelog backend handle (code 8, readable by every version)."""
    if type(h) is IncrementalHandle:
        return ChangelogBackendHandle(8, h.key_groups, 0, (h,), (), 1, None, "redteam-cl")
    return None


def _twice_in_changelog(h):
    inner = _in_changelog(h)
    if inner is None:
        return None
    return ChangelogBackendHandle(8, h.key_groups, 0, (None, inner), (), 2, None, "redteam-cl2")


def _files_as_key_groups(h):
    """Every file of an incremental snapshot behind a key-groups handle in its stream slot."""
    if type(h) is IncrementalHandle:

        def wrap(f):
            if type(f.handle) is not FileHandle:
                return f
            return f._replace(handle=KeyGroupsHandle(3, KeyGroupRange(0, 1), (0,), f.handle))

        return h._replace(shared=tuple(map(wrap, h.shared)), private=tuple(map(wrap, h.private)))
    return None


def _shared_and_private_swapped(h):
    if type(h) is IncrementalHandle:
        return h._replace(shared=h.private, private=h.shared)
    return None


def _keyed_as_raw(h):
    if type(h) is SubtaskState and h.managed_keyed is not None and h.raw_keyed is None:
        return h._replace(managed_keyed=None, raw_keyed=h.managed_keyed)
    return None


NESTINGS = {
    "in-changelog": _in_changelog,
    "twice-in-changelog": _twice_in_changelog,
    "files-as-key-groups": _files_as_key_groups,
    "shared-private-swapped": _shared_and_private_swapped,
    "keyed-as-raw": _keyed_as_raw,
}


@pytest.mark.parametrize("nesting", sorted(NESTINGS))
@pytest.mark.parametrize(
    ("version", "scenario"), [("1.20.3", "basic"), ("2.2.0", "forst"), ("1.15.4", "datastream")]
)
def test_files_held_through_other_nestings_stay(
    tmp_path: Path, version: str, scenario: str, nesting: str
) -> None:
    """The files of every checkpoint, held through a changelog backend handle (once or nested), a
    key-groups handle over each file, swapped shared/private lists or the raw keyed slot: the walk
    must still reach them, so gc keeps every file Flink's reading of the originals references.

    Tracker: a4."""
    sc = Scenario(version, scenario, tmp_path)
    needed = sc.referenced_by_flink()
    changed = [0]

    def fn(h):
        new = NESTINGS[nesting](h)
        if new is not None:
            changed[0] += 1
        return new

    for meta in sc.checkpoints.rglob("_metadata"):
        edit_metadata(meta, fn)
    assert changed[0], "the attack changed nothing"
    orphan = sc.plant(f"checkpoints/{sc.jobs()[0].name}/taskowned/orphan")
    plan = plan_to_file(tmp_path, str(sc.checkpoints), *sc.rebase, *OLD, "--force", expect=None)
    data = json.loads(plan.read_text())
    assert not data["refusals"], data["refusals"]
    apply(plan)
    gone = sorted(p for p in needed if not Path(p.removeprefix("file:")).exists())
    assert not gone, f"gc deleted files a retained checkpoint references: {gone[:3]}"
    assert not orphan.exists()


# ---------------------------------------------------------------------------------------------
# a5: odd but readable path strings in a retained checkpoint's handles fail closed, no traceback

ODD_ABSOLUTE = [" ", "/", "file:/", "file://", "s3://", "s3://b", "s3:///x", "hdfs://nn/x", "rel/x", "C:\\x",
                "\\\\srv\\x", "file:/a/..", "s3://b/../../x", "%2e%2e/x", "a\ud800b", "file:/tmp/x\x00y",
                "file:/a?q=1", "~/x", "..", "s3a://b/x"]  # fmt: skip
ODD_RELATIVE = ["..", "../..", "/abs", "a\ud800", "\x00", "x/../../y", "%2F", " "]


@pytest.mark.parametrize(
    ("kind", "value"), [("abs", v) for v in ODD_ABSOLUTE] + [("rel", v) for v in ODD_RELATIVE]
)
def test_odd_paths_fail_closed_without_a_traceback(tmp_path: Path, kind: str, value: str) -> None:
    """Tracker: a5."""
    sc = Scenario("1.20.3", "claim_native" if kind == "rel" else "basic", tmp_path)
    target = RelativeFileHandle if kind == "rel" else FileHandle
    field = "relative_path" if kind == "rel" else "path"
    done = []

    def fn(h):
        if not done and type(h) is target:
            done.append(getattr(h, field))
            return h._replace(**{field: value})
        return None

    edit_metadata(sorted(sc.checkpoints.rglob("chk-*/_metadata"))[-1], fn)
    assert done, "no handle to change"
    before = {p for p in sc.root.rglob("*") if p.is_file()}
    result = ckptctl("gc", "plan", "--json", str(sc.checkpoints), *sc.rebase, *OLD, "--force", expect=None)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code != 0
    assert json.loads(result.stdout)["refusals"]
    assert {p for p in sc.root.rglob("*") if p.is_file()} == before


# ---------------------------------------------------------------------------------------------
# a6: one subtask index written twice in an operator (a damaged file; Flink never writes it)


@pytest.mark.parametrize(("version", "scenario"), [("1.20.3", "basic"), ("1.15.4", "datastream")])
def test_files_of_a_subtask_state_a_repeated_index_replaced_stay(
    tmp_path: Path, version: str, scenario: str
) -> None:
    """Flink reads subtask states into a map, so of two with one index the later wins, and ckptctl
    reads them the same. The earlier one's files are still kept by gc: the file is damaged, and
    when in doubt gc keeps what either copy needs.

    Tracker: a6."""
    sc = Scenario(version, scenario, tmp_path)
    meta = max(sc.checkpoints.rglob("chk-*/_metadata"), key=lambda m: int(m.parent.name[4:]))
    md = read_metadata(meta.read_bytes(), str(meta))
    copies: list[Path] = []

    def to_copy(h, _where=None):
        """The same bytes under another name in the same directory (an old file, so a gc candidate)."""
        if type(h) is not FileHandle:
            return None
        src = Path(h.path.removeprefix("file:").replace(sc.original, str(sc.root), 1))
        dst = src.with_name(src.name + "-dup")
        dst.write_bytes(src.read_bytes())
        os.utime(dst, (T0, T0))
        copies.append(dst)
        return h._replace(path=h.path + "-dup")

    ops = list(md.operators)
    i = next(i for i, op in enumerate(ops) if op.subtasks and any(s.managed_keyed for s in op.subtasks))
    op = ops[i]
    first = next(s for s in op.subtasks if s.managed_keyed is not None)
    one_op = md._replace(operators=(op._replace(subtasks=(first,)),))
    earlier = map_file_handles(one_op, to_copy).operators[0].subtasks[0]
    assert copies, "the subtask state names no absolute file: the attack proves nothing"
    ops[i] = op._replace(subtasks=(earlier, *op.subtasks))  # the same index again, later
    meta.write_bytes(write_metadata(md._replace(operators=tuple(ops))))
    os.utime(meta, (T0 + 3600, T0 + 3600))

    back = read_metadata(meta.read_bytes(), str(meta)).operators[i]
    assert back.subtasks == op.subtasks and back.shadowed == (earlier,), "read as Flink reads it"
    orphan = sc.plant(f"checkpoints/{sc.jobs()[-1].name}/shared/orphan")
    plan = plan_to_file(tmp_path, str(sc.checkpoints), *sc.rebase, *OLD, "--force", expect=None)
    data = json.loads(plan.read_text())
    assert not data["refusals"], data["refusals"]
    apply(plan)
    gone = [str(p) for p in copies if not p.exists()]
    assert not gone, f"gc deleted files of the replaced subtask state: {gone[:3]}"
    assert not orphan.exists(), "the plan deleted nothing: the attack proves nothing"
