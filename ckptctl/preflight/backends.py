"""Which keyed state backend reads which snapshot: handle types, ForSt and the changelog backend.

A backend's restore dispatches on the type of the keyed handles it is given, not on who wrote them:

- heap (``HeapRestoreOperation``/``HeapSavepointRestoreOperation``) reads ``KeyGroupsStateHandle``
  (a canonical savepoint, a heap checkpoint); anything else is "Unexpected state handle type";
- RocksDB reads both; an ``IncrementalRemoteKeyedStateHandle`` is its native format, which ForSt
  writes too (ForSt's native savepoints and checkpoints restored into RocksDB, RocksDB's into ForSt:
  restored on 2.1.3 and 2.3.0);
- ForSt (2.x; ``ForStKeyedStateBackendBuilder`` and its sync twin) reads only
  ``IncrementalRemoteKeyedStateHandle`` and throws ``UnsupportedOperationException: Not support
  restoring yet for ForStStateBackend`` for anything else (a canonical savepoint, a heap
  checkpoint: refused on 2.1.3 and 2.3.0); it cannot write a canonical savepoint either
  (``ForStStateBackend.supportsSavepointFormat``: NATIVE only, 2.1.3 and 2.3.0);
- a changelog handle (``ChangelogStateBackendHandle``) is restored by the changelog backend or,
  changelog off, by ``DeactivatedChangelogStateBackend``: its materialized part by the underlying
  backend (the rules above), its non-materialized changes replayed on top (a changelog-only
  checkpoint restored into RocksDB and into HashMap with changelog off: restored on 1.20.3 and 2.3.0).

And one rule of the restore mode: restored in NO_CLAIM mode (Flink's default) the first
checkpoint must be a full snapshot (``CheckpointCoordinator``: ``forceFullSnapshot`` = the restored
snapshot is unclaimed), which the changelog backend cannot take (``supportsNoClaimRestoreMode``
false): a job with changelog on fails its first checkpoint after the restore, whatever it restored
from (``StreamTask``: "does not support enforcing a full snapshot").
"""

from __future__ import annotations

from ckptctl.metadata.handles import ChangelogBackendHandle, IncrementalHandle, KeyGroupsHandle
from ckptctl.metadata.walk import keyed_parts
from ckptctl.preflight.report import AS_IS, INCOMPATIBLE, UNKNOWN

ISE = "java.lang.IllegalStateException"
UOE = "java.lang.UnsupportedOperationException"
FORST_REFUSES = f"{UOE}: Not support restoring yet for ForStStateBackend"
CHANGELOG_NO_CLAIM = (
    f"{ISE}: Configured state backend (org.apache.flink.state.changelog.ChangelogStateBackend@…) does not "
    "support enforcing a full snapshot. If you are restoring in NO_CLAIM mode, please consider choosing CLAIM mode."
)
# NEW's handles are incremental (a native savepoint or checkpoint of the new job): RocksDB or ForSt
ROCKSDB_OR_FORST = "rocksdb|forst"
# NEW is a canonical savepoint, which ForSt cannot write ("does not support CANONICAL savepoints"):
# the new job's backend is RocksDB or HashMap
NOT_FORST = "rocksdb|hashmap"


def handle_kinds(op) -> set[str]:
    """What a backend restores an operator's keyed state from: ``incremental`` / ``key-groups``
    (the materialized parts of changelog handles included), ``changelog`` when there are changelog
    handles."""
    kinds: set[str] = set()
    for s in op.subtasks or ():
        h = s.managed_keyed
        if h is None:
            continue
        if type(h) is ChangelogBackendHandle:
            kinds.add("changelog")
        for part in keyed_parts(h):
            if type(part) is IncrementalHandle:
                kinds.add("incremental")
            elif type(part) is KeyGroupsHandle:
                kinds.add("key-groups")
    return kinds


def has_changelog(md) -> bool:
    return any("changelog" in handle_kinds(op) for op in md.operators)


def backend_check(
    fmt: str, kinds: set[str], new_backend: str | None, old_version: int = 0
) -> tuple[str, str, str | None]:
    """(outcome, detail, Flink's error) of restoring handles of ``kinds`` (see :func:`handle_kinds`)
    from a ``fmt`` snapshot (canonical | native | checkpoint) of metadata version ``old_version``
    into ``new_backend`` (rocksdb, hashmap, forst, full-snapshot: a heap checkpoint of NEW,
    ``ROCKSDB_OR_FORST``, ``NOT_FORST``; None: unknown)."""
    what = {"canonical": "canonical savepoint", "native": "native savepoint"}.get(fmt, "checkpoint")
    parts = kinds - {"changelog"}
    if not parts:  # a changelog-only checkpoint: nothing materialized, the changes are replayed
        return AS_IS, f"a {what} of state changes only (changelog, nothing materialized): replayed", None
    if len(parts) > 1:
        return UNKNOWN, f"a {what} with both incremental and key-group handles", None
    part = parts.pop()
    if new_backend is None or (new_backend == NOT_FORST and (part == "incremental" or fmt != "canonical")):
        return UNKNOWN, (f"a {what} ({part} handles) restores only into a backend that reads them; NEW's backend "
                         "is not known (--target-backend)"), None  # fmt: skip
    heap = new_backend in ("hashmap", "full-snapshot")
    if part == "key-groups":
        if new_backend == "forst":
            return INCOMPATIBLE, f"a {what} (key-group handles) restored into ForSt", FORST_REFUSES
        if new_backend == NOT_FORST:
            return AS_IS, (f"a {what} into RocksDB or HashMap (NEW is a canonical savepoint, which ForSt does "
                           "not write)"), None  # fmt: skip
        if new_backend == ROCKSDB_OR_FORST:
            return UNKNOWN, (f"a {what} (key-group handles) into NEW's backend, RocksDB or ForSt (its handles do "
                             "not tell): RocksDB reads it, ForSt refuses it (--target-backend)"), None  # fmt: skip
        if fmt == "canonical" or heap:
            return AS_IS, f"a {what} (key-group handles) into {new_backend}", None
        if old_version >= 4:
            # written by 1.15+, whose RocksDB checkpoints are incremental handles even with incremental
            # checkpoints off (native full snapshots: 1.20.3, 2.1.3, 2.3.0): key groups outside a canonical
            # savepoint are a heap snapshot, which RocksDB's full restore reads past its end
            return (
                INCOMPATIBLE,
                f"a {what} of the heap (key-group handles) restored into RocksDB",
                ("java.io.EOFException: null"),
            )
        return (
            UNKNOWN,
            f"a {what} of full snapshots (heap, or RocksDB without incremental checkpoints) into RocksDB",
            None,
        )
    # incremental: RocksDB's native format, ForSt's too
    if not heap:
        return AS_IS, f"a {what} (incremental handles) into {new_backend}", None
    return (
        INCOMPATIBLE,
        f"a {what} (incremental handles, RocksDB or ForSt) restored into {new_backend}",
        (
            f"{ISE}: Unexpected state handle type, expected one of: class org.apache.flink.runtime.state."
            "KeyGroupsStateHandle, but found: class org.apache.flink.runtime.state.IncrementalRemoteKeyedStateHandle. "
            "This can mostly happen when a different StateBackend from the one that was used for taking a "
            "checkpoint/savepoint is used when restoring."
        ),
    )
