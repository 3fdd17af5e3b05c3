"""Orphan garbage collection across every job, checkpoint and savepoint under the scanned roots.

The plan is the whole decision: it lists every file, why it is live, a candidate, or protected,
and every reason the plan must not be applied. It fails closed: anything ckptctl cannot prove
(an unreadable ``_metadata``, a moved directory without ``--rebase``, a reference outside the
roots, a file without an mtime, a clock in the future, an empty live set) protects files or
blocks deletion outright. ``apply`` never trusts an old plan: it re-scans with the same options
and deletes only what is still a candidate with the same size and mtime.

Lessons taken from other systems' orphan GC (see the project's anchors notes): Iceberg's age
floor and scheme normalisation, Paimon's fail-closed reads, Delta's retention check anchored on
the newest commit, Fluss's keep-when-mtime-unknown, plus blast-radius caps and a plan file.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from operator import itemgetter
from typing import Any, NamedTuple

from ckptctl import __version__
from ckptctl import storage as st
from ckptctl.errors import CkptError
from ckptctl.gcpause import paused_gc
from ckptctl.layout import CHK_RE, SAVEPOINT_RE, CheckpointLocation, Rebase, scan_root
from ckptctl.refs import LoadedCheckpoint, load_checkpoint, referenced_files
from ckptctl.storage import FileInfo, Storage

PLAN_FORMAT = 1
CLOCK_TOLERANCE = 300.0  # seconds a file's mtime may lead the storage clock before we refuse


class GcRefused(CkptError):
    """The plan has refusals: nothing may be deleted."""

    exit_code = 1


@dataclass(frozen=True)
class GcOptions:
    roots: tuple[str, ...]
    savepoint_dirs: tuple[str, ...] = ()
    changelog_dirs: tuple[str, ...] = ()
    keep_last: int | None = None
    older_than: float = 24 * 3600.0
    margin: float = 3600.0
    max_delete_fraction: float = 0.5
    force: bool = False
    allow_external: bool = False
    rebase: tuple[tuple[str, str], ...] = ()

    def normalized(self) -> GcOptions:
        norm = lambda xs: tuple(dict.fromkeys(st.normalize_uri(x) for x in xs))  # noqa: E731
        return GcOptions(
            norm(self.roots), norm(self.savepoint_dirs), norm(self.changelog_dirs), self.keep_last,
            self.older_than, self.margin, self.max_delete_fraction, self.force, self.allow_external,
            Rebase.parse(f"{o}={n}" for o, n in self.rebase).mappings,
        )  # fmt: skip

    def validate(self) -> None:
        if not self.roots:
            raise CkptError("gc needs at least one ROOT")
        if self.keep_last is not None and self.keep_last < 1:
            raise CkptError("--keep-last must be at least 1")
        if self.older_than < 0:
            raise CkptError(
                "--older-than must not be negative: a cutoff in the future would make every file eligible"
            )
        if self.margin < 0:
            raise CkptError("--margin must not be negative")
        if not 0 < self.max_delete_fraction <= 1:
            raise CkptError("--max-delete-fraction must be in (0, 1]")


class FileDecision(NamedTuple):
    """The fate of one file. ``evidence`` is shared by all files of a job (it names the anchor)."""

    path: str
    size: int
    mtime: float | None
    reason: str
    evidence: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size, "mtime": self.mtime, "reason": self.reason,
                "evidence": self.evidence or {}}  # fmt: skip


@dataclass
class GcPlan:
    options: GcOptions
    now: float
    now_source: str
    cutoff: float
    retained: list[dict[str, Any]]
    expired: list[dict[str, Any]]
    candidates: list[FileDecision]
    protected: list[FileDecision]
    live_files: int
    live_bytes: int
    total_files: int
    total_bytes: int
    external: list[dict[str, Any]]
    missing: list[dict[str, Any]]
    partially_live: list[dict[str, Any]]
    refusals: list[str]
    warnings: list[str]
    _header: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    @property
    def candidate_bytes(self) -> int:
        return sum(c.size for c in self.candidates)

    def summary(self) -> dict[str, Any]:
        mtimes = [c.mtime for c in self.candidates if c.mtime]
        return {
            "live_files": self.live_files, "live_bytes": self.live_bytes,
            "candidate_files": len(self.candidates), "candidate_bytes": self.candidate_bytes,
            "protected_files": len(self.protected), "protected_bytes": sum(p.size for p in self.protected),
            "total_files": self.total_files, "total_bytes": self.total_bytes,
            "retained_checkpoints": len(self.retained), "expired_checkpoints": len(self.expired),
            "external_references": len(self.external), "missing_files": len(self.missing),
            "partially_live_files": len(self.partially_live),
            "dead_bytes_in_partially_live_files": sum(p["dead_bytes"] for p in self.partially_live),
            "oldest_candidate_mtime": min(mtimes) if mtimes else None,
            "newest_candidate_mtime": max(mtimes) if mtimes else None,
        }  # fmt: skip

    def header(self) -> dict[str, Any]:
        """Everything in the plan but the (possibly millions of) per-file entries (computed once)."""
        if self._header is None:
            self._header = self._make_header()
        return dict(self._header, created_at=time.time())

    def _make_header(self) -> dict[str, Any]:
        from collections import Counter

        return {
            "format": PLAN_FORMAT, "tool": f"ckptctl {__version__}", "created_at": time.time(),
            "options": asdict(self.options), "now": self.now, "now_source": self.now_source, "cutoff": self.cutoff,
            "blocked": bool(self.refusals), "refusals": self.refusals, "warnings": self.warnings,
            **self.summary(),
            "candidates_by_reason": dict(Counter(c.reason for c in self.candidates).most_common()),
            "protected_by_reason": dict(Counter(p.reason for p in self.protected).most_common()),
            "retained": self.retained, "expired": self.expired,
            "external": self.external, "missing": self.missing, "partially_live": self.partially_live,
        }  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return {
            **self.header(),
            "candidates": [c.as_dict() for c in self.candidates],
            "protected": [p.as_dict() for p in self.protected],
        }

    def write_json(self, out) -> None:
        """The plan as JSON on a binary stream, one file entry per line (fast for huge plans)."""
        head = json.dumps(self.header(), indent=1)
        out.write(head[:-2].encode("utf-8"))
        for key, entries in (("candidates", self.candidates), ("protected", self.protected)):
            out.write(f',\n "{key}": [\n'.encode())
            _write_entries(entries, out)
            out.write(b"\n ]")
        out.write(b"\n}\n")


def _write_entries(entries: list[FileDecision], out) -> None:
    """One JSON object per line. Entries of one job share their reason and evidence objects, so
    the line's tail is re-encoded only when those change (compared by identity)."""
    from ckptctl.export import _encode, _needs_escape

    last_reason = last_evidence = object()
    tail = ""
    for start in range(0, len(entries), 4096):
        chunk = entries[start : start + 4096]
        plain = not _needs_escape(" ".join(e.path for e in chunk))
        lines = []
        append = lines.append
        for path, size, mtime, reason, evidence in chunk:
            if reason is not last_reason or evidence is not last_evidence:
                last_reason, last_evidence = reason, evidence
                tail = f', "reason": {_encode(reason)}, "evidence": {json.dumps(evidence or {})}}}'
            p = '"' + path + '"' if plain else _encode(path)
            m = "null" if mtime is None else repr(mtime)
            append(f'  {{"path": {p}, "size": {size}, "mtime": {m}{tail}')
        out.write(((",\n" if start else "") + ",\n".join(lines)).encode("utf-8"))


