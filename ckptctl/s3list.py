"""Concurrent listing of S3 prefixes shaped like Flink checkpoint roots.

One ListObjectsV2 call returns at most 1000 keys, so a flat ``shared/`` with a million SSTs takes
a thousand sequential round trips. The layout is known, though: the structure two levels down
(jobs, then chk-N / shared / taskowned) is found with delimiter listings, and every ``shared/``
and ``taskowned/`` prefix is split into 16 key ranges listed concurrently. The ranges use
``StartAfter`` boundaries (``…/1``, ``…/2`` … ``…/f``) rather than hex prefixes, so names of any
shape are listed exactly once: range i holds the keys in (b_i, b_i+1].
"""

from __future__ import annotations

import asyncio
from typing import Any

from ckptctl.storage import retrying_async

BOUNDARIES = "123456789abcdef"
SPLIT_DIRS = ("shared", "taskowned")
MAX_DEPTH = 2
CONCURRENCY = 32
PAGE_SIZE: int | None = None  # S3's default (1000); tests set it small to exercise paging


async def _call(fs: Any, sem: asyncio.Semaphore, **kwargs: Any) -> dict:
    """One ListObjectsV2 request, retried as every storage call is (see storage._retry_delay)."""

    async def once() -> dict:
        async with sem:
            return await fs._call_s3("list_objects_v2", **kwargs)

    return await retrying_async(once)


async def _pages(fs: Any, sem: asyncio.Semaphore, **kwargs: Any):
    token = None
    if PAGE_SIZE is not None:
        kwargs["MaxKeys"] = PAGE_SIZE
    while True:
        args = dict(kwargs)
        if token:
            args["ContinuationToken"] = token
        page = await _call(fs, sem, **args)
        yield page
        if not page.get("IsTruncated"):
            return
        token = page.get("NextContinuationToken")


def _object(o: dict) -> tuple[str, int, Any]:
    return o["Key"], int(o.get("Size") or 0), o.get("LastModified")


async def _range(fs, sem, bucket: str, prefix: str, after: str | None, upto: str | None) -> list:
    out = []
    kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
    if after is not None:
        kwargs["StartAfter"] = after
    async for page in _pages(fs, sem, **kwargs):
        for o in page.get("Contents", ()):
            if upto is not None and o["Key"] > upto:
                return out
            out.append(_object(o))
    return out


async def _split(fs, sem, bucket: str, prefix: str) -> list:
    bounds = [prefix + b for b in BOUNDARIES]
    edges = [None, *bounds]
    ranges = [
        _range(fs, sem, bucket, prefix, edges[i], bounds[i] if i < len(bounds) else None)
        for i in range(len(edges))
    ]
    return [o for part in await asyncio.gather(*ranges) for o in part]


async def _walk(fs, sem, bucket: str, prefix: str, depth: int) -> list:
    files: list = []
    subdirs: list[str] = []
    async for page in _pages(fs, sem, Bucket=bucket, Prefix=prefix, Delimiter="/"):
        files.extend(_object(o) for o in page.get("Contents", ()))
        subdirs.extend(p["Prefix"] for p in page.get("CommonPrefixes", ()))
    tasks = []
    for sub in subdirs:
        name = sub[len(prefix) :].rstrip("/")
        if name in SPLIT_DIRS:
            tasks.append(_split(fs, sem, bucket, sub))
        elif depth < MAX_DEPTH:
            tasks.append(_walk(fs, sem, bucket, sub, depth + 1))
        else:
            tasks.append(_range(fs, sem, bucket, sub, None, None))
    for part in await asyncio.gather(*tasks):
        files.extend(part)
    return files


async def list_prefix(fs: Any, bucket: str, prefix: str) -> list[tuple[str, int, Any]]:
    """(key, size, last modified) of every object under ``prefix`` (which ends with "/" or is "")."""
    sem = asyncio.Semaphore(CONCURRENCY)
    return await _walk(fs, sem, bucket, prefix, 0)
