"""S3 keeps an object's time in whole seconds, truncated (moto as AWS): an upload is newer than
the ones before it only in a later second. Tests waited a fixed 1.2 s for that; waiting for the
next second on the clock moto stamps with (this machine's: it serves on loopback) takes 0.55 s on
average, and the S3 tests make it dozens of times."""

from __future__ import annotations

import math
import time

MARGIN = 0.05  # past the second's start: an upload begun now is stamped in the new second


def next_second() -> None:
    """Wait until the next whole second has begun: every object uploaded from now on has a later
    mtime than every object uploaded before the call, and a clock read now is past their mtimes."""
    now = time.time()
    time.sleep(math.floor(now) + 1 + MARGIN - now)
