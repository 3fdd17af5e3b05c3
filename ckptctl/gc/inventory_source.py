"""``gc plan --inventory``: an S3 Inventory report stands in for the listing of the roots' files.

A report lists a bucket of 10^8 objects for the price of reading a few Parquet or CSV files, but
it is old: hours to days. What it stands in for is the full listing only. Discovery of the
``_metadata`` files stays a fresh walk, the report read must be the one a plan was made from
when that plan is re-validated, live files missing from it are looked up one by one (written
since), and the ``_metadata`` files are listed again once the plan is built: a checkpoint
completing meanwhile blocks the plan.

A part of both planners (:class:`ckptctl.gc.plan.LocalPlanner` and the Spark one, which calls
:meth:`InventorySource.record_inventory` from its executors' counts): it reads and sets the run's
``storage``, ``options``, ``scopes``, ``inventory``, ``inventory_record``, ``metadata_seen`` and
``warnings`` (:class:`~ckptctl.gc.state.PlanState`), and refuses through its ``refuse``.
"""

from __future__ import annotations

import time
from dataclasses import replace

from ckptctl.gc.reasons import Refusal
from ckptctl.gc.state import PlanState
from ckptctl.storage import FileInfo


class InventorySource:
    """The planner's steps that read, check and record the S3 Inventory report."""

    def __init__(self, state: PlanState) -> None:
        self.state = state

    def open_inventory(self, latest: float) -> None:
        """Read the manifest; it must be of the roots' bucket and, when re-validating a plan, the
        very report the plan was made from (same creation time, same number of rows). No time it
        gives (its creation, its rows' mtimes) may be later than ``latest``: the storage clock
        plus the tolerance any mtime has."""
        from ckptctl.inventory.manifest import read_manifest
        from ckptctl.inventory.report import InventoryError

        options = self.state.options
        inv = read_manifest(self.state.storage, options.inventory, latest=latest)
        bucket = options.roots[0][5:].split("/")[0]
        if inv.source_bucket != bucket:
            raise InventoryError(
                f"the inventory is of bucket {inv.source_bucket!r}, the roots are in {bucket!r}", path=inv.uri
            )
        if options.inventory_created is not None and options.inventory_created != inv.created:
            raise InventoryError(
                f"the inventory was created at {inv.created}, the plan was made from one created at "
                f"{options.inventory_created}: not the same report; run `ckptctl gc plan` again", path=inv.uri,
            )  # fmt: skip
        self.state.inventory = inv
        age = time.time() - inv.created
        if age > 8 * 86400:
            self.state.warnings.append(
                f"the inventory is {age / 86400:.0f} days old: files written since are kept, and live files not in "
                "it are looked up one by one; a fresher report finds more garbage, faster"
            )

    def inventory_listings(self) -> dict[str, list[FileInfo]]:
        """The inventory's current objects under each listed scope, sorted like a listing."""
        from ckptctl.inventory.report import ReadStats
        from ckptctl.inventory.rows import iter_files

        inv = self.state.inventory
        stats = ReadStats()
        by_root: dict[str, list[FileInfo]] = {root: [] for root in self.state.scopes.listed}
        prefixes = [(r.rstrip("/") + "/", r) for r in self.state.scopes.listed]
        for f in iter_files(self.state.storage, inv, self.state.scopes.listed, stats):
            root = next(r for p, r in prefixes if f.uri.startswith(p))
            by_root[root].append(f)
        for root, files in by_root.items():
            files.sort(key=_uri)
            deduped: list[FileInfo] = []
            for f in files:  # two rows of one key: the newest speaks
                if deduped and deduped[-1].uri == f.uri:
                    deduped[-1] = max(deduped[-1], f, key=_newest)
                else:
                    deduped.append(f)
            by_root[root] = deduped
        self.record_inventory(stats.rows_read, stats.rows_kept)
        return by_root

    def record_inventory(self, rows_read: int, rows_kept: int) -> None:
        """The report read: the same as the plan's (when re-validating), and recorded in the plan."""
        from ckptctl.inventory.report import InventoryError

        inv, options = self.state.inventory, self.state.options
        if options.inventory_rows is not None and options.inventory_rows != rows_read:
            raise InventoryError(
                f"the inventory has {rows_read} rows, the plan was made from one with "
                f"{options.inventory_rows}: not the same report; run `ckptctl gc plan` again", path=inv.uri,
            )  # fmt: skip
        self.state.options = replace(options, inventory_created=inv.created, inventory_rows=rows_read)
        self.state.inventory_record = {
            **inv.describe(), "rows_read": rows_read, "rows_in_scope": rows_kept,
            "created_iso": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(inv.created)),
        }  # fmt: skip

    def check_metadata_after_plan(self) -> None:
        """The ``_metadata`` files listed afresh once the plan is built must be exactly those
        discovery saw (same size and mtime): the inventory is old, discovery is what is true now."""
        after = set()
        for root in self.state.scopes.listed:
            after |= {(f.uri, f.size, f.mtime) for f in self.state.storage.find_metadata(root)}
        changed = after ^ self.state.metadata_seen
        if changed:
            first = sorted(changed)[0][0]
            self.state.refuse(
                Refusal.CHECKPOINTS_CHANGED,
                f"_metadata files changed while the plan was built ({len(changed)} changed, first: {first}): "
                "a job is running here; run the plan again",
            )

    def present_now(self, paths: set[str]) -> dict[str, int]:
        """Which of ``paths`` exist now (HEAD each, concurrently): path -> size."""
        from concurrent.futures import ThreadPoolExecutor

        ordered = sorted(paths)
        with ThreadPoolExecutor(32) as pool:
            found = list(pool.map(lambda p: self.state.storage.stat(p, fresh=True), ordered))
        return {p: f.size for p, f in zip(ordered, found, strict=True) if f is not None}


def _uri(f: FileInfo) -> str:
    return f.uri


def _newest(f: FileInfo) -> tuple:
    """Which of two rows of one key speaks: the larger size, then the newer mtime (a row without
    one is the older: a sort of whole rows compared ``None`` with a float and failed), as the Spark
    planner's ``max(struct(size, mtime, is_link))`` picks."""
    return f.size, f.mtime is not None, f.mtime or 0.0, f.is_link
