"""Where things live in a Flink checkpoint root, and where they lived when Flink wrote them.

Flink's ``FsCheckpointStorage`` layout::

    <root>/<job-id>/chk-<N>/_metadata      completed checkpoint (+ its exclusive files)
    <root>/<job-id>/chk-<N>/               without _metadata: in flight, aborted or crashed
    <root>/<job-id>/shared/                incremental files shared across checkpoints
    <root>/<job-id>/shared/job_<id>_op_<op>_<i>_<p>/  file-merging directories of one subtask
    <root>/<job-id>/taskowned/             task-owned state, file-merging job_<id>_tm_<tm>/ dirs
    <dir>/savepoint-<6 hex>-<12 hex>/_metadata

The root is listed once; everything else is derived from the listing. Absolute paths inside a
``_metadata`` name the place the directory had when Flink wrote it: :mod:`ckptctl.checkpoint.rebase` maps
them to where it is now.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from ckptctl import storage as st
from ckptctl.errors import LayoutError, StorageError
from ckptctl.metadata.codes import MAGIC
from ckptctl.storage import FileInfo, Storage

METADATA_FILE = "_metadata"
CHK_RE = re.compile(r"^chk-([1-9][0-9]*)\Z")  # "chk-" + Long.toString(id): ASCII, no leading zero
SAVEPOINT_RE = re.compile(r"^savepoint-([0-9a-fA-F]{6})-([0-9a-zA-Z]{12})\Z")
JOB_ID_RE = re.compile(r"^[0-9a-f]{32}\Z")  # a JobID as Flink prints it: 16 bytes in lowercase hex
# ForSt (Flink 2.x, disaggregated state) keeps each operator's live database inside shared/:
# shared/op_<operator>__<subtask>_<parallelism>__attempt_<k>/db/<files>, plus empty _dummy_dir_<uuid>
FORST_DIR_RE = re.compile(r"^(?:op_.+__[0-9]+_[0-9]+__attempt_[0-9]+|_dummy_dir_.*)\Z")
# file-merging's directories (FileMergingSnapshotManagerBase): one per subtask in shared/, one per
# task manager in taskowned/
FILE_MERGING_DIR_RE = re.compile(r"^job_[0-9a-f]{32}_(?:op_[0-9a-f]{32}_[0-9]+_[0-9]+|tm_.+)\Z")
# files of a RocksDB/ForSt database that are not data files: never collected from a working dir
FORST_CONTROL_RE = re.compile(r"^(?:CURRENT|IDENTITY|LOCK|LOG(?:\..*)?|MANIFEST-[0-9]+|OPTIONS-[0-9]+)\Z")
# how every name FORST_CONTROL_RE matches begins: columnar readers pick the names to test with it by these
FORST_CONTROL_PREFIXES = ("CURRENT", "IDENTITY", "LOCK", "LOG", "MANIFEST-", "OPTIONS-")
AREAS_WITHOUT_METADATA = ("shared", "taskowned")


# ---------------------------------------------------------------------------------------------
# The one directory grammar (used by every command and by gc)


class Place(NamedTuple):
    """Where a directory lies in Flink's layout below a root.

    ``area`` is ``shared``, ``taskowned``, ``chk`` (inside ``<job>/chk-N``), ``savepoint`` (inside a
    ``savepoint-…`` directory) or ``other`` (anything Flink's checkpoint storage does not write:
    never a gc candidate). ``job`` is the job directory URI (its name a 32-hex JobID), ``chk`` the
    checkpoint directory URI, ``forst`` the ForSt working directory (``<job>/shared/op_…``) it is in.
    """

    area: str
    job: str | None = None
    chk: str | None = None
    forst: str | None = None  # the ForSt working directory (shared/op_…__attempt_k) holding it


OTHER = Place("other")
SAVEPOINT_PLACE = Place("savepoint")


def place_of(root: str, dir_uri: str) -> Place:
    """The place of directory ``dir_uri`` (inside ``root`` or ``root`` itself) in the grammar::

        [root/…/]<job-id>/shared/…            [root/…/]<job-id>/taskowned/…
        [root/…/]<job-id>/chk-<N>/…           …/savepoint-<6 hex>-<12 alnum>/…

    The first ``shared``, ``taskowned`` or ``chk-N`` component right below a job directory (a
    32-hex JobID, the root itself included), or the first savepoint component, decides. The same
    names below anything else are ordinary directories: ``ROOT/team/shared/report.csv`` is not
    Flink's, and ``<fleet>/shared/ckpts/<job-id>/shared/…`` is that job's shared area.
    """
    root = root.rstrip("/")
    if SAVEPOINT_RE.match(st.basename(root)):
        return SAVEPOINT_PLACE  # the root is itself a savepoint directory
    if dir_uri == root:
        return OTHER
    parts = dir_uri[len(root) + 1 :].split("/")
    for i, part in enumerate(parts):
        is_chk = part.startswith("chk-") and CHK_RE.match(part) is not None
        if is_chk or part in AREAS_WITHOUT_METADATA:
            job = root + "/" + "/".join(parts[:i]) if i else root
            if JOB_ID_RE.match(st.basename(job)) is None:
                continue  # a directory that happens to have the name: keep looking below it
            if is_chk:
                return Place("chk", job, job + "/" + part)
            forst = None
            if part == "shared" and i + 1 < len(parts) and FORST_DIR_RE.match(parts[i + 1]) is not None:
                forst = job + "/shared/" + parts[i + 1]
            return Place(part, job, None, forst)
        if part.startswith("savepoint-") and SAVEPOINT_RE.match(part):
            return SAVEPOINT_PLACE
    return OTHER


def fixed_job_id(job_id: str) -> bool:
    """A JobID that is not drawn at random but derived, so that several deployments share it.

    Application mode with HA fixes the id so that a failover finds its job again: all zeros up to
    Flink 1.15, ``JobID(clusterId.hashCode(), 0)`` since 1.16 (the same for every deployment of a
    cluster id: a redeployment, another namespace); operators derive theirs from a resource id and
    a small generation the same way. Flink prints the lower long first, so such an id ends in a
    small number: its upper 32 bits (hex digits 17-24) are zero. A random id does so once in 2^32,
    and then only keeps files that could have gone."""
    return job_id[16:24] == "00000000"


# Flink (FLINK-17808; so in the 1.20.3 and 2.2.0 jars) writes a _metadata through the RecoverableWriter
# (FsCheckpointMetadataOutputStream.getOutputStreamWrapper): on a local or HDFS file system into
# "._metadata.inprogress.<uuid>" beside it, renamed to _metadata when complete (on S3 a multipart
# upload, invisible until complete). While it exists, a checkpoint is completing in that directory.
METADATA_IN_PROGRESS = "." + METADATA_FILE + ".inprogress."


def is_metadata_being_written(uri: str) -> bool:
    """Whether ``uri`` names a ``_metadata`` Flink is still writing (:data:`METADATA_IN_PROGRESS`)."""
    return st.basename(uri).startswith(METADATA_IN_PROGRESS)


def is_checkpoint_metadata(root: str, uri: str) -> bool:
    """A ``_metadata`` that can be a checkpoint's or savepoint's: any ``_metadata`` except inside a
    job's ``shared/`` or ``taskowned/`` (``<job-id>/shared/…``: Flink never writes one there and
    :meth:`Storage.find_metadata` does not look there). A directory named ``shared`` anywhere else
    is searched: a checkpoint root may live below one."""
    if not uri.endswith("/" + METADATA_FILE):
        return False
    root = root.rstrip("/")
    parts = [st.basename(root), *uri[len(root) + 1 :].split("/")[:-1]]
    return not any(
        p in AREAS_WITHOUT_METADATA and JOB_ID_RE.match(parts[i - 1]) for i, p in enumerate(parts) if i
    )


def below_job_area(root: str, dir_uri: str) -> bool:
    """A directory below (not at) a job's ``shared/`` or ``taskowned/``: where discovery does not
    walk (the areas hold millions of files), and where Flink writes no ``_metadata``."""
    place = place_of(root, dir_uri)
    return place.area in AREAS_WITHOUT_METADATA and dir_uri != f"{place.job}/{place.area}"


def renamed_checkpoint_dir(root: str, dir_uri: str) -> bool:
    """A directory below (not at) a job's ``shared/`` or ``taskowned/``, named like no checkpoint:
    where an operator may have moved a savepoint under a name of their own (savepoints are
    relocatable; Flink names only those it writes ``savepoint-…``). Only the content of a
    ``_metadata`` there tells (:func:`begins_like_metadata`); a stray copy in ``shared/`` itself is
    just a file."""
    return below_job_area(root, dir_uri) and not _names_a_checkpoint(dir_uri)


def flink_area_subdir(root: str, dir_uri: str) -> bool:
    """A directory in (or below) one that Flink itself makes inside a job's ``shared/`` or
    ``taskowned/``: a ForSt working directory, a file-merging subtask's or task manager's."""
    place = place_of(root, dir_uri)
    if place.forst is not None:
        return True
    if place.area not in AREAS_WITHOUT_METADATA:
        return False
    first = dir_uri[len(f"{place.job}/{place.area}/") :].split("/")[0]
    return FILE_MERGING_DIR_RE.match(first) is not None


def begins_like_metadata(storage: Storage, uri: str, size: int | None = None) -> bool:
    """``uri`` begins with Flink's ``_metadata`` magic number (one ranged read). Unreadable: yes,
    so that it is read as a checkpoint, whose failure then says so (never dropped unread). Fewer
    than 4 bytes (``size``, when known) hold no magic: no, without a read (S3 answers a range
    of an empty object with an error, which would have blocked the plan where a local read says no)."""
    if size is not None and size < 4:
        return False
    try:
        head = storage.read_range(uri, 0, 4)
    except StorageError:
        return True
    return head == MAGIC.to_bytes(4, "big")


def _names_a_checkpoint(dir_uri: str) -> bool:
    """A ``chk-N`` or ``savepoint-…`` directory: a checkpoint wherever it lies, also inside what
    looks like a job's ``shared/`` (a root below a 32-hex tenant directory), when a listing shows it."""
    name = st.basename(dir_uri)
    return CHK_RE.match(name) is not None or SAVEPOINT_RE.match(name) is not None


