"""Writer/reader inverse over synthetic models with every handle kind, including the ones the real
fixtures cannot produce on this machine (legacy codes 3/5/8/10, channel state in both encodings,
merged channel handles, V7 regional-checkpoint ids, master hook state, a null properties trailer).
"""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as hs

from ckptctl.metadata import flinkpath, mutf8, read_metadata, write_metadata
from ckptctl.metadata.checkpoint import CheckpointMetadata, MasterState
from ckptctl.metadata.handles import (
    ByteStreamHandle,
    ChangelogBackendHandle,
    ChangelogBytesHandle,
    ChangelogFileHandle,
    EmptySegmentHandle,
    FileHandle,
    IncrementalHandle,
    KeyGroupRange,
    KeyGroupsHandle,
    LocalFile,
    RelativeFileHandle,
    SegmentFileHandle,
)
from ckptctl.metadata.operators import (
    ChannelHandle,
    FileMergingOperatorHandle,
    MergedChannelEntry,
    MergedChannelHandle,
    NamedOperatorState,
    OperatorState,
    OperatorStreamHandle,
    SubtaskState,
)
from tests.support.fixture_cases import cases

NULL_TRAILER = b"\xac\xed\x00\x05\x70"  # ObjectOutputStream.writeObject(null)

i32 = hs.integers(-(2**31), 2**31 - 1)
i64 = hs.integers(-(2**63), 2**63 - 1)
nat = hs.integers(0, 2**31 - 1)
text = hs.text(hs.characters(codec="utf-8") | hs.sampled_from(["\x00", "\U0001f600", "é"]), max_size=20)
kgr = hs.builds(KeyGroupRange, hs.integers(0, 32767), hs.integers(1, 64))
size = hs.integers(-1, 2**63 - 1)  # FileStateHandle accepts -1 (unknown) and up


def _flink_accepts(check, s: str) -> bool:
    try:
        check(s)
    except flinkpath.InvalidPath:
        return False
    return True


# strings Flink's Path accepts (the model must be one Flink can read)
path = text.map(lambda t: "file:/" + t).filter(lambda s: _flink_accepts(flinkpath.check_path, s))
relative = text.filter(lambda s: _flink_accepts(flinkpath.check_relative, s))
offsets = hs.lists(i64, max_size=4).map(tuple)


