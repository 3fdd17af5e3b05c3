"""The one duration grammar of every option that takes one (``--older-than``, ``--margin``, ``--ttl``).

``90``, ``90s``, ``1h30m``, ``500ms``, ``7d``, ``2w``, ``1.5h``: one or more number-unit pairs,
units ``ms``, ``s``/``sec``, ``m``/``min``, ``h``, ``d``, ``w`` (long forms too); a bare number is
seconds everywhere. Each option used to have its own grammar (``--ttl 5`` meant 5 ms while
``--older-than 5`` meant 5 s; ``--ttl 1min`` and ``--older-than 1ms`` were refused).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ckptctl.errors import CkptError

_SECONDS = {
    "ms": 0.001, "msec": 0.001, "millis": 0.001, "millisecond": 0.001, "milliseconds": 0.001,
    "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
    "w": 604800, "week": 604800, "weeks": 604800,
}  # fmt: skip
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*")
EXAMPLES = "e.g. 90s, 30m, 1h30m, 7d, 500ms"


def parse_seconds(text: str, option: str = "duration") -> float:
    """``text`` as seconds (see the module docstring); anything else is a one-line usage error."""
    s = text.strip()
    if not s:
        raise CkptError(f"{option} expects a duration ({EXAMPLES}), got '{text}'")
    total, pos = 0.0, 0
    while pos < len(s):
        m = _PART.match(s, pos)
        if m is None or (not m.group(2) and (pos or m.end() != len(s))):  # a bare number: the whole text
            raise CkptError(f"{option} expects a duration ({EXAMPLES}), got '{text}'")
        if m.group(2) == "M":  # minutes or months? never guess a deletion age
            raise CkptError(
                f"{option}: 'M' is ambiguous in '{text}': use m or min for minutes, d or w for days"
            )
        unit = m.group(2).lower()
        if unit not in _SECONDS and unit != "":
            raise CkptError(f"{option}: unknown unit '{m.group(2)}' in '{text}' ({EXAMPLES})")
        total += float(m.group(1)) * (_SECONDS[unit] if unit else 1)
        pos = m.end()
    if not total < 1e12:  # ~30,000 years: anything longer is a typo (and inf/nan never pass)
        raise CkptError(f"{option} '{text}' is too long a duration")
    return total


def parse_millis(text: str, option: str = "duration") -> int:
    return int(round(parse_seconds(text, option) * 1000))


@dataclass(frozen=True)
class OlderThan:
    """``--older-than`` (gc's, paimon's) as given, final once parsed: an age (seconds before the
    storage clock's now) or an instant (the cut-off itself, ``at``: compared with file times as it
    is, never turned into an age with this machine's clock, which may differ from the storage's)."""

    age: float = 0.0
    at: float | None = None

    def cutoff(self, now: float) -> float:
        """The instant files must be older than, ``now`` on the storage's clock."""
        return self.at if self.at is not None else now - self.age
