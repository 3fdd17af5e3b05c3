"""``--help`` of every command: metavars that say what to type, usage lines that name the arguments."""

from __future__ import annotations

import pytest

from tests.support.cli_runner import cli


@pytest.mark.parametrize(
    "command",
    [
        "",
        "ls",
        "show",
        "refs",
        "diff",
        "verify",
        "check",
        "plan-rescale",
        "gc",
        "gc plan",
        "gc apply",
        "repair",
        "relocate",
        "remap",
    ],
)
def test_help_metavars_say_what_to_type(command: str) -> None:
    result = cli(*command.split(), "--help", env={"COLUMNS": "100"})
    assert result.exit_code == 0
    text = result.stdout
    for bad in ("<str>", "<int", "<float>", "<list", "{", "HDFS"):
        assert bad not in text, (bad, text)
    usage = {
        "ls": "ls [OPTIONS] ROOT", "show": "show [OPTIONS] CHECKPOINT", "refs": "refs [OPTIONS] CHECKPOINT|ROOT",
        "diff": "diff [OPTIONS] A B", "verify": "verify [OPTIONS] CHECKPOINT|ROOT", "check": "check [OPTIONS] ROOT",
        "plan-rescale": "plan-rescale [OPTIONS] CHECKPOINT", "gc": "`ckptctl gc ROOT ...` is",
        "gc plan": "gc plan [OPTIONS] ROOT...", "gc apply": "gc apply [OPTIONS] PLAN.json",
        "repair": "repair [OPTIONS] CHECKPOINT", "relocate": "relocate [OPTIONS] SRC DST",
        "remap": "remap [OPTIONS] SNAPSHOT",
    }  # fmt: skip
    if command:
        assert usage[command] in text