def _strategies(dialect: str) -> dict:
    """Handle strategies for what one writer release family could have written.

    ``dialect``: "1.14" (V3: codes 3/5/7, changelog handles without sizes or ids, no file
    merging), "1.15" (V3: codes 7/11/12 and the later changelog layout, no codes 13+ nor file
    merging), "V4+" (everything). A V3 file names each local file once (1.14/1.15 hold the
    lists in a map).
    """
    v3 = dialect != "V4+"
    old = dialect == "1.14"
    segments = [
        hs.builds(SegmentFileHandle, i64, i64, hs.sampled_from([0, 1]), path, text),
        hs.just(EmptySegmentHandle()),
    ]
    leaf_stream = hs.one_of(
        hs.builds(FileHandle, path, size),
        hs.builds(RelativeFileHandle, relative, size),
        hs.builds(ByteStreamHandle, text, hs.binary(max_size=16)),
        *([] if v3 else segments),
    )

    @hs.composite
    def key_groups(draw, code):
        r = draw(kgr)
        return KeyGroupsHandle(
            code,
            r,
            tuple(draw(i64) for _ in range(r.count)),
            draw(leaf_stream),
            draw(text) if code == 12 else None,
        )

    stream = leaf_stream | key_groups(3)
    local_files = hs.lists(
        hs.builds(LocalFile, text, stream), max_size=3, unique_by=(lambda f: f.local_path) if v3 else None
    ).map(tuple)

    @hs.composite
    def incremental(draw):
        code = draw(hs.sampled_from([5] if old else [11] if v3 else [5, 11]))
        return IncrementalHandle(
            code, draw(i64), draw(text), draw(kgr), draw(i64) if code == 11 else None,
            draw(hs.none() | stream), draw(local_files), draw(local_files), draw(text) if code == 11 else None,
        )  # fmt: skip

    changelog_bytes = hs.builds(
        ChangelogBytesHandle,
        kgr,
        hs.integers(0, 2**63 - 1),  # SequenceNumber.of: not negative
        hs.integers(0, 2**63 - 1),
        hs.lists(hs.tuples(i32, hs.binary(max_size=8)), max_size=3).map(tuple),
        hs.none() if old else text,
    )

    @hs.composite
    def changelog_file(draw):
        code = draw(hs.sampled_from([10] if v3 else [10, 13]))
        pieces = tuple(draw(hs.lists(hs.tuples(i64, hs.none() | leaf_stream), max_size=3)))
        if old:
            return ChangelogFileHandle(code, draw(kgr), pieces, draw(i64), None, None, None)
        return ChangelogFileHandle(
            code, draw(kgr), pieces, draw(i64), draw(i64), draw(text), draw(text) if code == 13 else None
        )

    @hs.composite
    def changelog_backend(draw):
        code = draw(hs.sampled_from([8] if v3 else [8, 14]))
        mat = tuple(draw(hs.lists(incremental() | key_groups(3 if old else 12), max_size=2)))
        non = tuple(draw(hs.lists(changelog_bytes | changelog_file(), max_size=2)))
        if old:
            return ChangelogBackendHandle(code, draw(kgr), None, mat, non, None, None, None)
        mid = draw(i64)
        return ChangelogBackendHandle(
            code, draw(kgr), draw(i64), mat, non, mid, draw(i64) if code == 14 else None, draw(text)
        )

    key_group_codes = [3, 7] if old else [7, 12] if v3 else [3, 7, 12]
    keyed = hs.one_of(
        hs.none(), incremental(), *(key_groups(c) for c in key_group_codes), changelog_backend()
    )
    named_states = hs.lists(hs.builds(NamedOperatorState, text, hs.integers(0, 2), offsets), max_size=3).map(
        tuple
    )
    operator = hs.none() | hs.builds(OperatorStreamHandle, named_states, stream)
    if not v3:
        operator |= hs.builds(
            FileMergingOperatorHandle, named_states, path, path, hs.booleans(), hs.one_of(*segments)
        )
    return {"stream": stream, "keyed": keyed, "operator": operator}


STRATEGIES = {d: _strategies(d) for d in ("1.14", "1.15", "V4+")}


def channels(version: int, kinds: tuple[int, int]):
    stream = STRATEGIES["V4+" if version > 3 else "1.15"]["stream"]
    plain = hs.builds(
        ChannelHandle, hs.just(kinds[0]), i32, hs.tuples(i32, i32), offsets, i64, hs.none() | stream
    )
    if version < 6:
        return hs.lists(plain, max_size=2).map(tuple)
    merged = hs.builds(
        MergedChannelHandle, hs.just(kinds[1]), i32, i64, hs.none() | stream,
        hs.lists(hs.builds(MergedChannelEntry, hs.tuples(i32, i32), i64, offsets), max_size=3).map(tuple),
        raw_offsets=hs.none(),
    )  # fmt: skip
    return hs.lists(plain | merged, max_size=2).map(tuple)


@hs.composite
def subtask(draw, version: int, dialect: str, index: int):
    if draw(hs.booleans()) and draw(hs.booleans()):
        return SubtaskState(index, True)
    operator, keyed = STRATEGIES[dialect]["operator"], STRATEGIES[dialect]["keyed"]
    return SubtaskState(
        index, False, draw(operator), draw(operator), draw(keyed), draw(keyed),
        draw(channels(version, (1, 3))), draw(channels(version, (2, 4))),
        draw(hs.none() | i64) if version >= 7 else None,
    )  # fmt: skip


