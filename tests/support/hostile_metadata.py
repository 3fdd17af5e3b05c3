"""Hostile ``_metadata`` from real files: decode a fixture with ckptctl's reader, change handles in the
typed model, re-encode with its writer (never hand-made bytes)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ckptctl.metadata import read_metadata, write_metadata
from ckptctl.metadata.handles import RelativeFileHandle


def rewrite(obj, fn: Callable):
    """Rebuild a metadata model, replacing every handle ``fn`` returns a substitute for (non-None)."""
    if not isinstance(obj, tuple):
        return obj
    if hasattr(obj, "_fields"):
        new = fn(obj)
        if new is not None:
            return new
        return obj._make(rewrite(x, fn) for x in obj)
    return tuple(rewrite(x, fn) for x in obj)


def edit_metadata(meta: Path, fn: Callable) -> None:
    """Decode a real ``_metadata``, change handles in the typed model, write it back (mtime kept)."""
    st = meta.stat()
    md = read_metadata(meta.read_bytes(), str(meta))
    meta.write_bytes(write_metadata(rewrite(md, fn)))
    os.utime(meta, (st.st_atime, st.st_mtime))


def first_relative_handle(meta: Path) -> RelativeFileHandle:
    md = read_metadata(meta.read_bytes(), str(meta))
    found: list = []

    def look(h):
        if type(h) is RelativeFileHandle and not found:
            found.append(h)
        return None

    rewrite(md, look)
    assert found, f"{meta} has no relative handle"
    return found[0]
