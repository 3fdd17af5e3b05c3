"""Review c5: ``-v`` says what a command reads, for every command that reads through the storage
(show, refs, diff, states, check, repair, paimon...): each storage call and the URI it asks for, on
stderr (``Storage.on_call``, set once in ``ckptctl.cli.base._context``). It added nothing but for
``ls`` ("reading _metadata: 3")."""

from __future__ import annotations

import pytest

from tests.support.cli_runner import cli
from tests.support.fixture_cases import REPO, manifest

ENTRY = next(e for e in manifest()["entries"] if e["flink_version"] == "2.2.0" and e["scenario"] == "basic")
ROOT = REPO / ENTRY["data_dir"]
CHKS = sorted((p.parent for p in ROOT.glob("checkpoints/*/chk-*/_metadata")), key=lambda p: int(p.name[4:]))
REBASE = ["--rebase", f"{ENTRY['original_root']}={ROOT}"]


@pytest.mark.parametrize(
    "args",
    [
        ["show", str(CHKS[-1])],
        ["refs", str(CHKS[-1])],
        ["states", str(CHKS[-1])],
        ["check", str(CHKS[-1])],
        ["diff", str(CHKS[0]), str(CHKS[-1])],
    ],  # fmt: skip
)
def test_verbose_names_what_the_command_reads(args: list[str]) -> None:
    quiet = cli(*args, *REBASE)
    loud = cli(*args, *REBASE, "-v")
    assert quiet.exit_code == loud.exit_code == 0, loud.output
    metadata = f"{CHKS[-1]}/_metadata"
    assert metadata in loud.stderr and metadata not in quiet.stderr, loud.stderr
    assert loud.stdout == quiet.stdout
