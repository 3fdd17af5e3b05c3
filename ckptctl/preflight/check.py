"""``preflight``: will the changed job restore from SNAPSHOT? Decided as Flink decides it, offline.

NEW is the changed job's staging savepoint (or checkpoint): started without state, it records the
new program's operator ids, parallelism, max parallelism and every registered state's serializer
snapshots. Both are catalogued (:func:`ckptctl.states.catalog`: the keyed backends' headers and
the operator state streams' heads) and compared in the order Flink checks at restore:

1. the target release reads SNAPSHOT's metadata version (``Checkpoints.loadCheckpointMetadata``);
2. every operator with state maps to an operator of the new program by id
   (``Checkpoints.loadAndValidateCheckpoint``; with ``-n`` its state is dropped);
3. parallelism ≤ the snapshot's max parallelism, max parallelism equal or adoptable
   (``StateAssignmentOperation.checkParallelismPreconditions``);
4. the keyed backend can read the snapshot's handles (:mod:`~ckptctl.preflight.backends`:
   canonical → RocksDB or HashMap, not ForSt; incremental → RocksDB or ForSt; a heap checkpoint →
   the heap), and a job with the changelog backend on is not restored in NO_CLAIM mode;
5. per keyed state: kind, key, namespace and value serializers, MapState user keys, TTL
   (the backends' restore and ``RegisteredKeyValueStateBackendMetaInfo``);
6. per operator (list/union/broadcast) state: distribution mode, serializers.

All findings are kept; the verdict is the worst of them (:func:`~ckptctl.preflight.report.verdict_of`).
Every "restores" needs every check decided: what cannot be told is ``unknown``, never as-is.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ckptctl.preflight import releases
from ckptctl.preflight import serializers as ser
from ckptctl.preflight.backends import (
    CHANGELOG_NO_CLAIM,
    NOT_FORST,
    ROCKSDB_OR_FORST,
    backend_check,
    handle_kinds,
    has_changelog,
)
from ckptctl.preflight.changelogstates import read_changelog_states
from ckptctl.preflight.report import (
    AS_IS,
    DROPPED,
    INCOMPATIBLE,
    MIGRATION,
    UNKNOWN,
    Finding,
    OperatorRow,
    PreflightReport,
    verdict_of,
)
from ckptctl.preflight.statechecks import ISE, SME, printed, snap, states
from ckptctl.preflight.uidhash import operator_id_of_uid
from ckptctl.rescale import default_max_parallelism  # Flink's rule, written once

if TYPE_CHECKING:
    from ckptctl.checkpoint.loading import LoadedCheckpoint
    from ckptctl.preflight.description import JobDescription
    from ckptctl.states.catalog import OperatorCatalog

IAE = "java.lang.IllegalArgumentException"
BACKENDS = ("rocksdb", "hashmap", "forst")


def not_mapped_message(pointer: str, operator_id: str) -> str:
    return (
        f"{ISE}: Failed to rollback to checkpoint/savepoint {pointer}. Cannot map checkpoint/savepoint "
        f"state for operator {operator_id} to the new program, because the operator is not available in "
        "the new program. If you want to allow to skip this, you can set the --allowNonRestoredState "
        "option on the CLI."
    )


def snapshot_format(ck: LoadedCheckpoint) -> str:
    """canonical | native | checkpoint."""
    props = ck.metadata.properties
    if ck.kind == "savepoint":
        fmt = (props.savepoint_format if props is not None else None) or "CANONICAL"
        return fmt.lower()
    return "checkpoint"


class _Ctx:
    def __init__(self, old: LoadedCheckpoint, new: LoadedCheckpoint, target, new_backend: str | None) -> None:
        self.old, self.new, self.target, self.new_backend = old, new, target, new_backend
        self.findings: list[Finding] = []
        self.assumptions: list[str] = []

    def add(self, oc: OperatorCatalog, check: str, outcome: str, detail: str, **kw) -> Finding:
        f = Finding(oc.operator_id, check, outcome, detail, uid=oc.uid, name=oc.name, **kw)
        self.findings.append(f)
        return f

    def assume(self, text: str) -> None:
        if text not in self.assumptions:
            self.assumptions.append(text)


def _state_bytes(op, oc: OperatorCatalog) -> int:
    total = oc.keyed_bytes + oc.operator_bytes
    if op.coordinator_state is not None:
        total += op.coordinator_state.size if hasattr(op.coordinator_state, "size") else 0
    for s in op.subtasks or ():
        for c in (*s.input_channels, *s.output_channels):
            total += getattr(c, "state_size", 0) or 0
    return total


def _has_state(op, oc: OperatorCatalog) -> bool:
    """Flink's test (``OperatorSubtaskState.hasState`` of any subtask, or coordinator state):
    operator, keyed or channel state."""
    if op.coordinator_state is not None or oc.has_state:
        return True
    # keyed handles the catalog reads no state from (a changelog checkpoint's changes) are state too
    return any(
        s.input_channels or s.output_channels or s.managed_keyed is not None or s.raw_keyed is not None
        for s in op.subtasks or ()
    )


def run_preflight(
    storage,
    old: LoadedCheckpoint,
    new: LoadedCheckpoint | JobDescription,
    *,
    target_flink: str | None = None,
    allow_non_restored_state: bool = False,
    new_backend: str | None = None,
    new_changelog: bool | None = None,
    claimed: bool = False,
) -> PreflightReport:
    """Every finding of restoring the job NEW (its staging snapshot, or a job description)
    describes from OLD, and the verdict. ``new_backend``/``new_changelog``: the new job's keyed
    backend and whether it runs the changelog backend, where the user tells them (NEW's snapshot
    may not); ``claimed``: restored in CLAIM mode (otherwise NO_CLAIM, Flink's default)."""
    from ckptctl.preflight.description import JobDescription
    from ckptctl.states.catalog import catalog

    started = time.monotonic()
    described = isinstance(new, JobDescription)
    target, newest, source = _target(old, new, target_flink or (new.flink if described else None))
    ctx = _Ctx(old, new, target, new_backend)
    ctx.newest = newest
    if source == "inferred":
        words = releases.inferred_release(new.metadata.version)[2]
        ctx.assume(
            f"target Flink {words}: the releases that write NEW's metadata version {new.metadata.version}; a "
            "rule that differs between them is unknown (pass --target-flink)"
        )
    elif source == "assumed":
        ctx.assume(
            f"target Flink {releases.show(target)}: NEW does not tell the release (pass --target-flink)"
        )
    old_cat = {oc.operator_id: oc for oc in catalog(storage, old, operator_serializers=True)}
    old_ops = {op.operator_id: op for op in old.metadata.operators}
    if described:
        if new.kind == "plan":
            from ckptctl.preflight.plan import fit_to_snapshot

            fit_to_snapshot(new, old_ops, old_cat, ctx)
        new_cat = {oc.operator_id: oc for oc in new.catalog}
        new_ops = {op.operator_id: op for op in new.operators}
        new_uri = new.uri
        ctx.assume(f"NEW is {new.what}: it has no serializer snapshots, so no serializer check is decided")
    else:
        new_cat = {oc.operator_id: oc for oc in catalog(storage, new, operator_serializers=True)}
        new_ops = {op.operator_id: op for op in new.metadata.operators}
        new_uri = new.location.uri
    pointer = old.location.uri
    dstl_files: dict = {}  # DSTL bytes by URI: a file holds the change sets of many operators
    rows: list[OperatorRow] = []
    dropped = 0

    version_ok = releases.reads_metadata(target, old.metadata.version)
    fmt = snapshot_format(old)
    backend_new = new_backend or (new.backend if described else _backend_of_new(new, target))
    # the state rules tell the heap from RocksDB's family (ForSt migrates as RocksDB does)
    state_backend = {NOT_FORST: None, ROCKSDB_OR_FORST: "rocksdb"}.get(backend_new, backend_new)
    changelog_on = _changelog(ctx, old, new, new_changelog, described)
    if not version_ok:
        ctx.findings.append(Finding(
            None, "metadata-version", INCOMPATIBLE,
            f"Flink {releases.show(target)} does not read metadata version {old.metadata.version}",
            flink_error=f"{IAE}: Unrecognized checkpoint version number: {old.metadata.version}",
        ))  # fmt: skip
    for oid, op in old_ops.items():
        oc = old_cat[oid]
        has = _has_state(op, oc)
        nbytes = _state_bytes(op, oc)
        nop, noc = new_ops.get(oid), new_cat.get(oid)
        start = len(ctx.findings)
        if nop is None:
            unknown_nodes = new.unknown_nodes if described else []
            _unmapped(ctx, oc, has, nbytes, pointer, allow_non_restored_state, new_cat, unknown_nodes)
            dropped += nbytes if has and allow_non_restored_state else 0
        else:
            _max_parallelism(ctx, op, oc, nop)  # Checkpoints.loadAndValidateCheckpoint: every mapped operator
        if nop is not None and has:
            _uid_note(ctx, oc, noc)
            _parallelism(ctx, op, oc, nop)
            kinds = handle_kinds(op)
            if kinds:
                outcome, detail, error = backend_check(fmt, kinds, backend_new, old.metadata.version)
                ctx.add(oc, "backend", outcome, detail, flink_error=error)
            if "changelog" in kinds:
                # states in the change log (all of them, or those registered after the materialization the
                # headers come from): their serializer snapshots are its metadata records
                why = read_changelog_states(
                    storage, old, op, oc, dstl_files, only_missing=bool(oc.keyed_handles)
                )
                if why is not None:
                    ctx.add(oc, "state", UNKNOWN, why)
            if kinds and changelog_on and not claimed:
                ctx.add(oc, "changelog", INCOMPATIBLE, "changelog on in NEW, restored in NO_CLAIM mode: the first "
                        "checkpoint after the restore must be a full snapshot, which the changelog backend cannot "
                        "take", flink_error=CHANGELOG_NO_CLAIM)  # fmt: skip
            _key_serializer(ctx, oc, noc, state_backend)
            states(ctx, oc, noc, state_backend)
        own = ctx.findings[start:]
        rows.append(OperatorRow(
            oid, oc.uid, oc.name, True, nop is not None, has, nbytes,
            nop.parallelism if nop else None, nop.max_parallelism if nop else None,
            op.parallelism, op.max_parallelism, _worst(own) if own else AS_IS,
        ))  # fmt: skip
    for oid, nop in new_ops.items():
        if oid in old_ops or (described and new.kind == "plan"):
            continue  # a plan's ids are those its nodes MAY give: only the ones the snapshot has are told
        noc = new_cat[oid]
        ctx.add(noc, "mapping", AS_IS, "new in NEW: starts without state")
        rows.append(OperatorRow(oid, noc.uid, noc.name, False, True, noc.has_state, 0, nop.parallelism,
                                nop.max_parallelism, None, None, AS_IS))  # fmt: skip
    migrated = sum(f.bytes or 0 for f in ctx.findings if f.outcome == MIGRATION)
    return PreflightReport(
        snapshot=old.location.uri, new=new_uri, verdict=verdict_of(ctx.findings),
        target_flink=releases.shown(target, newest), target_flink_source=source,
        allow_non_restored_state=allow_non_restored_state, assumptions=ctx.assumptions, operators=rows,
        findings=ctx.findings, dropped_bytes=dropped, migrated_bytes=migrated,
        elapsed_seconds=round(time.monotonic() - started, 3),
    )  # fmt: skip


_ORDER = {AS_IS: 0, DROPPED: 1, MIGRATION: 2, UNKNOWN: 3, INCOMPATIBLE: 4}


def _worst(findings: list[Finding]) -> str:
    return max((f.outcome for f in findings), key=_ORDER.__getitem__)


def _target(old: LoadedCheckpoint, new, given: str | None):
    """(oldest, newest release the new job may run on, how it was found)."""
    if given:
        r = releases.parse_release(given)
        return r, r, "given"
    metadata = getattr(new, "metadata", None)  # a job description has none
    inferred = releases.inferred_release(metadata.version) if metadata is not None else None
    if inferred is not None:
        return inferred[0], inferred[1], "inferred"
    return (1, 20, 0), (1, 20, 0), "assumed"


def _backend_of_new(new: LoadedCheckpoint, target) -> str | None:
    """NEW's keyed backend as far as its handles tell (``backends``): incremental handles are
    RocksDB's or ForSt's (ForSt from 2.0), a checkpoint's key-group handles the heap's, a canonical
    savepoint is not ForSt's (ForSt does not write one); ``None``: no keyed state to tell."""
    fmt = snapshot_format(new)
    if fmt == "canonical":
        return NOT_FORST
    kinds = set().union(*(handle_kinds(op) for op in new.metadata.operators)) - {"changelog"}
    if kinds == {"incremental"}:
        return ROCKSDB_OR_FORST if target >= (2, 0, 0) else "rocksdb"
    if kinds == {"key-groups"} and fmt == "checkpoint":
        return "full-snapshot"
    return None


def _changelog(ctx, old, new, given: bool | None, described: bool) -> bool:
    """Whether the new job runs with the changelog state backend: given, or told by NEW's
    checkpoint (its keyed handles are changelog handles or not); a savepoint does not tell (the
    underlying backend writes it). Unknown: assumed off, said in the assumptions; and when OLD
    was written with changelog on, the restore is unknown (on, a NO_CLAIM restore fails)."""
    if given is not None:
        return given
    if not described and snapshot_format(new) == "checkpoint":
        kinds = set().union(*(handle_kinds(op) for op in new.metadata.operators))
        if kinds:
            return "changelog" in kinds
    if has_changelog(old.metadata):
        ctx.findings.append(Finding(
            None, "changelog", UNKNOWN,
            "SNAPSHOT was written with the changelog state backend; NEW does not tell whether the new job keeps "
            "it on: on, a NO_CLAIM restore fails its first checkpoint (pass --target-changelog on|off)",
            flink_error=CHANGELOG_NO_CLAIM,
        ))  # fmt: skip
        return False
    ctx.assume("the new job's changelog state backend assumed off (state.changelog.enabled; NEW's savepoint does "
               "not tell; pass --target-changelog on|off): on, a NO_CLAIM restore fails its first checkpoint")  # fmt: skip
    return False


def _unmapped(ctx, oc, has, nbytes, pointer, allow, new_cat, unknown_nodes=()) -> None:
    hint = ""
    if oc.uid:
        hint = f" (uid {oc.uid!r})"
    same_name = [n for n in new_cat.values() if oc.name and n.name == oc.name]
    if same_name:
        n = same_name[0]
        hint += (
            f"; NEW has an operator named {oc.name!r} with id {n.operator_id}"
            + (f" and uid {n.uid!r}" if n.uid else "")
            + ": a changed uid? (ckptctl remap)"
        )
    if not has:
        ctx.add(oc, "mapping", AS_IS, f"not in NEW{hint}; it holds no state: skipped")
    elif unknown_nodes and not allow:  # a compiled plan's node whose uids are not known may be it
        ctx.add(oc, "mapping", UNKNOWN, f"not reached by a uid of NEW's plan{hint}; the plan's exec nodes of "
                f"type {', '.join(unknown_nodes)} give uids ckptctl does not know", bytes=nbytes)  # fmt: skip
    elif allow:
        ctx.add(oc, "mapping", DROPPED, f"not in NEW{hint}: its state is dropped (--allowNonRestoredState)",
                bytes=nbytes)  # fmt: skip
    else:
        ctx.add(oc, "mapping", INCOMPATIBLE, f"not in NEW{hint}: its state cannot be mapped",
                flink_error=not_mapped_message(pointer, oc.operator_id), bytes=nbytes)  # fmt: skip


def _uid_note(ctx, oc, noc) -> None:
    """V5+ metadata records uids: an id that is not the hash of its uid was set with setUidHash."""
    uid = noc.uid if noc is not None else None
    if uid and operator_id_of_uid(uid) != noc.operator_id:
        ctx.assume(
            f"operator {noc.operator_id} (uid {uid!r}): its id is not the hash of its uid (setUidHash)"
        )


def _parallelism(ctx, op, oc, nop) -> None:
    """``StateAssignmentOperation.checkParallelismPreconditions`` (operators with state): the new
    parallelism must not exceed the snapshot's max parallelism."""
    o_max, p = op.max_parallelism, nop.parallelism
    if p > o_max:
        ctx.add(oc, "parallelism", INCOMPATIBLE,
                f"parallelism {p} above the snapshot's max parallelism {o_max}",
                flink_error=f"{ISE}: The state for task {nop.operator_id} can not be restored. The maximum "
                f"parallelism ({o_max}) of the restored state is lower than the configured parallelism ({p}). "
                "Please reduce the parallelism of the task to be lower or equal to the maximum parallelism.")  # fmt: skip


def _max_parallelism(ctx, op, oc, nop) -> None:
    """``Checkpoints.loadAndValidateCheckpoint``, for every operator of the snapshot found in the
    new program (with state or not): the same max parallelism, or one Flink may adopt (not set
    explicitly in the new program)."""
    o_max, p, n_max = op.max_parallelism, nop.parallelism, nop.max_parallelism
    if n_max == o_max:
        ctx.add(oc, "max-parallelism", AS_IS, f"max parallelism {o_max} kept")
        return
    default = default_max_parallelism(p)
    explicit = getattr(nop, "max_parallelism_explicit", None)
    err = (f"{ISE}: Failed to rollback to checkpoint/savepoint Checkpoint Metadata. Max parallelism mismatch "
           f"between checkpoint/savepoint state and new program. Cannot map operator {oc.operator_id} with max "
           f"parallelism {o_max} to new program with max parallelism {n_max}. This indicates that the program has "
           "been changed in a non-compatible way after the checkpoint/savepoint.")  # fmt: skip
    if explicit is False:
        ctx.add(oc, "max-parallelism", AS_IS, f"max parallelism {o_max} adopted (not set explicitly in NEW)")
        return
    if explicit or n_max != default:
        ctx.add(oc, "max-parallelism", INCOMPATIBLE,
                f"max parallelism {o_max} → {n_max}, set explicitly in NEW"
                + ("" if explicit else f" (the default for parallelism {p} is {default})"), flink_error=err)  # fmt: skip
        return
    ctx.assume(
        f"operator {oc.operator_id}: NEW's max parallelism {n_max} is the default for parallelism {p}, so "
        "NEW cannot tell whether it was set explicitly (then Flink refuses the snapshot's "
        f"{o_max}) or not (then Flink adopts {o_max})"
    )
    ctx.add(oc, "max-parallelism", UNKNOWN,
            f"max parallelism {o_max} → {n_max}: adopted if NEW's was not set explicitly, refused if it was",
            flink_error=err)  # fmt: skip


def _key_serializer(ctx, oc, noc, backend) -> None:
    if oc.key_serializer is None:
        return
    if noc is None or noc.key_serializer is None:
        ctx.add(oc, "key-serializer", UNKNOWN,
                "NEW records no key serializer for this operator (no keyed state in its staging run, or NEW "
                "is a description or compiled plan)")  # fmt: skip
        return
    c = ser.resolve(snap(oc.key_serializer), snap(noc.key_serializer), "key")
    if c.outcome == AS_IS:
        ctx.add(oc, "key-serializer", AS_IS, c.detail)
    elif c.outcome == UNKNOWN:
        ctx.add(oc, "key-serializer", UNKNOWN, c.detail, blocking_class=c.blocking)
    else:  # the key serializer must be as-is: keys are not migrated
        ctx.add(oc, "key-serializer", INCOMPATIBLE, f"{c.detail} ({c.outcome})",
                flink_error=f"{SME}: The new key serializer ({printed(noc.key_serializer)}) must be compatible "
                f"with the previous key serializer ({printed(oc.key_serializer)}).")  # fmt: skip
