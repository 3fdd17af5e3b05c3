"""preflight judges state, not files: a big checkpoint's ``_metadata`` is mostly its incremental
handles' file lists (415k references in the 52 MB of bench/preflight_bench.py), which preflight reads
for their bytes only (``skimming_files``) -- the same verdict, the same bytes for ``-n``, a fraction of
the decoding."""

from __future__ import annotations

import json

import pytest

from ckptctl.metadata import read_metadata, write_metadata
from ckptctl.metadata.handles import IncrementalHandle, SkimmedFiles
from ckptctl.metadata.read_streams import skimming_files
from ckptctl.metadata.reader import Decoder
from ckptctl.metadata.walk import incremental_parts
from tests.support.cli_runner import cli
from tests.support.fixture_cases import FIXTURES

UPGRADES = FIXTURES / "upgrades" / "data" / "2.3.0"
# a RocksDB incremental checkpoint (shared and private files) and the staging savepoint of the job on HashMap
PAIR = UPGRADES / "backend_switch_checkpoint"
CHECKPOINT = next((PAIR / "old").glob("*/chk-*/_metadata"))
NEW = next((PAIR / "new").glob("*/_metadata")).parent


def _handles(md) -> list[IncrementalHandle]:
    return [p for op in md.operators for s in op.subtasks or () for p in incremental_parts(s.managed_keyed)]


def test_skimmed_file_lists_keep_their_count_and_bytes_and_no_file():
    data = CHECKPOINT.read_bytes()
    full = read_metadata(data, path=str(CHECKPOINT))
    with skimming_files():
        skimmed = read_metadata(data, path=str(CHECKPOINT))
    assert read_metadata(data, path=str(CHECKPOINT)) == full  # the switch ends with the block
    pairs = list(zip(_handles(full), _handles(skimmed), strict=True))
    assert pairs
    for f, s in pairs:
        for files, skim in ((f.shared, s.shared), (f.private, s.private)):
            assert type(skim) is SkimmedFiles and len(skim) == 0
            assert skim.count_skimmed == len(files)
            assert skim.size == sum(x.handle.state_size for x in files)
        assert s.state_size == f.state_size and s.meta == f.meta and s.key_groups == f.key_groups


def test_a_skimmed_handle_is_never_written():
    with skimming_files():
        skimmed = read_metadata(CHECKPOINT.read_bytes(), path=str(CHECKPOINT))
    with pytest.raises(ValueError, match="skimmed"):
        write_metadata(skimmed)


def test_preflight_decodes_no_file_list(monkeypatch):
    """The full decoding of a file list is never called by preflight, and the report is the one
    the full decoding gives (verdict, findings, every operator's bytes: what -n drops)."""
    from ckptctl.checkpoint.rebase import Rebase
    from ckptctl.checkpoint.targets import one_checkpoint
    from ckptctl.preflight import run_preflight
    from ckptctl.storage import Storage, StorageOptions

    storage = Storage(StorageOptions.from_env(None))
    old, new = (one_checkpoint(storage, str(p), Rebase()) for p in (CHECKPOINT.parent, NEW))
    full = run_preflight(storage, old, new, target_flink="2.3.0", new_backend="hashmap").to_json()

    def refuse(self):
        raise AssertionError("preflight decoded an incremental handle's file list")

    monkeypatch.setattr(Decoder, "local_files", refuse)
    args = ("--target-flink", "2.3.0", "--target-backend", "hashmap", "--json")
    result = cli("preflight", str(CHECKPOINT.parent), "--against", str(NEW), *args)
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert doc["verdict"] == full["verdict"] == "fails"
    assert doc["findings"] == full["findings"]
    assert doc["operators"] == full["operators"]
    # the files' bytes, not the meta's alone
    assert any(op["state_bytes"] > 20_000 for op in doc["operators"])
