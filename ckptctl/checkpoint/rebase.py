"""Moved directories: where the absolute paths a ``_metadata`` names are now.

Flink writes absolute paths into a checkpoint's ``_metadata`` (shared incremental files, file-
merging segments, CLAIM-restored files of older checkpoints), so a checkpoint root that was moved
or copied still points at where it used to be. A :class:`Rebase` (``--rebase OLD=NEW``, repeatable)
maps those paths to where the files are now; :func:`infer_rebase` proposes the mapping from the
checkpoint's own paths when its directory was moved.

The option is parsed once (:meth:`Rebase.parse`, in the command) and the same immutable, picklable
object travels to everything that resolves paths; read-only commands add the inferred mapping to it
(:meth:`Rebase.merged`) and say so once per mapping (:func:`moved_warnings`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ckptctl import storage as st
from ckptctl.checkpoint.layout import CheckpointLocation
from ckptctl.errors import LayoutError


@dataclass(frozen=True)
class Rebase:
    """Prefix mappings OLD=NEW applied to absolute paths read from metadata (longest prefix wins).

    Both sides are canonical URIs (:func:`storage.normalize_uri`); the mappings are kept longest
    OLD first, so :meth:`apply` can stop at the first match.
    """

    mappings: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, specs: Iterable[str]) -> Rebase:
        """``OLD=NEW`` strings as given to ``--rebase`` (or kept in a plan file)."""
        pairs = []
        for spec in specs:
            old, sep, new = spec.partition("=")
            if not sep or not old or not new:
                raise LayoutError(f"--rebase expects OLD=NEW, got '{spec}'")
            pairs.append((old, new))
        return cls.of(pairs)

    @classmethod
    def of(cls, pairs: Iterable[Iterable[str]]) -> Rebase:
        """(OLD, NEW) pairs, as a plan file or :class:`ckptctl.gc.GcOptions` holds them."""
        normalized = [(st.normalize_uri(old), st.normalize_uri(new)) for old, new in pairs]
        return cls(_longest_first(normalized))

    def __bool__(self) -> bool:
        return bool(self.mappings)

    def apply(self, uri: str) -> str:
        for old, new in self.mappings:
            if st.is_under(uri, old):
                return new + uri[len(old.rstrip("/")) :]
        return uri

    def merged(self, other: Rebase | None) -> Rebase:
        """These mappings plus ``other``'s; for the same OLD, this one's NEW wins."""
        if not other:
            return self
        pairs = dict(other.mappings)
        pairs.update(dict(self.mappings))
        return Rebase(_longest_first(pairs.items()))

    def to_json(self) -> list[list[str]]:
        """The form every plan file keeps (gc's and relocate's): ``[[OLD, NEW], ...]``. Pairs, not
        ``OLD=NEW`` strings: a path may hold a ``=`` (``dt=2026-11-25/``), a pair never splits wrong."""
        return [[o, n] for o, n in self.mappings]

    @classmethod
    def from_json(cls, value: Any, where: str) -> Rebase:
        """:meth:`to_json`'s form read back from ``where`` (a plan file); anything else is one line."""
        if not isinstance(value, list) or not all(
            isinstance(m, list) and len(m) == 2 and all(isinstance(p, str) and p for p in m) for m in value
        ):
            raise LayoutError(f"{where}: 'rebase' must be a list of [OLD, NEW] pairs (a plan of an older ckptctl? "
                              "make the plan again)")  # fmt: skip
        return cls.of(value)

    def specs(self) -> list[str]:
        """The ``OLD=NEW`` strings as given to ``--rebase`` (for messages)."""
        return [f"{o}={n}" for o, n in self.mappings]

    def describe(self) -> str:
        return ", ".join(self.specs())


def _longest_first(pairs: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(pairs, key=lambda p: -len(p[0])))


# ---------------------------------------------------------------------------------------------
# inference


# Directory names that place a written absolute path inside a job directory.
_JOB_CHILD_RE = re.compile(r"^(?P<job>.*)/(?:shared|taskowned|chk-\d+)(?:/|$)")


def written_job_dir(written_uri: str) -> str | None:
    """The job directory an absolute state path was written under, if it follows Flink's layout."""
    m = _JOB_CHILD_RE.match(written_uri)
    return m.group("job") if m else None


def infer_rebase(location: CheckpointLocation, written_uris: Iterable[str]) -> Rebase | None:
    """Propose OLD=NEW when a checkpoint's absolute paths point to where its job directory used to be.

    The checkpoint's own job directory as written is found from paths into ``<job>/shared``,
    ``<job>/taskowned`` or ``<job>/chk-N`` whose job directory has the same name as the one the
    checkpoint now lives in; OLD and NEW are then those two paths with their common tail removed,
    so the mapping also covers sibling jobs under the same root (CLAIM-mode restores).
    """
    if location.kind != "checkpoint":
        return None
    actual_job = st.parent(location.uri)
    job_name = st.basename(actual_job)
    for uri in written_uris:
        job = written_job_dir(uri)
        if job is None or st.basename(job) != job_name:
            continue
        if job == actual_job:
            return None
        old_parts, new_parts = job.split("/"), actual_job.split("/")
        while len(old_parts) > 1 and len(new_parts) > 1 and old_parts[-1] == new_parts[-1]:
            old_parts.pop()
            new_parts.pop()
        return Rebase(((_rejoin(old_parts), _rejoin(new_parts)),))
    return None


def _rejoin(parts: list[str]) -> str:
    joined = "/".join(parts)
    return joined + "/" if joined in ("file:", "s3:/") else joined


# ---------------------------------------------------------------------------------------------
# what the user is told


def moved_warning(inferred: Rebase) -> str:
    return f"directories were written elsewhere; mapped with --rebase {inferred.describe()} (inferred)"


def moved_warnings(inferred: Iterable[Rebase | None]) -> list[str]:
    """One warning per distinct inferred mapping, in the order first seen (not one per checkpoint:
    a moved root has dozens, and they all suggest the same mapping)."""
    seen: dict[str, str] = {}
    for r in inferred:
        if r:
            seen.setdefault(r.describe(), moved_warning(r))
    return list(seen.values())


def with_inferred(explicit: Rebase, inferred: Iterable[Rebase | None]) -> Rebase:
    """``explicit`` plus every inferred mapping (explicit ones win): what a command that goes on to
    touch the files (``check``'s orphan count) must use for a moved root."""
    out = explicit
    for r in inferred:
        out = out.merged(r)
    return out
