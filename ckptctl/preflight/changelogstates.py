"""The keyed states of a changelog checkpoint that live in its change log, read from its DSTL files.

Such an operator's state lives only in the change log: no backend header records its states, so
the catalog has none, yet Flink's restore replays the log and registers each state from the
metadata record the log holds for it, checking the new job's serializers against the snapshots
recorded there (``ChangelogBackendRestoreOperation``, ``ChangelogBackendLogApplier``). Each
state's first change in a changelog backend's life is preceded by that record
(``AbstractStateChangeLogger.logMetaIfNeeded``), a change of key group -1 (``COMMON_KEY_GROUP``)::

    byte   METADATA (StateChangeOperation: 8 in every file of 1.15 to 2.3 here; 9 in a source
           version that also has REMOVE_FIRST_ELEMENT: both taken, only metadata is of key group -1)
    int    StateMetaInfoSnapshot version (the current writer's: 7 on 1.20 to 2.3)
    StateMetaInfoSnapshot (StateMetaInfoSnapshotReadersWriters' writer: as in a keyed proxy)
    then the logger's own fields (TTL config, default value, state id), not read here

Its snapshot is decoded by the keyed proxy's reader (:func:`ckptctl.metadata.keyedproxy.
parse_state_meta`); the last serializer snapshot's end is found by its grammar
(:func:`ckptctl.preflight.serializers.body_length`; a class of unknown format keeps the bytes that
follow, so nothing compares equal that is not). The states go into the operator's catalog entry
as a materialized header's would, and preflight's state checks decide them. Where part of the
state is materialized, the headers give its states and the log adds those registered since (the
others' records in the log are the same states'). The DSTL files a changelog checkpoint's log
pieces reference are read: one GET per file, bounded; nothing for any other checkpoint.
"""

from __future__ import annotations

from ckptctl.checkpoint import dstl
from ckptctl.checkpoint.refs import file_resolver
from ckptctl.errors import CkptError, StoreUnanswered
from ckptctl.metadata.handles import (
    ChangelogBackendHandle,
    ChangelogFileHandle,
    FileHandle,
    RelativeFileHandle,
)
from ckptctl.metadata.keyedproxy import parse_state_meta
from ckptctl.preflight.serializers import body_length
from ckptctl.states.catalog import add_keyed_states

METADATA = (8, 9)  # StateChangeOperation.METADATA's codes
META_VERSIONS = range(5, 8)  # StateMetaInfoSnapshotReadersWriters: 5+ read by the current reader
# a DSTL file is an upload batch of a few MB (dstl.dfs.batch.persist-size-threshold); a Snappy
# framed file is at most ~0.02 % (and 11 bytes) larger than its uncompressed bytes
READ_LIMIT = 64 << 20
NOT_READ = "state only in the change log: its serializer snapshot is in the DSTL file, not read"


def changelog_handles(op) -> list[ChangelogBackendHandle]:
    """The operator's managed changelog handles."""
    return [s.managed_keyed for s in op.subtasks or () if type(s.managed_keyed) is ChangelogBackendHandle]


def read_changelog_states(
    storage, ck, op, oc, files: dict | None = None, only_missing: bool = False
) -> str | None:
    """Add the states whose metadata records the DSTL files of ``op``'s changelog handles hold
    to ``oc`` (its catalog entry); ``None``, or why they could not all be read (then none is
    trusted: the caller says unknown). ``files``: DSTL bytes by URI, shared between operators
    (a file holds the change sets of every backend of a task manager's upload batch).
    ``only_missing``: the checkpoint has a materialized part, whose backend headers gave ``oc``
    its states; a state registered after that materialization is only in the log, so the
    states the headers lack are added from it (a changed serializer there is refused by the
    restore's replay as surely as one in a header)."""
    files = {} if files is None else files
    resolve = file_resolver(ck)
    pieces = []
    for h in changelog_handles(op):
        for part in h.non_materialized:
            if type(part) is not ChangelogFileHandle:
                return f"{NOT_READ} ({type(part).__name__}: not a DSTL file)"
            for offset, stream in part.pieces:
                if type(stream) not in (FileHandle, RelativeFileHandle):
                    return f"{NOT_READ} ({type(stream).__name__}: not a file)"
                pieces.append((resolve(stream), stream.size, offset))
    metas = []
    try:
        _read_all(storage, {(uri, size) for uri, size, _ in pieces if uri not in files}, files)
        for uri, _size, offset in pieces:
            body = files[uri]
            if isinstance(body, Exception):
                raise body
            metas += _records(body[0], body[1], offset, uri)
    except StoreUnanswered:
        raise
    except (CkptError, dstl.DstlError) as e:
        return f"{NOT_READ}: {e}"
    if only_missing:
        metas = [m for m in metas if m.name not in oc.states]
    add_keyed_states(oc, metas)
    return None


def _read_all(storage, wanted: set[tuple[str, int]], files: dict, workers: int = 16) -> None:
    """Each DSTL file of ``wanted`` (URI, size recorded) into ``files``: its bytes, or the error
    reading it raised; in parallel (on S3 a loop over a job's upload batches would take seconds)."""
    from concurrent.futures import ThreadPoolExecutor

    def one(item):
        try:
            return _read(storage, *item)
        except StoreUnanswered:
            raise  # each next file would wait out the same deadline
        except (CkptError, dstl.DstlError) as e:
            return e

    items = sorted(wanted)
    if len(items) <= 1:
        files.update({uri: one((uri, size)) for uri, size in items})
        return
    with ThreadPoolExecutor(min(workers, len(items))) as pool:
        files.update({uri: got for (uri, _), got in zip(items, pool.map(one, items), strict=True)})


def _read(storage, uri: str, recorded: int):
    """The uncompressed bytes after a DSTL file's header and their offset in the file: one
    ranged read bounded by the size recorded (of the uncompressed bytes, the header excluded)
    plus the Snappy framing's overhead."""
    if recorded > READ_LIMIT:
        raise CkptError(f"{uri}: {recorded:,} bytes recorded, more than the {READ_LIMIT:,} read")
    bound = 1 + recorded + 64 + 8 * (recorded // dstl.MAX_CHUNK + 1)
    data = storage.read_range(uri, 0, bound)
    if len(data) >= bound:
        raise CkptError(f"{uri}: larger than the {recorded:,} bytes the checkpoint records")
    body, at = dstl.body_of(data, recorded)
    if len(body) != recorded:
        raise CkptError(f"{uri}: {len(body):,} bytes of changes, the checkpoint records {recorded:,}")
    return body, at


def _records(body, at: int, offset: int, uri: str) -> list:
    """The state metadata records of the change set at ``offset``."""
    if not 0 <= offset < len(body):
        raise dstl.DstlError(f"a change set at {offset:,}, past the file's changes", offset + at)
    _end, _payload, common = dstl.change_set(body, offset, at)
    out = []
    for pos, length in common:
        change = bytes(body[pos : pos + length])
        if length < 5 or change[0] not in METADATA:
            op = change[0] if change else None
            raise dstl.DstlError(f"a change of key group -1 with operation {op}, not METADATA", pos + at)
        version = int.from_bytes(change[1:5], "big", signed=True)
        if version not in META_VERSIONS:
            raise dstl.DstlError(f"state meta info snapshot version {version}, not read", pos + 1 + at)
        out.append(parse_state_meta(change[5:], uri, base=pos + 5 + at, body_length=body_length))
    return out
