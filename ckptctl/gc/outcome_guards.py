"""The checks that block a plan on its per-file outcome as a whole: files retained checkpoints
reference that are missing (FLINK-39964's relative names recognised), a job starting up beside
checkpoints about to expire, a ``_metadata`` being written, and the blast-radius caps.

The conclusion of both planners (:class:`ckptctl.gc.conclusion.Conclusion`) asks them once the
files are decided; the checks on what was listed, before that, are :mod:`ckptctl.gc.guards`.
Like those, a part holding the run's :class:`~ckptctl.gc.state.PlanState`: it reads its
``storage``, ``options``, ``scopes`` and ``notes``, adds to its ``warnings`` and refuses through
its ``refuse``.
"""

from __future__ import annotations

from typing import Any

from ckptctl import storage as st
from ckptctl.checkpoint.layout import CHK_RE, place_of
from ckptctl.checkpoint.loading import load_checkpoint
from ckptctl.checkpoint.refs import referenced_files
from ckptctl.errors import CkptError, StoreUnanswered
from ckptctl.gc.contexts import DirContexts
from ckptctl.gc.guards import first_of
from ckptctl.gc.reasons import Reason, Refusal
from ckptctl.gc.retention import Retention
from ckptctl.gc.state import PlanState


class OutcomeGuards:
    """The planner's refusals that look at the decided files as a whole."""

    def __init__(self, state: PlanState) -> None:
        self.state = state

    def missing_files(
        self, missing_paths: set[str], retention: Retention, savepoint_files
    ) -> tuple[list[dict[str, Any]], set[str]]:
        """Files retained checkpoints reference under the scanned roots that are not there.

        Such a checkpoint is already broken, or the references are mapped wrongly (a renamed job
        directory, a wrong ``--rebase``): in the second case the files they really mean look
        unreferenced. Either way nothing may be deleted until a human has looked, unless every
        such checkpoint is named with ``--accept-lost``.

        One known case is recognised: after a CLAIM restore from a native savepoint, Flink up to
        1.20.3/2.1.3/2.3.0 writes the savepoint's SSTs into the new checkpoints as relative names
        (FLINK-39964), which resolve inside ``chk-N/``. A missing ``chk-N/<name>`` whose name and
        recorded size are a file of a savepoint directory in scope is that file: it is live (also
        when the savepoint's ``_metadata`` is gone: these may be the only copy of the state), and
        the plan says to run ``ckptctl repair``. Returns (missing, savepoint files made live).
        ``savepoint_files(names)``: the listed files inside savepoint directories with those names
        (a :class:`~ckptctl.checkpoint.flink39964.SavepointFiles`, the index ``verify`` and ``repair`` look in).
        """
        if not missing_paths:
            return [], set()
        by_path: dict[str, list[str]] = {p: [] for p in missing_paths}
        sizes: dict[str, int] = {}
        rebase = self.state.options.rebase
        for loc in retention.retained:
            try:
                ck = load_checkpoint(self.state.storage, loc, rebase, apply_inferred=False)
            except StoreUnanswered:
                raise  # each next checkpoint would wait out the same deadline
            except CkptError:
                continue  # already a refusal
            for path, _scope, _offset, size in referenced_files(ck):
                if path in by_path and loc.uri not in by_path[path]:
                    by_path[path].append(loc.uri)
                    sizes[path] = size
        in_savepoints = savepoint_files({st.basename(p) for p in by_path})
        misanchored: dict[str, str] = {}
        also_live: set[str] = set()  # every savepoint file it may be (never guess which copy)
        for path in list(by_path):
            size = sizes.get(path)  # None: no retained checkpoint names it (a segment's file, an alias)
            found = (
                in_savepoints.lookup(st.basename(path), size)
                if size is not None and place_of_chk(path)
                else []
            )
            if found:
                misanchored[path] = found[0]
                also_live.update(found)
        if misanchored:
            cks = sorted({c for p in misanchored for c in by_path.pop(p)})
            first = min(misanchored)  # the same on every run (sets follow the hash seed)
            self.state.warnings.append(
                f"{len(cks)} retained checkpoints reference {len(misanchored)} savepoint files by relative names "
                f"that resolve inside their own directory (FLINK-39964: a CLAIM restore from a native savepoint), "
                f"e.g. {first} is {misanchored[first]}. Flink cannot restore them as they are: run `ckptctl repair` "
                f"on {', '.join(cks[:3])}{' ...' if len(cks) > 3 else ''}. The savepoint files are kept."
            )
        if not by_path:
            return [], also_live
        missing = [{"path": p, "checkpoints": cks} for p, cks in sorted(by_path.items())]
        broken = sorted({c for m in missing for c in m["checkpoints"]})
        not_accepted = [c for c in broken if c not in self.state.options.accept_lost]
        first = missing[0]["path"]
        if not_accepted:
            self.state.refuse(
                Refusal.MISSING_LIVE_FILES,
                f"{len(missing)} files referenced by retained checkpoints are missing (first: {first}), in "
                f"{len(broken)} checkpoints: {', '.join(not_accepted[:5])}{' ...' if len(not_accepted) > 5 else ''}. "
                "A wrong --rebase or a renamed directory makes the files they mean look unreferenced. "
                + (
                    "Files missing directly in chk-N/ may be a native savepoint's, after a CLAIM restore "
                    "(FLINK-39964): pass that savepoint's directory with --savepoints. "
                    if any(place_of_chk(m["path"]) for m in missing)
                    else ""
                )
                + "Run `ckptctl verify` on them; if they are lost for good, name each with --accept-lost to go on",
            )
        else:
            self.state.warnings.append(
                f"{len(missing)} files referenced by checkpoints accepted as lost (--accept-lost) are missing "
                f"(first: {first})"
            )
        return missing, also_live

    def check_no_job_starting(self, contexts: DirContexts, kept_paths_since, retention: Retention,
                              cutoff: float) -> None:  # fmt: skip
        """A job directory with fresh files but no completed checkpoint is a job starting up: it may
        have been restored (CLAIM or NO_CLAIM) from a checkpoint ``--keep-last`` is about to expire,
        and its first checkpoint will reference that checkpoint's files. Nothing can be expired then.

        Files are not the only sign: right after the restore the job has created its empty
        ``shared/`` and ``taskowned/`` directories (or, on S3A, their directory markers) and
        uploaded nothing yet. A directory of a job without a retained checkpoint that changed after
        the oldest expiring ``_metadata`` was written is such a sign too.

        ``kept_paths_since(t)``: the protected files without an mtime or modified at ``t`` or later
        (one per directory and kind, file or directory marker, is enough)."""
        job_of = {id(stats): job for job, stats in contexts.job_stats.items()}
        since = min((loc.metadata.mtime or 0) for loc in retention.expired)
        young = max(since, cutoff)  # a restored run's checkpoint in progress: see _behind
        behind_of = self._behind(retention)
        starting, behind = set(), set()
        for path in kept_paths_since(since):
            # any kept file (young, of a dead job, not yet Flink's by evidence, a directory marker)
            # of a job without a retained checkpoint, written after the oldest expiring _metadata
            job = job_of.get(id(contexts.get(path.rpartition("/")[0])[4]))
            if job is None and path.endswith("/"):
                job = place_of(self.state.scopes.scope_of(path)[0] or "", path.rstrip("/")).job
            if job is not None and job not in retention.newest_retained:
                starting.add(job)
        for path in kept_paths_since(young):  # the kept files carry no mtime here: asked again
            directory = path.rstrip("/") if path.endswith("/") else st.parent(path)
            behind.add(behind_of(place_of(self.state.scopes.scope_of(path)[0] or "", directory)))
        for notes in self.state.notes.values():
            for directory, mtime in notes.dirs.items():
                if mtime < since:
                    continue
                scope, kind = self.state.scopes.scope_of(directory)
                if kind != "root":
                    continue
                place = place_of(scope, directory)
                if (
                    place.area in ("shared", "taskowned", "chk")
                    and place.job not in retention.newest_retained
                ):
                    starting.add(place.job)
                if mtime >= young:
                    behind.add(behind_of(place))
        behind.discard(None)
        if starting:
            first = sorted(starting)[0]
            self.state.refuse(
                Refusal.JOB_STARTING,
                f"{len(starting)} job directories have fresh files or directories but no completed checkpoint "
                f"(first: {first}): a job starting up may restore from a checkpoint --keep-last would expire. "
                "Run the plan again once it has completed a checkpoint, or without --keep-last",
            )
        if behind:
            first = sorted(behind)[0]
            self.state.refuse(
                Refusal.JOB_STARTING,
                f"{len(behind)} checkpoints in progress are numbered below a completed one of their job (first: "
                f"{first}): a run restored from an older checkpoint under the same job id (application mode with "
                "HA gives every deployment of a cluster id the same id) is taking its first checkpoint, and "
                "--keep-last would expire what it restored from. Run the plan again once that checkpoint has "
                "completed, or without --keep-last (a leftover of an aborted checkpoint stops counting once older "
                "than --older-than)",
            )

    @staticmethod
    def _behind(retention: Retention):
        """A function of a place giving its ``chk-N`` directory when that is a checkpoint in
        progress (no ``_metadata``) of a job --keep-last expires checkpoints of, numbered below the
        job's newest completed checkpoint, else ``None``. Flink numbers a restored run's checkpoints
        on from the one it restored, so its first checkpoint lands below the newest when it restored
        an older one into the same job directory (a fixed job id). Asked of young places only (the
        cut-off at the earliest): a leftover of an aborted checkpoint of the run before is older, or
        a candidate, once --older-than has passed. Before the restored run starts its first
        checkpoint nothing in its job directory shows it: that stays unseen."""
        newest: dict[str, int] = {}
        complete: set[str] = set()
        for loc in (*retention.retained, *retention.expired):
            if loc.kind == "checkpoint" and loc.dir_checkpoint_id is not None:
                job = st.parent(loc.uri)
                newest[job] = max(newest.get(job, 0), loc.dir_checkpoint_id)
                complete.add(loc.uri)
        expiring = {st.parent(loc.uri) for loc in retention.expired}

        def behind_of(place) -> str | None:
            if place.area != "chk" or place.job not in expiring or place.chk in complete:
                return None
            m = CHK_RE.match(st.basename(place.chk))
            return place.chk if m is not None and int(m.group(1)) < newest.get(place.job, 0) else None

        return behind_of

    def check_no_metadata_being_written(self, metadata_being_written, cutoff: float) -> None:
        """A ``chk-N/._metadata.inprogress.<uuid>`` younger than the cut-off is a checkpoint
        completing now (:data:`ckptctl.checkpoint.layout.METADATA_IN_PROGRESS`): its ``_metadata`` will name
        files no ``_metadata`` names yet -- its own, shared files it uploaded, perhaps files only
        an expired checkpoint names -- and a checkpoint that started while an older one was
        still running can have written them before the newest ``_metadata`` minus ``--margin``.
        What it references cannot be known before the rename: nothing is deleted. An older one
        is a crashed write's leftover (Flink never finished it) and is ignored."""
        n, first = metadata_being_written(cutoff)
        if n:
            self.state.refuse(
                Refusal.METADATA_BEING_WRITTEN,
                f"{n} checkpoints are completing: Flink is writing their _metadata (first: {first}). Run the plan "
                "again when it has landed; a leftover of a crashed write is ignored once older than --older-than",
            )

    def caps(self, contexts: DirContexts, n_candidates: int, candidate_bytes: int, total_files: int, total_bytes: int,
             retention: Retention) -> list[dict]:  # fmt: skip
        """Blast-radius caps (global and per living job) and the list of dead jobs."""
        options = self.state.options
        limit = options.max_delete_fraction
        dead: list[dict[str, Any]] = []
        for job, (files, size, cand_files, cand_bytes) in sorted(contexts.job_stats.items()):
            if job not in retention.newest_retained:
                verdict = contexts.dead_verdicts.get(job, Reason.NOT_FLINK_FILE)
                # an active job is no dead one: its files are kept whatever the options say
                if verdict not in (Reason.NOT_FLINK_FILE, Reason.JOB_ACTIVE) and files:
                    dead.append({"job": job, "files": files, "bytes": size, "collected": verdict is None,
                                 "evidence": contexts.evidence.of(job) or "named as ROOT",
                                 "candidate_files": cand_files, "candidate_bytes": cand_bytes})  # fmt: skip
                continue
            share = max(cand_files / max(files, 1), cand_bytes / max(size, 1))
            if n_candidates and not options.force and share > limit:
                self.state.refuse(
                    Refusal.DELETE_FRACTION,
                    f"the plan deletes {cand_files / max(files, 1):.0%} of the files and {cand_bytes / max(size, 1):.0%} "
                    f"of the bytes of job {job}, more than --max-delete-fraction {limit:.0%}; review it, then run "
                    "`ckptctl gc plan` again with --force (or a higher --max-delete-fraction)",
                )
        collected = [d for d in dead if d["collected"] and d["candidate_files"]]
        if collected:
            self.state.warnings.append(
                f"{len(collected)} jobs have no retained checkpoint and all their old files are candidates "
                f"({_first_names(collected)}): if another job was restored from one of them in CLAIM mode "
                "and writes its checkpoints elsewhere, scan that root in the same plan, or it loses the files it borrows"
            )
        kept = [d for d in dead if not d["collected"]]
        if kept:
            self.state.warnings.append(
                f"{len(kept)} jobs have no retained checkpoint; their files are kept ({_first_names(kept)}): "
                "a job restored from one of them in CLAIM mode elsewhere may "
                "still borrow them. Scan that job's root in the same plan, then pass --collect-dead-jobs (or name "
                "the job directory as ROOT) to collect them"
            )
        if n_candidates and not options.force:
            files_share = n_candidates / max(total_files, 1)
            bytes_share = candidate_bytes / max(total_bytes, 1)
            if max(files_share, bytes_share) > limit:
                self.state.refuse(
                    Refusal.DELETE_FRACTION,
                    f"the plan deletes {files_share:.0%} of the files and {bytes_share:.0%} of the bytes, more than "
                    f"--max-delete-fraction {limit:.0%}; review it, then run `ckptctl gc plan` again with --force",
                )
        return dead


def _first_names(jobs: list[dict[str, Any]], n: int = 5) -> str:
    """The first ``n`` job ids of a dead-jobs list, '...' when there are more."""
    return first_of([st.basename(d["job"]) for d in jobs], n)


def place_of_chk(path: str) -> bool:
    """True if ``path`` lies directly in a ``chk-N`` directory (where relative names resolve)."""
    return CHK_RE.match(st.basename(st.parent(path))) is not None
