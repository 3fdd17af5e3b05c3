"""Applying a plan: re-validate against the storage as it is now, then delete without ever
leaving the roots.

``apply`` never trusts an old plan: it re-scans with the plan's options and deletes only what is
still a candidate with the same size and mtime. Expired checkpoints go ``_metadata`` first (as
Flink's own discard does), so an interruption never leaves a ``_metadata`` pointing at deleted
files. Locally every deletion walks from the root through directory descriptors opened with
``O_NOFOLLOW``: a directory swapped for a symbolic link while apply runs is never followed. On
object stores a key must lie under its root's prefix and be in normal form.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import shutil
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ckptctl import storage as st
from ckptctl.checkpoint.layout import CHK_RE, METADATA_FILE
from ckptctl.errors import CkptError, StoreUnanswered
from ckptctl.gc.plan import FileDecision, GcPlan, build_plan
from ckptctl.gc.planfile import options_from_plan, validate
from ckptctl.gc.reasons import Reason
from ckptctl.gc.revalidation import (
    CHANGED,
    GONE,
    WAITING,
    WAITING_WHY,
    GcApplyRefused,
    replanned,
    still_candidates,
    why_dropped,
)
from ckptctl.storage import Storage

Judgements = dict[str, tuple[int, float | None]]  # uri -> the size and mtime it was judged deletable with


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
    """Re-scan with the plan's options; keep only what is still a candidate, unchanged
    (:mod:`ckptctl.gc.revalidation`).

    The result is ordered for deletion: the ``_metadata`` of expired checkpoints first. When
    an expired checkpoint's ``_metadata`` will not be deleted (changed, guarded), nothing that
    belongs to it or is referenced only by expired checkpoints is deleted either.
    """
    fresh = replanned(
        plan_data, validate, lambda: build_plan(storage, options_from_plan(plan_data), progress=progress)
    )
    go, skipped, dropped = still_candidates(plan_data["candidates"], fresh.candidates)
    wanted = set(dropped)
    guarded = {d.path: d.reason for d in fresh.protected if d.path in wanted}
    skipped.extend(why_dropped(storage, dropped, guarded))
    return fresh, *order_for_deletion(storage, fresh, go, skipped)


def order_for_deletion(
    storage: Storage, fresh: GcPlan, go: list[FileDecision], skipped: list[dict[str, Any]]
) -> tuple[list[FileDecision], list[dict]]:
    """The unchanged candidates (re-checked one by one after an inventory plan), the ``_metadata``
    of expired checkpoints first; nothing of an expired checkpoint whose ``_metadata`` stays."""
    if fresh.options.inventory is not None:
        go = _unchanged_now(storage, go, skipped)
    going = {d.path for d in go}
    expired_metadata = {st.join(e["path"], METADATA_FILE) for e in fresh.expired}
    stuck = {st.parent(m) for m in expired_metadata if m not in going}
    if stuck:
        kept = []
        for d in go:
            if d.reason is Reason.EXPIRED_ONLY or (
                d.reason is Reason.EXPIRED_CHECKPOINT and any(st.is_under(d.path, s) for s in stuck)
            ):
                skipped.append({"path": d.path, "code": WAITING, "reason": WAITING_WHY})
            else:
                kept.append(d)
        go = kept
    first = [d for d in go if d.path in expired_metadata]
    return first + [d for d in go if d.path not in expired_metadata], skipped


def _unchanged_now(
    storage: Storage, go: list[FileDecision], skipped: list[dict[str, Any]]
) -> list[FileDecision]:
    """An inventory plan's candidates were judged by the report's sizes and mtimes, which may be a
    day old: each is looked at as it is now (HEAD) and kept only if it is still there, unchanged."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(32) as pool:
        now = list(pool.map(lambda d: storage.stat(d.path, fresh=True), go))
    out = []
    for d, current in zip(go, now, strict=True):
        why = why_changed(d.size, d.mtime, current, "the inventory")
        if why is None:
            out.append(d)
        else:
            code = GONE if why.startswith("gone") else CHANGED
            skipped.append({"path": d.path, "code": code, "reason": why})
    return out


