"""What this machine has, for choosing where work runs and how much the JVM may take."""

from __future__ import annotations

import os


def machine_memory() -> int:
    """This machine's memory in bytes (0: unknown)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 0


def available_memory(proc: str = "/proc", cgroup_root: str = "/sys/fs/cgroup") -> int:
    """The memory this process may still take, in bytes (0: unknown): the kernel's ``MemAvailable``
    (free memory plus what it can reclaim without swapping), or less where this process's cgroup
    (a container, a CI job's slice) has a lower limit left (v2 ``memory.max`` less
    ``memory.current``; v1 ``memory.limit_in_bytes`` less ``memory.usage_in_bytes``). A machine
    shared with other work has much less than its total: a JVM sized from the total (a quarter of
    24 GB, on each of two test workers, beside Flink's MiniClusters) was taken by the OOM killer."""
    free = _meminfo_available(os.path.join(proc, "meminfo"))
    for limit in _cgroup_room(proc, cgroup_root):
        free = limit if not free else min(free, limit)
    return free


def _meminfo_available(path: str) -> int:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _cgroup_room(proc: str, cgroup_root: str) -> list[int]:
    """What is left below the memory limit of this process's cgroup and of each cgroup above it
    (a limit may be set on a parent slice only), for cgroup v2 and v1; unlimited ones give nothing."""
    try:
        with open(os.path.join(proc, "self", "cgroup"), encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    room = []
    for line in lines:
        _id, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if controllers == "":  # v2: one hierarchy (below unified/ on a hybrid machine)
            hybrid = os.path.join(cgroup_root, "unified")
            base = hybrid if os.path.isdir(hybrid) else cgroup_root
            limit_name, used_name = "memory.max", "memory.current"
        elif "memory" in controllers.split(","):  # v1: the memory controller's hierarchy
            base = os.path.join(cgroup_root, "memory")
            limit_name, used_name = "memory.limit_in_bytes", "memory.usage_in_bytes"
        else:
            continue
        parts = [p for p in path.split("/") if p]
        for depth in range(len(parts), -1, -1):
            directory = os.path.join(base, *parts[:depth])
            limit, used = (
                _read_int(os.path.join(directory, limit_name)),
                _read_int(os.path.join(directory, used_name)),
            )
            # v1 writes "no limit" as a page-rounded 2^63-1: anything above 2^60 is no limit
            if limit is not None and limit < 1 << 60:
                room.append(max(0, limit - (used or 0)))
    return room


def _read_int(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as f:
            text = f.read().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None  # "max": no limit
