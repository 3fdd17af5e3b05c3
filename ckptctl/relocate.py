"""Relocation: copy checkpoints and savepoints anywhere, with every path in ``_metadata`` rewritten.

Incremental, file-merging, changelog and CLAIM-restored checkpoints (and native savepoints of
older releases) name their files by absolute path, so a plain copy still points at the original
location. :func:`plan_relocation` works out, from the reference map, every file each checkpoint
needs and where it goes under DST in the layout Flink expects::

    <src root>/<job>/chk-N/…         -> DST/<job>/chk-N/…
    <src root>/<job>/shared/…        -> DST/<job>/shared/…   (files of other jobs: DST/<their job>/…)
    <src root>/<job>/taskowned/…     -> DST/<job>/taskowned/…
    …/savepoint-<x>/…                -> DST/savepoint-<x>/…
    <dstl base>/<job>/dstl/…         -> DST/dstl/<job>/dstl/…   (changelog)
    anything else                    -> DST/_external/<scheme>/<path>

and the new ``_metadata`` of each (only the paths of absolute file and segment handles and the
file-merging directories change; relative handles move with their directory). Files shared by
several relocated checkpoints are copied once, file-merging physical files whole.

:func:`apply_relocation` refuses when DST already holds a different ``_metadata``, copies with
a thread pool (each copy under a temporary name, renamed when complete; S3: one PUT or a
multipart upload plus a size check), skips files already copied with the right size (so a
re-run after an interruption finishes the job), and writes every ``_metadata`` last. Nothing is
ever written under a source directory. No Typer or Rich here.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple

from ckptctl import storage as st
from ckptctl.checkpoint.flink39964 import ISSUE, misanchored_uris, savepoint_dir_of
from ckptctl.checkpoint.layout import JOB_ID_RE, METADATA_FILE, locate_checkpoint, refuse_a_file, scan_root
from ckptctl.checkpoint.loading import LoadedCheckpoint, canonical, each_checkpoint, load_checkpoint
from ckptctl.checkpoint.rebase import Rebase, written_job_dir
from ckptctl.checkpoint.refs import file_resolver, relative_uri
from ckptctl.checkpoint.targets import checkpoint_if_named
from ckptctl.errors import CkptError, StoreUnanswered
from ckptctl.metadata import read_metadata, write_metadata
from ckptctl.metadata.model import RelativeFileHandle
from ckptctl.metadata.transform import map_file_handles
from ckptctl.storage import Storage
from ckptctl.storage.copying import check_copies, copy_file, write_atomic

PLAN_FORMAT = "ckptctl-relocate-plan/1"
DSTL_RE = re.compile(r"^(?P<base>.*)/(?P<tail>[0-9a-f]{32}/dstl/.*)$")


class RelocateError(CkptError):
    """The relocation cannot be planned or applied as asked."""


class RelocateRefused(RelocateError):
    exit_code = 1


# ---------------------------------------------------------------------------------------------
# where things go


@dataclass(frozen=True)
class Destination:
    """DST canonical (for storage calls) and as Flink should write it (the scheme as given:
    ``s3a://`` stays ``s3a://`` so Flink picks the same filesystem plugin)."""

    root: str
    written_root: str

    @classmethod
    def parse(cls, dst: str) -> Destination:
        root = st.normalize_uri(dst)
        scheme, sep, _rest = dst.strip().partition("://")
        if sep and scheme.lower() in ("s3a", "s3n", "s3p"):
            return cls(root, scheme.lower() + "://" + root[len("s3://") :])
        return cls(root, root)

    def written(self, uri: str) -> str:
        return self.written_root + uri[len(self.root) :] if st.is_under(uri, self.root) else uri


class Mapper:
    """Source file URI (canonical, as it is now) -> destination URI under DST."""

    def __init__(self, dst: Destination, checkpoint_dirs: dict[str, str]) -> None:
        self.dst = dst.root
        self.dirs = sorted(checkpoint_dirs.items(), key=lambda kv: -len(kv[0]))

    def __call__(self, uri: str) -> str:
        for src, dst in self.dirs:
            if st.is_under(uri, src):
                return dst + uri[len(src) :]
        sp = savepoint_dir_of(uri)
        if sp is not None:
            return st.join(self.dst, st.basename(sp)) + uri[len(sp) :]
        job = written_job_dir(uri)
        if job is not None and JOB_ID_RE.match(st.basename(job)):
            return st.join(self.dst, st.basename(job)) + uri[len(job) :]
        m = DSTL_RE.match(uri)
        if m:
            return st.join(self.dst, "dstl", m.group("tail"))
        scheme = st.scheme_of(uri)
        path = uri[len("file:") :] if scheme == "file" else uri.partition("://")[2]
        return st.join(self.dst, "_external", scheme, path.lstrip("/"))


def checkpoint_destination(ck: LoadedCheckpoint, dst: Destination) -> str:
    loc = ck.location
    if loc.kind == "checkpoint" and loc.job_id:
        return st.join(dst.root, loc.job_id, loc.name)
    return st.join(dst.root, loc.name)


# ---------------------------------------------------------------------------------------------
# the plan


@dataclass(frozen=True)
class CopyItem:
    src: str
    dst: str
    size: int


@dataclass
class NewCheckpoint:
    source: str
    destination: str
    checkpoint_id: int
    kind: str
    rewritten: int  # handles (and file-merging directories) whose path changed
    relative: int  # relative handles, unchanged (they move with their directory)
    data: bytes = field(repr=False)

    @property
    def metadata_uri(self) -> str:
        return st.join(self.destination, METADATA_FILE)


@dataclass
class RelocatePlan:
    source: str
    destination: Destination
    checkpoints: list[NewCheckpoint]
    copies: list[CopyItem]
    prefixes: Counter  # (old directory as written, new directory as written) -> handles
    shared_files: int  # files needed by more than one relocated checkpoint (copied once)
    conflicts: list[str]  # DST _metadata files that differ from what relocate would write
    already: list[str]  # DST _metadata files identical to what relocate writes (done before)
    source_dirs: list[str]
    options: dict[str, Any] = field(default_factory=dict)  # how to plan it again (relocate apply PLAN)

    @property
    def total_bytes(self) -> int:
        return sum(c.size for c in self.copies)

    def fingerprint(self) -> str:
        """What an applied plan must still be: every copy and every new ``_metadata``."""
        h = hashlib.sha256()
        for c in self.copies:
            h.update(f"{c.src}\0{c.dst}\0{c.size}\n".encode())
        for c in self.checkpoints:
            h.update(c.metadata_uri.encode() + b"\0" + hashlib.sha256(c.data).digest())
        return h.hexdigest()

    def to_json(self, with_files: bool = True) -> dict[str, Any]:
        out = {
            "format": PLAN_FORMAT,
            "options": self.options,
            "fingerprint": self.fingerprint(),
            "source": self.source, "destination": self.destination.root,
            "written_destination": self.destination.written_root,
            "checkpoints": [
                {"source": c.source, "destination": c.destination, "checkpoint_id": c.checkpoint_id,
                 "kind": c.kind, "rewritten_handles": c.rewritten, "relative_handles": c.relative,
                 "metadata_bytes": len(c.data)}
                for c in self.checkpoints
            ],
            "files": len(self.copies), "bytes": self.total_bytes, "shared_files": self.shared_files,
            "rewritten_prefixes": [
                {"from": old, "to": new, "handles": n} for (old, new), n in sorted(self.prefixes.items())
            ],
            "conflicts": self.conflicts, "already_relocated": self.already,
        }  # fmt: skip
        if with_files:
            out["copies"] = [{"src": c.src, "dst": c.dst, "size": c.size} for c in self.copies]
        return out


def load_sources(
    storage: Storage, src: str, rebase: Rebase | None, all_checkpoints: bool
) -> tuple[list[LoadedCheckpoint], str]:
    """The checkpoints SRC names: one (directory or ``_metadata``), or with ``all_checkpoints``
    every completed checkpoint and savepoint below a job directory or root."""
    uri = st.normalize_uri(src)
    named = checkpoint_if_named(storage, uri, rebase)  # one GET on S3 when SRC is a checkpoint
    if named is not None:
        return [named], uri
    if st.basename(uri) == METADATA_FILE:  # no such _metadata: locate_checkpoint says so
        return [load_checkpoint(storage, locate_checkpoint(storage, uri), rebase)], uri
    refuse_a_file(storage, uri, src)  # a plain file: "not a checkpoint directory", as every command says
    if not all_checkpoints:
        if not storage.is_dir(uri):
            raise RelocateError("no such checkpoint directory or _metadata file", path=uri)
        raise RelocateError(
            "not a checkpoint or savepoint directory; to relocate every checkpoint below it, add --all",
            path=uri,
        )
    layout = scan_root(storage, uri)
    complete = [loc for loc in layout.locations() if loc.complete]
    if not complete:
        raise RelocateError("no completed checkpoints or savepoints here", path=uri)
    loaded = []
    for _loc, ck, error in each_checkpoint(storage, complete, rebase):
        if error is not None:
            raise error  # all or nothing: a relocation of some of the checkpoints asked for is not made
        loaded.append(ck)
    return loaded, layout.root


def plan_relocation(
    storage: Storage,
    checkpoints: list[LoadedCheckpoint],
    source: str,
    dst: str | Destination,
    workers: int = 8,
) -> RelocatePlan:
    """Every file to copy and every new ``_metadata``; reads and stats only (nothing is written)."""
    dest = dst if isinstance(dst, Destination) else Destination.parse(dst)
    if st.nest(dest.root, source):  # as written or through a symlink
        via = (
            "" if st.is_under(dest.root, source) or st.is_under(source, dest.root) else " (through a symlink)"
        )
        raise RelocateError(
            f"DST {dest.root} and SRC {source} overlap{via}; relocate never writes inside a source directory"
        )
    ck_dirs = {ck.location.uri: checkpoint_destination(ck, dest) for ck in checkpoints}
    if len(set(ck_dirs.values())) != len(ck_dirs):
        raise RelocateError(
            "two checkpoints would land in the same directory under DST (same job id and chk-N)"
        )
    mapper = Mapper(dest, ck_dirs)
    needed: dict[str, str] = {}  # src -> dst
    users: Counter = Counter()
    prefixes: Counter = Counter()
    new: list[NewCheckpoint] = []
    broken: list[str] = []
    for ck in checkpoints:
        resolve = file_resolver(ck)
        base = ck.location.uri
        new_base = ck_dirs[base]
        seen_here: set[str] = set()
        counts = {"rewritten": 0, "relative": 0}

        def rewrite(
            h, where, resolve=resolve, base=base, new_base=new_base, seen_here=seen_here, counts=counts
        ):
            src = resolve(h)
            target = mapper(src)
            needed.setdefault(src, target)
            if src not in seen_here:
                seen_here.add(src)
                users[src] += 1
            if type(h) is RelativeFileHandle:
                if relative_uri(new_base, h.relative_path) != target:
                    broken.append(
                        f"{base}: relative handle '{h.relative_path}' would not resolve to its copy"
                    )
                counts["relative"] += 1
                return h
            written = dest.written(target)
            if written == h.path:
                return h
            counts["rewritten"] += 1
            prefixes[(h.path.rpartition("/")[0], written.rpartition("/")[0])] += 1
            return h._replace(path=written)

        def rewrite_dir(d, where, ck=ck, counts=counts):
            if not d:
                return d
            src = ck.rebase.apply(canonical(d)) if ck.rebase else canonical(d)
            written = dest.written(mapper(src))
            if written != d:
                counts["rewritten"] += 1
                prefixes[(d, written)] += 1
            return written

        md = map_file_handles(ck.metadata, rewrite, rewrite_dir)
        data = write_metadata(md)
        if read_metadata(data, path="<relocated _metadata>") != md:
            raise RelocateError("internal error: the rewritten _metadata does not read back", path=base)
        new.append(NewCheckpoint(base, new_base, ck.metadata.checkpoint_id, ck.kind, counts["rewritten"],
                                 counts["relative"], data))  # fmt: skip
    if broken:
        raise RelocateError(
            f"{len(broken)} relative handles cannot move with their directory; first: {broken[0]}"
        )
    source_dirs = sorted({_source_area(s) for s in needed} | set(ck_dirs))
    real_areas = [(area, st.real_uri(area)) for area in source_dirs]
    real_dirs: dict[str, str] = {}  # target directory -> where it really is (resolved once per directory)
    for target in needed.values():
        d = st.parent(target)
        real = real_dirs.get(d) or real_dirs.setdefault(d, st.real_uri(d))
        for area, real_area in real_areas:
            as_written = st.is_under(target, area)
            if as_written or st.is_under(real, real_area):
                raise RelocateError(
                    f"{target} would be written inside a source directory ({area})"
                    + ("" if as_written else f", reached through a symlink ({real})")
                    + "; choose a DST outside it"
                )
    _refuse_aliased_destination(source_dirs, [*needed.values(), *ck_dirs.values()])
    sizes = _stat_all(storage, list(needed), workers)
    missing = [s for s in needed if sizes.get(s) is None]
    if missing:
        hint = ""
        if any(not misanchored_uris(ck).isdisjoint(missing) for ck in checkpoints):
            hint = f" (some are {ISSUE} files: run `ckptctl repair` on that checkpoint first)"
        raise RelocateError(
            f"{len(missing)} files the checkpoints need are missing{hint}; first: {missing[0]}. "
            "Run `ckptctl verify` on the source"
        )
    copies = [CopyItem(s, t, sizes[s]) for s, t in sorted(needed.items(), key=lambda kv: kv[1])]
    conflicts, already = [], []
    for c in new:
        there = storage.stat(c.metadata_uri)
        if there is not None:
            (already if storage.read_bytes(c.metadata_uri) == c.data else conflicts).append(c.metadata_uri)
    return RelocatePlan(
        source,
        dest,
        new,
        copies,
        prefixes,
        sum(1 for n in users.values() if n > 1),
        conflicts,
        already,
        source_dirs,
    )


def _identity(path: str) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _refuse_aliased_destination(source_dirs: list[str], targets: list[str]) -> None:
    """DST may name a source directory under another name (a symlink, a bind mount): comparing
    strings cannot see it. Locally, each target directory's nearest existing ancestor and every
    directory above it are compared by (device, inode) with the source directories."""
    sources: dict[tuple[int, int], str] = {}
    for d in source_dirs:
        if st.scheme_of(d) == "file":
            ident = _identity(d[5:])
            if ident is not None:
                sources[ident] = d
    if not sources:
        return
    checked: set[str] = set()
    for target in targets:
        if st.scheme_of(target) != "file":
            continue
        d = os.path.dirname(target[5:])
        while d not in checked:
            checked.add(d)
            ident = _identity(d)
            if ident is not None and ident in sources:
                raise RelocateError(
                    f"{target} would be written inside a source directory ({sources[ident]}), reached through "
                    f"{'file:' + d} (a symlink or a second mount); choose a DST outside it"
                )
            parent = os.path.dirname(d)
            if parent == d:
                break
            d = parent


def _source_area(uri: str) -> str:
    """The directory of a source file that must never receive writes: its job or savepoint
    directory (or its own directory outside Flink's layout)."""
    sp = savepoint_dir_of(uri)
    if sp is not None:
        return sp
    job = written_job_dir(uri)
    return job if job is not None else st.parent(uri)


def _stat_all(storage: Storage, uris: list[str], workers: int) -> dict[str, int | None]:
    """Each source's size (``None``: missing), from listings on S3 (:meth:`Storage.stat_many`)."""
    return {
        u: (info.size if info is not None else None) for u, info in storage.stat_many(uris, workers).items()
    }


# ---------------------------------------------------------------------------------------------
# apply


@dataclass
class RelocateResult:
    copied_files: int
    copied_bytes: int
    skipped_files: int
    metadata_written: list[str]
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "copied_files": self.copied_files, "copied_bytes": self.copied_bytes,
            "already_there": self.skipped_files, "metadata_written": self.metadata_written,
            "seconds": round(self.seconds, 3),
        }  # fmt: skip


