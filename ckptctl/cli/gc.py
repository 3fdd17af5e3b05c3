"""``ckptctl gc plan`` (dry run, the default) and ``ckptctl gc apply PLAN`` (re-validate, delete)."""

from __future__ import annotations

import re
import sys
from datetime import datetime
from typing import Annotated

import typer

from ckptctl.cli import Command, EndpointOpt, JsonOpt, RebaseOpt, _context, app, command

gc_app = typer.Typer(
    help=(
        "Find and safely delete orphaned checkpoint files (dry run by default: plan → review → apply). "
        "`ckptctl gc ROOT ...` is `ckptctl gc plan ROOT ...`."
    ),
    no_args_is_help=True,
)
app.add_typer(gc_app, name="gc")

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|d|w)?\s*$")
_UNITS = {None: 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_age(text: str, option: str) -> float:
    """A duration (``24h``, ``90m``, ``7d``, seconds) or an absolute time (ISO 8601) as seconds of age."""
    from ckptctl.errors import CkptError

    m = _DURATION.match(text)
    if m:
        return float(m.group(1)) * _UNITS[m.group(2)]
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise CkptError(
            f"{option} expects a duration like 24h, 90m, 7d or an ISO time, got '{text}'"
        ) from None
    if when.tzinfo is None:
        raise CkptError(f"{option} '{text}' needs a time zone (e.g. 2026-11-01T00:00:00Z)")
    import time

    age = time.time() - when.timestamp()
    if age < 0:
        raise CkptError(f"{option} {text} is in the future: refusing (it would make every file old enough)")
    return age


@gc_app.command("plan", cls=Command)
@command
def plan_command(
    roots: Annotated[
        list[str],
        typer.Argument(help="Checkpoint roots (every job directory below is scanned).", metavar="ROOT"),
    ],
    savepoints: Annotated[
        list[str] | None,
        typer.Option("--savepoints", metavar="DIR", help="Extra savepoint directory to scan. Repeatable."),
    ] = None,
    changelog_dir: Annotated[
        list[str] | None,
        typer.Option("--changelog-dir", metavar="DIR", help="Changelog (DSTL) storage directory. Repeatable."),
    ] = None,
    keep_last: Annotated[
        int | None,
        typer.Option("--keep-last", metavar="K", help="Retain only the newest K completed checkpoints per job."),
    ] = None,
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than", metavar="DURATION",
            help="Only files older than this are candidates (24h, 90m, 7d, or an ISO time).",
        ),
    ] = "24h",
    margin: Annotated[
        str,
        typer.Option(
            "--margin", metavar="DURATION",
            help="Files must also predate the newest retained checkpoint of their job by this.",
        ),
    ] = "1h",
    max_delete_fraction: Annotated[
        float,
        typer.Option(
            "--max-delete-fraction", metavar="FRACTION",
            help="Refuse plans deleting a larger share of files or bytes, overall or of any job.",
        ),
    ] = 0.5,
    force: Annotated[bool, typer.Option("--force", help="Allow plans above --max-delete-fraction.")] = False,
    allow_external: Annotated[
        bool,
        typer.Option("--allow-external", help="Proceed although references point outside the scanned roots."),
    ] = False,
    accept_lost: Annotated[
        list[str] | None,
        typer.Option(
            "--accept-lost", metavar="CHECKPOINT",
            help="A retained checkpoint whose missing files you accept as lost (otherwise missing files block). Repeatable.",
        ),
    ] = None,
    clock: Annotated[
        str,
        typer.Option(
            "--clock", metavar="storage|local",
            help="Whose clock ages are measured on: the object store's (default; refuses if unreadable) or this machine's.",
        ),
    ] = "storage",
    output: Annotated[
        str | None, typer.Option("--output", "-o", metavar="PLAN.json", help="Write the plan (JSON) to this file.")
    ] = None,
    as_json: JsonOpt = False,
    s3_endpoint: EndpointOpt = None,
    rebase: RebaseOpt = None,
) -> None:
    """Dry run: the live set, the orphans the guards allow, and why anything else is kept.

    `ckptctl gc ROOT ...` is the same as `ckptctl gc plan ROOT ...`.
    """
    from ckptctl.cli.output import make_output
    from ckptctl.gc import GcOptions, build_plan

    out = make_output(as_json)
    storage, mappings = _context(s3_endpoint, rebase)
    options = GcOptions(
        tuple(roots), tuple(savepoints or ()), tuple(changelog_dir or ()), keep_last,
        parse_age(older_than, "--older-than"), parse_age(margin, "--margin"), max_delete_fraction, force,
        allow_external, mappings.mappings, tuple(accept_lost or ()), clock,
    )  # fmt: skip
    plan = build_plan(storage, options, progress=lambda items, n: _progress(out, items, n))
    if output:
        with open(output, "wb") as f:
            plan.write_json(f)
    if as_json:
        sys.stdout.flush()
        plan.write_json(sys.stdout.buffer)
        sys.stdout.buffer.flush()
    else:
        out.gc_plan(plan.header(), output)
    if plan.refusals:
        raise typer.Exit(1)


def _progress(out, items, total):
    with out.progress(items, total, "reading _metadata") as it:
        yield from it


@gc_app.command("apply", cls=Command)
@command
def apply_command(
    plan_file: Annotated[
        str, typer.Argument(help="A plan written by `ckptctl gc plan -o FILE`.", metavar="PLAN.json")
    ],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    trash: Annotated[
        str | None,
        typer.Option("--trash", metavar="DIR", help="Move files under this prefix instead of deleting them."),
    ] = None,
    manifest: Annotated[
        str | None,
        typer.Option("--manifest", metavar="FILE", help="Manifest of removed files (default: PLAN.manifest.jsonl)."),
    ] = None,
    batch_size: Annotated[
        int, typer.Option("--batch-size", min=1, max=1000, metavar="N", help="Files per delete request (S3 allows 1000).")
    ] = 1000,
    as_json: JsonOpt = False,
    s3_endpoint: EndpointOpt = None,
) -> None:
    """Re-validate the plan against the storage as it is now, then delete what is still an orphan.

    The plan's own storage endpoint is used unless --s3-endpoint names another.
    """
    from ckptctl.cli.output import make_output
    from ckptctl.errors import CkptError
    from ckptctl.gc import apply_plan, read_plan, revalidate
    from ckptctl.gc.planfile import storage_from_plan
    from ckptctl.storage import Storage

    out = make_output(as_json)
    plan_data = read_plan(plan_file)
    storage = Storage(storage_from_plan(plan_data, s3_endpoint))
    fresh, go, skipped = revalidate(storage, plan_data, progress=lambda items, n: _progress(out, items, n))
    total = sum(d.size for d in go)
    if not go:
        out.warn("nothing to delete: no candidate of the plan is still an orphan")
    elif not yes:
        if not sys.stdin.isatty():
            raise CkptError("refusing to delete without confirmation: pass --yes (no terminal to ask)")
        what = "move" if trash else "delete"
        if not typer.confirm(f"{what} {len(go)} files ({total:,} bytes)?", default=False, err=True):
            out.warn("aborted; nothing deleted")
            raise typer.Exit(1)
    with out.counter(len(go), "moving" if trash else "deleting") as advance:
        result = apply_plan(
            storage, fresh, go, skipped,
            manifest=(manifest or plan_file + ".manifest.jsonl") if go else None, trash=trash,
            batch_size=batch_size, on_batch=advance,
        )  # fmt: skip
    if as_json:
        out.json(result.to_json())
    else:
        out.gc_apply(result.to_json())
    if result.failed:
        raise typer.Exit(1)
