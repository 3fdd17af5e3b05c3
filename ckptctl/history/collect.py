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
    states: bool = False,
) -> HistoryReport:
    """``states``: also read the state files of each job's checkpoints on disk
    (:mod:`ckptctl.history.files`): entries and bytes per state, file merging's amplification."""
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
        table = led.read(columns=[*NUMERIC, "path"])  # read once: for what is new, and for the report
        update = update_ledger(storage, root, led, rebase, disk=(layout, locations), have=table)
        if update.rows:
            import pyarrow as pa

            new = dictionary_encoded(rows_to_table(update.rows, with_files=False).select(table.column_names))
            table = pa.concat_tables([table, new], promote_options="permissive")
        added, failed, loaded = len(update.added), update.failed, update.loaded
    else:
        loaded, failed = load_new(storage, locations, set(), rebase)
        table = rows_to_table(rows_in_memory(loaded), with_files=False)
        added = 0
    files = _read_files(storage, locations, loaded, rebase, job) if states else None
    report = build(
        table, root, ledger=None if ledger is None else st.normalize_uri(ledger).rstrip("/"),
        incomplete=incomplete, job=job, operator=operator, since=since, since_is_instant=since_is_instant,
        budget=budget, rules=rules, files=files,
    )  # fmt: skip
    report.added, report.failed = added, failed
    report.elapsed_seconds = round(time.monotonic() - start, 3)
    return report


def _read_files(storage: Storage, locations: list, loaded: list, rebase: Rebase | None, job: str | None):
    """:func:`ckptctl.history.files.read_job` for each job with checkpoints on disk: the
    checkpoints not read yet are read now (one ``GET`` each). A job whose files cannot be read is
    reported in its ``files.problems``; the rest of the history stands."""
    from ckptctl.history.files import JobFiles, read_job
    from ckptctl.history.rows import NO_JOB, job_key

    have = {ck.location.uri for ck in loaded}
    wanted = [
        loc for loc in locations
        if loc.kind == "checkpoint" and loc.job_id and loc.uri not in have and (job is None or loc.job_id == job)
    ]  # fmt: skip
    more, _failed = load_new(storage, wanted, set(), rebase)
    jobs: dict[str, list] = {}
    for ck in [*loaded, *more]:
        key = job_key(ck)
        if key != NO_JOB and (job is None or key == job):
            jobs.setdefault(key, []).append(ck)
    files = {}
    for key, cks in jobs.items():
        try:
            files[key] = read_job(storage, cks)
        except CkptError as e:
            newest = max(c.metadata.checkpoint_id for c in cks)
            files[key] = JobFiles(newest, {}, None, [f"states not read: {e}"])
    return files