def why_changed(size: int, mtime: float | None, current: st.FileInfo | None, since: str) -> str | None:
    """Why a file judged with ``size`` and ``mtime`` must not be deleted as it is now (``current``,
    ``None``: gone), or ``None``. S3 keeps mtimes to the second (an inventory to the millisecond):
    they are compared to the second there, exactly for local files (a file rewritten within the
    same second with the same size is another file)."""
    if current is None:
        return f"gone since {since}"
    if current.size != size or current.mtime is None or mtime is None:
        return f"changed since {since} (size or mtime of the object now)"
    same = (
        math.floor(current.mtime) == math.floor(mtime)
        if st.scheme_of(current.uri) == "s3"
        else current.mtime == mtime
    )
    return None if same else f"changed since {since} (size or mtime of the object now)"


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
    roots = fresh.options.scopes()
    trash_root = outside_scopes("--trash", trash, roots) if trash else None
    if manifest:
        check_manifest(manifest)
    remover = Remover(storage, roots)
    expired_metadata = {st.join(e["path"], METADATA_FILE) for e in fresh.expired}
    n_first = sum(1 for d in go if d.path in expired_metadata)
    batches = _batches(go, n_first, batch_size)
    try:
        for number, batch in enumerate(batches):
            remover.close()  # each batch walks from the root again: a swapped-in link is seen
            targets = trash_targets(storage, trash_root, (d.path for d in batch)) if trash_root else {}
            if manifest:
                _append_manifest(manifest, [
                    {"batch": number, "path": d.path, "size": d.size, "mtime": d.mtime, "reason": str(d.reason),
                     "action": "trash" if trash_root else "delete",
                     **({"trash_path": targets[d.path]} if trash_root else {})}
                    for d in batch
                ])  # fmt: skip
            judged = {d.path: (d.size, d.mtime) for d in batch}
            bad = dict(remover.move(targets, judged) if trash_root else remover.delete(list(judged), judged))
            for d in batch:
                if d.path in bad:
                    failed.append({"path": d.path, "error": bad[d.path]})
                else:
                    deleted.append(d)
            if manifest:
                _append_manifest(manifest, [{"batch": number, "done": True, "failed": len(bad)}])
            if on_batch:
                on_batch(len(batch))
            if bad and number == 0 and n_first:
                # an expired _metadata could not be removed: its files must stay
                for d in go[len(batch) :]:
                    skipped.append({"path": d.path, "code": WAITING,
                                    "reason": "not attempted: an expired _metadata could not be deleted first"})  # fmt: skip
                break
        remove_emptied_dirs(remover, fresh, {st.parent(d.path) for d in deleted})
    finally:
        remover.close()
    return ApplyResult(deleted, skipped, failed, trash_root, manifest)


def remove_emptied_dirs(remover: Remover, fresh: GcPlan, parents: set[str]) -> None:
    """Remove the local directories this run emptied (``parents``: the directories of the files it
    deleted) that must not stay: a ``chk-N`` directory, and a collected dead job entirely -- left as
    empty ``shared/`` and ``taskowned/`` directories it would look like a job that is starting
    (fresh directories, no checkpoint) and block every later ``--keep-last`` plan. A directory
    that is not empty stays."""
    for d in sorted(parents, key=len, reverse=True):
        if CHK_RE.match(st.basename(d)):
            remover.remove_empty_dir(d)
    dead = {j["job"] for j in fresh.dead_jobs if j.get("collected")}
    if dead:
        emptied = {p for p in parents if any(st.is_under(p, j) for j in dead)}
        for d in sorted({a for e in emptied for a in _ancestors_within(e, dead)}, key=len, reverse=True):
            remover.remove_empty_dir(d)


def outside_scopes(what: str, location: str, scopes: Iterable[str]) -> str:
    """``location`` normalised, refused if it nests with a scope: a trash (or a manifest directory)
    inside a root would be collected by the next plan, one around a root would collect it."""
    normal = st.normalize_uri(location)
    for scope in scopes:
        if st.nest(normal, scope):  # as written or through a symlink (a linked mount point)
            raise GcApplyRefused(
                f"overlapping scopes: {what} {normal} and {scope} nest (the {what.lstrip('-')} would be collected, "
                "or would collect)"
            )
    return normal


def _ancestors_within(directory: str, jobs: set[str]) -> list[str]:
    """``directory`` and its parents up to (and including) the dead job directory holding it."""
    job = next((j for j in jobs if st.is_under(directory, j)), None)
    out = []
    while job is not None and st.is_under(directory, job):
        out.append(directory)
        if directory == job:
            break
        directory = st.parent(directory)
    return out


