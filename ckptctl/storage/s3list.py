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
import bisect
from collections.abc import Callable
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


# -- listings that skip what they need not see ---------------------------------------------------
#
# A ListObjectsV2 page holds up to 1000 keys in byte order, and ``StartAfter`` may name any string,
# not only a key: a listing can jump over a range it does not need. ``prefix + AFTER_ALL`` lies
# after every key that starts with ``prefix`` and before every other key above ``prefix`` (a key
# above ``prefix`` not starting with it differs at some position inside ``prefix`` by a larger
# character), so starting after it skips exactly that prefix's keys.

AFTER_ALL = "\U0010ffff"  # the largest code point: UTF-8 order is code point order


async def _outside(lister: _Lister, prefix: str, area_of: Callable[[str], str | None], on_page) -> list:
    out: list = []
    after: str | None = None
    while True:
        kwargs: dict[str, Any] = {"Prefix": prefix}
        if lister.page_size is not None:
            kwargs["MaxKeys"] = lister.page_size
        if after is not None:
            kwargs["StartAfter"] = after
        page = await lister.call(**kwargs)
        skipping = None
        last = None
        for o in page.get("Contents", ()):
            last = key = o["Key"]
            if skipping is not None and key.startswith(skipping):
                continue
            skipping = area_of(key)
            if skipping is None:
                out.append(_object(o))
        if on_page is not None:
            on_page(len(out))
        if not page.get("IsTruncated"):
            return out
        if last is None:
            raise OSError(f"a truncated listing without keys under s3://{lister.bucket}/{prefix}")
        after = skipping + AFTER_ALL if skipping is not None else last


async def list_outside(
    fs: Any,
    bucket: str,
    prefix: str,
    area_of: Callable[[str], str | None],
    on_page: Callable[[int], None] | None = None,
    page_size: int | None = None,
) -> list[tuple[str, int, Any]]:
    """Every object under ``prefix`` except those under the prefixes ``area_of`` names.

    ``area_of(key)``: the prefix (ending with "/") of the area ``key`` lies in, which is skipped,
    or ``None``. One listing from ``prefix`` on, in key order: a page that runs into an area goes
    on after it (``StartAfter`` = area + :data:`AFTER_ALL`) instead of paging through it. Cost:
    the pages of the keys outside the areas, plus at most one request per area that a page runs
    into: a job's ``shared/`` of millions of keys costs no more than one of three.
    ``on_page(n)``: the number of objects kept so far, after each page (a progress count)."""
    return await _outside(_Lister(fs, bucket, page_size), prefix, area_of, on_page)


async def _present(lister: _Lister, prefix: str, names: list[str]) -> list:
    """The objects among ``prefix + name`` for the sorted ``names`` (one run of :func:`list_present`)."""
    found: list = []
    wanted = set(names)
    i = 0  # names[:i] are decided: listed, or absent from a range a page covered
    after = None  # where the last page ended
    while i < len(names):
        # just before the next undecided name: its key minus the last character lies below it
        start = prefix + names[i][:-1]
        if after is not None and after > start:
            start = after
        kwargs: dict[str, Any] = {"Prefix": prefix, "Delimiter": "/", "StartAfter": start}
        if lister.page_size is not None:
            kwargs["MaxKeys"] = lister.page_size
        page = await lister.call(**kwargs)
        ends = [p["Prefix"][len(prefix) :] for p in page.get("CommonPrefixes", ())]
        for o in page.get("Contents", ()):
            name = o["Key"][len(prefix) :]
            ends.append(name)
            if name in wanted:
                found.append(_object(o))
        if not page.get("IsTruncated"):
            return found
        if not ends:
            raise OSError(f"a truncated listing without keys under s3://{lister.bucket}/{prefix}")
        end = max(ends)  # the page covers (start, end]: a name there that it does not show is absent
        after = prefix + end + (AFTER_ALL if end.endswith("/") else "")  # past a common prefix's keys
        i = bisect.bisect_right(names, end, lo=i)
    return found


async def list_present(
    fs: Any, bucket: str, prefix: str, names: list[str], runs: int = 1, page_size: int | None = None
) -> list[tuple[str, int, Any]]:
    """(key, size, last modified) of those of the objects ``prefix + name`` that exist.

    The cost model (``n`` names, ``P`` pages a plain listing of ``prefix`` takes): each request
    lists the directory (``Delimiter`` "/") from just before the next name not yet decided, so it
    decides that name and every other name up to the end of its page. Every request but a run's
    last returns a full page of keys that no other request of the run returns, hence at most
    ``P + runs`` requests; and as each request decides at least its first name (unless a thousand
    keys lie between that name and the name without its last character), at most ``n``: never
    more than a HEAD per file, and far fewer than a full listing when the names are few or close
    together among many other keys (orphans). Referenced keys interleaved with orphans throughout
    (random names) cost the full listing's pages: no listing can do better, a page holding 1000
    consecutive keys. ``runs`` splits the names into that many consecutive runs listed
    concurrently (wall time), each costing at most one page more."""
    names = sorted(set(names))
    if not names:
        return []
    lister = _Lister(fs, bucket, page_size)
    runs = max(1, min(runs, len(names)))
    step = -(-len(names) // runs)
    parts = await asyncio.gather(*(_present(lister, prefix, names[k : k + step]) for k in range(0, len(names), step)))
    return [o for part in parts for o in part]
