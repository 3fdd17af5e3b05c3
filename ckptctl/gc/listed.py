"""The local planner's per-file data in columns: the live sets by directory (:class:`PathsByDir`),
every listed file looked up in them once (:func:`flag_listed`), and the outcome over a listing of
:class:`~ckptctl.storage.listing.DirFiles` (:class:`Listed`).

Measured at a million files (bench/gc_bench.py; 1M files in one shared/, 400k references), as
tracemalloc saw it when the plan was complete: ``FileInfo`` tuples with a full URI each cost ~250 B
per listed file (URI 150, tuple 80, mtime float 24), the live set of full URIs ~180 B per live path,
a ``FileDecision`` per candidate ~100 B: 414 MB, 460 B of RSS per file. Held as packed names per
directory, arrays of sizes and mtimes, the live set as a set of names per directory and decisions
as positions: 185 B of RSS per file, of which the live set was the largest part (57 MB for 500k
names, ~115 B a name). Now the live names are packed too (18 MB) and never a set in the planner's
process once the checkpoints are many (the fold worker, which built the set, looks the listed
files up in it); classification reads a byte per file. RSS probes at the steps of that plan: the
interpreter and modules 26 MB, the listing 53 (names 37, sizes and mtimes 16), the live names 18,
the flags, the runs' contexts and the rest 10, pyarrow 35 (loaded at the first batch), the
batches' buffers 7, decisions 8: 158 MiB peak, 162 B of RSS per file (107 at 3M files). See
:data:`ckptctl.gc.plan.SPARK_HINT_FILES`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from ckptctl import storage as st
from ckptctl.checkpoint.flink39964 import SavepointFiles
from ckptctl.checkpoint.layout import METADATA_IN_PROGRESS, is_metadata_being_written, place_of
from ckptctl.gc.decisions import Decisions, GcPlan, Verdicts
from ckptctl.storage import Storage, WalkNotes
from ckptctl.storage.listing import NAMES_CHUNK, DirFiles, Names, dir_runs, walk_local_dirs

_EMPTY: frozenset = frozenset()


class PathsByDir:
    """A set of paths (or a mapping of paths) held by directory: parent -> the names in it (a set,
    the names packed (:meth:`packed`), or a dict name -> value). Directory strings are held once;
    a run of a directory's listed files asks for its names once. Iterates full paths, tests
    ``path in``."""

    __slots__ = ("dirs",)

    def __init__(self, dirs: dict[str, Any] | None = None) -> None:
        self.dirs: dict[str, Any] = dirs if dirs is not None else {}

    @classmethod
    def of(cls, paths: Iterable[str] | dict[str, Any] | PathsByDir) -> PathsByDir:
        """From paths (a set) or a mapping path -> value (a dict)."""
        if isinstance(paths, PathsByDir):
            return paths
        dirs: dict[str, Any] = {}
        if isinstance(paths, dict):
            for path, value in paths.items():
                parent, _, name = path.rpartition("/")
                d = dirs.get(parent)
                if d is None:
                    d = dirs[parent] = {}
                d[name] = value
            return cls(dirs)
        for path in paths:
            parent, _, name = path.rpartition("/")
            d = dirs.get(parent)
            if d is None:
                d = dirs[parent] = set()
            d.add(name)
        return cls(dirs)

    @classmethod
    def packed(cls, paths: set[str] | PathsByDir) -> PathsByDir:
        """Paths with each directory's names packed (:class:`Names`, ~37 bytes a name where a set
        of strings holds ~115): what the plan keeps of a live set once :func:`flag_listed` has
        looked every listed file up in it. A worker's live set pickles this way in a few pieces
        instead of half a million."""
        dirs: dict[str, Any] = {}
        for parent, names in cls.of(paths).dirs.items():
            ordered, packed = list(names), Names()
            for start in range(0, len(ordered), NAMES_CHUNK):
                packed.extend(ordered[start : start + NAMES_CHUNK])
            dirs[parent] = packed
        return cls(dirs)

    def __contains__(self, path: str) -> bool:
        parent, _, name = path.rpartition("/")
        return name in self.dirs.get(parent, _EMPTY)

    def __iter__(self) -> Iterator[str]:
        for parent, names in self.dirs.items():
            prefix = parent + "/"
            for name in names:
                yield prefix + name

    def __len__(self) -> int:
        return sum(map(len, self.dirs.values()))

    def __bool__(self) -> bool:
        return any(self.dirs.values())

    def __ior__(self, paths: Iterable[str]) -> PathsByDir:
        for path in paths:
            parent, _, name = path.rpartition("/")
            names = self.dirs.get(parent)
            if not isinstance(names, set):  # none yet, or packed: a set again (a few late checkpoints' paths)
                names = self.dirs[parent] = set(names or ())
            names.add(name)
        return self

    def items(self) -> Iterator[tuple[str, Any]]:
        """(path, value) of a mapping."""
        for parent, names in self.dirs.items():
            prefix = parent + "/"
            for name, value in names.items():
                yield prefix + name, value


class ListedFlags(NamedTuple):
    """What :func:`flag_listed` tells classification, per run of listed files a byte per file
    (``None``: 0 for every file): 1 if it is live, 1 if only expired checkpoints reference it;
    and the live paths no run lists."""

    live: list[bytearray | None]
    expired: list[bytearray | None]
    live_unlisted: set[str]


def flag_listed(runs: list[DirFiles], live: PathsByDir, expired: PathsByDir | None) -> ListedFlags:
    """Every listed file looked up, once, in the live set and (unless ``None``) the expired one.

    Before classification: a directory's names become a set for its runs (unless they are one)
    and are dropped before the next directory's, so the plan holds a byte per listed file
    through classification instead of a set of names (at 1M files, 1 MB instead of 57 for a
    live set of 500k names, besides the packed names, 18)."""
    flags = listed_flags(runs, live)
    return ListedFlags(flags, [None] * len(runs) if expired is None else listed_flags(runs, expired),
                       unlisted(runs, live, flags))  # fmt: skip


def listed_flags(runs: list[DirFiles], paths: PathsByDir) -> list[bytearray | None]:
    """Per run, a byte per file: 1 if its path is one of ``paths`` (``None``: no path is in the
    run's directory)."""
    by_parent: dict[str, list[int]] = {}
    for k, run in enumerate(runs):
        if run.parent in paths.dirs:
            by_parent.setdefault(run.parent, []).append(k)
    flags: list[bytearray | None] = [None] * len(runs)
    for parent, names in paths.dirs.items():
        members = names if isinstance(names, set) else set(names)
        for k in by_parent.get(parent, ()):
            flags[k] = name_flags((chunk for _start, chunk in runs[k].names.chunks()), members)
        del members
    return flags


def name_flags(chunks: Iterable[list[str]], members: set[str]) -> bytearray:
    """A byte per name of the chunks: 1 if it is one of ``members``."""
    out = bytearray()
    for names in chunks:
        out += bytes(map(members.__contains__, names))
    return out


def unlisted(runs: list[DirFiles], paths: PathsByDir, flags: list[bytearray | None]) -> set[str]:
    """The paths no run lists, given each run's flags (:func:`listed_flags`): none, unless fewer
    files of a directory are flagged than it has paths."""
    found: dict[str, int] = {}
    for run, here in zip(runs, flags, strict=True):
        if here is not None:
            found[run.parent] = found.get(run.parent, 0) + here.count(1)
    missing: set[str] = set()
    for parent, names in paths.dirs.items():
        if found.get(parent, 0) < len(names):
            listed = set().union(*(run.names for run in runs if run.parent == parent))
            missing.update(parent + "/" + n for n in names if n not in listed)
    return missing


def list_runs(storage: Storage, root: str, notes: WalkNotes) -> list[DirFiles]:
    """Every file below ``root`` as runs of one directory's files. A local root is walked into
    columns directly; a storage that answers ``list_files`` itself (a scan's, a test's) and object
    stores are asked through ``list_files`` and grouped."""
    if st.scheme_of(root) == "file" and type(storage).list_files is Storage.list_files:
        return list(walk_local_dirs(storage.fs(root)[1], notes=notes))
    return list(dir_runs(storage.list_files(root, notes)))


_IN_PROGRESS = "/" + METADATA_IN_PROGRESS  # in a URI the name follows a slash


class Tally:
    """The per-file outcome as :meth:`~ckptctl.gc.conclusion.Conclusion.finish` needs it, wherever the files are: in columns
    here (:class:`Listed`) or in DataFrames on executors (:mod:`ckptctl.gc.spark`)."""

    live_files: int
    live_bytes: int
    total_files: int
    total_bytes: int

    def missing_paths(self) -> set[str]:
        """Live paths (files and segments' files) not among the listed files."""
        raise NotImplementedError

    def savepoint_files(self, names: set[str]) -> SavepointFiles:
        """Listed files inside savepoint directories whose names are in ``names``."""
        raise NotImplementedError

    def drop_listing(self) -> None:
        """The listing is no longer needed."""

    def relive(self, paths: set[str]) -> None:
        """Protected files that are live after all: counted live, no longer protected."""
        raise NotImplementedError

    def future_files(self) -> tuple[int, str | None]:
        """How many listed files have an mtime past the clock tolerance, and the first of them."""
        raise NotImplementedError

    def first_collision(self, names: dict[str, str]) -> str | None:
        """The first candidate whose file name is one of ``names``."""
        raise NotImplementedError

    def candidate_totals(self) -> tuple[int, int]:
        raise NotImplementedError

    def live_set_empty(self) -> bool:
        raise NotImplementedError

    def kept_paths_since(self, since: float) -> Iterable[str]:
        """Protected files without an mtime or modified at ``since`` or later."""
        raise NotImplementedError

    def metadata_being_written(self, since: float) -> tuple[int, str | None]:
        """How many listed files are a ``_metadata`` Flink is still writing
        (:func:`ckptctl.checkpoint.layout.is_metadata_being_written`) without an mtime or modified at
        ``since`` or later, and the first of them by path."""
        raise NotImplementedError

    def plan(self, *args) -> GcPlan:
        """The plan: :class:`GcPlan`'s fields but the per-file ones, in order."""
        raise NotImplementedError


class Listed(Tally):
    """The local planner's outcome: decisions as columns over the listing (runs of
    :class:`DirFiles` per scope), in listing order."""

    def __init__(self, listings: list[tuple[str, list[DirFiles]]], live: PathsByDir, spans: PathsByDir,
                 live_unlisted: set[str], live_listed: int) -> None:  # fmt: skip
        """``live_unlisted``: the live paths no run lists; ``live_listed``: how many listed files
        are live (both from :func:`flag_listed`)."""
        self.listings, self.live, self.spans = listings, live, spans
        self.live_unlisted, self.live_listed = live_unlisted, live_listed
        self.total_files = sum(len(run) for _root, runs in listings for run in runs)
        self.total_bytes = sum(sum(run.sizes) for _root, runs in listings for run in runs)
        self.live_files = self.live_bytes = 0
        self.verdicts = Verdicts()
        self.candidates = Decisions(self.verdicts)
        self.protected = Decisions(self.verdicts)
        self.partially_live: list[dict[str, Any]] = []
        self.future: list[str] = []

    def missing_paths(self) -> set[str]:
        spans = self.spans
        missing = set(self.live_unlisted)
        # every segments' file was found once (the other live files are the live set's, counted
        # by flag_listed): only when some were not are the segments' files looked up
        if self.live_files - self.live_listed >= len(spans):
            return missing
        runs = [run for _root, runs in self.listings for run in runs]
        return missing | unlisted(runs, spans, listed_flags(runs, spans))

    def savepoint_files(self, names: set[str]) -> SavepointFiles:
        found = SavepointFiles()
        for root, runs in self.listings:
            for run in runs:
                if names.isdisjoint(run.names) or place_of(root, run.parent).area != "savepoint":
                    continue
                for i, name in enumerate(run.names):
                    if name in names:
                        found.add_file(run.prefix + name, run.sizes[i])
        return found

    def relive(self, paths: set[str]) -> None:
        files, size = self.protected.without(paths)
        self.live_files += files
        self.live_bytes += size

    def future_files(self) -> tuple[int, str | None]:
        return len(self.future), (self.future[0] if self.future else None)

    def first_collision(self, names: dict[str, str]) -> str | None:
        for run, at, _codes in self.candidates.segments:
            for i in at:
                if run.names[i] in names:
                    return run.prefix + run.names[i]
        return None

    def candidate_totals(self) -> tuple[int, int]:
        return len(self.candidates), self.candidates.total_size()

    def live_set_empty(self) -> bool:
        return not self.live and not self.spans

    def kept_paths_since(self, since: float) -> Iterable[str]:
        return (d.path for d in self.protected if d.mtime is None or d.mtime >= since)

    def metadata_being_written(self, since: float) -> tuple[int, str | None]:
        # ``since`` is the cut-off: a file modified at it or later is never a candidate, so only the
        # protected list is looked at, a substring test (in C) before the name's own
        hits = [d.path for d in self.protected if _IN_PROGRESS in d.path and is_metadata_being_written(d.path)
                and (d.mtime is None or d.mtime >= since)]  # fmt: skip
        return len(hits), min(hits, default=None)

    def plan(self, options, now, now_source, cutoff, retained, expired, external, missing, *rest) -> GcPlan:
        return GcPlan(options, now, now_source, cutoff, retained, expired, self.candidates, self.protected,
                      self.live_files, self.live_bytes, self.total_files, self.total_bytes, external, missing,
                      self.partially_live, *rest)  # fmt: skip
