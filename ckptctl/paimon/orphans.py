"""Paimon orphan clean-up that never deletes what a Flink checkpoint still holds (hazard B).

Paimon's ``remove_orphan_files`` deletes every file of the table directory that no snapshot, tag or
changelog names and that is older than ``older_than``; it knows nothing of Flink state. The files a
Flink job wrote before a checkpoint whose commit has not happened yet (a lost notification, a crash
between checkpoint and commit, a job stopped with a savepoint) are exactly such files, and the
restore of that checkpoint then fails. Here the candidates are Paimon's own
(:func:`ckptctl.paimon.reachable.orphan_candidates`) minus every file name a committable of
a retained checkpoint or savepoint under ``--checkpoints`` names, and the result is a plan that
``ckptctl gc apply`` re-validates (a fresh plan with the same cut-off instant, each file unchanged)
before it deletes anything.

Two more guards read time, both with gc's ``--margin`` (its in-flight rule, the same option and
default). A file younger than the newest retained checkpoint or savepoint (by checkpoint id: a copy
of an older one made today moves nothing) of any commit user whose checkpoints are scanned, less
the margin, may be one that user's running writer flushed for the checkpoint it is taking (slow or
failing checkpoints): kept as ``in_flight``. A data, changelog or
index file written after the table's latest commit (its newest ``snapshot-N`` on any branch, the
earlier of the file's time and its ``timeMillis``), less the margin, was named by no commit yet: if no scanned committable names it, only a writer whose
checkpoints are not scanned (one whose commits all failed has no snapshot to be learnt from) or a
running one holds it: kept as ``after_last_commit``. Times before 2016 (:data:`PLAUSIBLE_MTIME`)
or ahead of the storage's clock date nothing: such an anchor keeps every file it would date.

Fail closed: the plan is blocked when a checkpoint cannot be read, when a root is one checkpoint
(``chk-N``: the job's other retained checkpoints would not be protected), when no checkpoint under
the roots holds Paimon committer state, or when the table has a streaming commit user (a Flink job's)
with no checkpoint under the roots, or whose latest commit identifier (a checkpoint id) is above
every checkpoint of it under the roots (the job's newer checkpoints or savepoint are elsewhere):
that job's uncommitted files would not be protected; and when such a user's newest checkpoint is
older than the cut-off (its checkpoints are failing, or the job stopped: nothing tells the two
apart, and a running writer's files since then are named nowhere yet).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from ckptctl import storage as st
from ckptctl.durations import OlderThan
from ckptctl.errors import CkptError, StoreUnanswered
from ckptctl.paimon.anchors import (
    WRITTEN_BY_WRITERS,
    after_commit_from,
    failing_checkpoints,
    in_flight_from,
    table_latest_commit,
    writer_anchors,
)
from ckptctl.paimon.reachable import DAY_SECONDS, all_snapshots, orphan_candidates
from ckptctl.paimon.restore import TableView, committers, forecast, held_file_names, sink_states
from ckptctl.paimon.sinkelements import END_INPUT_IDENTIFIER as END_INPUT  # a batch commit: the job ended
from ckptctl.paimon.table import PaimonTable
from ckptctl.storage.listing import PLAUSIBLE_MTIME

PLAN_KIND = "paimon-orphans"
PLAN_FORMAT = 1
# The youngest cut-off a plan takes. The files a running job writes for the checkpoint being taken
# (and a compaction's output not committed yet) are named by no completed checkpoint and no
# snapshot: only the cut-off keeps them, as Paimon's older_than does (its default is one day).
MIN_AGE = 3600.0


@dataclass
class Candidate:
    path: str  # URI
    size: int
    mtime: float | None
    reason: str  # Paimon's: unreferenced, not-a-snapshot, not-a-changelog

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size, "mtime": self.mtime, "reason": self.reason}


@dataclass
class OrphanPlan:
    table: str
    checkpoints: list[str]
    cutoff: float  # files older than this instant are candidates
    candidates: list[Candidate]
    held: list[dict[str, Any]]  # Paimon orphans a checkpoint holds: kept
    refusals: list[dict[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    s3_endpoint: str | None = None
    written_to: str | None = None
    min_age: float = MIN_AGE
    scope_uris: tuple[str, ...] = ()  # where deletion may happen: the table and its external data paths
    # what ``gc apply`` reads of a plan besides its files: no expired checkpoints, no dead jobs
    expired: tuple = ()
    dead_jobs: tuple = ()
    # Paimon orphans whose mtime is a store's stand-in (before 2016: :data:`PLAUSIBLE_MTIME`): no age,
    # so --older-than and --min-age cannot vouch for them: kept
    undated: list[dict[str, Any]] = field(default_factory=list)
    margin: float | None = None  # gc's --margin; None: gc's default
    # not older than a scanned writer's newest checkpoint less the margin: kept (see the module docstring)
    in_flight: list[dict[str, Any]] = field(default_factory=list)
    # data, changelog and index files not older than the table's latest commit less the margin: kept
    after_last_commit: list[dict[str, Any]] = field(default_factory=list)
    anchors: list[dict[str, Any]] = field(default_factory=list)  # per commit user: its newest checkpoint
    latest_commit: dict[str, Any] | None = None  # the table's newest snapshot file, its time
    # what those two rules keep from (files not older than this are kept): None when they keep
    # nothing (no scanned writer) or everything (an anchor that dates nothing): see the warnings
    in_flight_from: float | None = None
    after_commit_from: float | None = None
    # the checkpoint a restore takes (each job's newest retained) already broken: see broken_restores
    broken: list[dict[str, Any]] = field(default_factory=list)

    @property
    def options(self) -> OrphanPlan:
        return self

    def scopes(self) -> tuple[str, ...]:
        return self.scope_uris

    def relative(self, uri: str) -> str:
        return uri[len(self.table) + 1 :] if uri.startswith(self.table + "/") else uri

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": PLAN_KIND, "format": PLAN_FORMAT, "table": self.table, "checkpoints": self.checkpoints,
            "cutoff": self.cutoff, "min_age": self.min_age, "scopes": list(self.scope_uris), "blocked": bool(self.refusals),
            "refusals": self.refusals, "warnings": self.warnings, "storage": {"s3_endpoint": self.s3_endpoint},
            "candidates": [c.as_dict() for c in self.candidates], "held": self.held, "undated": self.undated,
            "margin": self.margin, "in_flight": self.in_flight, "after_last_commit": self.after_last_commit,
            "anchors": self.anchors, "latest_commit": self.latest_commit, "in_flight_from": self.in_flight_from,
            "after_commit_from": self.after_commit_from, "broken_restores": self.broken,
            "candidate_bytes": sum(c.size for c in self.candidates),
        }  # fmt: skip


def plan_orphans(
    storage, table_uri: str, checkpoint_roots: list[str], mappings, *,
    older_than: float = DAY_SECONDS, older_than_at: float | None = None, s3_endpoint: str | None = None,
    min_age: float = MIN_AGE, margin: float | None = None,
) -> OrphanPlan:  # fmt: skip
    """``min_age``: the youngest a candidate may be, whatever the cut-off says (see :data:`MIN_AGE`);
    lowered only by a user who knows no job writes the table. ``margin``: gc's ``--margin`` (``None``:
    its default), how long before a writer's newest checkpoint, or the table's latest commit, a file
    may have been written for what comes next."""
    from ckptctl.gc.options import GcOptions

    if margin is None:
        margin = GcOptions.margin
    if not (math.isfinite(margin) and margin >= 0):
        raise CkptError(f"--margin must be a finite duration, not negative, got {margin}")
    if not checkpoint_roots:
        raise CkptError("--checkpoints ROOT is required: the Flink checkpoints whose files must be kept")
    table = PaimonTable(table_uri, storage)
    now, _src = storage.now(table.uri)
    if now is None:
        raise CkptError(f"cannot tell the storage's time at {table.uri}: nothing can be judged old enough")
    cutoff = OlderThan(older_than, older_than_at).cutoff(now)
    if cutoff > now:
        # as Paimon refuses: a file written right now is named by no snapshot yet
        raise CkptError(
            f"--older-than must lie in the past of the storage's clock (now {now:.0f}, cut-off {cutoff:.0f})"
        )
    if cutoff > now - min_age:
        raise CkptError(
            f"--older-than must be at least --min-age ({min_age:g}s) before the storage's clock (now {now:.0f}, "
            f"cut-off {cutoff:.0f}): younger files may belong to the checkpoint a running job is taking, "
            "which no completed checkpoint names yet"
        )
    refusals: list[dict[str, str]] = []
    warnings: list[str] = []
    states = []
    roots = []
    loaded = []  # (checkpoint, its sink state) of every root
    for root in checkpoint_roots:
        unreadable: dict[str, str] = {}
        try:
            got, root_uri = sink_states(storage, root, mappings, unreadable)
        except StoreUnanswered:
            raise
        except CkptError as e:
            refusals.append({"code": "unreadable-checkpoints", "message": f"{root}: {e}"})
            continue
        roots.append(root_uri)
        states.extend(s for _ck, s in got)
        loaded.extend(got)
        if len(got) == 1 and got[0][0].location.uri == root_uri and got[0][0].kind != "savepoint":
            # one retained checkpoint of a job: the others retained next to it (newer ones with
            # committables not yet committed) would not be protected
            refusals.append({"code": "single-checkpoint", "message": (
                f"{root_uri} is one checkpoint, not a directory of checkpoints: the job's other retained "
                "checkpoints next to it would not be protected; name the job's checkpoint directory"
            )})  # fmt: skip
        for uri, err in unreadable.items():
            refusals.append(
                {"code": "unreadable-metadata", "message": f"{uri}: {err} (its files cannot be protected)"}
            )
    with_sink = [s for s in states if committers(s)]
    if not with_sink and not refusals:
        refusals.append({"code": "no-paimon-checkpoint", "message": (
            f"no checkpoint under {', '.join(checkpoint_roots)} holds Paimon committer state: name the directory "
            "of the job's retained checkpoints and savepoints"
        )})  # fmt: skip
    newest_of: dict[str | None, int] = {}  # commit user -> the newest checkpoint of it under the roots
    for s in with_sink:
        for op in committers(s):
            newest_of[op.commit_user] = max(newest_of.get(op.commit_user, -1), s.checkpoint_id)
    # every commit user any snapshot, tag or changelog of any branch names (a job writing to a
    # branch, or one whose snapshots expired while changelogs or tags kept its commits: a red-team
    # helper's attacks, both deleted files such a job's checkpoints still re-commit), by its
    # highest commit: a batch commit (END_INPUT) ends a job, a checkpoint id is a job that restores
    latest_of: dict[str, tuple[str, Any]] = {}
    for label, _branch, s in all_snapshots(table):
        was = latest_of.get(s.commit_user)
        if s.commit_user is not None and (was is None or s.commit_identifier > was[1].commit_identifier):
            latest_of[s.commit_user] = (label, s)
    for user, (label, latest) in sorted(latest_of.items()):
        streaming = latest.commit_identifier != END_INPUT
        if streaming and user not in newest_of:
            refusals.append({"code": "unprotected-commit-user", "message": (
                f"commit user {user} (latest commit in {label}, identifier {latest.commit_identifier}) commits "
                "from checkpoints none of which is under --checkpoints: its uncommitted files would not be "
                "protected; add its checkpoint directory"
            )})  # fmt: skip
        elif streaming and latest.commit_identifier > newest_of[user]:
            # the identifier is the checkpoint id: that checkpoint (and any newer one holding files
            # not committed yet) is somewhere the roots do not reach
            refusals.append({"code": "stale-checkpoints", "message": (
                f"commit user {user} committed checkpoint {latest.commit_identifier} ({label}), but "
                f"its newest checkpoint under --checkpoints is {newest_of[user]}: the job's newer checkpoints or "
                "savepoints are elsewhere and their uncommitted files would not be protected; add their directory"
            )})  # fmt: skip
    anchors = writer_anchors(loaded, now)
    in_flight_at = in_flight_from(anchors, margin, warnings)
    refusals.extend(failing_checkpoints(anchors, latest_of, cutoff, margin))
    latest_commit = table_latest_commit(table, now)
    after_commit_at = after_commit_from(latest_commit, margin, warnings)
    held_names = held_file_names(states)
    broken = broken_restores(loaded, table, warnings)
    candidates: list[Candidate] = []
    held: list[dict[str, Any]] = []
    undated: list[dict[str, Any]] = []
    in_flight: list[dict[str, Any]] = []
    after_last_commit: list[dict[str, Any]] = []
    for c in orphan_candidates(table, cutoff):
        name = c.uri.rpartition("/")[2]
        if name in held_names:
            held.append({"path": c.path, "size": c.size, "checkpoints": sorted(held_names[name])})
        elif c.mtime is None or not c.mtime >= PLAUSIBLE_MTIME:  # Paimon would take it: its age is unknown
            undated.append({"path": c.path, "size": c.size, "mtime": c.mtime})
        elif c.mtime >= in_flight_at:
            in_flight.append({"path": c.path, "size": c.size, "mtime": c.mtime})
        elif c.area in WRITTEN_BY_WRITERS and c.mtime >= after_commit_at:
            after_last_commit.append({"path": c.path, "size": c.size, "mtime": c.mtime})
        else:
            candidates.append(Candidate(c.uri, c.size, c.mtime, c.reason))
    layout = table.layout()
    scopes = (table.uri, *(st.normalize_uri(p.strip()) for p in layout.external_paths if p.strip()))
    return OrphanPlan(
        table.uri,
        roots,
        cutoff,
        candidates,
        held,
        refusals,
        warnings,
        s3_endpoint,
        None,
        min_age,
        scopes,
        undated=undated,
        margin=margin,
        in_flight=in_flight,
        after_last_commit=after_last_commit,
        anchors=anchors,
        latest_commit=latest_commit,
        in_flight_from=in_flight_at if math.isfinite(in_flight_at) else None,
        after_commit_from=after_commit_at if math.isfinite(after_commit_at) else None,
        broken=broken,
    )


def broken_restores(loaded, table: PaimonTable, warnings: list[str]) -> list[dict[str, Any]]:
    """Each job's newest retained checkpoint (what Flink restores after a restart) whose
    committables a restore re-commits name files already gone from the table (hazard B): a
    clean-up keeps every file a checkpoint holds, but no clean-up brings these back. One warning
    each, and the files."""
    newest: dict[str | None, tuple] = {}
    for ck, state in loaded:
        if ck.kind != "savepoint" and committers(state):
            job = ck.location.job_id
            if job not in newest or state.checkpoint_id > newest[job][1].checkpoint_id:
                newest[job] = (ck, state)
    if not newest:
        return []
    view = TableView(table)
    out = []
    for ck, state in newest.values():
        for fc in forecast(ck.location.uri, ck.kind, state, view):
            gone = [p for h in fc.hazards if h.code == "B" for p in h.files]
            if not gone:
                continue
            out.append({"checkpoint": ck.location.uri, "checkpoint_id": state.checkpoint_id,
                        "job_id": ck.location.job_id, "commit_user": fc.commit_user, "missing": gone})  # fmt: skip
            warnings.append(
                f"{ck.location.uri}, the checkpoint a restore of job {ck.location.job_id} takes, is already "
                f"broken: {len(gone)} file(s) its committables need are gone (first {gone[0]}; --json lists "
                "them): a restore from it fails with 'Cannot recover from this checkpoint'; see `ckptctl "
                "paimon` for the newest safe one"
            )
    return out


def write_plan(plan: OrphanPlan, path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(plan.to_json(), f, indent=2)
        f.write("\n")
    plan.written_to = path


def is_orphan_plan(data: Any) -> bool:
    return isinstance(data, dict) and data.get("kind") == PLAN_KIND


def validate(data: dict[str, Any], path: str | None) -> None:
    """Every field ``gc apply`` uses, type-checked: a plan is an instruction to delete files."""
    from ckptctl.gc.planfile import InvalidPlan, validate_outcome

    def check(cond: bool, what: str) -> None:
        if not cond:
            raise InvalidPlan(what, path)

    check(
        data.get("format") == PLAN_FORMAT,
        f"paimon-orphans format {data.get('format')!r} (expected {PLAN_FORMAT})",
    )
    check(isinstance(data.get("table"), str) and bool(data["table"]), "'table' is not a string")
    cks = data.get("checkpoints")
    check(isinstance(cks, list) and bool(cks) and all(isinstance(c, str) for c in cks), "'checkpoints'")
    scopes = data.get("scopes")
    check(isinstance(scopes, list) and bool(scopes) and all(isinstance(c, str) for c in scopes), "'scopes'")
    check(data["table"] in scopes, "'scopes' does not hold the table")
    cutoff = data.get("cutoff")
    check(
        isinstance(cutoff, int | float) and not isinstance(cutoff, bool) and math.isfinite(cutoff), "'cutoff'"
    )
    ma = data.get("min_age", MIN_AGE)
    check(
        isinstance(ma, int | float) and not isinstance(ma, bool) and math.isfinite(ma) and ma >= 0,
        "'min_age'",
    )
    mg = data.get("margin")
    check(mg is None or (isinstance(mg, int | float) and not isinstance(mg, bool) and math.isfinite(mg) and mg >= 0),
          "'margin'")  # fmt: skip
    validate_outcome(data, path)
    for i, c in enumerate(data["candidates"]):
        check(any(st.is_under(c["path"], s) for s in scopes), f"candidate #{i} lies outside the table")


def revalidate(storage, data: dict[str, Any], mappings=None):
    """A fresh plan with the same table, checkpoints and cut-off instant; only the candidates that
    are still candidates, with the same size and mtime, go (:mod:`ckptctl.gc.revalidation`, gc
    apply's own check). Returns (fresh plan, go, skipped)."""
    from ckptctl.checkpoint.rebase import Rebase
    from ckptctl.gc.revalidation import replanned, still_candidates, why_dropped

    fresh = replanned(
        data, lambda d: validate(d, None), lambda: plan_orphans(
            storage, data["table"], data["checkpoints"], mappings or Rebase(), older_than_at=float(data["cutoff"]),
            min_age=float(data.get("min_age", MIN_AGE)),
            margin=None if data.get("margin") is None else float(data["margin"]),
            s3_endpoint=data["storage"].get("s3_endpoint"),
        ), "ckptctl paimon orphans",
    )  # fmt: skip
    go, skipped, dropped = still_candidates(data["candidates"], fresh.candidates)
    skipped.extend(why_dropped(storage, dropped, {}, "named again, or held by a checkpoint"))
    return fresh, go, skipped
