"""What this machine has, for choosing where work runs and how much the JVM may take."""

from __future__ import annotations

import os


def machine_memory() -> int:
    """This machine's memory in bytes (0: unknown)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 0
