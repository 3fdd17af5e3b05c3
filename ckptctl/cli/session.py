"""The session of one invocation: what the output flags chose (JSON or not, verbosity), its
:class:`~ckptctl.cli.terminal.Terminal` and its :class:`~ckptctl.cli.output.Output`.

Above both: the output renders through the terminal, and the session makes each (the output
module is imported when a command first asks for it: ``ckptctl --help`` does not load it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckptctl.cli.terminal import NORMAL, Terminal

if TYPE_CHECKING:
    from ckptctl.cli.output import Output


class Session:
    """What the output flags chose for this invocation: JSON or not, verbosity.

    The app's group makes a new one for each invocation (:func:`activate`); the flags before the
    command name (``ckptctl --json ls``) and after it (``ckptctl ls --json``) fill it while the
    command line is parsed. The command then asks :meth:`output` once for its result renderer.
    """

    def __init__(self, json: bool = False, verbosity: int = NORMAL) -> None:
        self.json = json
        self.verbosity = verbosity
        self._terminal: Terminal | None = None
        self._output: Output | None = None

    @property
    def terminal(self) -> Terminal:
        if self._terminal is None:
            self._terminal = Terminal(self.verbosity)
        self._terminal.verbosity = self.verbosity
        return self._terminal

    def output(self, json: bool | None = None) -> Output:
        """The result renderer: JSON with --json (or when ``json`` says so, e.g. ``refs --format
        csv``, whose data is not a table), else the console; made once."""
        if self._output is None:
            from ckptctl.cli.output import make_output

            self._output = make_output(self.json if json is None else json, self.terminal)
        return self._output


_active: Session | None = None


def activate(session: Session) -> None:
    """Make ``session`` the current one (the app's group does, once per invocation)."""
    global _active
    _active = session


def current_session() -> Session:
    """The session of the running invocation (a default one outside the command line)."""
    global _active
    if _active is None:
        _active = Session()
    return _active


def current_terminal() -> Terminal:
    return current_session().terminal
