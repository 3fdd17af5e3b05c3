"""Arrow compute helpers the columnar readers share (the S3 Inventory reader, gc's per-file rule).
PyArrow is imported when one is called, never at import."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

ALLOCATOR_VARIABLE = "ARROW_DEFAULT_MEMORY_POOL"


def return_freed_memory() -> None:
    """Arrow buffers from the C library's allocator, for a process about to decide millions of
    files in batches (``ckptctl``'s CLI): PyArrow's default (mimalloc) keeps the pages of freed
    batches for reuse, and the in-process gc plan of 1M files peaked 19 MiB higher with it (233
    vs 214 MiB, the same time: bench/gc_bench.py). Only before PyArrow is loaded (the pool is
    chosen then), and never over the user's own ``ARROW_DEFAULT_MEMORY_POOL``."""
    if "pyarrow" not in sys.modules:
        os.environ.setdefault(ALLOCATOR_VARIABLE, "system")


def starts_with_any(values: Any, prefixes: Sequence[str]) -> Any:
    """Per value of an Arrow string or binary array, whether it begins with one of ``prefixes``
    (at least one)."""
    import pyarrow.compute as pc

    mask = pc.starts_with(values, prefixes[0])
    for prefix in prefixes[1:]:
        mask = pc.or_(mask, pc.starts_with(values, prefix))
    return mask
