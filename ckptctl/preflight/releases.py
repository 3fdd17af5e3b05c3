"""What depends on the Flink release the new job runs on (``--target-flink``).

Each rule names the release where Flink's behaviour changed; where the release is neither given
nor inferable the report says which one it assumed.
"""

from __future__ import annotations

import re

from ckptctl.errors import CkptError

Release = tuple[int, int, int]

# the metadata version each release writes (Checkpoints.storeCheckpointMetadata): V3 up to 1.14,
# V4 1.15-1.20, V5 2.0, V6 from 2.1 (checked on the fixtures of every release 1.14 -> 2.3)
_WRITTEN_BY = {3: ((1, 11, 0), (1, 14, 99)), 4: ((1, 15, 0), (1, 20, 99)), 5: ((2, 0, 0), (2, 0, 99)),
               6: ((2, 1, 0), None)}  # fmt: skip


def parse_release(text: str) -> Release:
    """``2.1`` / ``2.1.3`` / ``1.20-SNAPSHOT`` → (2, 1, 3); a bad value is one line, exit 2."""
    m = re.fullmatch(r"\s*(\d+)\.(\d+)(?:\.(\d+))?(?:[-.\w]*)\s*", text or "")
    if not m:
        raise CkptError(f"--target-flink {text!r}: expected a release like 2.1 or 1.20.3")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def show(r: Release) -> str:
    return f"{r[0]}.{r[1]}" + (f".{r[2]}" if r[2] else "")


def shown(lo: Release, hi: Release) -> str:
    """A release or a range of them: ``2.1``, ``2.1-2.3``, ``2.1+`` (any later)."""
    if lo == hi:
        return show(lo)
    return f"{show(lo)}+" if hi == LATEST else f"{show(lo)}-{show(hi)}"


def inferred_release(metadata_version: int) -> tuple[Release, Release, str] | None:
    """The releases that write ``metadata_version`` (NEW's staging savepoint was written by the new
    job's release): the oldest, the newest (``LATEST`` when open-ended) and the range in words."""
    span = _WRITTEN_BY.get(metadata_version)
    if span is None:
        return None
    lo, hi = span
    words = f"{lo[0]}.{lo[1]} to {hi[0]}.{hi[1]}" if hi else f"{lo[0]}.{lo[1]} or later"
    return lo, hi or LATEST, words


LATEST: Release = (99, 0, 0)  # "any later release": rules decided for every release from a boundary on


def reads_metadata(target: Release, version: int) -> bool:
    """Whether ``target`` reads ``_metadata`` of ``version`` (readers are added, never removed,
    from V2 on)."""
    span = _WRITTEN_BY.get(version)
    if span is None:
        return version <= 2 and target >= (1, 3, 0)
    return target >= span[0]


# TTL switched on or off for an existing state (the value serializer gains or loses the TTL
# wrapper). Up to 1.20 every backend refuses it (a TTL serializer snapshot against a plain one is
# incompatible). RocksDB: FLINK-35780 wraps every state serializer in TtlAwareSerializer and
# migrates the values -- real restores on 2.1.3 and 2.3.0 migrated both ways (2.0 not labelled:
# unknown). Heap: FLINK-37294 was reviewed until 2025-07-28, after the 2.1 branch was cut; 2.1.3
# refuses ("For heap backends, the new state serializer ... must not need ttl state migration"),
# 2.3.0 migrates both ways (the docs, FLINK-37295: "across versions 2.0.0 to 2.2.0").
TTL_MIGRATES_FROM = {"rocksdb": (2, 1, 0), "heap": (2, 2, 0)}
TTL_REFUSED_BEFORE = {"rocksdb": (2, 0, 0), "heap": (2, 2, 0)}
# from 2.0 the heap backend tells a TTL switch from other incompatibilities (TtlAwareSerializer)
HEAP_TTL_MESSAGE_FROM: Release = (2, 0, 0)


def ttl_switch(lo: Release, hi: Release | None = None, backend: str | None = None) -> str:
    """``migration``, ``incompatible`` or ``unknown`` for a state whose TTL was switched, on every
    release from ``lo`` to ``hi`` (one release when ``hi`` is None) and on ``backend`` (``heap``,
    ``rocksdb``; ``None``: either): unknown unless they all agree."""
    backends = [backend] if backend in TTL_MIGRATES_FROM else list(TTL_MIGRATES_FROM)
    answers = {_ttl_switch_on(r, b) for r in (lo, hi or lo) for b in backends}
    return answers.pop() if len(answers) == 1 else "unknown"


def _ttl_switch_on(target: Release, backend: str) -> str:
    if target >= TTL_MIGRATES_FROM[backend]:
        return "migration"
    if target < TTL_REFUSED_BEFORE[backend]:
        return "incompatible"
    return "unknown"
