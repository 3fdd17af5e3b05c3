"""One clock for both planners of a test (``assert_same_plan`` compares plans whole, and the plan
names its cut-off): the storage clock read once, at the call."""

from __future__ import annotations

import time


def fixed_clock(monkeypatch) -> float:
    """Every plan made from now on reads the same storage clock: this moment's."""
    from ckptctl.gc.discovery import Discovery

    now = time.time()
    monkeypatch.setattr(Discovery, "clock", lambda self: (now, "test clock"))
    return now
