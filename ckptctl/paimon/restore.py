"""What restoring a Flink checkpoint does to the Paimon table its sink commits to.

Paimon's Flink sink commits through checkpoints: the Global Committer keeps every committable not
yet committed in ``streaming_committer_raw_states`` and, on a restore, hands them all to
``TableCommitImpl.filterAndCommitMultiple``. That call keeps the committables whose identifier is
above the commit user's latest snapshot (``FileStoreCommitImpl.filterCommitted``: the walk from the
latest snapshot down stops at the first expired one), checks that every file they name still
exists, and commits them. Three things go wrong on a real table, and this module predicts each
from the checkpoint's bytes and the table's files, without a JVM:

- **A** no snapshot of the commit user survives (expired): Paimon cannot tell what was committed
  and re-commits every committable of the checkpoint, data that may already be in the table;
- **B** a file a re-commit needs is gone: the restore fails with "Cannot recover from this
  checkpoint because some files in the snapshot that need to be resubmitted have been deleted";
- **D** a file a re-commit needs is named by no snapshot, tag or changelog, so Paimon's orphan
  clean-up (which knows nothing of Flink state) deletes it once it is older than its
  ``older_than``: severe when it already is, and then the restore fails as in B (``B`` meant both
  before; it now means gone, as scripts read it);
- **C** the checkpoint is older than what the commit user already committed: nothing is
  re-committed, but the sources rewind, so the rows of the later commits are written again
  (duplicates in an append table or a summing aggregation; a deduplicating primary key absorbs them).

The files a re-commit needs are those ``TableCommitImpl.checkFilesExistence`` resolves: new,
changelog, compact-before and compact-after data files with their extra files (or external path),
and the index files of the message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ckptctl.paimon.reachable import DAY_SECONDS, listed_files, used_file_names
from ckptctl.paimon.records import ADD, Snapshot
from ckptctl.paimon.sinkelements import Committable
from ckptctl.paimon.sinkstate import RAW_STATES, OperatorSinkState, PaimonSinkState
from ckptctl.paimon.table import PaimonTable
from ckptctl.storage import FileInfo

# The data-file lists of a CommitMessage whose files Paimon checks before it re-commits.
RECOMMIT_DATA_LISTS = ("new_files", "changelog_files", "compact_before", "compact_after")
# Merge engines for which rows written twice leave the table as it was.
IDEMPOTENT_MERGE = ("deduplicate", "first-row", "partial-update")


@dataclass
class NeededFile:
    """A file a committable names: ``state`` is ``present`` (named by the table's snapshots),
    ``unreferenced`` (in the table directory, named by no snapshot/tag/changelog: an orphan to
    Paimon), or ``missing``."""

    name: str
    list: str
    state: str
    path: str | None = None  # where it is, or (missing) where Paimon looks for it: relative to the table
    size: int | None = None
    mtime: float | None = None
    checked: bool = True  # Paimon checks it exists before a re-commit

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "list": self.list, "state": self.state, "path": self.path, "size": self.size,
                "mtime": self.mtime, "checked_on_restore": self.checked}  # fmt: skip


@dataclass
class CommittableFate:
    identifier: int
    recommitted: bool  # a restore commits it (identifier above the commit user's latest snapshot)
    files: list[NeededFile]

    def to_json(self) -> dict[str, Any]:
        return {"identifier": self.identifier, "recommitted_on_restore": self.recommitted,
                "files": [f.to_json() for f in self.files]}  # fmt: skip


@dataclass
class Hazard:
    code: str  # "A", "B", "C" or "D" (see the module docstring)
    message: str
    severe: bool = True  # False: worth knowing, not a reason to stop a restore
    files: list[str] = field(default_factory=list)  # B, D: every file concerned, relative to the table

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "severe": self.severe, "files": self.files}


@dataclass
class Replay:
    """What a restore writes again: the commit user's snapshots after the checkpoint (the sources
    rewind past them), the rows they added (``deltaRecordCount``) and the bytes of their new data
    files (the delta manifests' file sizes). Compactions add no rows and are not counted."""

    snapshots: list[int] = field(default_factory=list)
    identifiers: list[int] = field(default_factory=list)
    rows: int = 0
    bytes: int = 0
    rows_known: bool = True  # False: a snapshot without deltaRecordCount and unreadable manifests

    def to_json(self) -> dict[str, Any]:
        return {"snapshots": self.snapshots, "commit_identifiers": self.identifiers, "rows": self.rows,
                "bytes": self.bytes, "rows_known": self.rows_known}  # fmt: skip


@dataclass
class RestoreForecast:
    """What restoring one checkpoint does to the table, for one Paimon committer operator."""

    checkpoint: str
    checkpoint_id: int
    kind: str
    operator_id: str | None
    commit_user: str | None
    latest: Snapshot | None  # the commit user's latest surviving snapshot
    committables: list[CommittableFate] = field(default_factory=list)
    rewound: list[Snapshot] = field(default_factory=list)  # the user's snapshots after this checkpoint
    replay: Replay = field(default_factory=Replay)  # what the rewound snapshots wrote: written again
    recommit_reason: str | None = None  # why the re-committed committables are re-committed
    tag: str | None = None  # a savepoint-<id> tag of this checkpoint
    hazards: list[Hazard] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    # the checkpoint a restore will take: the one named, or the newest checkpoint of its job
    # (what Flink restores after a restart); only these decide the exit code
    gated: bool = False
    job_id: str | None = None

    @property
    def safe(self) -> bool:
        return not any(h.severe for h in self.hazards) and not self.problems

    def to_json(self) -> dict[str, Any]:
        latest = self.latest
        return {
            "checkpoint": self.checkpoint, "checkpoint_id": self.checkpoint_id, "kind": self.kind,
            "operator_id": self.operator_id, "commit_user": self.commit_user,
            "latest_snapshot_of_user": None if latest is None else {
                "id": latest.id, "commit_identifier": latest.commit_identifier, "commit_kind": latest.commit_kind,
                "time_millis": latest.time_millis},
            "committables": [c.to_json() for c in self.committables],
            "recommitted": [c.identifier for c in self.committables if c.recommitted],
            "recommit_reason": self.recommit_reason,
            "rewound_snapshots": [{"id": s.id, "commit_identifier": s.commit_identifier} for s in self.rewound],
            "replay": self.replay.to_json(),
            "savepoint_tag": self.tag, "hazards": [h.to_json() for h in self.hazards], "problems": self.problems,
            "safe": self.safe, "gated": self.gated, "job_id": self.job_id,
        }  # fmt: skip


class TableView:
    """What the forecasts need of a table, read once: the user's snapshots, the names its
    snapshots/tags/changelogs use, the files in its bucket and index directories by name."""

    def __init__(
        self, table: PaimonTable, older_than: float = DAY_SECONDS, older_than_at: float | None = None
    ) -> None:
        self.table = table
        self.snapshots = table.snapshots()
        self.used = used_file_names(table)
        self.files: dict[str, FileInfo] = {}
        for f in listed_files(table):
            self.files.setdefault(f.uri.rpartition("/")[2], f)
        self.tags = table.tags()
        schema = table.latest_schema()
        self.primary_keys = list(schema.get("primaryKeys") or [])
        self.merge_engine = table.options().get("merge-engine", "deduplicate")
        now, _src = table.storage.now(table.uri)
        self.now = now
        # Paimon's orphan clean-up cut-off: files older than this are deleted when nothing names them
        self.older_than = (
            older_than_at if older_than_at is not None else (None if now is None else now - older_than)
        )
        self._latest: dict[str, Snapshot | None] = {}

    def replay(self, rewound: list[Snapshot]) -> Replay:
        """What the rewound snapshots wrote: rows from ``deltaRecordCount`` (or, where a snapshot
        lacks it, the row counts of the ADD entries of its delta manifests) and the bytes of those
        entries. Compactions (commit kind COMPACT) rewrite, they add nothing the sources replay."""
        from ckptctl.errors import CkptError

        r = Replay([s.id for s in rewound], sorted({s.commit_identifier for s in rewound}))
        for s in rewound:
            if s.commit_kind == "COMPACT":
                continue
            added = []
            try:
                for meta in (
                    self.table.manifests.manifest_list(s.delta_manifest_list) if s.delta_manifest_list else []
                ):
                    added += [e.file for e in self.table.manifests.manifest(meta.file_name) if e.kind == ADD]
            except CkptError:
                r.rows_known = r.rows_known and s.delta_record_count is not None
            r.bytes += sum(f.file_size for f in added)
            r.rows += (
                s.delta_record_count if s.delta_record_count is not None else sum(f.row_count for f in added)
            )
        return r

    def latest_of(self, user: str) -> Snapshot | None:
        if user not in self._latest:
            self._latest[user] = self.table.latest_snapshot_of_user(user)
        return self._latest[user]

    def file(self, name: str, list_name: str, checked: bool, where: str | None = None) -> NeededFile:
        """``where``: the path Paimon resolves the file to (its partition and bucket)."""
        f = self.files.get(name)
        if f is None:
            return NeededFile(name, list_name, "missing", where, checked=checked)
        state = "present" if name in self.used else "unreferenced"
        return NeededFile(name, list_name, state, self.table.relative(f.uri), f.size, f.mtime, checked)


def committers(state: PaimonSinkState) -> list[OperatorSinkState]:
    """The Global Committer operators (those holding ``streaming_committer_raw_states``)."""
    return [op for op in state.operators if RAW_STATES in op.states]


def named_files(c: Committable, table: PaimonTable | None = None):
    """(list name, file name, path) of every file a committable names, extra files (file indexes)
    too; the path (relative to the table, from the message's partition and bucket) when ``table``
    is given, else None."""
    for m in c.messages:
        for list_name, files in m.lists.items():
            index = list_name.endswith("index_files")
            for f in files:
                external = getattr(f, "external_path", None)
                path = None
                if table is not None:
                    path = table.file_path(m.partition.serialized, m.bucket, f.file_name, index, external)
                yield list_name, f.file_name, path
                for extra in getattr(f, "extra_files", ()):
                    name = extra.rpartition("/")[2]
                    yield (
                        list_name,
                        name,
                        None if path is None else f"{path.rpartition('/')[0]}/{name}".lstrip("/"),
                    )


def needed_files(c: Committable, view: TableView) -> list[NeededFile]:
    return [
        view.file(
            name, list_name, list_name in RECOMMIT_DATA_LISTS or list_name.endswith("index_files"), path
        )
        for list_name, name, path in named_files(c, view.table)
    ]


def forecast(
    checkpoint: str, kind: str, state: PaimonSinkState, view: TableView, operator: str | None = None
) -> list[RestoreForecast]:
    """One forecast per committer operator of ``state`` that commits to ``view``'s table."""
    ops = committers(state)
    if operator is not None:
        ops = [op for op in ops if op.operator_id == operator or op.uid == operator]
    elif len(ops) > 1:
        # several Paimon sinks in one job: the ones whose commit user this table knows
        known = {s.commit_user for s in view.snapshots}
        ops = [op for op in ops if op.commit_user in known] or ops
    return [_one(checkpoint, kind, state.checkpoint_id, op, view) for op in ops]


def _one(checkpoint: str, kind: str, ck_id: int, op: OperatorSinkState, view: TableView) -> RestoreForecast:
    user = op.commit_user
    fc = RestoreForecast(checkpoint, ck_id, kind, op.operator_id, user, None, problems=list(op.problems))
    if user is None:
        fc.problems.append("no single commit user in commit_user_state: Paimon's restore would fail")
        return fc
    latest = fc.latest = view.latest_of(user)
    tag = view.tags.get(f"savepoint-{ck_id}")
    fc.tag = tag.name if tag is not None else None
    for c in op.committables:
        again = latest is None or c.identifier > latest.commit_identifier
        fc.committables.append(CommittableFate(c.identifier, again, needed_files(c, view)))
    recommit = [c for c in fc.committables if c.recommitted]
    fc.recommit_reason = _recommit_reason(user, latest, view)
    # A: the commit user has no surviving snapshot, yet the table holds what its committables
    # wrote. (Files present but named by no snapshot were never committed: committing them again
    # is the restore doing its job. Files gone are hazard B.)
    if latest is None and fc.committables:
        in_table = [c.identifier for c in fc.committables if any(f.state == "present" for f in c.files)]
        if in_table:
            fc.hazards.append(Hazard("A", (
                f"{fc.recommit_reason}; yet the table holds the files of committables {_ids(in_table)}: "
                f"Paimon cannot tell they were committed and commits all {len(recommit)} again (a commit "
                "conflict fails the restore, or their rows are written twice)"
            )))  # fmt: skip
    # B: files a re-commit needs, gone
    missing = [f for c in recommit for f in c.files if f.checked and f.state == "missing"]
    if missing:
        fc.hazards.append(Hazard("B", (
            f"{len(missing)} file(s) that a restore must commit again are gone from the table: the restore "
            "fails with 'Cannot recover from this checkpoint'"
        ), files=[_where(f) for f in missing]))  # fmt: skip
    # D: files a re-commit needs that Paimon's orphan clean-up deletes
    at_risk = [f for c in recommit for f in c.files if f.state == "unreferenced"]
    if at_risk:
        now_old = [
            f
            for f in at_risk
            if view.older_than is not None and f.mtime is not None and f.mtime < view.older_than
        ]
        if now_old:
            fc.hazards.append(Hazard("D", (
                f"{len(now_old)} file(s) only this checkpoint holds are Paimon orphans older than the clean-up "
                "cut-off: a Paimon remove_orphan_files run now deletes them and the restore then fails (B); "
                "clean with `ckptctl paimon orphans` instead"
            ), files=[_where(f) for f in now_old]))  # fmt: skip
        else:
            fc.hazards.append(Hazard("D", (
                f"{len(at_risk)} file(s) only this checkpoint holds are named by no snapshot: a Paimon orphan "
                "clean-up deletes them once they are older than its cut-off"
            ), severe=False, files=[_where(f) for f in at_risk]))  # fmt: skip
    # C: the checkpoint is older than what the user committed
    if latest is not None and latest.commit_identifier > ck_id:
        fc.rewound = sorted(
            (s for s in view.snapshots if s.commit_user == user and ck_id < s.commit_identifier),
            key=lambda s: s.id,
        )
        fc.replay = view.replay(fc.rewound)
        absorbed = bool(view.primary_keys) and view.merge_engine in IDEMPOTENT_MERGE
        what = (
            f"primary-key table with merge-engine {view.merge_engine}: rows written again replace themselves"
            if absorbed
            else "append table: duplicates"
            if not view.primary_keys
            else f"merge-engine {view.merge_engine}: merged again"
        )
        fc.hazards.append(Hazard("C", (
            f"checkpoint {ck_id} is older than commit identifier {latest.commit_identifier} of snapshot "
            f"{latest.id}: nothing is committed again but the sources rewind, and {replay_text(fc.replay)} "
            f"are written again ({what})"
        ), severe=not absorbed))  # fmt: skip
    return fc


def replay_text(r: Replay) -> str:
    """``57 rows (4,213 bytes) of 2 committed snapshot(s) (#5-#6)``: what a rewind writes again."""
    if not r.snapshots:
        return "no committed snapshot"
    rows = f"{r.rows:,} rows" if r.rows_known else f"at least {r.rows:,} rows"
    span = f"#{r.snapshots[0]}" if len(r.snapshots) == 1 else f"#{r.snapshots[0]}-#{r.snapshots[-1]}"
    return f"{rows} ({r.bytes:,} bytes) of {len(r.snapshots)} committed snapshot(s) ({span})"


def _where(f: NeededFile) -> str:
    return f.path or f.name


def _recommit_reason(user: str, latest: Snapshot | None, view: TableView) -> str:
    """Why Paimon's ``filterCommitted`` keeps the committables it keeps."""
    if latest is not None:
        return (
            f"Paimon re-commits the committables above commit identifier {latest.commit_identifier} of "
            f"snapshot {latest.id}, the latest of commit user {user}"
        )
    if not view.snapshots:
        return (
            f"the table has no snapshot, so none of commit user {user}: Paimon's filterCommitted keeps "
            "every committable"
        )
    ids = [s.id for s in view.snapshots]
    others = sorted({s.commit_user for s in view.snapshots})
    span = f"snapshot {ids[0]}" if len(ids) == 1 else f"snapshots {min(ids)}-{max(ids)}"
    return (
        f"no snapshot of commit user {user} survives ({span}: commit user(s) "
        f"{', '.join(others[:3])}{' …' if len(others) > 3 else ''}; the user's expired): Paimon's "
        "filterCommitted finds no commit of the user, so it keeps every committable"
    )


def _ids(ids: list[int]) -> str:
    shown = ", ".join(str(i) for i in ids[:5])
    return shown + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")


def held_file_names(states: list[PaimonSinkState]) -> dict[str, list[int]]:
    """Every file name (and extra file) any committable of these checkpoints names, with the
    checkpoints that hold it: what a Paimon orphan clean must never delete."""
    held: dict[str, list[int]] = {}
    for s in states:
        for op in committers(s):
            for c in op.committables:
                for _list, name, _path in named_files(c):
                    ids = held.setdefault(name, [])
                    if s.checkpoint_id not in ids:
                        ids.append(s.checkpoint_id)
    return held


@dataclass
class PaimonReport:
    """``ckptctl paimon``: every checkpoint under a path against one table."""

    table: str
    root: str
    forecasts: list[RestoreForecast]
    without_sink: list[str]  # checkpoints holding no Paimon committer state for this table
    unreadable: dict[str, str]
    tags: list[dict[str, Any]]  # the table's savepoint-<id> tags
    users: list[dict[str, Any]]  # the table's commit users and their latest snapshot
    newest_safe: list[dict[str, Any]] = field(default_factory=list)  # per job: see :func:`newest_safe`

    @property
    def ok(self) -> bool:
        return not self.unreadable and all(f.safe for f in self.forecasts if f.gated)

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table, "root": self.root, "ok": self.ok,
            "checkpoints": [f.to_json() for f in self.forecasts], "without_paimon_sink": self.without_sink,
            "unreadable": self.unreadable, "savepoint_tags": self.tags, "commit_users": self.users,
            "newest_safe": self.newest_safe,
        }  # fmt: skip