@hs.composite
def operator_state(draw, version: int, dialect: str):
    op_id = draw(hs.binary(min_size=16, max_size=16)).hex()
    named = version >= 5
    name, uid = (draw(text), draw(text)) if named else (None, None)
    # OperatorState: 0 <= parallelism <= max parallelism, subtask indexes below the parallelism
    # (Flink's reader takes any max parallelism; with subtasks, a parallelism up to 2^15)
    max_par = draw(hs.integers(3, 2**31 - 1))
    par = draw(hs.integers(3, max_par))
    if draw(hs.integers(0, 9)) == 0:
        return OperatorState(op_id, par, max_par, None, None, name, uid)
    par = min(par, 1 << 15)
    n = draw(hs.integers(0, 3))
    subs = tuple(draw(subtask(version, dialect, i)) for i in range(n))
    coord = draw(hs.none() | hs.builds(ByteStreamHandle, text, hs.binary(max_size=8)))
    return OperatorState(op_id, par, max_par, coord, subs, name, uid)


@hs.composite
def metadata(draw):
    version = draw(hs.sampled_from([3, 4, 5, 6, 7]))
    dialect = draw(hs.sampled_from(["1.14", "1.15"])) if version == 3 else "V4+"
    masters = tuple(draw(hs.lists(hs.builds(MasterState, i32, text, hs.binary(max_size=8)), max_size=2)))
    ops = tuple(draw(hs.lists(operator_state(version, dialect), max_size=3)))
    trailer = b"" if version == 3 else NULL_TRAILER
    return CheckpointMetadata(version, draw(hs.integers(0, 2**63 - 1)), masters, ops, trailer, None)


# Hypothesis's default 100 examples, not 300: the time goes to drawing the models (write and read
# are ~1% of it; 300 took 15 CPU-s), and test_flink_view's byte-exact round trip of every fixture's
# _metadata (162 real files, formats 3-6, every handle kind Flink wrote) holds the real space
@settings(max_examples=100, deadline=None)
@given(md=metadata())
def test_write_then_read_gives_the_same_model(md: CheckpointMetadata) -> None:
    data = write_metadata(md)
    back = read_metadata(data)
    assert back == md
    assert write_metadata(back) == data


@given(hs.text(hs.characters(codec="utf-16", exclude_categories=()) | hs.sampled_from(["\x00", "\ud800"])))
def test_modified_utf8_round_trip(s: str) -> None:
    raw = mutf8.encode(s)
    assert b"\x00" not in raw  # Java writes U+0000 as C0 80
    assert all(b < 0xF0 for b in raw)  # never 4-byte sequences
    assert mutf8.decode(raw) == s


def test_modified_utf8_matches_java_examples() -> None:
    assert mutf8.encode("\x00") == b"\xc0\x80"
    assert mutf8.encode("\U0001f600") == b"\xed\xa0\xbd\xed\xb8\x80"  # surrogate pair, 3 bytes each
    assert mutf8.decode(b"\xed\xa0\xbd\xed\xb8\x80") == "\U0001f600"


def test_null_properties_trailer_is_accepted() -> None:
    # a 1.x file with a CheckpointProperties trailer: format 4 (1.16-1.20); 1.14/1.15 (format 3) write none
    case = next(
        c for c in cases() if c.flink_version.startswith("1.") and c.expected()["format_version"] == 4
    )
    md = read_metadata((case.checkpoint_dir / "_metadata").read_bytes())
    assert md.properties is not None and md.properties.checkpoint_type == "Checkpoint"
    nulled = write_metadata(md._replace(trailer=NULL_TRAILER))
    back = read_metadata(nulled)
    assert back.properties is None and back.operators == md.operators


def test_header_fields() -> None:
    case = cases()[0]
    raw = (case.checkpoint_dir / "_metadata").read_bytes()
    magic, version, checkpoint_id = struct.unpack_from(">iiq", raw)
    md = read_metadata(raw)
    assert magic == 0x4960672D and (md.version, md.checkpoint_id) == (version, checkpoint_id)
