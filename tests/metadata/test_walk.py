"""The model's one walk (HandleWalk) and per-handle facts, over every real fixture.

Completeness is checked against the model's own handle unions (what the reader can produce), so
a handle type added to the reader without its place in the walk, its sizes or its view fails here
instead of being skipped silently.
"""

from __future__ import annotations

import typing

import pytest

from ckptctl.checkpoint.loading import load_checkpoint
from ckptctl.checkpoint.refs import (
    ARROW_TYPES,
    COLUMNS,
    FILE_COLUMNS,
    GROUP_COLUMNS,
    GROUP_KEY,
    Ref,
    file_resolver,
    reference_rows,
    referenced_files,
    referenced_uris,
)
from ckptctl.inspect import views
from ckptctl.metadata import read_metadata, write_metadata
from ckptctl.metadata.handles import (
    ChangelogBackendHandle,
    ChangelogFileHandle,
    FileHandle,
    IncrementalHandle,
    KeyedHandle,
    KeyGroupRange,
    RelativeFileHandle,
    SegmentFileHandle,
    StreamHandle,
)
from ckptctl.metadata.operators import AnyChannelHandle, OperatorHandle
from ckptctl.metadata.transform import map_file_handles
from ckptctl.metadata.walk import HandleWalk, file_groups, incremental_parts, state_sizes
from ckptctl.storage import Storage
from tests.support.fixture_cases import cases

CASES = cases()
STREAM = typing.get_args(StreamHandle)
KEYED = typing.get_args(KeyedHandle)
OPERATOR = typing.get_args(OperatorHandle)
CHANNEL = typing.get_args(AnyChannelHandle)


@pytest.mark.parametrize("cls", sorted({*STREAM, *KEYED, *OPERATOR, *CHANNEL}, key=lambda c: c.__name__))
def test_every_handle_type_has_its_facts(cls) -> None:
    for name in ("flink_class", "state_size", "inline_size"):
        assert hasattr(cls, name), f"{cls.__name__} has no {name}"
    if cls in KEYED:
        assert hasattr(cls, "incremental_size"), cls.__name__
    if cls in STREAM:
        assert hasattr(cls, "source"), cls.__name__


class _NewHandle(typing.NamedTuple):
    """A handle type the views do not know: shown with the model's field names."""

    key_groups: KeyGroupRange
    delegate: typing.Any
    handle_id: str
    blob: bytes

    flink_class = "SomeNewStateHandle"
    state_size = property(lambda self: self.delegate.state_size)


def test_a_new_handle_type_is_shown_by_its_fields() -> None:
    h = _NewHandle(KeyGroupRange(0, 4), FileHandle("file:/x/f", 7), "id-1", b"\x01\xff")
    assert views.handle_view(h, lambda f: f.path) == {
        "type": "SomeNewStateHandle", "state_size": 7, "key_groups": [0, 4],
        "delegate": {"type": "FileStateHandle", "state_size": 7, "path": "file:/x/f"},
        "handle_id": "id-1", "blob": "01ff",
    }  # fmt: skip


def test_ref_row_is_the_arrow_schema() -> None:
    assert tuple(ARROW_TYPES) == COLUMNS == Ref._fields
    assert COLUMNS[GROUP_KEY : GROUP_KEY + len(FILE_COLUMNS)] == FILE_COLUMNS
    assert len(GROUP_COLUMNS) + len(FILE_COLUMNS) == len(COLUMNS)


def _file_count(md) -> int:
    return sum(len(items) for *_, items in file_groups(md))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_walk_rebuilds_only_what_changed(case) -> None:
    raw = (case.checkpoint_dir / "_metadata").read_bytes()
    md = read_metadata(raw)
    assert HandleWalk().checkpoint(md) is md  # nothing changed: the very same object

    copied = map_file_handles(md, lambda h, where: h._replace())  # every file handle a new, equal object
    assert copied == md and (copied is not md) == (_file_count(md) > 0)
    assert write_metadata(copied) == raw

    def moved(h, where):
        if type(h) is RelativeFileHandle:
            return h._replace(relative_path="moved-" + h.relative_path)
        return h._replace(path="file:/moved" + h.path)

    after = map_file_handles(md, moved)
    before_files = [h for *_, items in file_groups(md) for _n, h in items]
    after_files = [h for *_, items in file_groups(after) for _n, h in items]
    assert len(after_files) == len(before_files)
    for a, b in zip(before_files, after_files, strict=True):
        assert type(a) is type(b) and a.size == b.size
        if type(a) is RelativeFileHandle:
            assert b.relative_path == "moved-" + a.relative_path
        else:
            assert b.path == "file:/moved" + a.path
        assert type(b) in (FileHandle, RelativeFileHandle, SegmentFileHandle)
    assert read_metadata(write_metadata(after)) == after


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_incremental_sources_are_files_of_the_reference_map(case) -> None:
    ck = load_checkpoint(Storage(), str(case.checkpoint_dir))
    resolve = file_resolver(ck)
    refs = reference_rows(ck)
    rows = {(r.local_name, r.path) for r in refs if r.local_name is not None}
    found = set()
    for op in ck.metadata.operators:
        for s in op.subtasks or ():
            for h in incremental_parts(s.managed_keyed):
                for name, src in h.sources(resolve):
                    assert src[0] in ("file", "range", "inline")
                    if src[0] != "inline":
                        found.add((name, src[1]))
    assert found <= rows
    if any(r.scope in ("shared", "private") and r.slot == "managed_keyed" for r in refs):
        assert found


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_folds_grouped_uris_are_the_reference_map(case) -> None:
    # gc's fold (and referenced_files) read a group of handles at a time: the files, scopes and
    # order of the reference map, relative and rebased handles included (the fixtures were
    # written elsewhere and moved), offsets and sizes of segments included
    ck = load_checkpoint(Storage(), str(case.checkpoint_dir))
    grouped = [(scope, uri, h) for scope, uris, items in referenced_uris(ck)
               for uri, (_name, h) in zip(uris, items, strict=True)]  # fmt: skip
    rows = reference_rows(ck)
    assert [(s, u) for s, u, _h in grouped] == [(r.scope, r.path) for r in rows]
    assert [(getattr(h, "offset", 0), h.size) for _s, _u, h in grouped] == [(r.offset, r.size) for r in rows]
    assert [(f.path, f.scope, f.offset, f.size) for f in referenced_files(ck)] == [
        (r.path, r.scope, r.offset, r.size) for r in rows
    ]


