"""What a listing yields (:class:`FileInfo`) and the local walk below a root.

The local walk is where gc's safety on local disks is decided: directory symlinks, bind mounts and
aliases of one directory under two names are recorded (:class:`WalkNotes`), never listed twice.
"""

from __future__ import annotations

import os
import stat as stat_mod
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from ckptctl.errors import StorageError
from ckptctl.storage.uri import clean_local


class FileInfo(NamedTuple):
    """One listed file. ``mtime`` is seconds since the epoch, ``None`` when the storage has none.

    A NamedTuple: listings hold millions of these, and tuples are the cheapest immutable record.
    """

    uri: str
    size: int
    mtime: float | None
    is_link: bool = False


# The oldest mtime a file may have for its age to tell anything (gc's rule, the Paimon orphan
# plan): 2016-01-01T00:00:00Z (Flink 1.0 came out in March 2016; the checkpoint formats ckptctl
# reads, later). Stores and file systems report stand-ins for times they do not have -- 0 (Alibaba
# OSS's access time defeated Amoro's age guard: apache/amoro#2924), 1 (Nix's store, some FUSE
# mounts of object stores), 1980-01-01 (FAT, zip) -- and each made a file written a second ago look
# decades old: a candidate, past every age guard. An mtime before this date is no age: gc keeps
# the file as "no-mtime", the Paimon orphan plan as "undated".
PLAUSIBLE_MTIME = 1_451_606_400.0


def _contains_walk_root(link: str, root: str) -> bool:
    """Whether the directory a symlink points at is the walk's root or one of its ancestors."""
    try:
        target = os.path.realpath(link)
        top = os.path.realpath(root)
    except OSError:
        return True
    return top == target or top.startswith(target.rstrip("/") + "/")


# Directory names Flink writes no ``_metadata`` into, when they sit right below a job directory
# (a 32-hex JobID). The same name anywhere else is an ordinary directory (a platform's
# ``<fleet>/shared/ckpts`` root): pruning it by name alone hides whole jobs from gc.
JOB_AREAS = ("shared", "taskowned")


def is_job_dir_name(name: str) -> bool:
    """A JobID as Flink prints it: 32 lowercase hex digits."""
    return len(name) == 32 and all(c in "0123456789abcdef" for c in name)


@dataclass
class WalkNotes:
    """What a local walk saw besides files: what gc must know to never miss or double-count one.

    ``dirs``: every directory and its mtime (a job that was just restored has created empty
    ``shared/`` and ``taskowned/`` directories before it writes any file). ``followed``: directory
    symlinks walked into (their files are flagged as links, so never deleted). ``aliases``: a
    directory reached a second time under another name (a bind mount, a symlink into the root):
    the same file would be both live and "unreferenced" under two paths. ``mounts``: directories on
    another device than their parent.
    """

    dirs: dict[str, float] = field(default_factory=dict)
    followed: list[tuple[str, str]] = field(default_factory=list)  # (symlink uri, its target)
    aliases: list[tuple[str, str]] = field(default_factory=list)  # (uri, the uri seen first)
    mounts: list[str] = field(default_factory=list)
    # (device, inode) -> path of every directory entered; share one between the walks of several
    # scopes so that a directory of one reached through a symlink from another is an alias too
    seen: dict[tuple[int, int], str] = field(default_factory=dict, repr=False)
    # ls only: a directory below the root that cannot be read is recorded here (its URI) and the
    # walk goes on; None (gc, verify): it stops the walk, one line naming it (fail closed)
    unreadable: list[str] | None = None


NAMES_CHUNK = 4096


