"""``history``: which operator's state grows, how fast, and when a budget runs out.

Every retained ``_metadata`` gives full bytes per operator and subtask; two consecutive checkpoints
of a job give what the newer one uploaded (files the older did not reference) and reused. With
``num-retained = 1`` one checkpoint is on disk at a time, so the facts are recorded as they happen
in a ledger (a Parquet dataset, :mod:`ckptctl.history.ledger`) and read back together with what
is on disk now.

* :mod:`~ckptctl.history.rows`: one checkpoint as rows, one per (job, checkpoint, operator, subtask);
* :mod:`~ckptctl.history.ledger`: the Parquet ledger, local or S3, appended idempotently;
* :mod:`~ckptctl.history.growth`: least-squares slopes, the ranking, days to a budget;
* :mod:`~ckptctl.history.rules`: the ``--fail-if`` grammar and its verdicts;
* :mod:`~ckptctl.history.report`: all of it per job, the typed result of the command;
* :mod:`~ckptctl.history.html`: the self-contained page (inline SVG) of ``--html``.

No Typer or Rich here (the command is :mod:`ckptctl.cli.history`).
"""
