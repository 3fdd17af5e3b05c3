"""``ckptctl preflight``: will the changed job restore from this snapshot? Decided before the deploy."""

from __future__ import annotations

from typing import Annotated

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


@app.command("preflight", cls=Command)
@command
def preflight_command(
    snapshot: Annotated[
        str,
        typer.Argument(
            metavar="SNAPSHOT",
            help="The checkpoint or savepoint the new job will start from (directory or _metadata).",
        ),
    ],
    against: Annotated[
        str,
        typer.Option(
            "--against",
            metavar="NEW",
            help="The changed job, told apart by content: a savepoint or checkpoint of it started without "
            "state (a staging run; directory or _metadata), a SQL compiled plan (COMPILE PLAN's JSON: "
            "operator uids and state TTL), or a job description in JSON or YAML (uids, parallelism, max "
            "parallelism, states).",
        ),
    ],
    target_flink: Annotated[
        str | None,
        typer.Option(
            "--target-flink",
            metavar="X.Y[.Z]",
            help="The Flink release the new job runs on (default: inferred from NEW's metadata version).",
        ),
    ] = None,
    target_backend: Annotated[
        str | None,
        typer.Option(
            "--target-backend",
            metavar="rocksdb|hashmap|forst",
            help="The new job's state backend, when NEW's snapshot does not tell it (a canonical savepoint).",
        ),
    ] = None,
    target_changelog: Annotated[
        str | None,
        typer.Option(
            "--target-changelog",
            metavar="on|off",
            help="Whether the new job runs the changelog state backend (state.changelog.enabled), when NEW's "
            "snapshot does not tell it (a savepoint). Default: assumed off (said in the assumptions); unknown "
            "when SNAPSHOT was written with it.",
        ),
    ] = None,
    claim: Annotated[
        bool,
        typer.Option(
            "--claim",
            help="The new job restores in CLAIM mode (default: NO_CLAIM, Flink's default), which the changelog "
            "backend needs.",
        ),
    ] = False,
    allow_non_restored_state: Annotated[
        bool,
        typer.Option(
            "--allow-non-restored-state",
            "-n",
            help="As Flink's -n: state of operators missing in NEW is dropped (the report says how much).",
        ),
    ] = False,
    junit: Annotated[
        str | None, typer.Option("--junit", help="Write a JUnit XML report to this file.", metavar="FILE")
    ] = None,
    s3_endpoint: EndpointOpt = None,
    rebase: RebaseOpt = None,
) -> None:
    """Will the changed job (NEW) restore from SNAPSHOT? Every finding at once; exit 0: it restores, 1: it
    fails or cannot be decided (the verdict says which)."""
    from functools import partial

    from ckptctl.checkpoint.targets import one_checkpoint
    from ckptctl.cli.render import preflight as render
    from ckptctl.errors import CkptError
    from ckptctl.metadata.read_streams import skimming_files
    from ckptctl.preflight import junit_xml, run_preflight
    from ckptctl.preflight.check import BACKENDS
    from ckptctl.preflight.new import read_new
    from ckptctl.preflight.releases import parse_release

    if target_flink is not None:
        parse_release(target_flink)  # a bad value is a usage error before anything is read
    if target_backend is not None and target_backend not in BACKENDS:
        raise CkptError(f"--target-backend {target_backend!r}: one of {', '.join(BACKENDS)}")
    if target_changelog is not None and target_changelog not in ("on", "off"):
        raise CkptError(f"--target-changelog {target_changelog!r}: on or off")
    writable_outputs(junit)
    out = get_output()
    storage, mappings = storage_and_rebase(s3_endpoint, rebase)
    with skimming_files():  # state is judged, not files: incremental handles' file lists read for bytes only
        old = one_checkpoint(storage, snapshot, mappings)
        new = read_new(storage, against, mappings)
    report = run_preflight(
        storage, old, new, target_flink=target_flink, allow_non_restored_state=allow_non_restored_state,
        new_backend=target_backend, new_changelog=None if target_changelog is None else target_changelog == "on",
        claimed=claim,
    )  # fmt: skip
    if junit:
        with open(junit, "w", encoding="utf-8") as f:
            f.write(junit_xml(report.to_json()))
    out.result(report, partial(render.report, named=snapshot, against=against))
    raise typer.Exit(EXIT_CODES[report.verdict])


# the project's codes: 0 nothing found against the deploy, 1 problems found -- a refusal, or a restore
# preflight cannot vouch for (fail closed, as gc; the verdict tells them apart); 2 bad input, 3 bug
EXIT_CODES = {"restores": 0, "restores-with-migration": 0, "fails": 1, "unknown": 1}