@dataclass(frozen=True)
class CheckpointLocation:
    """A directory that holds (or should hold) a ``_metadata``: a chk-N, a savepoint, or any dir."""

    uri: str
    kind: str  # "checkpoint" | "savepoint" | "unknown"
    job_id: str | None
    dir_checkpoint_id: int | None  # N of chk-N
    metadata: FileInfo | None  # None: incomplete (no _metadata)

    @property
    def metadata_uri(self) -> str:
        return st.join(self.uri, METADATA_FILE)

    @property
    def complete(self) -> bool:
        return self.metadata is not None

    @property
    def name(self) -> str:
        return st.basename(self.uri)


@dataclass
class JobDirectory:
    uri: str
    job_id: str
    checkpoints: list[CheckpointLocation] = field(default_factory=list)


@dataclass
class RootLayout:
    """Everything found under one root by a single listing (the listing itself is not kept)."""

    root: str
    jobs: list[JobDirectory]
    savepoints: list[CheckpointLocation]
    others: list[CheckpointLocation]  # directories with a _metadata that fit no naming scheme

    def locations(self) -> list[CheckpointLocation]:
        out = [c for j in self.jobs for c in j.checkpoints]
        return out + self.savepoints + self.others


def classify(dir_uri: str, metadata: FileInfo | None) -> CheckpointLocation:
    name = st.basename(dir_uri)
    m = CHK_RE.match(name)
    if m:
        job = st.basename(st.parent(dir_uri))
        return CheckpointLocation(dir_uri, "checkpoint", job, int(m.group(1)), metadata)
    m = SAVEPOINT_RE.match(name)
    if m:
        return CheckpointLocation(dir_uri, "savepoint", None, None, metadata)
    return CheckpointLocation(dir_uri, "unknown", None, None, metadata)