def _batches(go: list[FileDecision], n_first: int, size: int) -> Iterable[list[FileDecision]]:
    """The expired ``_metadata`` files as the first batch of their own, then the rest."""
    if n_first:
        yield go[:n_first]
    for start in range(n_first, len(go), size):
        yield go[start : start + size]


def trash_targets(storage: Storage, trash_root: str, paths: Iterable[str]) -> dict[str, str]:
    """Each path's place in the trash: ``TRASH/<scheme>/<the whole original path>`` (files of two
    roots never meet), and an existing file is never overwritten (a ``.~N~`` suffix is added).
    On S3 one listing per trash directory tells which are taken (:meth:`Storage.stat_many`), not a
    HEAD per file; a name taken is asked for again with each suffix.

    No two paths get one name: ``x`` whose trash name is taken would get ``x.~1~``, the very name
    of a candidate ``x.~1~`` itself -- on S3 the second copy would overwrite the first, both
    sources would be deleted, and one file would be lost. The names each path wants as it is are
    handed out first; a suffixed one skips every name handed out, and every name whose own file
    (``x.~1~`` beside ``x``) exists: it may be moving there in another batch (the executors' run
    concurrently). That file is looked at before the trash: it is deleted only after its copy
    is in place, so one of the two is always seen."""
    # file:/… and s3://… both have a 5-character prefix
    wanted = {p: st.join(trash_root, st.scheme_of(p), p[5:].lstrip("/")) for p in paths}
    taken = storage.stat_many(wanted.values(), unlisted_is_absent=True)
    out = {path: target for path, target in wanted.items() if taken[target] is None}
    given = set(out.values())
    for path, target in wanted.items():
        if path not in out:
            out[path] = _free_name(storage, trash_root, target, given)
            given.add(out[path])
    return {path: out[path] for path in wanted}


def _free_name(storage: Storage, trash_root: str, target: str, given: set[str]) -> str:
    """``target`` if it is free, else ``target.~N~`` with the smallest ``N`` that is: not
    ``given``, not the trash name of a file that exists (:func:`trash_targets`), not in the
    storage."""
    n = 0
    candidate = target
    while (candidate in given or (n and storage.stat(_trashed_from(trash_root, candidate)) is not None)
           or storage.stat(candidate) is not None):  # fmt: skip
        n += 1
        candidate = f"{target}.~{n}~"
    return candidate


def _trashed_from(trash_root: str, target: str) -> str:
    """The path whose plain trash name is ``target``: ``TRASH/<scheme>/<path>`` read back."""
    scheme, _, rest = target[len(trash_root.rstrip("/")) + 1 :].partition("/")
    return f"file:/{rest}" if scheme == "file" else f"{scheme}://{rest}"


