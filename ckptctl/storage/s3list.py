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

from ckptctl.errors import StoreUnanswered
from ckptctl.storage.retry import retrying_async

BOUNDARIES = "123456789abcdef"
SPLIT_DIRS = ("shared", "taskowned")
MAX_DEPTH = 2
CONCURRENCY = 32


OnPage = Callable[[int], None]  # called with the objects listed so far, after each page (progress)


class _Lister:
    """The requests of one listing: the filesystem, the bucket, a bound on concurrent requests,
    the page size (``None``: S3's default of 1000 keys) and who hears of each page (``on_page``)."""

    def __init__(self, fs: Any, bucket: str, page_size: int | None, on_page: OnPage | None = None) -> None:
        self.fs, self.bucket, self.page_size, self.on_page = fs, bucket, page_size, on_page
        self.sem = asyncio.Semaphore(CONCURRENCY)
        self.listed = 0

    async def call(self, retry: bool = True, **kwargs: Any) -> dict:
        """One ListObjectsV2 request, retried as every storage call is (see storage.retry.retry_delay)
        unless ``retry`` is false."""

        async def once() -> dict:
            async with self.sem:
                return await self.fs._call_s3("list_objects_v2", Bucket=self.bucket, **kwargs)

        return await retrying_async(once, self.fs, retry=retry)

    def count(self, n: int) -> None:
        """``n`` more objects listed (each counted once, however the ranges overlap)."""
        if self.on_page is not None:
            self.listed += n
            self.on_page(self.listed)

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
            before = len(out)
            for o in page.get("Contents", ()):
                if upto is not None and o["Key"] > upto:
                    self.count(len(out) - before)
                    return out
                out.append(_object(o))
            self.count(len(out) - before)
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
            self.count(len(page.get("Contents", ())))
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
    fs: Any, bucket: str, prefix: str, page_size: int | None = None, on_page: OnPage | None = None
) -> list[tuple[str, int, Any]]:
    """(key, size, last modified) of every object under ``prefix`` (which ends with "/" or is "").

    ``page_size``: keys per request (default S3's 1000; small ones exercise the paging)."""
    return await _Lister(fs, bucket, page_size, on_page).walk(prefix, 0)


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
# character), so starting after it skips exactly that prefix's keys -- all but those holding
# U+10FFFF right after the prefix (legal in a key, if odd): a jump never assumes it got past them.

AFTER_ALL = "\U0010ffff"  # the largest code point: UTF-8 order is code point order
# A ListObjectsV2 delimiter may be any string: "/shared/" rolls every shared/ directory up into one
# common prefix, so a job's shared/ costs one entry of a page, not a request.
AREA_DELIMITER = "/shared/"