@dataclass
class RelocateReport:
    """``relocate``: the plan (without its file list) and, once applied, the copy and the shallow
    verify of the relocated checkpoints (``verify``: None with --no-verify)."""

    plan: RelocatePlan
    applied: bool
    result: RelocateResult | None = None
    verify: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out = {**self.plan.to_json(with_files=False), "applied": self.applied}
        if self.applied:
            out.update(result=self.result.to_json() if self.result else None, verify=self.verify)
        return out


def replan(storage: Storage, plan_data: dict[str, Any], workers: int = 8) -> RelocatePlan:
    """``relocate apply PLAN``: never trust an old plan; plan again with its options and refuse
    when anything (a file, a size, a new ``_metadata``) differs from what was reviewed."""
    if not isinstance(plan_data, dict) or plan_data.get("format") != PLAN_FORMAT:
        raise RelocateError(f"not a relocate plan (expected format {PLAN_FORMAT})")
    o = plan_data.get("options")
    if not isinstance(o, dict) or not isinstance(o.get("src"), str) or not isinstance(o.get("dst"), str):
        raise RelocateError("the plan has no options.src/options.dst: not written by `ckptctl relocate -o`")
    try:
        rebase = Rebase.from_json(o.get("rebase", []), "the plan's options")
    except CkptError as e:
        raise RelocateError(str(e)) from None
    checkpoints, source = load_sources(storage, o["src"], rebase, bool(o.get("all")))
    fresh = plan_relocation(storage, checkpoints, source, o["dst"], workers)
    fresh.options = o
    if fresh.fingerprint() != plan_data.get("fingerprint"):
        raise RelocateRefused(
            "the source or DST changed since this plan was made; run `ckptctl relocate` again"
        )
    return fresh


