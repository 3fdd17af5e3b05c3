"""Arrow compute helpers the columnar readers share (the S3 Inventory reader, gc's per-file rule).
PyArrow is imported when one is called, never at import."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def starts_with_any(values: Any, prefixes: Sequence[str]) -> Any:
    """Per value of an Arrow string or binary array, whether it begins with one of ``prefixes``
    (at least one)."""
    import pyarrow.compute as pc

    mask = pc.starts_with(values, prefixes[0])
    for prefix in prefixes[1:]:
        mask = pc.or_(mask, pc.starts_with(values, prefix))
    return mask
