"""Folding the references of every checkpoint into the live set: what the checkpoints say.

Both planners fold with :func:`fold_references` (the Spark one over slices of the checkpoints on
executors); the local one may do it in a worker process (:func:`fold_references_packed`), which then
looks the listed files up in the sets it holds (:func:`flag_held`). :class:`Folded` is what every
later step reads of the metadata.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ckptctl import storage as st
from ckptctl.checkpoint.layout import CheckpointLocation
from ckptctl.checkpoint.loading import LoadedCheckpoint, load_checkpoint
from ckptctl.checkpoint.rebase import Rebase
from ckptctl.checkpoint.refs import referenced_uris
from ckptctl.errors import CkptError, StoreUnanswered
from ckptctl.gc.listed import PathsByDir, name_flags
from ckptctl.gc.reasons import Refusal
from ckptctl.pycollector import paused_collector
from ckptctl.storage import Storage
from ckptctl.words import plural


@dataclass
class Folded:
    """What the checkpoints say: the live set and everything the plan needs from the metadata."""

    live: set[str]
    spans: dict[str, list[tuple[int, int]]]  # segments only: a physical file is live if any is
    expired_refs: set[str]
    external: dict[str, dict[str, Any]]
    info: dict[str, dict[str, Any]]  # checkpoint dir -> what the plan shows of it
    refusals: list[tuple[str, str]]
    moved: dict[str, list[str]] = field(default_factory=dict)  # inferred --rebase mapping -> checkpoints


def location_info(loc: CheckpointLocation) -> dict[str, Any]:
    """What the plan shows of a checkpoint directory (id and kind as its name says)."""
    meta = loc.metadata
    return {"path": loc.uri, "job_id": loc.job_id, "checkpoint_id": loc.dir_checkpoint_id, "kind": loc.kind,
            "metadata_mtime": meta.mtime if meta else None, "metadata_size": meta.size if meta else None}  # fmt: skip


def checkpoint_info(ck: LoadedCheckpoint) -> dict[str, Any]:
    """The same, with id and kind as the decoded ``_metadata`` says."""
    return {**location_info(ck.location), "checkpoint_id": ck.metadata.checkpoint_id, "kind": ck.kind}


def fold_references(storage, ordered, retained_set, rebase: Rebase, prefixes, progress=None) -> Folded:
    """Decode each checkpoint in turn and keep only the paths it references (bounded memory).

    Runs in this process or in a worker; ``storage`` may be a :class:`Storage` or its options.
    A reference is live when it lies under a scanned scope (after normalisation: a ``..`` that
    climbs out of the roots makes it external, whatever its spelling).
    """
    with paused_collector():
        if not isinstance(storage, Storage):
            storage = Storage(storage)
        out = Folded(set(), {}, set(), {}, {}, [])
        live, spans, external = out.live, out.spans, out.external
        add = live.add
        escapes = st.escapes
        iterator = progress(ordered, len(ordered)) if progress else ordered
        moved: dict[str, list[str]] = {}  # inferred mapping -> checkpoints written elsewhere
        for loc in iterator:
            try:
                ck = load_checkpoint(storage, loc, rebase, apply_inferred=False)
            except StoreUnanswered:
                raise  # each next checkpoint would wait out the same deadline
            except CkptError as e:
                out.refusals.append(
                    (
                        Refusal.UNREADABLE_METADATA.value,
                        f"unreadable _metadata, nothing can be proven unreferenced: {e}",
                    )
                )
                out.info[loc.uri] = location_info(loc)
                if loc.uri in retained_set:
                    add(loc.metadata_uri)
                continue
            if ck.inferred_rebase is not None:
                moved.setdefault(ck.inferred_rebase.describe(), []).append(loc.uri)
            out.info[loc.uri] = checkpoint_info(ck)
            if loc.uri in retained_set:
                add(loc.metadata_uri)
                for scope, uris, items in referenced_uris(ck):
                    segment = scope == "segment"
                    for path, (_name, h) in zip(uris, items, strict=True):
                        # "/.." first: escapes() is a call, the substring test is not
                        if not path.startswith(prefixes) or ("/.." in path and escapes(path)):
                            external.setdefault(
                                path, {"path": path, "referenced_by": loc.uri, "scope": scope}
                            )
                        elif segment:
                            spans.setdefault(path, []).append((h.offset, h.size))
                        else:
                            add(path)
            else:
                expired = out.expired_refs
                for _scope, uris, _items in referenced_uris(ck):
                    expired.update(uris)
            del ck
        out.moved = moved
        out.refusals.extend(moved_refusals(moved))
        return out


def moved_refusals(moved: dict[str, list[str]]) -> list[tuple[str, str]]:
    """One refusal per inferred mapping (not one per checkpoint): mapping -> checkpoints, in order."""
    return [(
        Refusal.MOVED_DIRECTORY.value,
        f"{plural(len(cks), 'checkpoint')} {'was' if len(cks) == 1 else 'were'} written at another location (first: {cks[0]}); their absolute "
        f"paths point elsewhere. Pass --rebase {mapping} (or the right mapping) to collect garbage here",
    ) for mapping, cks in moved.items()]  # fmt: skip


# in a fold worker: the live and expired sets it folded, held for flag_held (the executor has one
# worker process, so its next tasks run here)
_HELD: tuple[PathsByDir, PathsByDir] | None = None


def fold_references_packed(*args) -> Folded:
    """:func:`fold_references` for a worker process: the path sets travel by directory with the
    names packed (:meth:`PathsByDir.packed`), which pickle in a few pieces instead of half a
    million small ones and are held that way; the sets stay in the worker for :func:`flag_held`."""
    global _HELD
    out = fold_references(*args)
    live, expired = PathsByDir.of(out.live), PathsByDir.of(out.expired_refs)
    out.live, out.expired_refs = PathsByDir.packed(live), PathsByDir.packed(expired)
    _HELD = live, expired
    return out


def flag_held(
    pieces: list[tuple[str, str]], check_expired: bool
) -> list[tuple[bytearray | None, bytearray | None]]:
    """In the fold worker (its next tasks): per piece of a run (its directory, a chunk of its
    names ``/``-joined), a byte per name, 1 if the path is live, and 1 if only expired
    checkpoints reference it (``None``: the directory holds no such path), from the sets
    :func:`fold_references_packed` left this process."""
    live, expired = _HELD  # type: ignore[misc]  # None: not the fold worker, an error (never "nothing is live")
    live, expired = live.dirs, expired.dirs if check_expired else {}
    out: list[tuple[bytearray | None, bytearray | None]] = []
    for parent, packed in pieces:
        names = packed.split("/")
        out.append(tuple(None if (members := held.get(parent)) is None else name_flags([names], members)
                         for held in (live, expired)))  # type: ignore[misc]  # fmt: skip
    return out
