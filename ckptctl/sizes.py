"""The one size grammar of every option and rule that takes a number of bytes (``--max-orphan-bytes``,
``--bwlimit``, ``--budget``, ``--fail-if 'full > 500GiB'``): ``1048576``, ``512MiB``, ``10G``, binary units."""

from __future__ import annotations

import re

from ckptctl.errors import CkptError

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}


def parse_bytes(text: str, option: str) -> int:
    """``1048576``, ``512MiB``, ``10G`` (binary units) as a number of bytes."""
    m = _SIZE.match(text)
    if not m:
        raise CkptError(f"{option} expects a number of bytes like 1048576, 512MiB or 10G, got '{text}'")
    return int(float(m.group(1)) * _SIZE_UNITS[m.group(2).lower()])


def human_bytes(n: int | float | None, none: str = "-") -> str:
    """A number of bytes as people read it (``1.5 MiB``): the one spelling of the terminal and the
    history page. ``none`` is what a missing figure shows."""
    if n is None:
        return none
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"