def sink_states(storage, path: str, mappings, unreadable: dict[str, str]):
    """(loaded checkpoint, its Paimon sink state) for each checkpoint at ``path``, and the root.

    Reading the state reads bytes, so the checkpoint's files are taken where they are now (a moved
    checkpoint's inferred mapping applies): the committables are the same wherever the copy lives."""
    from ckptctl.checkpoint.targets import checkpoints_at
    from ckptctl.errors import CkptError, StoreUnanswered
    from ckptctl.paimon.sinkstate import read_sink_state

    loaded, root = checkpoints_at(storage, path, mappings, unreadable=unreadable)
    out = []
    for ck in loaded:
        try:
            out.append((ck, read_sink_state(storage, ck)))
        except StoreUnanswered:
            raise  # each next checkpoint would wait out the same deadline
        except CkptError as e:
            unreadable[ck.location.uri] = str(e)
    return out, root


def run_report(
    storage,
    path: str,
    table_uri: str,
    mappings,
    operator: str | None = None,
    older_than: float = DAY_SECONDS,
    older_than_at: float | None = None,
) -> PaimonReport:
    """Forecast a restore of every checkpoint at ``path`` (one checkpoint, or all under a root)
    against the table; ``older_than`` / ``older_than_at``: the Paimon orphan clean-up cut-off
    (an age, Paimon's default one day, or an instant) hazard B is judged against."""
    table = PaimonTable(table_uri, storage)
    view = TableView(table, older_than, older_than_at)
    unreadable: dict[str, str] = {}
    states, root = sink_states(storage, path, mappings, unreadable)
    forecasts: list[RestoreForecast] = []
    without: list[str] = []
    for ck, state in sorted(states, key=lambda p: p[1].checkpoint_id):
        got = forecast(ck.location.uri, ck.kind, state, view, operator)
        for f in got:
            f.job_id = ck.location.job_id
        if got:
            forecasts.extend(got)
        else:
            without.append(ck.location.uri)
    if len(states) == 1 and not unreadable:
        for f in forecasts:
            f.gated = True  # the one checkpoint named
    else:
        newest: dict[str | None, int] = {}
        for f in forecasts:
            if f.kind != "savepoint":
                newest[f.job_id] = max(newest.get(f.job_id, -1), f.checkpoint_id)
        for f in forecasts:
            f.gated = f.kind != "savepoint" and newest.get(f.job_id) == f.checkpoint_id
    held = {f.checkpoint_id for f in forecasts}
    tags = [
        {"name": t.name, "savepoint_id": t.savepoint_id, "snapshot": t.snapshot.id,
         "checkpoint_present": t.savepoint_id in held}
        for t in sorted(view.tags.values(), key=lambda t: t.name) if t.savepoint_id is not None
    ]  # fmt: skip
    users = []
    for user in sorted({s.commit_user for s in view.snapshots}):
        latest = view.latest_of(user)
        users.append({"commit_user": user, "latest_snapshot": None if latest is None else latest.id,
                      "commit_identifier": None if latest is None else latest.commit_identifier})  # fmt: skip
    return PaimonReport(table.uri, root, forecasts, without, unreadable, tags, users, newest_safe(forecasts))