def apply_relocation(
    storage: Storage,
    plan: RelocatePlan,
    *,
    workers: int = 8,
    bwlimit: float | None = None,
    progress: Callable[[int], None] | None = None,
    engine: Any = "local",
    master: str | None = None,
) -> RelocateResult:
    """Copy every file (resumable), then write each new ``_metadata`` last.

    ``engine`` (an :class:`~ckptctl.engine.Engine` or its name): ``local`` (a thread pool of
    ``workers``) or ``spark`` (each executor copies a partition of the files; the driver writes
    the ``_metadata`` files once all are copied); ``auto`` picks by the number of files."""
    from ckptctl.engine import Engine

    chosen = Engine.parse(engine, master).resolve(len(plan.copies))
    if plan.conflicts:
        raise RelocateRefused(
            f"DST already holds a different checkpoint: {plan.conflicts[0]} differs from the one relocate "
            "would write; choose another DST or remove it"
        )
    started = time.monotonic()
    lock = threading.Lock()
    stats = {"copied": 0, "bytes": 0, "skipped": 0}
    limiter = _Limiter(bwlimit) if bwlimit else None

    copied: list[tuple[str, int]] = []  # checked together, before any _metadata is written
    # set by the copy that fails, in its own thread: a worker freed by a failed copy took the next
    # one from the pool's queue before the main thread (woken by as_completed, late on a loaded
    # machine) could cancel it, and that copy waited out the deadline too (4 held files, 2 workers)
    failed = threading.Event()

    def one(item: CopyItem) -> None:
        if failed.is_set():
            return  # the run is ending: a copy not begun is not begun
        try:
            copy_one(item)
        except BaseException:
            failed.set()
            raise

    def copy_one(item: CopyItem) -> None:
        if item.dst in already:
            with lock:
                stats["skipped"] += 1
        else:
            n = copy_file(storage, item.src, item.dst, item.size, checked=False)
            if limiter is not None:
                limiter.spend(n)
            with lock:
                stats["copied"] += 1
                stats["bytes"] += n
                copied.append((item.dst, item.size))
        if progress is not None:
            progress(1)

    if chosen.kind == "spark":
        for outcome in run_spark_copies(storage, plan.copies, chosen, progress):
            stats["skipped" if outcome.skipped else "copied"] += 1
            stats["bytes"] += outcome.copied
    else:
        already = _already_copied(storage, plan.copies)
        if workers <= 1:
            for item in plan.copies:
                one(item)
        else:
            with ThreadPoolExecutor(workers) as pool:
                futures = [pool.submit(one, item) for item in plan.copies]
                try:
                    for fut in as_completed(futures):
                        fut.result()
                except BaseException:  # the first failure ends the run: the copies not begun are not
                    for f in futures:  # (a hung endpoint: each would wait out the deadline, in turn)
                        f.cancel()
                    raise
        check_copies(storage, copied)
    written = []
    for c in plan.checkpoints:  # last: a _metadata never names a file that is not there yet
        write_atomic(storage, c.metadata_uri, c.data)
        written.append(c.metadata_uri)
    return RelocateResult(
        stats["copied"], stats["bytes"], stats["skipped"], written, time.monotonic() - started
    )