def options_from_plan(data: dict[str, Any]) -> GcOptions:
    if data.get("format") != PLAN_FORMAT:
        raise CkptError(f"not a ckptctl gc plan (format {data.get('format')!r})")
    o = data["options"]
    return GcOptions(
        tuple(o["roots"]), tuple(o["savepoint_dirs"]), tuple(o["changelog_dirs"]), o["keep_last"],
        float(o["older_than"]), float(o["margin"]), float(o["max_delete_fraction"]), bool(o["force"]),
        bool(o["allow_external"]), tuple(tuple(m) for m in o["rebase"]),
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# planning


def _checkpoint_info(ck: LoadedCheckpoint) -> dict[str, Any]:
    meta = ck.location.metadata
    return {
        "path": ck.location.uri, "job_id": ck.location.job_id, "checkpoint_id": ck.metadata.checkpoint_id,
        "kind": ck.kind, "metadata_mtime": meta.mtime if meta else None, "metadata_size": meta.size if meta else None,
    }  # fmt: skip


def _root_of(path: str, roots: Iterable[str]) -> str | None:
    for root in roots:
        if st.is_under(path, root):
            return root
    return None


def _place(rel_parts: list[str]) -> tuple[str | None, str, str | None]:
    """(job-relative prefix, area, chk dir name) of a file by its path parts below a root.

    area is ``shared``, ``taskowned``, ``chk``, ``savepoint`` or ``other``.
    """
    for i, part in enumerate(rel_parts[:-1]):
        if part in ("shared", "taskowned"):
            return "/".join(rel_parts[:i]), part, None
        if CHK_RE.match(part):
            return "/".join(rel_parts[:i]), "chk", part
        if SAVEPOINT_RE.match(part):
            return None, "savepoint", None
    return None, "other", None


def build_plan(
    storage: Storage,
    options: GcOptions,
    *,
    progress: Callable[[Iterable[CheckpointLocation], int], Iterable[CheckpointLocation]] | None = None,
) -> GcPlan:
    """Scan the roots, read every ``_metadata``, and decide the fate of every file.

    Memory stays bounded by the listing and the live set: each checkpoint is decoded, reduced
    to the paths it references, and dropped before the next is read.
    """
    with paused_gc():
        return _build_plan(storage, options, progress)


def _build_plan(storage: Storage, options: GcOptions, progress) -> GcPlan:
    options = options.normalized()
    options.validate()
    scan_roots = _disjoint(
        list(dict.fromkeys((*options.roots, *options.savepoint_dirs, *options.changelog_dirs)))
    )
    refusals: list[str] = []
    warnings: list[str] = []

    now, now_source = storage.now(options.roots[0])
    cutoff = now - options.older_than
    if cutoff > now:
        refusals.append("the age cutoff lies in the future; refusing to delete anything")

    # 1. find every _metadata first (cheap: shared/ and taskowned/ never hold one), so that the
    #    checkpoints can be decoded while the full listing runs
    #    On object stores finding them costs a full listing, so there the listing comes first.
    meta_roots = [r for r in scan_roots if r not in options.changelog_dirs]
    prelisted: dict[str, list[FileInfo]] = {}
    if not all(st.scheme_of(r) == "file" for r in scan_roots):
        prelisted = {root: list(storage.list_files(root)) for root in scan_roots}
    discovered: dict[str, CheckpointLocation] = {}
    for root in meta_roots:
        found = prelisted[root] if prelisted else storage.find_metadata(root)
        for loc in scan_root(storage, root, found).locations():
            if loc.complete:
                discovered.setdefault(loc.uri, loc)

    # 2. retention from the directory layout: newest K chk-N per job (all without --keep-last),
    #    every savepoint and every other directory holding a _metadata
    by_job: dict[str, list[CheckpointLocation]] = {}
    retained_locs: list[CheckpointLocation] = []
    for loc in sorted(discovered.values(), key=lambda c: c.uri):
        if loc.kind == "checkpoint":
            by_job.setdefault(st.parent(loc.uri), []).append(loc)
        else:
            retained_locs.append(loc)
    expired_locs: list[CheckpointLocation] = []
    newest_retained: dict[str, CheckpointLocation] = {}
    for job_uri, locs in by_job.items():
        locs.sort(key=lambda c: c.dir_checkpoint_id or 0)
        keep = locs if options.keep_last is None else locs[-options.keep_last :]
        retained_locs.extend(keep)
        expired_locs.extend(c for c in locs if c not in keep)
        newest_retained[job_uri] = max(keep, key=lambda c: c.metadata.mtime or 0)
    retained_set = {loc.uri for loc in retained_locs}
    root_prefixes = tuple(r.rstrip("/") + "/" for r in scan_roots)
    ordered = retained_locs + expired_locs

    # 3. decode every checkpoint (in a worker process when there is a lot of metadata, while this
    #    process lists) and fold its references into the live set or the expired set
    metadata_bytes = sum(loc.metadata.size for loc in ordered)
    worker = None
    if metadata_bytes >= PARALLEL_METADATA_BYTES:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        worker = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        future = worker.submit(
            fold_references_packed, storage.options, ordered, retained_set, options.rebase, root_prefixes
        )
    listings: list[tuple[str, list[FileInfo]]] = []
    listed_complete: set[str] = set()
    for root in scan_roots:
        files = prelisted.pop(root) if prelisted else list(storage.list_files(root))
        listings.append((root, files))
        if root in options.changelog_dirs:
            continue
        if not files and not storage.is_dir(root):
            raise CkptError("no such directory (or it is empty)", path=root)
        listed_complete.update(f.uri[: -len("/_metadata")] for f in files if f.uri.endswith("/_metadata"))
    if worker is not None:
        try:
            folded = _unpack(future.result())
        finally:
            worker.shutdown()
    else:
        folded = fold_references(storage, ordered, retained_set, options.rebase, root_prefixes, progress)
    if listed_complete != set(discovered):
        refusals.append(
            "checkpoints completed or disappeared while the roots were scanned "
            f"({len(listed_complete ^ set(discovered))} changed): a job is running here; run the plan again"
        )
    live, spans, expired_refs, external = folded.live, folded.spans, folded.expired_refs, folded.external
    retained_info, expired_info = folded.retained_info, folded.expired_info
    refusals.extend(folded.refusals)

    if external and not options.allow_external:
        first = next(iter(external))
        refusals.append(
            f"{len(external)} references point outside the scanned roots (first: {first}). They may mean a moved "
            "directory or a missing --savepoints/--changelog-dir. Scan their location too, map it with --rebase, "
            "or pass --allow-external (files outside the roots are never deleted)"
        )
    external_names = {st.basename(p): p for p in external}

    # 4. every listed file: live, candidate or protected. This loop runs once per file (millions):
    #    a directory's context is looked up once per run of its files, and tuples are built
    #    directly (FileDecision's constructor is a Python frame).
    candidates: list[FileDecision] = []
    protected: list[FileDecision] = []
    keep, take = protected.append, candidates.append
    new = tuple.__new__
    partially_live: list[dict[str, Any]] = []
    found_live = live_files = live_bytes = 0
    total_files = sum(len(files) for _root, files in listings)
    total_bytes = sum(sum(map(itemgetter(1), files)) for _root, files in listings)
    expired_dirs = {loc.uri for loc in expired_locs}
    future: list[str] = []
    tolerance_limit = now + CLOCK_TOLERANCE
    margin = options.margin
    check_expired = bool(expired_refs)
    for root, files in listings:
        dir_ctx: dict[str, tuple] = {}
        run_prefix, run_ctx = None, None
        for uri, size, mtime, is_link in files:
            if uri in live:
                found_live += 1
                live_files += 1
                live_bytes += size
                continue
            if spans:
                seg = spans.get(uri)
                if seg is not None:
                    found_live += 1
                    live_files += 1
                    live_bytes += size
                    covered = _covered(seg)
                    if covered < size:
                        partially_live.append(
                            {"path": uri, "size": size, "live_bytes": covered, "dead_bytes": size - covered}
                        )
                    continue
            if run_prefix is not None and uri.startswith(run_prefix) and uri.find("/", len(run_prefix)) < 0:
                ctx = run_ctx
            else:
                parent = uri.rpartition("/")[0]
                ctx = dir_ctx.get(parent)
                if ctx is None:
                    ctx = dir_ctx[parent] = _directory_context(
                        parent, root, options, expired_dirs, retained_set, newest_retained
                    )
                run_prefix, run_ctx = parent + "/", ctx
            reason, detail, anchor, evidence = ctx
            if (
                check_expired
                and reason is not None
                and uri in expired_refs
                and reason.startswith("unreferenced")
            ):
                reason = "referenced only by expired checkpoints (--keep-last)"
            if reason is None:
                keep(new(FileDecision, (uri, size, mtime, detail, None)))
            elif is_link:
                keep(new(FileDecision, (uri, size, mtime, "symbolic link (never followed or deleted)", None)))
            elif mtime is None or mtime <= 0:
                keep(new(FileDecision, (uri, size, mtime, "no modification time (kept: age unknown)", None)))
            elif mtime > tolerance_limit:
                future.append(uri)
                keep(new(FileDecision, (uri, size, mtime, "modification time in the future", None)))
            elif mtime >= cutoff:
                young = f"younger than --older-than ({_age(now - mtime)} old)"
                keep(new(FileDecision, (uri, size, mtime, young, None)))
            elif anchor is not None and mtime >= anchor - margin:
                keep(new(FileDecision, (uri, size, mtime, IN_FLIGHT, evidence)))
            else:
                take(new(FileDecision, (uri, size, mtime, reason, evidence)))

    # every listed live file was found once; only when some were not is the set algebra needed
    missing_paths: Iterable[str] = ()
    if found_live < len(live) + len(spans):
        listed = {f.uri for _root, files in listings for f in files}
        missing_paths = live.union(spans).difference(listed)
    del listings
    missing = sorted(({"path": p} for p in missing_paths), key=lambda d: d["path"])
    if missing:
        warnings.append(
            f"{len(missing)} files referenced by retained checkpoints do not exist (first: {missing[0]['path']}); "
            "those checkpoints cannot be restored: run `ckptctl verify`"
        )
    if future:
        refusals.append(
            f"{len(future)} files have a modification time in the future of the storage clock ({now_source}), "
            f"first: {future[0]}; a skewed clock makes age guards meaningless"
        )
    collisions = [c.path for c in candidates if c.path.rpartition("/")[2] in external_names]
    if collisions:
        refusals.append(
            f"candidate {collisions[0]} has the same name as the external reference "
            f"{external_names[st.basename(collisions[0])]}: a moved directory? pass --rebase"
        )
    if candidates and not live and not spans:
        refusals.append("the live set is empty but there are candidates: refusing to delete everything")
    if candidates and not options.force:
        files_share = len(candidates) / max(total_files, 1)
        bytes_share = sum(c.size for c in candidates) / max(total_bytes, 1)
        if max(files_share, bytes_share) > options.max_delete_fraction:
            refusals.append(
                f"the plan deletes {files_share:.0%} of the files and {bytes_share:.0%} of the bytes, more than "
                f"--max-delete-fraction {options.max_delete_fraction:.0%}; review it and pass --force to proceed"
            )
    # entries stay in listing order (directory by directory, stable for a given tree): sorting
    # half a million paths would cost more than the rest of the classification
    return GcPlan(
        options, now, now_source, cutoff,
        sorted(retained_info, key=lambda d: d["path"]), sorted(expired_info, key=lambda d: d["path"]),
        candidates, protected, live_files, live_bytes, total_files, total_bytes,
        sorted(external.values(), key=lambda d: d["path"]), missing, partially_live, refusals, warnings,
    )  # fmt: skip


PARALLEL_METADATA_BYTES = 8 << 20  # below this, a worker process costs more than it saves


@dataclass
class Folded:
    """What the checkpoints say: the live set and everything the plan needs from the metadata."""

    live: set[str]
    spans: dict[str, list[tuple[int, int]]]  # segments only: a physical file is live if any is
    expired_refs: set[str]
    external: dict[str, dict[str, Any]]
    retained_info: list[dict[str, Any]]
    expired_info: list[dict[str, Any]]
    refusals: list[str]


def fold_references(storage, ordered, retained_set, rebase_pairs, root_prefixes, progress=None) -> Folded:
    """Decode each checkpoint in turn and keep only the paths it references (bounded memory).

    Runs in this process or in a worker; ``storage`` may be a :class:`Storage` or its options.
    """
    with paused_gc():
        if not isinstance(storage, Storage):
            storage = Storage(storage)
        rebase = Rebase(tuple(tuple(p) for p in rebase_pairs))
        out = Folded(set(), {}, set(), {}, [], [], [])
        live, spans, external = out.live, out.spans, out.external
        add = live.add
        iterator = progress(ordered, len(ordered)) if progress else ordered
        for loc in iterator:
            try:
                ck = load_checkpoint(storage, loc, rebase, apply_inferred=False)
            except CkptError as e:
                out.refusals.append(f"unreadable _metadata, nothing can be proven unreferenced: {e}")
                continue
            if ck.inferred_rebase is not None:
                out.refusals.append(
                    f"{loc.uri} was written at another location; its absolute paths point elsewhere. "
                    f"Pass --rebase {ck.inferred_rebase.describe()} (or the right mapping) to collect garbage here"
                )
            if loc.uri in retained_set:
                out.retained_info.append(_checkpoint_info(ck))
                add(loc.metadata_uri)
                for path, scope, offset, size in referenced_files(ck):
                    if not path.startswith(root_prefixes):
                        external.setdefault(path, {"path": path, "referenced_by": loc.uri, "scope": scope})
                    elif scope == "segment":
                        spans.setdefault(path, []).append((offset, size))
                    else:
                        add(path)
            else:
                out.expired_info.append(_checkpoint_info(ck))
                out.expired_refs.update(ref[0] for ref in referenced_files(ck))
            del ck
        return out


def fold_references_packed(*args) -> tuple:
    """:func:`fold_references` for a worker process: the path sets travel as single NUL-joined
    strings, which pickle in one piece instead of half a million small ones."""
    out = fold_references(*args)
    live, expired = _pack(out.live), _pack(out.expired_refs)
    out.live, out.expired_refs = set(), set()
    return live, expired, out


def _pack(paths: set[str]) -> str | set[str]:
    return paths if any("\0" in p for p in paths) else "\0".join(paths)


def _unpack_paths(value: str | set[str]) -> set[str]:
    if isinstance(value, set):
        return value
    return set(value.split("\0")) if value else set()


def _unpack(packed: tuple) -> Folded:
    live, expired, out = packed
    out.live, out.expired_refs = _unpack_paths(live), _unpack_paths(expired)
    return out


IN_FLIGHT = "not older than the newest retained checkpoint of its job minus --margin (may be in flight)"


def _disjoint(roots: list[str]) -> list[str]:
    """Drop roots inside other roots, so no file is listed (and counted) twice."""
    return [r for r in roots if not any(o != r and st.is_under(r, o) for o in roots)]


def _directory_context(parent, root, options, expired_dirs, retained_dirs, newest_retained) -> tuple:
    """(candidate reason or None, protection reason, anchor mtime, evidence) for files in ``parent``."""
    probe = parent + "/x"
    reason, detail = _candidate_reason(probe, root, options, expired_dirs, retained_dirs)
    if reason is None:
        return None, detail, None, None
    newest = newest_retained.get(detail or "")
    if newest is None:
        return reason, None, None, None
    anchor = newest.metadata.mtime or 0
    return reason, None, anchor, {"newest_retained": newest.uri, "newest_retained_mtime": anchor}


def _covered(spans: list[tuple[int, int]]) -> int:
    total = end = 0
    for start, size in sorted(spans):
        stop = start + size
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


def _candidate_reason(uri, root, options, expired_dirs, retained_dirs) -> tuple[str | None, str | None]:
    """(reason it may be garbage, its job directory or None) — or (None, why it is protected)."""
    if root is None:
        return None, "outside the scanned roots"
    if root in options.changelog_dirs:
        return "unreferenced changelog (DSTL) file", None
    parts = uri[len(root.rstrip("/")) + 1 :].split("/")
    job_rel, area, chk = _place(parts)
    if area == "savepoint":
        return None, "inside a savepoint directory"
    if area == "other" or job_rel is None:
        return None, "not a checkpoint file"
    job_uri = st.join(root, job_rel) if job_rel else root
    if area == "chk":
        chk_uri = st.join(job_uri, chk)
        if chk_uri in retained_dirs:
            return None, "unreferenced file inside a retained checkpoint directory"
        if chk_uri in expired_dirs:
            return "expired checkpoint (--keep-last)", job_uri
        return "incomplete checkpoint directory (no _metadata)", job_uri
    return ("unreferenced shared file" if area == "shared" else "unreferenced task-owned file"), job_uri


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


# ---------------------------------------------------------------------------------------------
# applying


@dataclass
class ApplyResult:
    deleted: list[FileDecision]
    skipped: list[dict[str, Any]]
    failed: list[dict[str, Any]]
    trashed_to: str | None
    manifest: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "deleted": [d.as_dict() for d in self.deleted], "deleted_files": len(self.deleted),
            "deleted_bytes": sum(d.size for d in self.deleted), "skipped": self.skipped, "failed": self.failed,
            "trash": self.trashed_to, "manifest": self.manifest,
        }  # fmt: skip


