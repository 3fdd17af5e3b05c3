"""The model's one walk (HandleWalk) and per-handle facts, over every real fixture.

Completeness is checked against the model's own handle unions (what the reader can produce), so
a handle type added to the reader without its place in the walk, its sizes or its view fails here
instead of being skipped silently.
"""

from __future__ import annotations

import typing

import pytest

from ckptctl import views
from ckptctl.metadata import model, read_metadata, write_metadata
from ckptctl.metadata.model import (
    FileHandle,
    HandleWalk,
    RelativeFileHandle,
    SegmentFileHandle,
    file_groups,
    incremental_parts,
)
from ckptctl.metadata.transform import map_file_handles
from ckptctl.refs import (
    ARROW_TYPES,
    COLUMNS,
    FILE_COLUMNS,
    GROUP_COLUMNS,
    GROUP_KEY,
    Ref,
    file_resolver,
    load_checkpoint,
    reference_rows,
)
from ckptctl.storage import Storage
from tests.fixture_cases import cases

CASES = cases()
STREAM = typing.get_args(model.StreamHandle)
KEYED = typing.get_args(model.KeyedHandle)
OPERATOR = typing.get_args(model.OperatorHandle)
CHANNEL = typing.get_args(model.AnyChannelHandle)


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

    key_groups: model.KeyGroupRange
    delegate: typing.Any
    handle_id: str
    blob: bytes

    flink_class = "SomeNewStateHandle"
    state_size = property(lambda self: self.delegate.state_size)


def test_a_new_handle_type_is_shown_by_its_fields() -> None:
    h = _NewHandle(model.KeyGroupRange(0, 4), FileHandle("file:/x/f", 7), "id-1", b"\x01\xff")
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
