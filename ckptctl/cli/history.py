"""``ckptctl history``: which operator's state grows, how fast, and when a budget runs out."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ckptctl.cli.base import (
    Command,
    EndpointOpt,
    RebaseOpt,
    app,
    command,
    get_output,
    storage_and_rebase,
    writable_outputs,
)
from ckptctl.cli.params import AGE, BYTES, Typed


def _rule(text: str, option: str):
    from ckptctl.history.rules import parse_rule

    return parse_rule(text, option)


RULE = Typed("rule", _rule)  # --fail-if 'growth > 20%/d': a ckptctl.history.rules.Rule


@app.command("history", cls=Command)
@command
def history_command(
    root: Annotated[str, typer.Argument(metavar="ROOT", help="A checkpoint root or a job directory.")],
    ledger: Annotated[
        str | None,
        typer.Option(
            "--ledger",
            metavar="LEDGER",
            help="A Parquet ledger directory (local or s3://): append what is new, read the whole history.",
        ),
    ] = None,  # fmt: skip
    job: Annotated[str | None, typer.Option("--job", metavar="ID", help="Only this job.")] = None,
    operator: Annotated[
        str | None, typer.Option("--operator", metavar="ID|UID|NAME", help="Only this operator.")
    ] = None,
    since: Annotated[
        float | None,
        typer.Option(
            "--since",
            parser=AGE,
            metavar="DURATION|ISO",
            help="The window: checkpoints within this long of the newest (7d), or since an ISO time.",
        ),
    ] = None,  # fmt: skip
    budget: Annotated[
        int | None,
        typer.Option(
            "--budget", parser=BYTES, metavar="SIZE", help="Days until this size at the current slope."
        ),
    ] = None,
    fail_if: Annotated[
        list[Any] | None,  # ckptctl.history.rules.Rule: RULE
        typer.Option(
            "--fail-if",
            parser=RULE,
            metavar="RULE",
            help="Exit 1 when broken: 'growth > 20%/d', 'full > 500GiB', 'uploaded > 2GiB'. Repeatable.",
        ),
    ] = None,  # fmt: skip
    junit: Annotated[
        str | None, typer.Option("--junit", help="Write a JUnit XML report of the rules.", metavar="FILE")
    ] = None,
    html: Annotated[
        str | None,
        typer.Option("--html", metavar="FILE", help="Write a self-contained HTML page of the history."),
    ] = None,
    states: Annotated[
        bool,
        typer.Option(
            "--states",
            "--deep",
            help="Also read the state files of each job's checkpoints on disk (a GET per file): entries and "
            "bytes per state, TTL, file merging's space amplification.",
        ),
    ] = False,
    s3_endpoint: EndpointOpt = None,
    rebase: RebaseOpt = None,
) -> None:
    """Per job and operator: full, uploaded and reused bytes over checkpoints, growth, budget, CI rules."""
    from functools import partial

    from ckptctl.cli.params import Instant
    from ckptctl.cli.render import history as render
    from ckptctl.history.collect import run_history

    writable_outputs(junit, html)
    out = get_output()
    storage, mappings = storage_and_rebase(s3_endpoint, rebase)
    report = run_history(
        storage, root, ledger=ledger, rebase=mappings, job=job, operator=operator, since=since,
        since_is_instant=isinstance(since, Instant), budget=budget, rules=list(fail_if or ()),
        states=states,
    )  # fmt: skip
    for f in report.failed:
        out.warn(f"{f['path']}: not in the history: {f['error']}")
    if junit:
        from ckptctl.history.rules import junit_xml

        with open(junit, "w", encoding="utf-8") as f:
            f.write(junit_xml(report.to_json()))
    if html:
        from ckptctl.history.html import write_html

        with open(html, "w", encoding="utf-8") as f:
            f.write(write_html(report.to_json()))
    out.result(report, partial(render.report, named=root))
    if not report.ok:
        raise typer.Exit(1)
