"""Checkpoints read after discovery: those the full listing found inside a job's ``shared/`` or
``taskowned/`` (:meth:`LateCheckpoints.fold_late`), and those beside a ROOT that is a job directory
(:meth:`LateCheckpoints.fold_siblings`, :mod:`ckptctl.gc.siblings`). Both planners read them on
the driver and fold what they reference into the live set before classifying.
"""

from __future__ import annotations

from ckptctl import storage as st
from ckptctl.checkpoint.layout import (
    CheckpointLocation,
    begins_like_metadata,
    classify,
    renamed_checkpoint_dir,
)
from ckptctl.gc.folding import Folded, fold_references
from ckptctl.gc.guards import first_of
from ckptctl.gc.reasons import Refusal
from ckptctl.gc.retention import Retention
from ckptctl.gc.siblings import (
    beside,
    job_directory_roots,
    listed_beside,
    sibling_checkpoints,
    starting_beside,
    unmapped_references,
)
from ckptctl.gc.state import PlanState
from ckptctl.storage import FileInfo


class LateCheckpoints:
    """Reads the checkpoints discovery does not find and adds them to the retention and the fold."""

    def __init__(self, state: PlanState) -> None:
        self.state = state

    def fold_late(self, hidden: list[FileInfo], retention: Retention, folded: Folded) -> None:
        """``_metadata`` files of ``chk-N`` or savepoint directories that the full listing found
        inside a job's ``shared/`` or ``taskowned/``, where discovery does not look (Flink writes none there, and those directories hold millions
        of files). One is a checkpoint root below a directory that merely looks like a job (a
        32-hex tenant id with a ``shared/ckpts`` root inside): read each as a retained checkpoint,
        so whatever it references stays live; a stray file that is no ``_metadata`` blocks the plan
        as unreadable."""
        # a checkpoint or savepoint directory, by its name (chk-N, savepoint-…) or, under any other
        # name (a savepoint an operator moved there as release-42/), by its content: Flink's magic
        # number. A stray copy of a _metadata lying in shared/ or taskowned/ itself is just a file
        # there (kept as not-flink-file), and so is a file of that name that is no Flink's.
        locs = [loc for loc in (classify(st.parent(f.uri), f) for f in hidden)
                if loc.kind != "unknown" or self.renamed_checkpoint(loc)]  # fmt: skip
        if not locs:
            return
        extra = fold_references(self.state.storage, locs, {loc.uri for loc in locs}, self.state.options.rebase,
                                self.state.scopes.prefixes)  # fmt: skip
        folded.live |= extra.live
        for path, spans in extra.spans.items():
            folded.spans.setdefault(path, []).extend(spans)
        for path, ref in extra.external.items():
            folded.external.setdefault(path, ref)
        folded.info.update(extra.info)
        for code, message in extra.refusals:
            self.state.refuse(Refusal(code), message)
        retention.retained.extend(locs)
        self.state.late = [loc.uri for loc in locs]
        self.state.warnings.append(
            f"{len(locs)} _metadata files lie inside a job's shared/ or taskowned/ (first: {locs[0].uri}), where "
            "Flink writes none: read as checkpoints and kept with everything they reference. A checkpoint root "
            "below a directory named like a JobID? Scan it as its own root"
        )

    def fold_siblings(self, retention: Retention, folded: Folded) -> None:
        """A ROOT that is a job directory: the checkpoints of the job directories beside it (not
        scanned) may borrow its files, a job restored from it in CLAIM mode above all
        (:mod:`ckptctl.gc.siblings`). Read each as a retained checkpoint, so that what it
        references under the scopes stays live; its own files are not judged (nor its references
        to them: they are no external references of the plan). Refused when a sibling's
        ``_metadata`` cannot be read, or it names the ROOT's job directory somewhere no mapping
        brings under the ROOT."""
        roots = job_directory_roots(self.state.options.roots)
        parents = list(dict.fromkeys(beside(r) for r in roots))
        if None in parents:
            self.state.refuse(Refusal.SIBLING_REFERENCES, "a ROOT is a job directory at the top of its file system: the "
                        "job directories beside it, which may borrow its files, are not read. Scan the directory "
                        "holding them instead")  # fmt: skip
        locs: list[CheckpointLocation] = []
        starting: list[str] = []
        since = min((loc.metadata.mtime or 0) for loc in retention.expired) if retention.expired else None
        for parent in parents:
            if parent is None:
                continue
            files = listed_beside(self.state.storage, parent, self.state.scopes)
            here = sibling_checkpoints(self.state.storage, parent, files)
            locs += here
            if since is not None:
                starting += starting_beside(parent, files, here, since)
        if starting:
            self.state.refuse(
                Refusal.JOB_STARTING,
                f"{len(starting)} job directories beside a ROOT have fresh checkpoint files but no completed "
                f"checkpoint (first: {starting[0]}): a job restored from a checkpoint --keep-last would expire may "
                "be taking its first one. Run the plan again once it has completed a checkpoint, or without --keep-last",
            )
        if not locs:
            return
        extra = fold_references(self.state.storage, locs, {loc.uri for loc in locs}, self.state.options.rebase,
                                self.state.scopes.prefixes)  # fmt: skip
        # what they reference under the scopes (not their own _metadata, which is outside)
        borrowed = {p for p in extra.live if p.startswith(self.state.scopes.prefixes)}
        folded.live |= borrowed
        for path, spans in extra.spans.items():
            folded.spans.setdefault(path, []).extend(spans)
        folded.info.update(extra.info)
        for code, message in extra.refusals:
            # written elsewhere is no refusal here: only a sibling's references into the ROOTs
            # matter, and a name of their job directories that maps nowhere is refused below
            if code != Refusal.MOVED_DIRECTORY.value:
                self.state.refuse(Refusal(code), message)
        unmapped = unmapped_references(extra.external, roots)
        if unmapped:
            self.state.refuse(
                Refusal.SIBLING_REFERENCES,
                f"{len(unmapped)} references of checkpoints beside a ROOT that is a job directory name that job "
                f"directory at another location (first: {unmapped[0]['path']}, by {unmapped[0]['referenced_by']}): "
                "files they borrow under a name that maps to none here. Map it with --rebase, or scan "
                f"{first_of([p for p in parents if p is not None], 3)} as the ROOT",
            )
        retention.retained.extend(locs)
        self.state.siblings = [loc.uri for loc in locs]
        borrowed.update(extra.spans)
        if borrowed:
            self.state.warnings.append(
                f"{len(borrowed)} files of the ROOTs are referenced by checkpoints of the job directories beside them "
                f"(first: {min(borrowed)}; {len(locs)} checkpoints read there, e.g. {locs[0].uri}): a job restored "
                "in CLAIM mode borrows them. They are kept"
            )

    def renamed_checkpoint(self, loc: CheckpointLocation) -> bool:
        """A ``_metadata`` below a job's ``shared/`` or ``taskowned/`` in a directory of no
        checkpoint's name that begins with Flink's magic number: a checkpoint or savepoint
        directory renamed, whose references may be all that keeps its files."""
        scope, _kind = self.state.scopes.scope_of(loc.uri + "/x")
        return (scope is not None and renamed_checkpoint_dir(scope, loc.uri)
                and begins_like_metadata(self.state.storage, loc.metadata.uri, loc.metadata.size))  # fmt: skip
