"""docs/cli.md, the command reference, generated from every command's ``--help``.

The reference is the help text itself, so it cannot say something the commands do not:
``tests/test_docs.py`` regenerates it and fails when the committed file differs. Rendered as a
100-column terminal without colour, so the text does not depend on who runs it.

    python -m ckptctl.cli.docs            # rewrite docs/cli.md
    python -m ckptctl.cli.docs --check    # exit 1 when docs/cli.md is stale
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
from typer.testing import CliRunner

from ckptctl.cli import app

CLI_MD = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
REGENERATE = "python -m ckptctl.cli.docs"
ENV = {"COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb"}


def commands(group: Any, ctx: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every visible command path under ``group`` in the order ``--help`` lists them, each group
    before its commands (Typer's own Click: groups are the commands that list commands)."""
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        yield (*prefix, name)
        if hasattr(command, "list_commands"):
            yield from commands(
                command, command.context_class(command, parent=ctx, info_name=name), (*prefix, name)
            )


def help_text(path: tuple[str, ...]) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], prog_name="ckptctl", env=ENV)
    if result.exit_code != 0:
        raise RuntimeError(f"ckptctl {' '.join(path)} --help exited {result.exit_code}: {result.output}")
    return result.output.rstrip()


def render() -> str:
    """The whole of docs/cli.md."""
    root = typer.main.get_command(app)
    paths = [(), *commands(root, root.context_class(root, info_name="ckptctl"))]
    out = [
        "# Command reference",
        "",
        f"Generated from each command's `--help` by `{REGENERATE}`; do not edit by hand",
        "(`tests/test_docs.py` fails when this file is stale).",
        "",
        *(f"- [`{' '.join(('ckptctl', *p))}`](#{'-'.join(('ckptctl', *p))})" for p in paths),
    ]
    for path in paths:
        out += ["", f"## {' '.join(('ckptctl', *path))}", "", "```text", help_text(path), "```"]
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if CLI_MD.exists() and CLI_MD.read_text(encoding="utf-8") == text:
            return 0
        print(f"{CLI_MD} is stale: run `{REGENERATE}`", file=sys.stderr)
        return 1
    CLI_MD.write_text(text, encoding="utf-8")
    print(f"wrote {CLI_MD}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