class Remover:
    """Deletes and moves files without ever leaving the scanned roots."""

    def __init__(self, storage: Storage, roots: Iterable[str]) -> None:
        self.storage = storage
        self.roots = sorted(roots, key=len, reverse=True)
        self._dir: str | None = None
        self._fd: int | None = None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        self._dir = self._fd = None

    def _root_of(self, uri: str) -> str | None:
        for root in self.roots:
            if uri != root and st.is_under(uri, root):
                return root
        return None

    def refusal(self, uri: str) -> str | None:
        """Why ``uri`` must not be touched, or ``None``."""
        if not st.is_normal(uri) or st.escapes(uri):
            return "path not in normal form: refusing to delete"
        if self._root_of(uri) is None:
            return "outside the scanned roots: refusing to delete"
        return None

    # -- local, through directory descriptors ----------------------------------------------
    def _dir_fd(self, dir_uri: str) -> int:
        if dir_uri == self._dir and self._fd is not None:
            return self._fd
        self.close()
        root = self._root_of(dir_uri + "/x")
        assert root is not None
        fd = os.open(root[5:], os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the root itself as named
        try:
            rest = dir_uri[len(root.rstrip("/")) + 1 :] if dir_uri != root else ""
            for part in filter(None, rest.split("/")):
                nfd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                os.close(fd)
                fd = nfd
        except BaseException:
            os.close(fd)
            raise
        self._dir, self._fd = dir_uri, fd
        return fd

    def _open_parent(self, uri: str) -> tuple[int | None, str, str | None]:
        """(directory fd, file name, error). fd None with no error: the directory is gone."""
        parent, _, name = uri.rpartition("/")
        try:
            return self._dir_fd(parent), name, None
        except FileNotFoundError:
            return None, name, None
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR):
                return (
                    None,
                    name,
                    "a directory on its path is a symbolic link or not a directory: not followed",
                )
            return None, name, f"cannot open its directory: {e.strerror or e}"

    def list_dir(self, dir_uri: str) -> tuple[dict[str, st.FileInfo] | None, str | None]:
        """The entries directly in the local directory ``dir_uri`` as they are now, by name: one
        listing through the ``O_NOFOLLOW`` descriptors a delete walks (a directory swapped for a
        link is not listed through it). Anything but a regular file has ``is_link`` set: never
        deleted. ``({}, None)``: the directory is gone; ``(None, error)``: it cannot be read."""
        fd, _, error = self._open_parent(st.join(dir_uri, "x"))
        if fd is None:
            return (None, error) if error else ({}, None)
        found: dict[str, st.FileInfo] = {}
        try:
            with os.scandir(fd) as entries:
                for entry in entries:
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    uri = st.join(dir_uri, entry.name)
                    found[entry.name] = st.FileInfo(
                        uri, info.st_size, info.st_mtime, not stat.S_ISREG(info.st_mode)
                    )
        except OSError as e:
            return None, f"cannot list its directory: {e.strerror or e}"
        return found, None

    def _regular_file(
        self, uri: str, verb: str, judged: tuple[int, float | None] | None = None
    ) -> tuple[int | None, str, os.stat_result | None, str | None]:
        """(directory fd, name, its stat, error) of the regular file ``uri``, reached from the root
        through ``O_NOFOLLOW`` descriptors: what every delete and move starts with. No fd and no
        error: it is gone already (an interrupted run repeated). ``judged``: the size and mtime it
        was judged deletable with, checked once more on the very descriptor the unlink uses (a
        file replaced since the listing, minutes earlier on a big run, is another file)."""
        fd, name, error = self._open_parent(uri)
        if fd is None:
            return None, name, None, error
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return None, name, None, None
        if not stat.S_ISREG(info.st_mode):
            return None, name, None, f"not a regular file (a symbolic link?): never {verb}"
        if judged is not None:
            why = why_changed(*judged, st.FileInfo(uri, info.st_size, info.st_mtime), "it was judged")
            if why is not None:
                return None, name, None, f"{why}: never {verb}"
        return fd, name, info, None

    def _local_unlink(self, uri: str, judged: tuple[int, float | None] | None) -> str | None:
        fd, name, _info, error = self._regular_file(uri, "deleted", judged)
        if fd is None:
            return error
        try:
            os.unlink(name, dir_fd=fd)
        except FileNotFoundError:
            return None
        except OSError as e:
            return e.strerror or str(e)
        return None

    def _local_move(self, uri: str, target: str, judged: tuple[int, float | None] | None) -> str | None:
        fd, name, _info, error = self._regular_file(uri, "moved", judged)
        if fd is None:
            return error
        dst = target[5:]
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        try:
            os.link(name, dst, src_dir_fd=fd, follow_symlinks=False)  # fails if dst exists: no overwrite
        except FileExistsError:
            return f"{target} exists: never overwritten"
        except OSError as e:
            if e.errno not in (errno.EXDEV, errno.EPERM, errno.ENOTSUP):
                return e.strerror or str(e)
            src_fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            try:
                with os.fdopen(src_fd, "rb", closefd=False) as src, open(dst, "xb") as out:
                    while chunk := src.read(1 << 20):
                        out.write(chunk)
                    out.flush()
                    os.fsync(out.fileno())
            finally:
                os.close(src_fd)
        os.unlink(name, dir_fd=fd)
        return None

    def _local_upload(self, uri: str, target: str, judged: tuple[int, float | None] | None) -> str | None:
        """A local file moved to a trash elsewhere (S3): read through the ``O_NOFOLLOW`` directory
        descriptors, write the copy, check it, then unlink by name in the same directory. Never by
        path: a directory swapped for a symlink mid-run would lead outside the root."""
        fd, name, info, error = self._regular_file(uri, "moved", judged)
        if fd is None:
            return error
        if self.storage.stat(target) is not None:
            return f"{target} exists: never overwritten"
        src_fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
        try:
            dst_fs, dst_path = self.storage.fs(target)
            with os.fdopen(src_fd, "rb") as src, dst_fs.open(dst_path, "wb") as out:  # streamed
                shutil.copyfileobj(src, out, 8 << 20)
        except StoreUnanswered as e:
            raise e.at(target) from None
        except Exception as e:  # noqa: BLE001 - botocore errors are not OSErrors: the source stays
            return f"cannot write {target}: {type(e).__name__}: {str(e).strip().splitlines()[0][:200] if str(e) else ''}"
        copied = self.storage.stat(target)
        if copied is None or copied.size != info.st_size:
            return f"the copy at {target} is missing or has the wrong size: source kept"
        os.unlink(name, dir_fd=fd)
        return None

    # -- both ----------------------------------------------------------------------------
    def delete(self, uris: list[str], judged: Judgements | None = None) -> list[tuple[str, str]]:
        """Delete ``uris``; (uri, why) of each that was not. ``judged``: uri -> (size, mtime) it was
        judged with, checked again at the unlink (locally; S3 deletes cannot be conditional)."""
        judged = judged or {}
        errors: list[tuple[str, str]] = []
        remote: list[str] = []
        for uri in uris:
            why = self.refusal(uri)
            if why is not None:
                errors.append((uri, why))
            elif st.scheme_of(uri) == "file":
                why = self._local_unlink(uri, judged.get(uri))
                if why is not None:
                    errors.append((uri, why))
            else:
                remote.append(uri)
        if remote:
            errors += self.storage.delete_many(remote)
        return errors

    def move(self, targets: dict[str, str], judged: Judgements | None = None) -> list[tuple[str, str]]:
        judged = judged or {}
        errors: list[tuple[str, str]] = []
        remote: list[tuple[str, str, int | None]] = []  # moved together (Storage.move_many)
        for uri, target in targets.items():
            why = self.refusal(uri)
            if why is None:
                try:
                    if st.scheme_of(uri) == "file" and st.scheme_of(target) == "file":
                        why = self._local_move(uri, target, judged.get(uri))
                    elif st.scheme_of(uri) == "file":
                        why = self._local_upload(uri, target, judged.get(uri))
                    else:
                        remote.append((uri, target, judged[uri][0] if uri in judged else None))
                except StoreUnanswered:
                    raise  # every next file would wait out the same deadline
                except (CkptError, OSError) as e:
                    why = str(e)
            if why is not None:
                errors.append((uri, why))
        if remote:
            errors += self.storage.move_many(remote)
        return errors

    def remove_empty_dir(self, dir_uri: str) -> None:
        """Remove an emptied checkpoint directory (local only; object stores have none)."""
        if st.scheme_of(dir_uri) != "file" or self.refusal(dir_uri) is not None:
            return
        fd, name, _ = self._open_parent(dir_uri)
        if fd is None:
            return
        with contextlib.suppress(OSError):  # not empty, or gone: keep it
            os.rmdir(name, dir_fd=fd)


def check_manifest(path: str) -> None:
    """``--manifest`` appends to a manifest of an earlier (interrupted) run, never to any other file."""
    try:
        with open(path, encoding="utf-8") as f:
            first = f.readline()
    except FileNotFoundError:
        return
    except (OSError, UnicodeDecodeError) as e:
        raise GcApplyRefused(f"--manifest {path} cannot be read: {e}") from None
    if not first.strip():
        return
    try:
        ok = isinstance(json.loads(first), dict) and "batch" in json.loads(first)
    except ValueError:
        ok = False
    if not ok:
        raise GcApplyRefused(
            f"--manifest {path} exists and is not a ckptctl gc manifest: refusing to append to it"
        )
    directory = os.path.dirname(os.path.abspath(path))
    if not os.access(directory, os.W_OK):
        raise GcApplyRefused(f"--manifest {path}: the directory {directory} is not writable")


def _append_manifest(path: str, lines: list[dict[str, Any]]) -> None:
    with open(path, "a", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
        f.flush()
        os.fsync(f.fileno())
