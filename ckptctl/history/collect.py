"""``history`` end to end: list the root once, bring the ledger up to date (or diff the checkpoints
on disk in memory when there is no ledger), then build the report (:mod:`ckptctl.history.report`)."""

from __future__ import annotations

import time

from ckptctl import storage as st
from ckptctl.checkpoint.rebase import Rebase
from ckptctl.errors import CkptError
from ckptctl.history.ledger import Ledger, dictionary_encoded, load_new, on_disk, rows_to_table, update_ledger
from ckptctl.history.report import NUMERIC, HistoryReport, build, rows_in_memory
from ckptctl.history.rules import Rule
from ckptctl.storage import Storage


def run_history(
    storage: Storage,
    root: str,
    *,
    ledger: str | None = None,
    rebase: Rebase | None = None,
    job: str | None = None,
    operator: str | None = None,
    since: float | None = None,
    since_is_instant: bool = False,
    budget: int | None = None,
    rules: list[Rule] | None = None,
) -> HistoryReport:
    start = time.monotonic()
    root = st.normalize_uri(root)
    layout, locations = on_disk(storage, root)
    if not layout.locations() and not layout.jobs and ledger is None:
        raise CkptError(f"no checkpoints under {layout.root}: no job, checkpoint or savepoint")
    incomplete: dict[str, list[int]] = {}
    for j in layout.jobs:
        incomplete[j.job_id] = [c.dir_checkpoint_id for c in j.checkpoints if not c.complete]
    if ledger is not None:
        led = Ledger.open(storage, ledger)
        table = led.read(columns=NUMERIC)  # read once: for what is new, and for the report
        update = update_ledger(storage, root, led, rebase, disk=(layout, locations), have=table)
        if update.rows:
            import pyarrow as pa

            new = dictionary_encoded(rows_to_table(update.rows, with_files=False).select(table.column_names))
            table = pa.concat_tables([table, new], promote_options="permissive")
        added, failed = len(update.added), update.failed
    else:
        loaded, failed = load_new(storage, locations, set(), rebase)
        table = rows_to_table(rows_in_memory(loaded), with_files=False)
        added = 0
    report = build(
        table, root, ledger=None if ledger is None else st.normalize_uri(ledger).rstrip("/"),
        incomplete=incomplete, job=job, operator=operator, since=since, since_is_instant=since_is_instant,
        budget=budget, rules=rules,
    )  # fmt: skip
    report.added, report.failed = added, failed
    report.elapsed_seconds = round(time.monotonic() - start, 3)
    return report
