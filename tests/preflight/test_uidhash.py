"""The operator id of a uid, against the ids real Flink wrote: V5+ metadata records each
operator's uid next to its id (2.0 onwards), for the DataStream jobs' ``uid(...)`` and the SQL
planner's generated uids alike."""

from __future__ import annotations

import pytest

from ckptctl.metadata.reader import read_metadata
from ckptctl.preflight.uidhash import murmur3_x64_128, operator_id_of_uid
from tests.support.fixture_cases import FIXTURES


def _recorded_uids() -> dict[str, str]:
    """uid → id, from every V5+ ``_metadata`` of the fixtures (releases 2.0 - 2.3)."""
    out: dict[str, str] = {}
    for path in sorted((FIXTURES / "data").glob("2.*/**/_metadata")):
        data = path.read_bytes()
        if int.from_bytes(data[4:8], "big") < 5:
            continue
        for op in read_metadata(data, path=str(path)).operators:
            if op.uid:
                out[op.uid] = op.operator_id
    return out


def test_every_recorded_uid_hashes_to_the_id_flink_wrote():
    recorded = _recorded_uids()
    # the DataStream jobs' uids and the SQL planner's: short and long ones (both hash tails, and
    # more than one 16-byte block)
    assert len(recorded) >= 6, recorded
    assert {len(u.encode()) % 16 for u in recorded} != {0}
    assert any(len(u.encode()) > 16 for u in recorded), recorded
    wrong = {u: (i, operator_id_of_uid(u)) for u, i in recorded.items() if operator_id_of_uid(u) != i}
    assert not wrong


@pytest.mark.parametrize("n", range(0, 40))
def test_every_tail_length_is_mixed_in(n):
    """Each byte of every tail length (0-15 past a block) changes the hash: none is dropped."""
    data = bytes(range(1, n + 1))
    h = murmur3_x64_128(data)
    assert len(h) == 16
    for i in range(n):
        changed = bytearray(data)
        changed[i] ^= 0x80
        assert murmur3_x64_128(bytes(changed)) != h
