"""Pause Python's cyclic garbage collector (the ``gc`` module) while building large acyclic structures.

Nothing to do with checkpoint garbage collection (:mod:`ckptctl.gc`).

Decoding a big ``_metadata`` creates about a million tuples; each allocation burst triggers a
collection that rescans all of them, which nearly doubles the decode time. The model is made of
tuples and strings only, so it holds no reference cycles and nothing is lost by pausing.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_collector() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
