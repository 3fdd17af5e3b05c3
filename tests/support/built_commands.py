"""Typer's test runner builds the app's click command anew at every invocation
(``typer.testing.CliRunner.invoke`` calls ``typer.main.get_command``): the signature of every
command function, its annotations evaluated, for all of ckptctl's commands, ~70 ms of CPU each time,
~8 % of a test worker's samples (py-spy over the suite). A process of ``ckptctl`` builds it once, as
``main()`` runs once; the suite's in-process invocations now do the same, once per app and worker.

Each invocation still makes its own context and session (:class:`ckptctl.cli.base.Group` starts a
new :class:`~ckptctl.cli.session.Session` in ``make_context``), as a new process would; the command
is rebuilt if the app's registered commands, groups or callback change.
"""

from __future__ import annotations

from typing import Any


def remember() -> None:
    """Make ``typer.testing`` build each app's command once (idempotent)."""
    import typer.main
    import typer.testing

    build = typer.main.get_command
    if getattr(typer.testing._get_command, "remembers", False):
        return
    built: dict[int, tuple[Any, tuple, Any]] = {}

    def get_command(app: Any) -> Any:
        shape = (
            tuple(id(c.callback) for c in app.registered_commands),
            tuple(id(g.typer_instance) for g in app.registered_groups),
            id(app.registered_callback),
        )
        entry = built.get(id(app))
        if entry is None or entry[0] is not app or entry[1] != shape:
            entry = built[id(app)] = (app, shape, build(app))  # the app kept: its id is not reused
        return entry[2]

    get_command.remembers = True  # type: ignore[attr-defined]
    typer.testing._get_command = get_command
