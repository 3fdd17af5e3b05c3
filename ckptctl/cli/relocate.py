"""``ckptctl repair`` (checkpoints Flink wrote unrestorable, FLINK-39964) and ``ckptctl relocate``
(copy checkpoints anywhere, with every path in ``_metadata`` rewritten)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ckptctl.cli import Command, EndpointOpt, JsonOpt, RebaseOpt, SavepointsOpt, _context, app, command

WorkersOpt = Annotated[int, typer.Option("--workers", metavar="N", help="Parallel copies (a thread pool).", min=1)]
BwlimitOpt = Annotated[
    str | None,
    typer.Option("--bwlimit", metavar="BYTES", help="Copy at most this many bytes per second (e.g. 50MiB)."),
]


@app.command("repair", cls=Command)
@command
def repair_command(
    path: Annotated[
        str,
        typer.Argument(
            metavar="CHECKPOINT", help="A checkpoint directory (or its _metadata) Flink cannot restore."
        ),
    ],
    output: Annotated[
        str | None,
        typer.Option(
            "--output",
            "-o",
            metavar="DEST",
            help="Write the repaired copy here (the checkpoint's own files, then a new _metadata).",
        ),
    ] = None,  # fmt: skip
    in_place: Annotated[
        bool,
        typer.Option(
            "--in-place",
            help="Rewrite the checkpoint's _metadata itself, keeping the old one as _metadata.pre-repair.",
        ),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show every handle that would be rewritten; write nothing.")
    ] = False,
    savepoints: SavepointsOpt = None,
    as_json: JsonOpt = False,
    s3_endpoint: EndpointOpt = None,
    rebase: RebaseOpt = None,
) -> None:
    """Make a checkpoint written after a CLAIM restore from a NATIVE savepoint restorable (FLINK-39964)."""
    from ckptctl.cli.inspect import checked_path, warn_moved
    from ckptctl.cli.output import make_output
    from ckptctl.errors import CkptError
    from ckptctl.refs import load_checkpoint
    from ckptctl.repair import apply_repair, plan_repair, savepoint_files_for, search_roots_for

    if in_place and output:
        raise CkptError("give either -o DEST or --in-place, not both")
    if not in_place and not output and not dry_run:
        raise CkptError("name the repaired copy with -o DEST (or use --in-place, or --dry-run to look first)")
    out = make_output(as_json)
    storage, mappings = _context(s3_endpoint, rebase)
    ck = load_checkpoint(storage, checked_path(storage, path), mappings)
    warn_moved(out, ck)
    index = savepoint_files_for(storage, search_roots_for(ck), savepoints or ())
    plan = plan_repair(storage, ck, index)
    view: dict[str, Any] = plan.to_json()
    view["searched"] = index.searched
    view["dry_run"] = dry_run
    if dry_run or not plan.fixes or plan.unresolved:
        if as_json:
            out.json(view)
        else:
            _render_plan(out, view)
        if not plan.fixes and not plan.unresolved:
            out.warn("nothing to repair: every relative file of this checkpoint is where Flink will look")
            return
        if plan.unresolved:
            raise typer.Exit(1)
        return
    result = apply_repair(storage, ck, plan, output, in_place)
    view["result"] = result.to_json()
    if as_json:
        out.json(view)
        return
    _render_plan(out, view)
    r = result.to_json()
    if r["backup"]:
        out.out.print(f"repaired in place; the old _metadata is kept as {r['backup']}")
    else:
        out.out.print(
            f"repaired copy at {r['destination']}: {r['copied_files']} files copied "
            f"({r['already_there']} already there), new _metadata written last"
        )


def _render_plan(out, view: dict[str, Any]) -> None:
    from ckptctl.cli.output import _escape

    n = view["rewritten_handles"]
    out.out.print(
        f"repair {_escape(view['checkpoint'])} ({view['issue']}): {n} handle{'s' if n != 1 else ''} to rewrite"
    )
    for r in view["rewrites"]:
        who = f"operator {r['operator_id']} subtask {r['subtask']} {r['slot']} {r['scope']}"
        name = f" {r['local_name']}" if r["local_name"] else ""
        out.out.print(
            f"  {who}{_escape(name)}: RelativeFileStateHandle '{_escape(r['relative_path'])}' ({r['size']} bytes) "
            f"→ FileStateHandle {_escape(r['to']['path'])}"
        )
    for u in view["unresolved"]:
        out.out.print(
            f"  [red]not found[/red]: '{_escape(u['relative_path'])}' ({u['size']} bytes) is in no savepoint "
            f"directory searched ({', '.join(view['searched'])}); pass it with --savepoints"
        )
    if view["dry_run"] and n:
        out.out.print("dry run: nothing written")


# ---------------------------------------------------------------------------------------------
# relocate


@app.command("relocate", cls=Command)
@command
def relocate_command(
    src: Annotated[
        str,
        typer.Argument(
            metavar="SRC",
            help="A checkpoint or savepoint directory (or its _metadata); with --all a job directory or root.",
        ),
    ],
    dst: Annotated[
        str,
        typer.Argument(metavar="DST", help="The new checkpoint root (file: path or s3://bucket/prefix)."),
    ],
    apply: Annotated[
        bool, typer.Option("--apply", help="Copy and write (default: show the plan only).")
    ] = False,
    all_checkpoints: Annotated[
        bool, typer.Option("--all", help="Relocate every completed checkpoint and savepoint below SRC.")
    ] = False,
    workers: WorkersOpt = 8,
    bwlimit: BwlimitOpt = None,
    plan_out: Annotated[
        str | None,
        typer.Option(
            "--plan-output", "-o", metavar="FILE", help="Write the plan (every copy) as JSON to FILE."
        ),
    ] = None,
    no_verify: Annotated[
        bool,
        typer.Option("--no-verify", help="Skip the shallow verify of the relocated copies after --apply."),
    ] = False,
    engine: Annotated[
        str,
        typer.Option(
            "--engine",
            metavar="local|spark",
            help="local (a thread pool, default) or spark (executors copy).",
        ),
    ] = "local",
    master: Annotated[
        str,
        typer.Option(
            "--master", metavar="URL", help="Spark master URL for --engine spark (default local[*])."
        ),
    ] = "local[*]",
    as_json: JsonOpt = False,
    s3_endpoint: EndpointOpt = None,
    rebase: RebaseOpt = None,
) -> None:
    """Copy checkpoints anywhere: every file they need, and a new _metadata whose paths point at the copy."""
    import json

    from ckptctl.cli.inspect import warn_moved
    from ckptctl.cli.output import make_output
    from ckptctl.cli.verify import parse_bytes
    from ckptctl.relocate import load_sources, plan_relocation
    from ckptctl.storage import normalize_uri

    out = make_output(as_json)
    storage, mappings = _context(s3_endpoint, rebase)
    limit = parse_bytes(bwlimit, "--bwlimit") if bwlimit else None
    checkpoints, source = load_sources(storage, src, mappings, all_checkpoints)
    warn_moved(out, *checkpoints)
    with out.status("planning …"):
        plan = plan_relocation(storage, checkpoints, source, dst, workers)
    plan.options = {
        "src": normalize_uri(src), "dst": plan.destination.written_root, "all": all_checkpoints,
        "rebase": mappings.specs(),
    }  # fmt: skip
    view: dict[str, Any] = plan.to_json(with_files=False)
    if plan_out:
        with open(plan_out, "w", encoding="utf-8") as f:
            json.dump(plan.to_json(), f, indent=1)
    if not apply:
        view["applied"] = False
        if as_json:
            out.json(view)
        else:
            _render_relocate_plan(out, view)
            out.out.print("dry run: nothing written; add --apply to copy")
        if plan.conflicts:
            raise typer.Exit(1)
        return
    _apply_and_report(out, storage, plan, view, workers, limit, no_verify, as_json, engine, master)


def _apply_and_report(
    out, storage, plan, view, workers, limit, no_verify, as_json, engine="local", master="local[*]"
) -> None:
    from ckptctl.relocate import apply_relocation, shallow_verify

    if engine == "spark":
        with out.status(f"starting Spark ({master}) …"):
            from ckptctl.verify import spark_session

            spark_session(master)
    with out.counter(len(plan.copies), "copying") as advance:
        result = apply_relocation(
            storage, plan, workers=workers, bwlimit=limit, progress=advance, engine=engine, master=master
        )
    view["applied"] = True
    view["result"] = result.to_json()
    report = None if no_verify else shallow_verify(storage, plan)
    view["verify"] = report
    if as_json:
        out.json(view)
    else:
        _render_relocate_plan(out, view)
        r = view["result"]
        out.out.print(
            f"copied {r['copied_files']} files ({r['copied_bytes']:,} bytes), {r['already_there']} already there, "
            f"{len(r['metadata_written'])} _metadata written last, in {r['seconds']:.1f}s"
        )
        if report is not None:
            if report["ok"]:
                c = report["checked"]
                out.out.print(
                    f"[green]verified[/green]: {c['files']} files of the copies exist with their sizes"
                )
            else:
                for p in report["problems"][:20]:
                    out.out.print(f"[red]{p['check']}[/red] {p['path']}: {p['detail']}")
    if report is not None and not report["ok"]:
        raise typer.Exit(1)


def _render_relocate_plan(out, view: dict[str, Any]) -> None:
    from ckptctl.cli.output import _escape, human_bytes

    out.out.print(
        f"relocate {_escape(view['source'])} → {_escape(view['written_destination'])}: "
        f"{len(view['checkpoints'])} checkpoint(s), {view['files']} files, {human_bytes(view['bytes'])} "
        f"({view['shared_files']} files shared by several checkpoints, copied once)"
    )
    for c in view["checkpoints"]:
        out.out.print(
            f"  {c['kind']} {c['checkpoint_id']}: {_escape(c['source'])} → {_escape(c['destination'])} "
            f"({c['rewritten_handles']} paths rewritten, {c['relative_handles']} relative handles move as they are)"
        )
    if view["rewritten_prefixes"]:
        out.out.print("rewritten path prefixes:")
        for p in view["rewritten_prefixes"]:
            out.out.print(f"  {_escape(p['from'])} → {_escape(p['to'])}  ({p['handles']})")
    for c in view["conflicts"]:
        out.out.print(f"[red]conflict[/red]: {_escape(c)} already holds a different checkpoint")
    for c in view["already_relocated"]:
        out.out.print(f"already relocated: {_escape(c)} (identical)")


@app.command("relocate-apply", cls=Command, hidden=True)
@command
def relocate_apply_command(
    plan_file: Annotated[
        str, typer.Argument(metavar="PLAN.json", help="A plan written by `relocate -o PLAN.json`.")
    ],
    workers: WorkersOpt = 8,
    bwlimit: BwlimitOpt = None,
    no_verify: Annotated[
        bool, typer.Option("--no-verify", help="Skip the shallow verify of the relocated copies.")
    ] = False,
    as_json: JsonOpt = False,
    s3_endpoint: EndpointOpt = None,
) -> None:
    """`ckptctl relocate apply PLAN.json`: plan again, refuse if anything changed, then copy."""
    import json

    from ckptctl.cli.output import make_output
    from ckptctl.cli.verify import parse_bytes
    from ckptctl.errors import CkptError
    from ckptctl.relocate import replan

    out = make_output(as_json)
    storage, _ = _context(s3_endpoint, None)
    try:
        with open(plan_file, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise CkptError(f"cannot read the plan: {e}", path=plan_file) from None
    plan = replan(storage, data, workers)
    view = plan.to_json(with_files=False)
    limit = parse_bytes(bwlimit, "--bwlimit") if bwlimit else None
    _apply_and_report(out, storage, plan, view, workers, limit, no_verify, as_json)
