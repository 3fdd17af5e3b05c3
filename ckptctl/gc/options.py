"""What a gc run is asked to do, checked before anything is listed."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, fields, replace

from ckptctl import storage as st
from ckptctl.checkpoint.rebase import Rebase
from ckptctl.errors import CkptError

CLOCKS = ("storage", "local")


@dataclass(frozen=True)
class GcOptions:
    roots: tuple[str, ...]
    savepoint_dirs: tuple[str, ...] = ()
    changelog_dirs: tuple[str, ...] = ()
    keep_last: int | None = None
    older_than: float = 24 * 3600.0
    margin: float = 3600.0
    max_delete_fraction: float = 0.5
    force: bool = False
    allow_external: bool = False
    rebase: Rebase = Rebase()  # --rebase, one value wherever it goes (plan files keep Rebase.to_json)
    accept_lost: tuple[str, ...] = ()  # checkpoints whose missing files the user accepts as lost
    clock: str = "storage"  # "storage": the object store's Date header; "local": this machine
    # jobs without a retained checkpoint (a CLAIM job elsewhere may borrow their files): kept
    # unless collected explicitly, or named as a ROOT
    collect_dead_jobs: bool = False
    # changelog (DSTL) files under a fixed job id (layout.fixed_job_id): kept, since another
    # deployment of that id whose checkpoints are not scanned may write the same changelog dir,
    # unless the user says every such deployment is scanned
    collect_fixed_id_changelog: bool = False
    # --older-than as an instant (ISO time): the cut-off itself, on no machine's clock
    older_than_at: float | None = None
    # an S3 Inventory manifest (manifest.json) that stands in for the listing of the roots' files;
    # its creation time and row count are recorded by the plan, so apply reads the same report
    inventory: str | None = None
    inventory_created: float | None = None
    inventory_rows: int | None = None

    def normalized(self) -> GcOptions:
        for what, values in (("ROOT", self.roots), ("--savepoints", self.savepoint_dirs),
                             ("--changelog-dir", self.changelog_dirs), ("--accept-lost", self.accept_lost)):  # fmt: skip
            for value in values:
                st.check_user_path(what, value)
        if not isinstance(self.rebase, Rebase):
            raise TypeError(f"GcOptions.rebase must be a Rebase, got {type(self.rebase).__name__}")
        for old, new in self.rebase.mappings:
            st.check_user_path("--rebase", old)
            st.check_user_path("--rebase", new)
        if self.inventory is not None:
            st.check_user_path("--inventory", self.inventory)

        def norm(xs):
            return tuple(dict.fromkeys(st.normalize_uri(x) for x in xs))

        return replace(
            self,
            roots=norm(self.roots),
            savepoint_dirs=norm(self.savepoint_dirs),
            changelog_dirs=norm(self.changelog_dirs),
            rebase=Rebase.of(self.rebase.mappings),
            accept_lost=tuple(
                st.parent(u) if st.basename(u) == "_metadata" else u for u in norm(self.accept_lost)
            ),
            inventory=None if self.inventory is None else st.normalize_uri(self.inventory),
        )

    def to_json(self) -> dict:
        """The plan file's ``options`` (read back by :func:`ckptctl.gc.planfile.options_from_plan`)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["rebase"] = self.rebase.to_json()
        return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}

    def validate(self) -> None:
        if not self.roots:
            raise CkptError("gc needs at least one ROOT")
        for root in self.roots:
            if root.rstrip("/") in ("file:", "s3:"):
                # `gc "$UNSET/"`: a variable that was empty must not make the whole disk a root
                raise CkptError(
                    f"refusing the filesystem root as a ROOT ({root}): name a checkpoint directory"
                )
        if self.keep_last is not None and (isinstance(self.keep_last, bool) or self.keep_last < 1):
            raise CkptError("--keep-last must be at least 1")
        if self.older_than_at is not None and not math.isfinite(self.older_than_at):
            raise CkptError(f"--older-than must be a finite time, got {self.older_than_at}")
        for name, value in (("--older-than", self.older_than), ("--margin", self.margin)):
            if not math.isfinite(value):
                raise CkptError(f"{name} must be a finite duration, got {value}")
            if value < 0:
                raise CkptError(
                    f"{name} must not be negative: a cutoff in the future would make every file eligible"
                )
        if not (math.isfinite(self.max_delete_fraction) and 0 < self.max_delete_fraction <= 1):
            raise CkptError("--max-delete-fraction must be in (0, 1]")
        if self.clock not in CLOCKS:
            raise CkptError(f"--clock must be one of {', '.join(CLOCKS)}")
        if self.inventory is not None:
            local = [s for s in self.scopes() if st.scheme_of(s) != "s3"]
            if local:
                raise CkptError(
                    f"--inventory is an S3 Inventory of a bucket: {local[0]} is not on S3 (list it instead)"
                )
            buckets = sorted({s[5:].split("/")[0] for s in self.scopes()})
            if len(buckets) > 1:
                raise CkptError(f"--inventory covers one bucket; the scopes lie in {', '.join(buckets)}")
            if self.keep_last is not None:
                # expiring checkpoints needs the job-starting guard, which looks for fresh files of jobs
                # without a checkpoint: a job restored after the report began is invisible to it
                raise CkptError(
                    "--keep-last cannot be used with --inventory (a job started after the report is "
                    "invisible to it): plan --keep-last from a listing"
                )

    def overlaps(self) -> list[str]:
        """Scopes that nest in a way that would classify one area by the rules of another.

        A changelog directory holding a root or a savepoint directory would make ``_metadata`` and
        SSTs "unreferenced changelog files"; a savepoint directory holding a root would protect or
        misfile its jobs. (A changelog or savepoint directory strictly inside a root is fine: the
        more specific scope decides for its files.)
        """
        problems = []
        for c in self.changelog_dirs:
            for kind, others in (("root", self.roots), ("--savepoints dir", self.savepoint_dirs)):
                for o in others:
                    if st.is_under(o, c):
                        problems.append(f"--changelog-dir {c} contains the {kind} {o}")
        for s in self.savepoint_dirs:
            for r in self.roots:
                if st.is_under(r, s):
                    problems.append(f"--savepoints {s} contains the root {r}")
        # the same directory under two names (a symbolic link) would be listed twice, and the
        # spelling the _metadata does not use would look unreferenced
        real = {}
        for scope in self.scopes():
            if st.scheme_of(scope) == "file":
                real.setdefault(os.path.realpath(scope[5:]), []).append(scope)
        resolved = list(real.items())
        for names in real.values():
            if len(names) > 1 and not all(
                st.is_under(n, names[0]) or st.is_under(names[0], n) for n in names
            ):
                problems.append(f"{names[0]} and {names[1]} are the same directory through a symbolic link")
        for i, (a, names_a) in enumerate(resolved):
            for b, names_b in resolved[i + 1 :]:
                if a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/"):
                    na, nb = names_a[0], names_b[0]
                    if not (st.is_under(na, nb) or st.is_under(nb, na)):
                        problems.append(f"{na} and {nb} are the same directory tree through a symbolic link")
        return problems

    def scopes(self) -> tuple[str, ...]:
        return self.roots + self.savepoint_dirs + self.changelog_dirs