class Names:
    """A directory's file names, packed: every :data:`NAMES_CHUNK` names joined by ``/`` (which no
    name holds) into one string. A 36-character name costs 37 bytes this way instead of ~93 (a
    string object and a list slot); readers split one chunk at a time (:meth:`chunks`), and
    reading by position splits the chunk it falls in once for the positions after it."""

    __slots__ = ("_chunk", "_packed", "_pending", "_split", "_split_at")

    def __init__(self) -> None:
        self._chunk = NAMES_CHUNK
        self._packed: list[str] = []
        self._pending: list[str] = []
        self._split: list[str] = []
        self._split_at = -1

    def append(self, name: str) -> None:
        self._pending.append(name)
        if len(self._pending) >= self._chunk:
            self._pack()

    def extend(self, names: list[str]) -> None:
        self._pending.extend(names)
        if len(self._pending) >= self._chunk:
            self._pack()

    def _pack(self) -> None:
        pending, chunk = self._pending, self._chunk
        while len(pending) >= chunk:
            self._packed.append("/".join(pending[:chunk]))
            del pending[:chunk]

    def __len__(self) -> int:
        return len(self._packed) * self._chunk + len(self._pending)

    def chunks(self) -> Iterator[tuple[int, list[str]]]:
        """(position of the first, names) per chunk."""
        for k, packed in enumerate(self._packed):
            yield k * self._chunk, packed.split("/")
        if self._pending:
            yield len(self._packed) * self._chunk, self._pending

    def __iter__(self) -> Iterator[str]:
        for _start, names in self.chunks():
            yield from names

    def packed(self) -> Iterator[tuple[int, int, str]]:
        """(position of the first, how many, the names ``/``-joined) per chunk, as held: for
        readers that hand the names on whole (to Arrow, to another process), not one by one."""
        for k, packed in enumerate(self._packed):
            yield k * self._chunk, self._chunk, packed
        if self._pending:
            yield len(self._packed) * self._chunk, len(self._pending), "/".join(self._pending)

    def __getitem__(self, i: int) -> str:
        k, j = divmod(i, self._chunk)
        if k == len(self._packed):
            return self._pending[j]
        if k != self._split_at:
            self._split, self._split_at = self._packed[k].split("/"), k
        return self._split[j]

    def __contains__(self, name: str) -> bool:
        if "/" in name:
            return False
        inner = "/" + name + "/"
        return name in self._pending or any(
            p == name or p.startswith(name + "/") or p.endswith("/" + name) or inner in p
            for p in self._packed
        )

    def index(self, name: str) -> int:
        for start, names in self.chunks():
            if name in names:
                return start + names.index(name)
        raise ValueError(name)


class DirFiles:
    """The files of one directory as columns: the directory's URI prefix once, then one entry per
    file in each column (names packed, :class:`Names`; sizes and mtimes in arrays; link flags as
    bytes).

    A million files cost ~55 bytes each this way, against ~260 as :class:`FileInfo` tuples with a
    full URI each: listings of millions of files are held as these. ``mtimes`` holds NaN for a
    file without an mtime. ``prefix`` ends with ``/``; a file's URI is ``prefix + name`` and its
    parent ``prefix[:-1]`` (names hold no ``/``).
    """

    __slots__ = ("links", "mtimes", "names", "prefix", "sizes")

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.names = Names()
        self.sizes = array("q")
        self.mtimes = array("d")
        self.links = bytearray()

    @property
    def parent(self) -> str:
        return self.prefix[:-1]

    def __len__(self) -> int:
        return len(self.names)

    def add(self, name: str, size: int, mtime: float | None, is_link: bool = False) -> None:
        self.names.append(name)
        self.sizes.append(size)
        self.mtimes.append(NAN if mtime is None else mtime)
        self.links.append(is_link)

    def mtime(self, i: int) -> float | None:
        m = self.mtimes[i]
        return None if m != m else m

    def newest(self) -> float:
        """The largest mtime (NaN, none, compares false: ``max`` skips it unless it comes first)."""
        newest = max(self.mtimes)
        if newest != newest:
            newest = max((m for m in self.mtimes if m == m), default=0.0)
        return newest

    def file(self, i: int) -> FileInfo:
        return FileInfo(self.prefix + self.names[i], self.sizes[i], self.mtime(i), bool(self.links[i]))

    def __iter__(self) -> Iterator[FileInfo]:
        return map(self.file, range(len(self.names)))


NAN = float("nan")


def dir_runs(files: Iterable[FileInfo]) -> Iterator[DirFiles]:
    """Consecutive files of one directory as :class:`DirFiles` (a directory may come back later in
    an object store's listing: ``a/b/c/x`` sorts between ``a/b/b`` and ``a/b/d``). An mtime that is
    no float (an int from a test's storage) keeps the files as they were: only floats round-trip
    through an array of doubles unchanged."""
    run: DirFiles | None = None
    for uri, size, mtime, is_link in files:
        parent, _, name = uri.rpartition("/")
        if run is None or len(run.prefix) != len(parent) + 1 or not run.prefix.startswith(parent):
            if run is not None:
                yield run
            run = DirFiles(parent + "/")
            if type(mtime) is not float and mtime is not None:
                run.mtimes = []  # type: ignore[assignment]
        elif type(mtime) is not float and mtime is not None and isinstance(run.mtimes, array):
            run.mtimes = list(run.mtimes)  # type: ignore[assignment]
        run.add(name, size, mtime, is_link)
    if run is not None:
        yield run


def walk_local(
    root: str, prune_job_areas: bool = False, only: str | None = None, notes: WalkNotes | None = None
) -> Iterator[FileInfo]:
    """:func:`walk_local_dirs`, one :class:`FileInfo` at a time."""
    for run in walk_local_dirs(root, prune_job_areas, only, notes):
        yield from run


