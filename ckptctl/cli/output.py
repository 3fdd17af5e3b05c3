"""The result of a command, for people or for scripts: one :class:`Output` per invocation.

:class:`Output` has one method, :meth:`Output.result`: a command hands it a typed result (from
the core: its ``to_json()`` is the JSON contract) and the function of :mod:`ckptctl.cli.render`
that draws it. :class:`JsonOutput` writes the result as one JSON document on stdout (streamed
when the result can write itself); :class:`ConsoleOutput` calls the renderer with the Rich
console. Which one is chosen once per invocation (:meth:`ckptctl.cli.session.Session.output`,
from ``--json``); commands never branch on the format or print themselves. What every renderer
shares stays here: :func:`fitted_table` and the human formatters (:func:`human_bytes`, ...).

Everything else (warnings, errors, progress, prompts, verbosity) belongs to the invocation's
:class:`~ckptctl.cli.terminal.Terminal`, which both implementations share; it writes to stderr, so
``ckptctl ls --json | jq`` always sees clean JSON.

Text from the outside (paths, names, keys, messages that quote them) is never Rich markup: the
Terminal's consoles draw every string as text (markup and emoji codes off, control characters
shown as escapes: :func:`visible`). ckptctl's own styles are asked for explicitly with
:func:`styled`, whose template is ckptctl's and whose values are text.
"""

from __future__ import annotations

import functools
import json
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from ckptctl.cli.terminal import Terminal, styled, visible
from ckptctl.sizes import human_bytes

__all__ = ["human_bytes", "styled", "visible"]  # with the helpers below: what renderers import from here


