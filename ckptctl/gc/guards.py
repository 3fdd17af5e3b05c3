"""The checks that block a plan or refuse to make one on what was listed, before files are decided.

Each one fails closed on something the per-file rule cannot see: a ROOT that holds nothing,
checkpoints completing while the roots are listed, a directory reached under two names, other
mounts below the roots. Those on the decided files as a whole (missing live files, a job starting
up, the blast-radius caps) are :mod:`ckptctl.gc.outcome_guards`. Kept apart from the orchestration
(:mod:`ckptctl.gc.plan`) so that what may block a plan is read in two places, by when it is known.

A part of both planners (:class:`ckptctl.gc.plan.LocalPlanner` and the Spark one, which calls these
same methods with its own listings): it reads the run's ``storage``, ``options``, ``scopes``,
``notes`` and ``inventory`` (:class:`~ckptctl.gc.state.PlanState`), adds to its ``warnings`` and
refuses through its ``refuse``.
"""

from __future__ import annotations

from ckptctl import storage as st
from ckptctl.checkpoint.layout import below_job_area, flink_area_subdir, is_checkpoint_metadata
from ckptctl.errors import CkptError
from ckptctl.gc.mounts import OtherMounts
from ckptctl.gc.reasons import Refusal
from ckptctl.gc.retention import Retention
from ckptctl.gc.state import PlanState
from ckptctl.storage import FileInfo