def scan_root(storage: Storage, root: str, files: Iterable[FileInfo] | None = None) -> RootLayout:
    """List ``root`` once and find its jobs, checkpoints (complete or not) and savepoints.

    ``files``: the listing of ``root`` when the caller has it (or only its ``_metadata`` files);
    it is read once, as it comes, and not kept.
    """
    root = st.normalize_uri(root)
    listed = files if files is not None else storage.list_files(root)
    metadata_by_dir: dict[str, FileInfo] = {}
    chk_dirs: set[str] = set()
    job_dirs: dict[str, JobDirectory] = {}
    prefix = root.rstrip("/") + "/"
    seen_dirs: set[str] = set()
    empty = True
    for f in listed:
        empty = False
        uri = f.uri
        parent, _, name = uri.rpartition("/")
        if name == METADATA_FILE and (
            is_checkpoint_metadata(root, uri) or _names_a_checkpoint(parent)
            or (renamed_checkpoint_dir(root, parent) and begins_like_metadata(storage, uri, f.size))
        ):  # fmt: skip
            metadata_by_dir[parent] = f
        # directories decide everything else: look at each one once (a flat shared/ holds millions)
        if parent in seen_dirs or not uri.startswith(prefix):
            continue
        seen_dirs.add(parent)
        place = place_of(root, parent)
        if place.job is not None:
            job_dirs.setdefault(place.job, JobDirectory(place.job, st.basename(place.job)))
            if place.chk is not None:
                chk_dirs.add(place.chk)
    if not seen_dirs:  # nothing below: maybe a file (asked only now: on S3 asking costs a request)
        refuse_a_file(storage, root, root)
    if empty and not storage.is_dir(root):
        raise LayoutError("no such directory (or it is empty)", path=root)
    savepoints: list[CheckpointLocation] = []
    others: list[CheckpointLocation] = []
    for dir_uri in sorted(set(metadata_by_dir) | chk_dirs):
        loc = classify(dir_uri, metadata_by_dir.get(dir_uri))
        job = job_dirs.get(st.parent(dir_uri)) if loc.kind == "checkpoint" else None
        if job is not None:
            job.checkpoints.append(loc)
        elif loc.kind == "savepoint":
            savepoints.append(loc)
        else:
            others.append(loc)
    for job in job_dirs.values():
        job.checkpoints.sort(key=lambda c: c.dir_checkpoint_id or 0)
    jobs = sorted(job_dirs.values(), key=lambda j: j.uri)
    return RootLayout(root, jobs, savepoints, others)