class CopyOutcome(NamedTuple):
    """What one copy on an executor did: ``copied`` bytes, or ``skipped`` (already there with its
    size), or the ``error``."""

    src: str
    copied: int = 0
    skipped: bool = False
    error: str | None = None


def copy_partition(options: st.StorageOptions, items: Iterable[CopyItem]) -> Iterator[CopyOutcome]:
    """The task function of the Spark copies (module level: pickled, with ``options`` bound, by reference)."""
    storage = Storage.shared(options)
    items = list(items)
    try:
        already = _already_copied(storage, items)
    except StoreUnanswered:
        raise  # the task stops: each copy would wait out the same deadline
    except CkptError as e:
        yield from (CopyOutcome(item.src, error=str(e)) for item in items)
        return
    for item in items:
        try:
            if item.dst in already:
                yield CopyOutcome(item.src, skipped=True)
            else:
                yield CopyOutcome(item.src, copy_file(storage, item.src, item.dst, item.size))
        except StoreUnanswered:
            raise
        except CkptError as e:
            yield CopyOutcome(item.src, error=str(e))


def _already_copied(storage: Storage, items: list[CopyItem]) -> set[str]:
    """The destinations that hold a file of their item's size already (a repeated run): on S3 one
    listing per destination directory (:meth:`Storage.stat_many`), not a stat each."""
    there = storage.stat_many([item.dst for item in items], unlisted_is_absent=True)
    return {item.dst for item in items if there[item.dst] is not None and there[item.dst].size == item.size}