def human_time(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


class Output(ABC):
    """A command's result, rendered one way; messages go to the shared :attr:`term`."""

    def __init__(self, terminal: Terminal | None = None) -> None:
        self.term = terminal if terminal is not None else Terminal()

    def warn(self, message: str) -> None:
        self.term.warn(message)

    def error(self, message: str) -> None:
        self.term.error(message)

    @abstractmethod
    def result(self, result: Any, render: Callable[[Any, Any], None]) -> None:
        """A typed result: its ``to_json()`` is the JSON contract (``write_json(binary_stream)``,
        when it has one, writes the same document streamed); ``render(console, result)`` (a
        function of :mod:`ckptctl.cli.render`) draws it for a person."""


class JsonOutput(Output):
    """Each result as one JSON document on stdout (indented; the documents tests and scripts read)."""

    def result(self, result: Any, render: Callable[[Any, Any], None]) -> None:
        write_json = getattr(result, "write_json", None)
        if write_json is not None:  # streamed: a gc plan or a reference map can list millions of files
            sys.stdout.flush()
            write_json(sys.stdout.buffer)
            sys.stdout.buffer.flush()
            return
        sys.stdout.write(readable_json(result.to_json()))
        sys.stdout.write("\n")


def readable_json(value: Any, depth: int = 0, levels: int = 4) -> str:
    """``value`` as JSON indented (two spaces) for its first ``levels`` levels, each deeper value
    on one line. ``json.dumps(indent=...)`` takes Python's pure encoder for a whole document: on
    a checkpoint of 10^5 handles (``show --json``) that was six times the C encoder's time and a
    third of the command's; a person or ``jq`` reads the top levels, not each handle's fields."""
    pad = "  " * (depth + 1)
    if depth < levels and isinstance(value, dict) and value:
        items = (f"{pad}{_json_key(k)}: {readable_json(v, depth + 1, levels)}" for k, v in value.items())
        return "{\n" + ",\n".join(items) + "\n" + pad[2:] + "}"
    if depth < levels and isinstance(value, list | tuple) and value:
        items = (pad + readable_json(v, depth + 1, levels) for v in value)
        return "[\n" + ",\n".join(items) + "\n" + pad[2:] + "]"
    return json.dumps(value, default=str)


def _json_key(key: Any) -> str:
    """A dict key as ``json.dumps`` writes it: a string as it is, ``None``, booleans and numbers
    as their JSON text in quotes; any other key is refused as it refuses it."""
    if isinstance(key, str):
        return json.dumps(key)
    if key is None or isinstance(key, bool | int | float):
        return json.dumps(json.dumps(key))
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


class ConsoleOutput(Output):
    """Rich rendering for a person at a terminal (also used when piping without --json)."""

    def result(self, result: Any, render: Callable[[Any, Any], None]) -> None:
        render(self.term.out, result)


class Col:
    """A table column: header, cells (text, or :func:`styled` text), alignment; ``fold``: may
    wrap (paths)."""

    def __init__(self, header: str, cells: list[Any], justify: str = "left", fold: bool = False) -> None:
        self.header, self.cells, self.justify, self.fold = header, cells, justify, fold


FOLD_MIN = 24  # the narrowest a folded (path) column may get before other columns are dropped


def __getattr__(name: str) -> Any:
    """``Table``: the Rich table of every renderer (``from ckptctl.cli.output import Table``), made
    when first asked for: Rich loads only when something is drawn."""
    if name == "Table":
        return _titled_table()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _titled_table() -> type:
    """A Rich table whose title is a line of its own, as wide as the terminal: Rich wraps a title
    to its table's width, and a small summary table broke ``verify <path>`` over three lines on a
    120-column terminal (review c2)."""
    from rich.table import Table as RichTable
    from rich.text import Text

    class TitledTable(RichTable):
        def __rich_console__(self, console: Any, options: Any) -> Any:
            title = self.title
            if title is None:
                yield from super().__rich_console__(console, options)
                return
            # as Rich draws a title (the console's rules: text, control characters shown), unwrapped
            line = (
                title.copy() if isinstance(title, Text) else console.render_str(str(title), highlight=False)
            )
            line.stylize(self.title_style or "table.title")
            line.justify = (
                "default" if self.title_justify == "left" else self.title_justify
            )  # no trailing blanks
            yield line
            self.title = None  # the table below it, untitled
            try:
                yield from super().__rich_console__(console, options)
            finally:
                self.title = title

    return TitledTable


def fitted_table(console, columns: list[Col], drop: Iterable[str] = (), **table_kwargs: Any):
    """A Rich table that fits ``console.width`` without cutting a cell: every column but the
    folded ones keeps its full width (no ellipsis in ids, numbers or status), folded columns wrap,
    and columns named in ``drop`` are left out, in that order, until the rest fits."""
    Table = _titled_table()  # noqa: N806 - the class

    def build(cols: list[Col], cap_folds: bool) -> Any:
        table = Table(**table_kwargs)
        for c in cols:
            width = max(len(c.header), *(cell_len(x) for x in c.cells)) if c.cells else len(c.header)
            if c.fold:
                table.add_column(
                    c.header, justify=c.justify, overflow="fold",
                    max_width=min(width, FOLD_MIN) if cap_folds else None,
                )  # fmt: skip
            else:
                table.add_column(c.header, justify=c.justify, no_wrap=True, min_width=width)
        for row in zip(*(c.cells for c in cols), strict=True):
            table.add_row(*row)
        return table

    unbounded = console.options.update_width(1 << 20)  # measure the natural width, not the clamped one
    shown = _fitting_columns(
        columns,
        drop,
        lambda cols: console.measure(build(cols, True), options=unbounded).maximum <= console.width,
    )
    return build(shown, cap_folds=False)


def _fitting_columns(columns: list[Col], drop: Iterable[str], fits: Callable[[list[Col]], bool]) -> list[Col]:
    """``columns`` without those named in ``drop``, left out in that order until ``fits`` (the
    rule of both tables: :func:`fitted_table`, :func:`print_long_table`)."""
    shown = list(columns)
    for victim in [None, *drop]:
        if victim is not None:
            shown = [c for c in shown if c.header != victim]
        if fits(shown):
            break
    return shown


QUICK_NOTE = " [muted](--quick: existence and sizes only, no file read)[/muted]"  # verify's, check's: a styled() template
LONG_ROWS = 2_000  # above this many rows a table is drawn line by line (:func:`print_long_table`)


def print_long_table(console, columns: list[Col], drop: Iterable[str], title: str) -> None:
    """:func:`fitted_table`'s table for many rows, drawn here line by line in Rich's default box:
    Rich lays out every cell several times (``refs`` of 10^5 references took 68 s). The same
    rule: every column but the folded one whole, columns in ``drop`` left out until the rest
    fits, the folded column (at least :data:`FOLD_MIN` wide) wrapped. Plain cells (printable
    ASCII without spaces, brackets or colons: nearly all) are drawn as they are; any other is
    made into Rich text as Rich makes it (markup, emoji codes, tabs, line breaks; wrapped at
    spaces). A terminal too narrow for the folded column's header gets Rich's own table."""
    cells = {
        id(c): [x if type(x) is str and _simple(x) else _rich_text(console, x) for x in c.cells]
        for c in columns
    }

    def natural(c: Col) -> int:
        return (
            max(len(c.header), *(len(x) if type(x) is str else _lines_width(x) for x in cells[id(c)]))
            if c.cells
            else len(c.header)
        )

    widths = {id(c): natural(c) for c in columns}

    def total(cols: list[Col], fold_cap: bool) -> int:
        return (
            sum((min(widths[id(c)], FOLD_MIN) if c.fold and fold_cap else widths[id(c)]) + 3 for c in cols)
            + 1
        )

    shown = _fitting_columns(columns, drop, lambda cols: total(cols, True) <= console.width)
    folds = [c for c in shown if c.fold]
    room = console.width - total([c for c in shown if not c.fold], False)
    if len(folds) > 1 or total(shown, True) > console.width or any(room - 3 < len(c.header) for c in folds):
        console.print(fitted_table(console, columns, drop=drop, title=title, title_justify="left"))
        return
    width = [min(widths[id(c)], room - 3) if c.fold else widths[id(c)] for c in shown]

    def line(parts: list[str], left: str, mid: str, right: str) -> str:
        return left + mid.join(parts) + right

    def cell(text: str, w: int, justify: str) -> str:
        pad = " " * (w - _width(text))
        return " " + (pad + text if justify == "right" else text + pad) + " "

    def pieces(x: Any, w: int, fold: bool) -> list[str]:
        if type(x) is str:
            return _folded(x, w) if fold else [x]
        return [t.plain for t in x.wrap(console, w, overflow="fold", no_wrap=not fold)] or [""]

    # the title as Rich gives a table's: wrapped to the table's width
    console.print(console.render_str(title, style="table.title", highlight=False),
                  width=sum(width) + 3 * len(width) + 1)  # fmt: skip
    out = [line(["━" * (w + 2) for w in width], "┏", "┳", "┓")]
    out.append(line([cell(c.header, w, c.justify) for c, w in zip(shown, width, strict=True)], "┃", "┃", "┃"))
    out.append(line(["━" * (w + 2) for w in width], "┡", "╇", "┩"))
    for row in zip(*(cells[id(c)] for c in shown), strict=True):
        parts = [pieces(x, w, c.fold) for c, x, w in zip(shown, row, width, strict=True)]
        for k in range(max(map(len, parts))):
            texts = [p[k] if k < len(p) else "" for p in parts]
            out.append(
                line(
                    [cell(t, w, c.justify) for c, t, w in zip(shown, texts, width, strict=True)],
                    "│",
                    "│",
                    "│",
                )
            )
    out.append(line(["─" * (w + 2) for w in width], "└", "┴", "┘"))
    console.out("\n".join(out), highlight=False)


def _simple(cell: str) -> bool:
    """A cell Rich draws as it is: printable ASCII, no space (a fold point)."""
    return cell.isascii() and cell.isprintable() and " " not in cell


def _rich_text(console, cell: Any) -> Any:
    """A cell as Rich's table makes it (a string as text, control characters shown; tabs expanded)."""
    text = console.render_str(cell, highlight=False) if isinstance(cell, str) else cell.copy()
    text.expand_tabs()
    return text


def _lines_width(text: Any) -> int:
    return max((line.cell_len for line in text.split("\n")), default=0)


def _width(text: str) -> int:
    return len(text) if text.isascii() else _cells(text)


def _folded(text: str, width: int) -> list[str]:
    """``text`` cut into pieces of at most ``width`` terminal cells (a path folded in its column)."""
    if _width(text) <= width:
        return [text]
    return [text[i : i + width] for i in range(0, len(text), width)]  # ASCII: a character a cell


def cell_len(cell: Any) -> int:
    """Terminal cells of a cell: a string's text as the console shows it (:func:`visible`), a
    :func:`styled` one's own."""
    if not isinstance(cell, str):
        return cell.cell_len
    if cell.isascii() and cell.isprintable():
        return len(cell)
    return _cells(visible(cell))


def _cells(text: str) -> int:
    from rich.cells import cell_len as rich_cell_len

    return rich_cell_len(text)


def or_dash(v: Any) -> str:
    """A table cell: the value as text, ``-`` for a missing one."""
    return "-" if v is None else str(v)


def make_output(as_json: bool, terminal: Terminal | None = None) -> Output:
    """The JSON or the console implementation, sharing ``terminal`` (a default one if None)."""
    return JsonOutput(terminal) if as_json else ConsoleOutput(terminal)
