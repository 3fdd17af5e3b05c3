"""The terminal of one invocation: messages, progress, confirmation, verbosity and styles.

Everything that is not the command's result goes through one :class:`Terminal`: warnings and
errors, progress bars and spinners (on stderr, only when it is a terminal), the confirmation
prompt of a destructive command, and the verbosity chosen with ``-v``/``-q``. It also holds the
two Rich consoles (stdout for results, stderr for the rest) and their theme, so a style is named
once (``[error]``, ``[warning]``, ``[ok]``) and every renderer uses the same colors.

The result itself goes to an :class:`ckptctl.cli.output.Output` (console or JSON), chosen once
per invocation by the :class:`~ckptctl.cli.session.Session` the app's group installs.

Rich is imported only when something is shown: ``ckptctl --help`` must stay fast.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from ckptctl.shown import visible

T = TypeVar("T")

# Named styles: renderers write "[error]…[/error]", the theme says what that looks like.
STYLES = {
    "error": "red",
    "warning": "yellow",
    "ok": "green",
    "title": "bold",
    "muted": "dim",
    "accent": "cyan",
}

NORMAL = 0  # verbosity: below it -q (errors only), above it -v


_TEXT_CONSOLE: Any = None


def text_console(**options: Any) -> Any:
    """A Rich console that draws every string as text: no markup, no emoji codes, no highlighting,
    control characters shown (:func:`visible`) -- a path from the outside is printed as it is,
    wherever a renderer puts it (a line, a table cell or title, a tree label). ckptctl's own
    styles come as :func:`styled` text."""
    global _TEXT_CONSOLE
    if _TEXT_CONSOLE is None:
        from rich.console import Console

        class TextConsole(Console):
            def render_str(self, text: str, **kwargs: Any) -> Any:
                return super().render_str(visible(text, lines=True), **kwargs)

            def on_broken_pipe(self) -> None:
                raise BrokenPipeError  # Rich would exit 1 ("problems found"): ckptctl.cli.base decides

        _TEXT_CONSOLE = TextConsole
    return _TEXT_CONSOLE(markup=False, emoji=False, highlight=False, **options)


def styled(template: str, *values: Any) -> Any:
    """A ``rich.text.Text`` of ckptctl's own markup ``template`` (``"[error]{}[/error]: {}"``)
    with each ``{}`` filled by a value drawn as text (:func:`visible`), in the styles around it:
    ``[bold]``, ``[/x]``, ``[link=...]``, backslashes, ``:emoji:`` codes in a value are what it
    shows, never a style or an error. The values never pass through the markup parser (escaping
    them could not be exact: a trailing backslash escapes the tag after it)."""
    from rich.text import Text

    parts = template.split("{}")
    if len(parts) != len(values) + 1:
        raise ValueError(f"{len(parts) - 1} places for {len(values)} values in {template!r}")
    marks = [chr(0xF0000 + i) for i in range(len(values))]  # private use: never in a template
    parsed = Text.from_markup("".join(p + m for p, m in zip(parts, [*marks, ""], strict=True)), emoji=False)
    if not values:
        return parsed
    pieces, at = [], 0
    for mark, value in zip(marks, values, strict=True):
        where = parsed.plain.index(mark, at)
        pieces.append(parsed[at:where])
        piece = Text(visible(str(value)))
        for span in parsed.spans:
            if span.start <= where < span.end:
                piece.stylize(span.style)
        pieces.append(piece)
        at = where + 1
    pieces.append(parsed[at:])
    return Text.assemble(*pieces, style=parsed.style)


class Terminal:
    """stderr for people (and stdout's console for rendered results), at a verbosity.

    ``verbosity`` < 0 (``-q``): errors only, no warnings, no progress; 0: warnings and progress
    bars on a terminal; > 0 (``-v``): also informational lines, and tracebacks of internal errors.
    """

    def __init__(self, verbosity: int = NORMAL) -> None:
        self.verbosity = verbosity
        self._err = None
        self._out = None

    # -- consoles --------------------------------------------------------------------------
    def _theme(self):
        from rich.theme import Theme

        return Theme(STYLES, inherit=True)

    @property
    def err(self):
        """The stderr console: messages, progress, prompts."""
        if self._err is None:
            self._err = text_console(stderr=True, soft_wrap=True, theme=self._theme())
        return self._err

    @property
    def out(self):
        """The stdout console rendered results are printed on (a wide page when piped)."""
        if self._out is None:
            self._out = text_console(soft_wrap=False, theme=self._theme())
            if not self._out.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
                self._out = text_console(soft_wrap=False, width=200, theme=self._theme())
        return self._out

    @property
    def quiet(self) -> bool:
        return self.verbosity < NORMAL

    @property
    def verbose(self) -> bool:
        return self.verbosity > NORMAL

    @property
    def interactive(self) -> bool:
        """Progress and spinners are shown: stderr is a terminal and -q was not given."""
        return not self.quiet and self.err.is_terminal

    # -- messages --------------------------------------------------------------------------
    # every message is text: paths and names in it are shown as they are (:func:`styled`)
    def error(self, message: str) -> None:
        self.err.print(styled("[error]error:[/error] {}", message))

    def warn(self, message: str) -> None:
        """A warning; not shown with -q."""
        if not self.quiet:
            self.err.print(styled("[warning]warning:[/warning] {}", message))

    def refusal(self, code: str, message: str) -> None:
        """Why a destructive command refuses: shown even with -q (it is the reason for exit 1)."""
        self.err.print(styled("[error]refused ({}):[/error] {}", code, message))

    def info(self, message: str) -> None:
        """A line for -v only (what is being done, how long it took)."""
        if self.verbose:
            self.err.print(styled("[muted]{}[/muted]", message))

    # -- progress --------------------------------------------------------------------------
    @contextmanager
    def progress(self, items: Iterable[T], total: int, label: str) -> Iterator[Iterable[T]]:
        """Iterate with a progress bar on a terminal; silently otherwise."""
        if total < 2 or not self.interactive:
            self.info(f"{label}: {total}")  # with a bar, the bar's total() says it
            yield items
            return
        with self.counter(total, label) as advance:

            def tick() -> Iterator[T]:
                for item in items:
                    yield item
                    advance(1)

            yield tick()

    def iterate(self, label: str) -> Callable[[Iterable[T], int], Iterator[T]]:
        """``progress=`` for core functions that take ``progress(items, total)`` (gc, targets)."""

        def progress(items: Iterable[T], total: int) -> Iterator[T]:
            with self.progress(items, total, label) as it:
                yield from it

        return progress

    @contextmanager
    def status(self, label: str) -> Iterator[None]:
        """A spinner with ``label`` on a terminal while something without a count runs."""
        self.info(label)
        if not self.interactive:
            yield
            return
        with self.err.status(styled("{}", label)):
            yield

    @contextmanager
    def counter(self, total: int, label: str) -> Iterator[Callable[[int], None]]:
        """A progress bar advanced by hand (``advance(n)``); a no-op when not interactive."""
        bar = Bar(self, label)
        with bar:
            bar.total(total, minimum=1)
            yield bar.advance

    def listing_count(self) -> Callable[[str, int | None], None] | None:
        """:attr:`Storage.on_listed <ckptctl.storage.Storage.on_listed>`: a spinner with the
        running count of the objects an S3 listing has returned (``None``: the listing is done),
        on a terminal only. A listing made while a bar is shown keeps quiet (one live display)."""
        if not self.interactive:
            return None
        from rich.errors import LiveError

        shown: list[Any] = []

        def on_listed(what: str, n: int | None) -> None:
            if n is None:
                while shown:
                    shown.pop().stop()
                return
            text = styled("listing {}: {} objects", what, f"{n:,}")
            if shown:
                shown[0].update(text)
                return
            status = self.err.status(text)
            try:
                status.start()
            except LiveError:
                return
            shown.append(status)

        return on_listed

    def bar(self, label: str) -> Bar:
        """A progress bar whose total is learnt later (``on_total``), for core callbacks."""
        return Bar(self, label)

    # -- confirmation ----------------------------------------------------------------------
    def confirm(self, question: str, no_terminal: str) -> bool:
        """Ask on the terminal (default no); without a terminal to ask, refuse with ``no_terminal``."""
        from ckptctl.errors import CkptError

        if not sys.stdin.isatty():
            raise CkptError(no_terminal)
        import typer

        return typer.confirm(visible(question), default=False, err=True)


class Bar:
    """A Rich progress bar on stderr when the terminal is interactive, nothing otherwise.

    ``total(n)`` starts it (not below ``minimum``, by default 2: one item needs no bar),
    ``advance(n)`` moves it; :attr:`callback` is ``advance``, or None when nothing is shown, so a
    core function can skip the bookkeeping.
    """

    def __init__(self, terminal: Terminal, label: str) -> None:
        self.terminal, self.label = terminal, label
        self._bar = self._task = None

    def __enter__(self) -> Bar:
        return self

    def total(self, n: int, minimum: int = 2) -> None:
        self.terminal.info(f"{self.label}: {n}")
        if n < minimum or not self.terminal.interactive:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._bar = Progress(
            TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=self.terminal.err, transient=True,
        )  # fmt: skip
        self._bar.start()
        self._task = self._bar.add_task(visible(self.label), total=n)

    def advance(self, n: int) -> None:
        if self._bar is not None:
            self._bar.advance(self._task, n)

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.stop()

    @property
    def callback(self) -> Callable[[int], None] | None:
        return self.advance if self.terminal.interactive else None
