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

from ckptctl.storage.retry import retrying_async

BOUNDARIES = "123456789abcdef"
SPLIT_DIRS = ("shared", "taskowned")
MAX_DEPTH = 2
CONCURRENCY = 32


class _Lister:
    """The requests of one listing: the filesystem, the bucket, a bound on concurrent requests
    and the page size (``None``: S3's default of 1000 keys)."""

    def __init__(self, fs: Any, bucket: str, page_size: int | None) -> None:
        self.fs, self.bucket, self.page_size = fs, bucket, page_size
        self.sem = asyncio.Semaphore(CONCURRENCY)

    async def call(self, **kwargs: Any) -> dict:
        """One ListObjectsV2 request, retried as every storage call is (see storage.retry.retry_delay)."""

        async def once() -> dict:
            async with self.sem:
                return await self.fs._call_s3("list_objects_v2", Bucket=self.bucket, **kwargs)

        return await retrying_async(once)

    async def pages(self, **kwargs: Any):
        token = None
        if self.page_size is not None:
            kwargs["MaxKeys"] = self.page_size
        while True:
            args = dict(kwargs)
            if token:
                args["ContinuationToken"] = token
            page = await self.call(**args)
            yield page
            if not page.get("IsTruncated"):
                return
            token = page.get("NextContinuationToken")

    async def range(self, prefix: str, after: str | None, upto: str | None) -> list:
        out = []
        kwargs: dict[str, Any] = {"Prefix": prefix}
        if after is not None:
            kwargs["StartAfter"] = after
        async for page in self.pages(**kwargs):
            for o in page.get("Contents", ()):
                if upto is not None and o["Key"] > upto:
                    return out
                out.append(_object(o))
        return out

    async def split(self, prefix: str) -> list:
        bounds = [prefix + b for b in BOUNDARIES]
        edges = [None, *bounds]
        ranges = [
            self.range(prefix, edges[i], bounds[i] if i < len(bounds) else None) for i in range(len(edges))
        ]
        return [o for part in await asyncio.gather(*ranges) for o in part]

    async def level(self, prefix: str) -> tuple[list, list[str]]:
        """The objects directly under ``prefix`` and its sub-prefixes (one delimiter listing)."""
        files: list = []
        subdirs: list[str] = []
        async for page in self.pages(Prefix=prefix, Delimiter="/"):
            files.extend(_object(o) for o in page.get("Contents", ()))
            subdirs.extend(p["Prefix"] for p in page.get("CommonPrefixes", ()))
        return files, subdirs

    async def below(self, prefix: str, sub: str, depth: int) -> list:
        """Every object under the sub-prefix ``sub`` of ``prefix`` (listed at ``depth``)."""
        name = sub[len(prefix) :].rstrip("/")
        if name in SPLIT_DIRS:
            return await self.split(sub)
        if depth < MAX_DEPTH:
            return await self.walk(sub, depth + 1)
        return await self.range(sub, None, None)

    async def walk(self, prefix: str, depth: int) -> list:
        files, subdirs = await self.level(prefix)
        for part in await asyncio.gather(*(self.below(prefix, sub, depth) for sub in subdirs)):
            files.extend(part)
        return files


def _object(o: dict) -> tuple[str, int, Any]:
    return o["Key"], int(o.get("Size") or 0), o.get("LastModified")


async def list_prefix(
    fs: Any, bucket: str, prefix: str, page_size: int | None = None
) -> list[tuple[str, int, Any]]:
    """(key, size, last modified) of every object under ``prefix`` (which ends with "/" or is "").

    ``page_size``: keys per request (default S3's 1000; small ones exercise the paging)."""
    return await _Lister(fs, bucket, page_size).walk(prefix, 0)


async def list_level(fs: Any, bucket: str, prefix: str) -> tuple[list[tuple[str, int, Any]], list[str]]:
    """The first step of :func:`list_prefix`: the objects directly under ``prefix`` and its
    sub-prefixes, each of which :func:`list_below` lists (on another machine, say) in the same order."""
    return await _Lister(fs, bucket, None).level(prefix)


async def list_below(fs: Any, bucket: str, prefix: str, sub: str) -> list[tuple[str, int, Any]]:
    """Every object under ``sub``, a sub-prefix :func:`list_level` found under ``prefix``."""
    return await _Lister(fs, bucket, None).below(prefix, sub, 0)