class Guards:
    """The planner's refusals that look at more than one file at a time."""

    def __init__(self, state: PlanState) -> None:
        self.state = state

    def check_listed(self, root: str, has_files: bool) -> None:
        """A ROOT must hold something, as for ``ls`` and ``check``: directories or aliases (refused
        later) mean it is not empty."""
        walked = self.state.notes[root]
        if root in self.state.options.roots and not has_files and not walked.aliases and not walked.dirs:
            if self.state.inventory is not None:
                raise CkptError(f"the inventory {self.state.options.inventory} has no object under this ROOT: nothing to "
                                "collect (a report of another prefix?)", path=root)  # fmt: skip
            raise CkptError("no such directory (or it is empty): nothing to collect", path=root)

    def check_checkpoints_unchanged(self, discovered, listings, report_dirs=()) -> list[FileInfo]:
        """The set of ``_metadata`` files must be the same in discovery, in the full listing and in
        a second pruned listing made after it: otherwise a checkpoint completed (or was
        discarded) while we looked, and the live set may already be stale. Returns those inside
        jobs' ``shared/`` and ``taskowned/``, where discovery does not look (:meth:`~ckptctl.gc.late.LateCheckpoints.fold_late`
        reads them); with ``--inventory`` as they are now (:meth:`hidden_metadata_now`:
        ``report_dirs``, (scope, directory) of every directory the report has files in)."""
        in_listing: set[str] = set()
        hidden: list[FileInfo] = []
        for root, files in listings:
            for f in files:
                uri = f.uri
                if uri.endswith("/_metadata"):
                    if is_checkpoint_metadata(root, uri):
                        in_listing.add(uri[: -len("/_metadata")])
                    else:
                        hidden.append(f)
        after: set[str] = set()
        for root in self.state.scopes.listed:
            for f in self.state.storage.find_metadata(root):
                if is_checkpoint_metadata(root, f.uri):
                    after.add(f.uri[: -len("/_metadata")])
        known = set(discovered) - {st.parent(f.uri) for f in hidden}  # the searched part only
        # with --inventory the report is older than discovery: checkpoints completed or subsumed
        # since differ from it by design, so discovery and the fresh listing must agree
        changed = (
            (after ^ known)
            if self.state.inventory is not None
            else (in_listing ^ known) | (after ^ in_listing)
        )
        if changed:
            first = sorted(changed)[0]
            self.state.refuse(
                Refusal.CHECKPOINTS_CHANGED,
                f"checkpoints completed or disappeared while the roots were scanned ({len(changed)} changed, "
                f"first: {first}): a job is running here; run the plan again",
            )
        if self.state.inventory is not None:
            return self.hidden_metadata_now(hidden, report_dirs)
        return hidden

    def hidden_metadata_now(self, hidden: list[FileInfo], report_dirs) -> list[FileInfo]:
        """With ``--inventory`` the only listing of jobs' ``shared/`` and ``taskowned/`` is the
        report: a ``_metadata`` written there after it began (the next checkpoint of a root below a
        tenant directory named like a job, a savepoint copied in as ``release-42/``) is in no
        listing, while the files it alone references, uploaded before, are in the report and old
        (a red-team helper's attack: gc deleted them). So look now, at a cost in directories, not
        files: a HEAD of ``<dir>/_metadata`` for every directory below those areas the report has
        files in (but Flink's own ForSt and file-merging directories), and a fresh pruned walk of
        the directory holding each checkpoint found there (its next ``chk-N`` may hold nothing but
        its ``_metadata``); never of an area itself. Returns the report's hidden ``_metadata`` and
        those found now (one the report lists that is gone since is still returned: reading it
        fails, which blocks the plan, as it did before)."""
        from concurrent.futures import ThreadPoolExecutor

        checkpoint_dirs = {st.parent(f.uri): self.state.scopes.scope_of(f.uri)[0] for f in hidden}
        probe = sorted({(scope, d) for scope, d in report_dirs if d not in checkpoint_dirs
                        and below_job_area(scope, d) and not flink_area_subdir(scope, d)})  # fmt: skip
        with ThreadPoolExecutor(32) as pool:
            heads = list(
                pool.map(lambda sd: self.state.storage.stat(sd[1] + "/_metadata", fresh=True), probe)
            )
        now = {f.uri: f for f in hidden}
        for (scope, d), f in zip(probe, heads, strict=True):
            if f is not None:
                now[f.uri] = f
                checkpoint_dirs[d] = scope
        walked = {(scope, st.parent(d)) for d, scope in checkpoint_dirs.items() if scope is not None}
        for scope, parent in sorted(walked):
            if not below_job_area(scope, parent):
                continue  # an area itself (millions of files): only its subdirectories were asked
            for f in self.state.storage.find_metadata(parent):  # discovery's walk: nested areas pruned
                now.setdefault(f.uri, f)
        return sorted(now.values(), key=lambda f: f.uri)

    def check_no_aliases(self) -> None:
        """The same directory reached under two names (a second mount of the volume inside a root,
        a symlink back into it) makes every live file also an "unreferenced" file under the other
        name: refuse. Directory symlinks to elsewhere (a ``chk-N`` moved to another volume) are
        followed, their files kept as links; say so."""
        aliases = [a for notes in self.state.notes.values() for a in notes.aliases]
        if aliases:
            uri, first = aliases[0]
            self.state.refuse(
                Refusal.ALIASED_PATH,
                f"{len(aliases)} directories are reachable under two names (first: {uri} is {first}): a bind "
                "mount or a symlink makes one file look both live and unreferenced. Remove the alias, or scan "
                "the real location only",
            )
        followed = [f for notes in self.state.notes.values() for f in notes.followed]
        if followed:
            link, target = followed[0]
            self.state.warnings.append(
                f"{len(followed)} directory symlinks were followed (first: {link} -> {target}); the files below "
                "them are read and kept, never deleted through a link"
            )

    def check_mounts(self, retention: Retention) -> None:
        """Other mounts below the roots fail closed (:mod:`ckptctl.gc.mounts`): the files of one no
        scope names are kept (the contexts say ``other-mount``); a checkpoint found below a mount
        in a job's ``shared/`` or ``taskowned/`` is a mounted copy of a job directory, and one
        ``--keep-last`` would expire below an unnamed mount could not go as a unit (its
        ``_metadata`` is kept there): both refuse the plan."""
        mounts = OtherMounts(self.state.scopes, self.state.notes)
        if not mounts:
            return
        locs = [*retention.retained, *retention.expired]
        inside = sorted((loc.uri, m) for loc in locs if (m := mounts.in_job_area_of(loc.uri)) is not None)
        if inside:
            self.state.refuse(
                Refusal.OTHER_MOUNT,
                f"{len(inside)} checkpoints lie below a mount inside a job's shared/ or taskowned/ (first: {inside[0][0]} "
                f"on the mount {inside[0][1]}), where Flink writes none: a second mount of a job's directory makes "
                "its files look unreferenced under their other name. Unmount it, or scan the real location only",
            )
        expiring = sorted(loc.uri for loc in retention.expired if mounts.unnamed_of(loc.uri) is not None)
        if expiring:
            self.state.refuse(
                Refusal.OTHER_MOUNT,
                f"{len(expiring)} checkpoints --keep-last would expire lie on another mount below the roots (first: "
                f"{expiring[0]}), whose files are kept: they cannot be expired as a unit. Name the mount as a ROOT "
                "if it is a volume of its own, or run without --keep-last",
            )
        unnamed = mounts.unnamed()
        if unnamed:
            self.state.warnings.append(
                f"{len(unnamed)} directories below the roots are other mounts (first: {unnamed[0]}); their files are "
                "kept (other-mount): a second mount of the same storage names the same files again. If one is a "
                "volume of its own, name it as a ROOT to collect there"
            )


def first_of(names: list[str], n: int) -> str:
    """The first ``n`` of ``names`` for a message, '...' when there are more."""
    return ", ".join(names[:n]) + (" ..." if len(names) > n else "")