def revalidate(
    storage: Storage, plan_data: dict[str, Any], progress=None
) -> tuple[GcPlan, list[FileDecision], list[dict]]:
    """Re-scan with the plan's options; keep only what is still a candidate, unchanged."""
    fresh = build_plan(storage, options_from_plan(plan_data), progress=progress)
    if fresh.refusals:
        raise GcRefused("the re-validated plan is blocked: " + fresh.refusals[0])
    now_candidates = {c.path: c for c in fresh.candidates}
    go: list[FileDecision] = []
    skipped: list[dict[str, Any]] = []
    for c in plan_data["candidates"]:
        current = now_candidates.get(c["path"])
        if current is None:
            skipped.append(
                {"path": c["path"], "reason": "no longer a candidate (gone, referenced again, or guarded)"}
            )
        elif current.size != c["size"] or current.mtime != c["mtime"]:
            skipped.append({"path": c["path"], "reason": "changed since the plan (size or mtime)"})
        else:
            go.append(current)
    return fresh, go, skipped


def apply_plan(
    storage: Storage,
    fresh: GcPlan,
    go: list[FileDecision],
    skipped: list[dict[str, Any]],
    *,
    manifest: str | None,
    trash: str | None = None,
    batch_size: int = 1000,
    on_batch: Callable[[int], None] | None = None,
) -> ApplyResult:
    """Delete (or move to ``trash``) the re-validated candidates, writing the manifest first."""
    failed: list[dict[str, Any]] = []
    deleted: list[FileDecision] = []
    trash_root = st.normalize_uri(trash) if trash else None
    if trash_root is not None and _root_of(trash_root, fresh.options.roots) is not None:
        raise CkptError("--trash must not be inside a scanned root (the trash would be collected next time)")
    roots = fresh.options.roots + fresh.options.savepoint_dirs + fresh.options.changelog_dirs
    emptied_dirs = set()
    for start in range(0, len(go), batch_size):
        batch = go[start : start + batch_size]
        if manifest:
            _append_manifest(manifest, [
                {"batch": start // batch_size, "path": d.path, "size": d.size, "mtime": d.mtime, "reason": d.reason,
                 "action": "trash" if trash_root else "delete",
                 **({"trash_path": _trash_path(trash_root, d.path, roots)} if trash_root else {})}
                for d in batch
            ])  # fmt: skip
        if trash_root:
            errors = []
            for d in batch:
                try:
                    storage.move(d.path, _trash_path(trash_root, d.path, roots))
                except CkptError as e:
                    errors.append((d.path, str(e)))
        else:
            errors = storage.delete_many([d.path for d in batch])
        bad = dict(errors)
        for d in batch:
            if d.path in bad:
                failed.append({"path": d.path, "error": bad[d.path]})
            else:
                deleted.append(d)
                if "checkpoint" in d.reason:
                    emptied_dirs.add(st.parent(d.path))
        if manifest:
            _append_manifest(manifest, [{"batch": start // batch_size, "done": True, "failed": len(bad)}])
        if on_batch:
            on_batch(len(batch))
    for d in sorted(emptied_dirs, key=len, reverse=True):
        if CHK_RE.match(st.basename(d)):
            storage.remove_empty_dirs(d)
    return ApplyResult(deleted, skipped, failed, trash_root, manifest)


def _trash_path(trash_root: str, path: str, roots: Iterable[str]) -> str:
    root = _root_of(path, roots) or st.parent(path)
    return st.join(trash_root, st.basename(root), path[len(root.rstrip("/")) + 1 :])


def _append_manifest(path: str, lines: list[dict[str, Any]]) -> None:
    import os

    with open(path, "a", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
        f.flush()
        os.fsync(f.fileno())
