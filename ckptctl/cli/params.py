"""Typed option values: durations, TTLs, instants, byte sizes, parallelism ranges, ``OLD=NEW`` mappings.

An option declares what it holds (``typer.Option(..., parser=AGE)``) and the command receives the value in its
final form (seconds, bytes, a list of parallelisms, a :class:`ckptctl.checkpoint.rebase.Rebase`), converted
once while the command line is parsed. A bad value is one line on stderr and exit code 2, like
every other input error of ckptctl, not Click's usage block: the parsers raise
:class:`~ckptctl.errors.CkptError` and :class:`OptionError` shows it the way the commands do.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

import typer

from ckptctl.durations import OlderThan
from ckptctl.sizes import parse_bytes

_DURATION_START = re.compile(r"^\s*-?\d")  # a duration (one grammar: ckptctl.durations) ...
_ISO_START = re.compile(r"^\s*\d{4}-\d{2}-\d{2}")  # ... unless it is an ISO date
_RANGE = re.compile(r"^\s*(\d+)\s*(?:\.\.|-)\s*(\d+)\s*$")
MAX_SWEEP = 4096  # parallelisms one sweep may cover


class Instant(float):
    """An absolute time (seconds since the epoch) given where a duration may be: ``--older-than
    2026-11-01T00:00:00Z`` is a cut-off instant, compared with file times as it is, never turned
    into an age with this machine's clock (the storage's clock may differ)."""


def parse_age(text: str, option: str) -> float:
    """A duration (``24h``, ``90m``, ``7d``, seconds) as seconds of age, or an absolute time (ISO
    8601) as an :class:`Instant`."""
    from ckptctl.durations import parse_seconds
    from ckptctl.errors import CkptError

    if _DURATION_START.match(text) and not _ISO_START.match(text):
        if text.strip().startswith("-"):
            raise CkptError(f"{option} must not be negative, got '{text}'")
        return parse_seconds(text, option)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise CkptError(
            f"{option} expects a duration like 24h, 90m, 1h30m, 7d or an ISO time, got '{text}'"
        ) from None
    if when.tzinfo is None:
        raise CkptError(f"{option} '{text}' needs a time zone (e.g. 2026-11-01T00:00:00Z)")
    return Instant(when.timestamp())


def parse_older_than(text: str, option: str) -> OlderThan:
    """``--older-than`` (gc's and paimon's): an age or an instant (:func:`parse_age`), told apart
    here once, as the :class:`~ckptctl.durations.OlderThan` the commands pass on."""
    value = parse_age(text, option)
    return OlderThan(at=float(value)) if isinstance(value, Instant) else OlderThan(age=value)


def parse_duration(text: str, option: str) -> float:
    """A duration only (``--margin 1h``): an ISO time is an instant, which no margin is."""
    from ckptctl.errors import CkptError

    value = parse_age(text, option)
    if isinstance(value, Instant):
        raise CkptError(f"{option} expects a duration like 1h or 10m, not a time")
    return value


def parse_parallelism(text: str, option: str = "--parallelism") -> list[int]:
    """``N`` or a sweep ``LOW..HIGH`` (also ``LOW-HIGH``) as the parallelisms to plan."""
    from ckptctl.errors import CkptError

    m = _RANGE.match(text)
    if m:
        lo, hi = int(m.group(1)), int(m.group(2))
        if lo < 1 or hi < lo:
            raise CkptError(f"{option} range '{text}' must be LOW..HIGH with 1 <= LOW <= HIGH")
        if hi - lo + 1 > MAX_SWEEP:
            raise CkptError(
                f"{option} range '{text}' covers {hi - lo + 1:,} parallelisms; a sweep covers at most "
                f"{MAX_SWEEP:,} (narrow it, e.g. {lo}..{lo + MAX_SWEEP - 1})"
            )
        return list(range(lo, hi + 1))
    if text.strip().isdigit():
        return [int(text)]
    raise CkptError(f"{option} expects N or LOW..HIGH, got '{text}'")


OPTION = "\x00option\x00"  # where the option's name goes in a parser's message


class OptionError(typer.BadParameter):
    """A bad option value: ``error: <message>`` on one line, exit code 2 (what ``command`` does
    for a :class:`~ckptctl.errors.CkptError`), instead of Click's usage block. Click attaches the
    option while parsing (``self.param``); its long name replaces :data:`OPTION` in the message."""

    exit_code = 2

    def format_message(self) -> str:
        opts = list(getattr(self.param, "opts", None) or ())
        name = next((o for o in opts if o.startswith("--")), opts[0] if opts else "option")
        return " ".join(self.message.replace(OPTION, name).split())

    def show(self, file: Any = None) -> None:
        from ckptctl.cli.session import current_terminal

        current_terminal().error(self.format_message())


class Typed:
    """A value parser for ``typer.Option(parser=...)`` around one of the parsers above: the
    command receives the converted value; a CkptError becomes an :class:`OptionError`."""

    def __init__(self, name: str, parse: Callable[[str, str], Any]) -> None:
        self.name, self._parse = name, parse
        self.__name__ = name  # shown by Typer/pydantic in its own messages, if any

    def __call__(self, value: Any) -> Any:
        if not isinstance(value, str):
            return value  # a default given in its final form
        from ckptctl.errors import CkptError

        try:
            return self._parse(value, OPTION)
        except CkptError as e:
            raise OptionError(str(e)) from None


def parse_ttl(text: str, option: str) -> tuple[str | None, int]:
    """``--ttl 7d`` (every TTL state: name None) or ``--ttl NAME=7d`` (one state) as (name, millis)."""
    from ckptctl.durations import parse_millis
    from ckptctl.errors import CkptError

    name, eq, duration = text.rpartition("=")
    if eq and not name:
        raise CkptError(f"{option} expects 7d or NAME=7d, got '{text}'")
    return (name if eq else None), parse_millis(duration, option)


def parse_epoch_millis(text: str, option: str) -> int:
    """``--now``: epoch milliseconds, or an ISO-8601 time (UTC unless it says otherwise)."""
    from datetime import UTC

    from ckptctl.errors import CkptError

    t = text.strip()
    if t.isdigit():
        return int(t)
    try:
        dt = datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise CkptError(f"{option} expects epoch milliseconds or an ISO-8601 time, got '{text}'") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def _rebase(text: str, option: str) -> Any:
    from ckptctl.checkpoint.rebase import Rebase

    return Rebase.parse([text])


AGE = Typed("duration", parse_age)  # --older-than 24h: seconds of age (a duration or an ISO time)
OLDER_THAN = Typed(
    "duration", parse_older_than
)  # --older-than 24h or an ISO time: an OlderThan, age or instant
DURATION = Typed("duration", parse_duration)  # --margin 1h: seconds, never an instant
BYTES = Typed("bytes", parse_bytes)  # --bwlimit 50MiB: bytes, binary units
PARALLELISM = Typed("parallelism", parse_parallelism)  # -p 4 or -p 1..8: the list of parallelisms
TTL = Typed("ttl", parse_ttl)  # --ttl 7d or NAME=7d: (state name or None, milliseconds)
EPOCH_MILLIS = Typed("time", parse_epoch_millis)  # --now: epoch milliseconds
MAPPING = Typed("mapping", _rebase)  # --rebase OLD=NEW: a Rebase of one mapping (Rebase.parse)
