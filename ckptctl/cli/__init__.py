"""The ``ckptctl`` command line: Typer commands that parse options, call the core, render output.

Every command takes the same output flags, declared once (:data:`OUTPUT_OPTIONS`): ``--json``,
``-v/--verbose``, ``-q/--quiet``, before or after the command name. They fill the invocation's
:class:`~ckptctl.cli.session.Session` (a new one per invocation, made by the app's
:class:`Group`), from which a command takes its :class:`~ckptctl.cli.output.Output`, chosen once
(:func:`get_output`). Errors a user can cause become one line on stderr and a non-zero exit code
(2 for bad input or I/O, 1 for "problems found"), never a traceback. Heavy modules (pyarrow,
s3fs) are imported inside the commands that need them.

The app and what the commands share live in :mod:`ckptctl.cli.base`; each command module
(``ckptctl/cli/<name>.py``) registers its commands on it, and this package imports them all.
"""

from __future__ import annotations

import sys

from ckptctl.cli.base import (  # the app and what the commands share; re-exported
    OUTPUT_OPTIONS,
    Command,
    EndpointOpt,
    EngineOpt,
    Group,
    MasterOpt,
    RebaseOpt,
    SavepointsOpt,
    app,
    as_json,
    command,
    engine_choice,
    get_output,
    output_options,
    storage_and_rebase,
    writable_outputs,
)

__all__ = [
    "Command",
    "EndpointOpt",
    "EngineOpt",
    "Group",
    "MasterOpt",
    "OUTPUT_OPTIONS",
    "RebaseOpt",
    "SavepointsOpt",
    "app",
    "as_json",
    "command",
    "engine_choice",
    "get_output",
    "output_options",
    "storage_and_rebase",
    "writable_outputs",
    "gc_alias",
    "main",
]

# The command modules (ckptctl/cli/<command>.py, or <group>.py for gc and paimon) register their
# commands on the app when imported, in this order: the order of `ckptctl --help`.
# isort: off
from ckptctl.cli import gc as _gc  # noqa: E402,F401
from ckptctl.cli import history as _history  # noqa: E402,F401
from ckptctl.cli import ls as _ls  # noqa: E402,F401
from ckptctl.cli import show as _show  # noqa: E402,F401
from ckptctl.cli import refs as _refs  # noqa: E402,F401
from ckptctl.cli import diff as _diff  # noqa: E402,F401
from ckptctl.cli import paimon as _paimon  # noqa: E402,F401
from ckptctl.cli import preflight as _preflight  # noqa: E402,F401
from ckptctl.cli import repair as _repair  # noqa: E402,F401
from ckptctl.cli import relocate as _relocate  # noqa: E402,F401
from ckptctl.cli import remap as _remap  # noqa: E402,F401
from ckptctl.cli import rescale as _rescale  # noqa: E402,F401
from ckptctl.cli import states as _states  # noqa: E402,F401
from ckptctl.cli import verify as _verify  # noqa: E402,F401
from ckptctl.cli import check as _check  # noqa: E402,F401
# isort: on


def main(argv: list[str] | None = None) -> None:
    from ckptctl.columns import return_freed_memory

    return_freed_memory()
    from ckptctl.cli.base import flush_stdout

    args = list(sys.argv[1:] if argv is None else argv)
    try:
        app(args=gc_alias(args), prog_name="ckptctl")
    finally:
        flush_stdout()


GLOBAL_FLAGS = frozenset({"--json", "-q", "--quiet", "-v", "--verbose", "-qq", "-vv"})


def gc_alias(args: list[str]) -> list[str]:
    """``ckptctl gc ROOT ...`` is ``ckptctl gc plan ROOT ...`` (the dry run is the default),
    ``ckptctl paimon PATH ...`` is ``ckptctl paimon status PATH ...``, and
    ``ckptctl relocate apply PLAN`` is the (hidden) ``relocate-apply PLAN``; the output flags
    may come first (``ckptctl --json gc ROOT``)."""
    i = 0
    while i < len(args) and args[i] in GLOBAL_FLAGS:
        i += 1
    head, rest = args[:i], args[i:]
    if len(rest) >= 2 and rest[0] == "gc" and rest[1] not in ("plan", "apply", "--help", "-h"):
        return [*head, "gc", "plan", *rest[1:]]
    if len(rest) >= 2 and rest[0] == "paimon" and rest[1] not in ("status", "orphans", "--help", "-h"):
        return [*head, "paimon", "status", *rest[1:]]
    if len(rest) >= 2 and rest[0] == "relocate" and rest[1] == "apply":
        return [*head, "relocate-apply", *rest[2:]]
    return args