async def _outside(
    lister: _Lister,
    prefix: str,
    within: str,
    area_of: Callable[[str], str | None],
    delimiter: str | None,
    trial: bool = False,
) -> list:
    out: list = []
    below: list[str] = []  # common prefixes that are no job's area: listed on their own
    after: str | None = None
    token: str | None = None  # the page's own continuation, when a jump would not get past it
    while True:
        kwargs: dict[str, Any] = {"Prefix": prefix}
        if delimiter is not None:
            kwargs["Delimiter"] = delimiter
        if lister.page_size is not None:
            kwargs["MaxKeys"] = lister.page_size
        if token is not None:
            kwargs["ContinuationToken"] = token
        elif after is not None:
            kwargs["StartAfter"] = after
        page = await lister.call(retry=not (trial and after is None and token is None), **kwargs)
        lister.count(len(page.get("Contents", ())))
        entries = [(o["Key"], o) for o in page.get("Contents", ())]
        entries += [(p["Prefix"], None) for p in page.get("CommonPrefixes", ())]
        skipping = None
        last = None
        for name, o in sorted(entries, key=lambda e: e[0]):
            if o is None and after is not None and token is None and name < after:
                # a key past ``prefix + AFTER_ALL`` (names may hold U+10FFFF) brings back the common
                # prefix the last jump went past: it was listed (or skipped) already
                continue
            last = name if o is not None else name + AFTER_ALL  # a common prefix stands for its keys
            if (skipping is not None and name.startswith(skipping)) or not name.startswith(within):
                continue
            skipping = area_of(name)
            if skipping is not None:
                continue
            if o is None:
                if len(name) <= len(prefix):
                    raise OSError(
                        f"a common prefix {name!r} that is not below the listed s3://{lister.bucket}/{prefix}"
                    )
                below.append(name)
            else:
                out.append(_object(o))
        if not page.get("IsTruncated"):
            break
        jump = (
            skipping + AFTER_ALL
            if skipping is not None and last is not None and last.startswith(skipping)
            else last
        )
        # keys inside an area may sort after area + AFTER_ALL ("taskowned/\U0010ffff…"): a jump that
        # does not get past the page's last entry would fetch the same page forever; go on from it
        if jump is None or (last is not None and jump < last) or (after is not None and jump <= after):
            token = page.get("NextContinuationToken")
            if token is None:
                raise OSError(f"a truncated listing without keys under s3://{lister.bucket}/{prefix}")
        else:
            after, token = jump, None
    for part in await asyncio.gather(*(_outside(lister, d, d, area_of, delimiter) for d in below)):
        out.extend(part)
    return out


async def list_outside(
    fs: Any,
    bucket: str,
    prefix: str,
    area_of: Callable[[str], str | None],
    page_size: int | None = None,
    on_page: OnPage | None = None,
    within: str | None = None,
    delimiter: str | None = AREA_DELIMITER,
) -> list[tuple[str, int, Any]]:
    """Every object under ``within`` (default ``prefix``) except those under the prefixes
    ``area_of`` names, listed from ``prefix`` (``within`` or a shorter string: ``ck/<job>`` rolls
    the job's own shared/ up too; keys beside it are dropped).

    ``area_of(key)``: the prefix (ending with "/") of the job area ``key`` (or a common prefix)
    lies in, or ``None``. One listing in key order, with ``delimiter`` (:data:`AREA_DELIMITER`):
    a job's ``shared/`` comes back as one common prefix; any other common prefix (a ``shared``
    directory that is no job's, or whatever a server rolls up) is listed on its own the same way.
    A page that runs into an area's keys (``taskowned/``, or ``shared/`` from a server that
    ignores the delimiter) goes on after it (``StartAfter`` = area + :data:`AFTER_ALL`) rather than
    paging through it. Cost: the pages of the keys outside the areas, plus at most one request
    per ``taskowned/`` that a page runs into and one per ``shared`` directory that is no job's.

    A server that refuses the delimiter (S3 Express directory buckets, some S3-compatible stores
    take only "/") gets the same listing without it: then one request more per ``shared/`` a
    page runs into. The first request with it is not retried (a refusal would be, for seconds):
    whatever failed, the listing without it is retried as every storage call is."""
    start = within if within is not None else prefix
    lister = _Lister(fs, bucket, page_size, on_page)
    if delimiter is not None:
        try:
            return await _outside(lister, prefix, start, area_of, delimiter, trial=True)
        except (FileNotFoundError, StoreUnanswered):
            raise
        except Exception:  # noqa: BLE001 - refused (400, 501...): list without it, which raises if that fails too
            lister.listed = 0
    return await _outside(lister, prefix, start, area_of, None)


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
        lister.count(len(page.get("Contents", ())))
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
    fs: Any,
    bucket: str,
    prefix: str,
    names: list[str],
    runs: int = 1,
    page_size: int | None = None,
    on_page: OnPage | None = None,
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
    lister = _Lister(fs, bucket, page_size, on_page)
    runs = max(1, min(runs, len(names)))
    step = -(-len(names) // runs)
    parts = await asyncio.gather(
        *(_present(lister, prefix, names[k : k + step]) for k in range(0, len(names), step))
    )
    return [o for part in parts for o in part]