def newest_safe(forecasts: list[RestoreForecast]) -> list[dict[str, Any]]:
    """Per job (and committer), the newest checkpoint or savepoint an operator can restore: the
    newest ``safe`` one, else (``safe`` false) the newest whose only hazard is C, the rows it
    writes again being its price; what restoring it replays. A job with neither: ``checkpoint``
    None."""
    jobs: dict[tuple, list[RestoreForecast]] = {}
    for f in forecasts:
        jobs.setdefault((f.job_id, f.operator_id), []).append(f)
    out = []
    for (job, op), fs in jobs.items():
        fs = sorted(fs, key=lambda f: f.checkpoint_id, reverse=True)
        only_c = [f for f in fs if not f.problems and all(h.code == "C" for h in f.hazards if h.severe)]
        pick = next((f for f in fs if f.safe), None) or next(iter(only_c), None)
        gated = next((f for f in fs if f.gated), None)
        out.append({
            "job_id": job, "operator_id": op,
            "checkpoint": None if pick is None else pick.checkpoint,
            "checkpoint_id": None if pick is None else pick.checkpoint_id,
            "safe": pick is not None and pick.safe,
            "is_the_restored": pick is not None and pick is gated,
            "recommits": [] if pick is None else [c.identifier for c in pick.committables if c.recommitted],
            "replay": None if pick is None else pick.replay.to_json(),
        })  # fmt: skip
    return out