def _with_repeated_local_name(raw: bytes):
    """A V3 file whose first incremental handle with two shared SSTs names the second by the
    first's local name (Flink never writes that; a map-reading release keeps the later one).
    Returns the bytes, where the handle is (operator id, subtask) and the entry the map hides."""
    md = read_metadata(raw)
    for op in md.operators:
        for s in op.subtasks or ():
            h = s.managed_keyed
            if type(h) is IncrementalHandle and len(h.shared) >= 2:
                first, second = h.shared[0], h.shared[1]
                shared = (first, second._replace(local_path=first.local_path), *h.shared[2:])
                new = s._replace(managed_keyed=h._replace(shared=shared))
                subtasks = tuple(new if x is s else x for x in op.subtasks)
                ops = tuple(op._replace(subtasks=subtasks) if o is op else o for o in md.operators)
                return write_metadata(md._replace(operators=ops)), (op.operator_id, s.index), first
    raise AssertionError("no incremental handle with two shared files")


def _keyed(md, where):
    return next(
        s.managed_keyed
        for op in md.operators
        for s in op.subtasks or ()
        if (op.operator_id, s.index) == where
    )


def test_a_shadowed_v3_entry_stays_in_the_reference_map(tmp_path) -> None:
    case = next(c for c in CASES if c.flink_version.startswith("1.14") and c.scenario == "datastream")
    raw = (case.checkpoint_dir / "_metadata").read_bytes()
    assert read_metadata(raw).version == 3
    data, where, hidden = _with_repeated_local_name(raw)
    md = read_metadata(data)
    h = _keyed(md, where)
    assert h.shadowed == (hidden,)  # the earlier entry: the map kept the later one under its name
    assert hidden.handle not in {f.handle for f in (*h.shared, *h.private)}

    chk = tmp_path / "0123456789abcdef0123456789abcdef" / case.checkpoint_dir.name
    chk.mkdir(parents=True)
    (chk / "_metadata").write_bytes(data)
    ck = load_checkpoint(Storage(), str(chk))
    rows = reference_rows(ck)
    assert [
        (r.slot, r.scope, r.local_name, r.size, r.handle_type)
        for r in rows
        if r.written_path == hidden.handle.path
    ] == [("managed_keyed", "shared", hidden.local_path, hidden.handle.size, "FileStateHandle")]
    # gc's view: every file the unedited checkpoint references is still referenced
    original = load_checkpoint(Storage(), str(case.checkpoint_dir))
    before = reference_rows(original)
    assert len(rows) == len(before)
    assert {r.written_path for r in rows} == {r.written_path for r in before}
    resolve = file_resolver(ck)
    assert resolve(hidden.handle) in {f.path for f in referenced_files(ck)}
    # a restore reads what the map holds: the hidden file is no source and no part of the state size
    assert hidden.handle.path not in {src[1] for _name, src in h.sources(lambda f: f.path)}
    assert h.state_size == _keyed(read_metadata(raw), where).state_size - hidden.handle.size


def test_changelog_handles_without_a_checkpointed_size_count_their_state_size() -> None:
    # Flink 1.14's layout has no checkpointed size (nor materialization or handle ids): the size
    # rule main's refs had, now the model's, counts the full state size as incremental
    case = next(
        c for c in CASES if c.scenario == "datastream_changelog" and c.flink_version.startswith("1.15")
    )
    md = read_metadata((case.checkpoint_dir / "_metadata").read_bytes())

    def legacy(h):
        if type(h) is not ChangelogBackendHandle:
            return h
        non = tuple(
            p._replace(checkpointed_size=None, handle_id=None) if type(p) is ChangelogFileHandle else p
            for p in h.non_materialized
        )
        return h._replace(
            checkpointed_size=None, materialization_id=None, handle_id=None, non_materialized=non
        )

    ops = tuple(
        op._replace(subtasks=tuple(s._replace(managed_keyed=legacy(s.managed_keyed)) for s in op.subtasks))
        for op in md.operators
    )
    old = md._replace(operators=ops)
    handles = [(s.managed_keyed, t.managed_keyed) for a, b in zip(md.operators, ops, strict=True)
               for s, t in zip(a.subtasks, b.subtasks, strict=True) if type(s.managed_keyed) is ChangelogBackendHandle]  # fmt: skip
    assert handles
    for new, was in handles:
        assert was.incremental_size == was.state_size == new.state_size
        assert new.incremental_size == new.checkpointed_size
        for p in was.non_materialized:
            if type(p) is ChangelogFileHandle:
                assert p.incremental_size == p.state_size
    full, incremental, inline = state_sizes(md)
    assert state_sizes(old) == (
        full,
        incremental + sum(was.state_size - new.checkpointed_size for new, was in handles),
        inline,
    )