def run_spark_copies(
    storage: Storage, copies: list[CopyItem], engine: Any, progress: Callable[[int], None] | None = None
) -> list[CopyOutcome]:
    """Every copy on the executors of ``engine`` (a Spark :class:`~ckptctl.engine.Engine`)."""
    _ran, outcomes = engine.run(copies, partial(copy_partition, storage.options), progress)
    errors = [o for o in outcomes if o.error is not None]
    if errors:
        raise RelocateError(f"{len(errors)} copies failed on Spark; first: {errors[0].error}")
    return outcomes


class _Limiter:
    """``--bwlimit``: at most this many bytes per second over the whole copy."""

    def __init__(self, rate: float) -> None:
        self.rate, self.spent, self.t0, self.lock = rate, 0, time.monotonic(), threading.Lock()

    def spend(self, n: int) -> None:
        with self.lock:
            self.spent += n
            wait = self.spent / self.rate - (time.monotonic() - self.t0)
        if wait > 0:
            time.sleep(wait)


def relocated_checkpoints(storage: Storage, plan: RelocatePlan) -> list[LoadedCheckpoint]:
    """The relocated copies, read back from DST (no rebase: their paths must be right as written)."""
    return [load_checkpoint(storage, c.destination, apply_inferred=False) for c in plan.checkpoints]


def shallow_verify(storage: Storage, plan: RelocatePlan) -> dict[str, Any]:
    """``verify --engine local`` (shallow) on the relocated copies."""
    from ckptctl.verify import verify

    result = verify(storage, relocated_checkpoints(storage, plan), engine="local")
    return result.to_json()
