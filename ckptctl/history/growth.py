"""Growth of a series of sizes: the least-squares slope over a window (not first and last point,
which one compaction or one failed checkpoint would swing), per day and in % of the window's mean
per day, and the days until a budget is reached at that slope.

Time comes from the checkpoints (their ``_metadata`` times). When a window holds fewer than two
distinct times (a copied tree whose times are all the copy's), per-day figures are ``None`` and the
slope per checkpoint is what remains: it ranks the same way within one job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

DAY = 86400.0


def least_squares(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """The slope of the least-squares line through (xs, ys); ``None`` under two distinct xs."""
    n = len(xs)
    if n < 2:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) * (x - mx) for x in xs)
    if sxx <= 0:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx


@dataclass(frozen=True)
class Growth:
    bytes_per_day: float | None
    percent_per_day: float | None
    bytes_per_checkpoint: float | None
    points: int

    def days_to(self, current: int, budget: int | None) -> float | None:
        """Days until ``current`` bytes reach ``budget`` at this slope: 0 when over it already,
        ``None`` when it does not grow (or no budget, or no time axis)."""
        if budget is None:
            return None
        if current >= budget:
            return 0.0
        if not self.bytes_per_day or self.bytes_per_day <= 0:
            return None
        return (budget - current) / self.bytes_per_day


def growth(times: Sequence[float | None], sizes: Sequence[int]) -> Growth:
    """The growth of ``sizes`` (one per checkpoint, oldest first) taken at ``times`` (seconds)."""
    n = len(sizes)
    ys = [float(v) for v in sizes]
    per_checkpoint = least_squares([float(i) for i in range(n)], ys)
    per_day = pct = None
    if all(t is not None for t in times) and len(set(times)) >= 2:
        per_second = least_squares([float(t) for t in times], ys)  # type: ignore[arg-type]
        if per_second is not None:
            per_day = per_second * DAY
            mean = sum(ys) / n
            pct = per_day / mean * 100 if mean > 0 else None
    return Growth(per_day, pct, per_checkpoint, n)
