"""How a count reads in ckptctl's text: ``1 checkpoint``, ``2 checkpoints`` (one rule, every message).

The JSON carries the numbers; only the words people read depend on this module. No imports, so
any layer (core or CLI) may use it."""

from __future__ import annotations


def plural(n: int, word: str, words: str | None = None, *, thousands: bool = True) -> str:
    """``n`` and ``word`` in the number it needs: ``plural(1, "file")`` is ``1 file``,
    ``plural(2, "file")`` is ``2 files``, ``plural(3, "copy", "copies")``; thousands are
    separated (``39,049 files``) unless ``thousands=False``."""
    count = f"{n:,}" if thousands else str(n)
    return f"{count} {word if n == 1 else (words or word + 's')}"