def walk_local_dirs(
    root: str, prune_job_areas: bool = False, only: str | None = None, notes: WalkNotes | None = None
) -> Iterator[DirFiles]:
    """os.scandir walk: one stat per file, each directory's files as one :class:`DirFiles`;
    directory symlinks followed once.

    A directory symlink (``chk-N`` moved to another volume) is walked into, and every file below
    it is flagged ``is_link`` (kept by gc, never deleted through a link); each directory is entered
    once by (device, inode), so a symlink loop, a second mount or a link back into the root is
    recorded in ``notes.aliases`` instead of listed twice. ``prune_job_areas`` skips
    ``<job-id>/shared`` and ``<job-id>/taskowned`` (no ``_metadata`` there, millions of files).
    Entries are consumed as the directory is read (a flat shared/ with a million files must not be
    held as a million DirEntry objects). A directory is read through its file descriptor, so each
    file's stat resolves one name, not the whole path (a quarter faster at a million files), and a
    regular file (known from the directory entry) costs no other call. Any OS error is one line
    naming the directory.
    """
    try:
        top = os.stat(root)
    except FileNotFoundError:
        return
    except OSError as e:
        raise StorageError(f"cannot list: {e.strerror or e}", path="file:" + root) from None
    if not stat_mod.S_ISDIR(top.st_mode):
        if only is None or os.path.basename(root) == only:
            yield next(dir_runs([FileInfo("file:" + clean_local(root), top.st_size, top.st_mtime)]))
        return
    seen: dict[tuple[int, int], str] = notes.seen if notes is not None else {}
    first_top = seen.get((top.st_dev, top.st_ino))
    if first_top is not None and notes is not None:  # this scope itself was reached from another
        notes.aliases.append(("file:" + clean_local(root), "file:" + clean_local(first_top)))
        return
    seen[(top.st_dev, top.st_ino)] = root
    stack: list[tuple[str, bool, int]] = [(root, False, top.st_dev)]
    while stack:
        current, linked, dev = stack.pop()
        clean = clean_local(current).rstrip("/")
        prefix = "file:" + clean + "/"
        prune_here = prune_job_areas and is_job_dir_name(clean.rpartition("/")[2])
        try:
            fd = os.open(current, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            continue  # removed while we walked
        except PermissionError:
            if notes is not None and notes.unreadable is not None and current != root:
                notes.unreadable.append("file:" + clean)
                continue
            raise StorageError("permission denied", path="file:" + clean) from None
        except OSError as e:
            raise StorageError(f"cannot list: {e.strerror or e}", path="file:" + clean) from None
        run = DirFiles(prefix)
        batch: list[str] = []  # names, packed every NAMES_CHUNK entries
        names, sizes, mtimes, links = batch.append, run.sizes.append, run.mtimes.append, run.links.append
        try:
            with os.scandir(fd) as it:
                for n, entry in enumerate(it, 1):
                    if not n % NAMES_CHUNK:
                        run.names.extend(batch)
                        batch.clear()
                    if entry.is_file(follow_symlinks=False):  # from the entry's type: no system call
                        if only is None or entry.name == only:
                            fs = entry.stat(follow_symlinks=False)
                            names(entry.name)
                            sizes(fs.st_size)
                            mtimes(fs.st_mtime)
                            links(linked)
                        continue
                    path = os.path.join(current, entry.name)
                    is_symlink = entry.is_symlink()
                    try:
                        is_dir = entry.is_dir(follow_symlinks=True)
                    except OSError:  # a symlink loop (ELOOP) or an unreadable target: a link, kept
                        is_dir = False
                    if is_dir and is_symlink and _contains_walk_root(path, root):
                        # a link to the root or above it (`up -> /`): following it would walk the
                        # machine; it is the root under another name, an alias
                        if notes is not None:
                            notes.aliases.append((prefix + entry.name, "file:" + clean_local(root)))
                        continue
                    if is_dir:
                        if prune_here and entry.name in JOB_AREAS:
                            continue
                        try:
                            ds = entry.stat(follow_symlinks=True)
                        except FileNotFoundError:
                            continue
                        uri = prefix + entry.name
                        first = seen.get((ds.st_dev, ds.st_ino))
                        if first is not None:
                            if notes is not None:
                                notes.aliases.append((uri, "file:" + clean_local(first)))
                            continue
                        seen[(ds.st_dev, ds.st_ino)] = path
                        if notes is not None:
                            notes.dirs[uri] = ds.st_mtime
                            if is_symlink:
                                notes.followed.append((uri, "file:" + os.path.realpath(path)))
                            if ds.st_dev != dev:
                                notes.mounts.append(uri)
                        stack.append((path, linked or is_symlink, ds.st_dev))
                    elif only is not None and entry.name != only:
                        continue
                    else:
                        fs = entry.stat(follow_symlinks=False)
                        names(entry.name)
                        sizes(fs.st_size)
                        mtimes(fs.st_mtime)
                        links(linked or is_symlink)
        except StorageError:
            raise
        except OSError as e:  # a name too long (PATH_MAX), an I/O error while reading the directory
            raise StorageError(f"cannot list: {e.strerror or e}", path="file:" + clean) from None
        finally:
            os.close(fd)
        run.names.extend(batch)
        if run.names:
            yield run
