"""A RocksDB MANIFEST with a flipped byte (its size unchanged) is not "well-formed" (review m4).

RocksDB's recovery refuses it (``Corruption: checksum mismatch``); the shallow gates check its log
records' masked CRC32C (``ckptctl/rocksdb/logfile.py``) and name the file and byte. The corrupted
case is a real fixture's MANIFEST with bytes flipped in a copy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ckptctl.rocksdb.logfile import crc32c, log_problem
from tests.support.cli_runner import DATA
from tests.support.gc_support import Scenario, ckptctl


def _manifests(root: Path, *rebase: str) -> list[dict]:
    rows = json.loads(ckptctl("refs", str(root), "--json", *rebase).stdout)
    return [r for r in rows if (r.get("local_name") or "").startswith("MANIFEST-")]


def test_crc32c_is_castagnoli() -> None:
    assert crc32c(b"123456789") == 0xE3069283  # the standard check value of CRC-32C


@pytest.mark.parametrize(
    "version", sorted(p.name for p in DATA.iterdir() if p.is_dir() and p.name[0].isdigit())
)
def test_every_manifest_flink_wrote_passes(version: str) -> None:
    """No false alarm: every MANIFEST of the real fixtures (some over one 32 KiB block) is sound."""
    seen = 0
    for r in _manifests(DATA / version):
        path = Path(r["path"].removeprefix("file:"))
        if not path.exists():
            continue  # a file the fixture lost on purpose (FLINK-39964 cases)
        data = path.read_bytes()[r["offset"] : r["offset"] + r["size"]]
        assert log_problem(data) is None, r["path"]
        seen += 1
    assert seen


@pytest.mark.parametrize("gate", ["verify", "check"])
def test_a_manifest_with_flipped_bytes_fails_the_shallow_gate(tmp_path: Path, gate: str) -> None:
    sc = Scenario("2.2.0", "basic", tmp_path)
    manifest = _manifests(sc.checkpoints, *sc.rebase)[0]
    path = Path(manifest["path"].removeprefix("file:"))
    data = bytearray(path.read_bytes())
    at = len(data) // 2
    data[at] ^= 0x55
    data[at + 1] ^= 0x55
    path.write_bytes(bytes(data))  # same size: only the contents say it is damaged
    args = [gate, str(sc.checkpoints), *sc.rebase] + (["--engine", "local"] if gate == "verify" else [])
    report = json.loads(ckptctl(*args, "--json", expect=1).stdout)
    problems = [p for p in report["problems"] if p["check"] == "manifest"]
    assert [p["path"] for p in problems] == [manifest["path"]], report["problems"]
    assert "checksum mismatch" in problems[0]["detail"] and "byte " in problems[0]["detail"]
    text = ckptctl(*args, expect=1, env={"COLUMNS": "200"}).stdout
    assert "well-formed" not in text and path.name in text