def refuse_a_file(storage: Storage, uri: str, named: str) -> None:
    """A plain file (not a ``_metadata``) is refused in one line: it can name no checkpoint, job
    or root, and an OS error later would not say so."""
    if st.basename(uri) != METADATA_FILE and storage.is_file(uri):
        raise LayoutError(
            f"not a checkpoint directory: {named} is a file (name a checkpoint or savepoint directory, "
            "its _metadata, or a directory of them)"
        )


def locate_checkpoint(
    storage: Storage, location: str, metadata: FileInfo | None = None
) -> CheckpointLocation:
    """A checkpoint named by its directory or by its ``_metadata`` file (``metadata``: its stat,
    when the caller has just made it)."""
    uri = st.normalize_uri(location)
    dir_uri = st.parent(uri) if st.basename(uri) == METADATA_FILE else uri
    info = metadata or storage.stat(st.join(dir_uri, METADATA_FILE))
    if info is None:
        try:
            is_dir = storage.is_dir(dir_uri)
        except StorageError:
            is_dir = False
        if not is_dir:
            raise LayoutError("no such checkpoint directory or _metadata file", path=uri)
        raise LayoutError(
            "no _metadata here: not a completed checkpoint or savepoint (in flight, aborted, or the wrong directory)",
            path=dir_uri,
        )
    return classify(dir_uri, info)
