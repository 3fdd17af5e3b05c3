"""``ckptctl remap``: operator state (coordinator state included) moved to new operator ids, or dropped."""

from __future__ import annotations

from typing import Annotated

import typer

from ckptctl.cli.base import Command, EndpointOpt, RebaseOpt, app, command, get_output, storage_and_rebase


@app.command("remap", cls=Command)
@command
def remap_command(
    snapshot: Annotated[
        str, typer.Argument(metavar="SNAPSHOT", help="The checkpoint or savepoint (directory or _metadata).")
    ],
    dest: Annotated[
        str,
        typer.Option(
            "--output",
            "-o",
            metavar="DEST",
            help="A new directory: the new _metadata, and the snapshot's relative files (a savepoint's own) "
            "copied next to it; absolute files are referenced where they are. SNAPSHOT is never written.",
        ),
    ],  # fmt: skip
    uid: Annotated[
        list[str] | None,
        typer.Option(
            "--uid",
            metavar="OLD=NEW",
            help="Move OLD's state to NEW; each a uid (its id is Flink's MurmurHash3 of it) or a 32-hex "
            "operator id. Repeatable.",
        ),
    ] = None,  # fmt: skip
    drop: Annotated[
        list[str] | None,
        typer.Option(
            "--drop", metavar="OPERATOR", help="Remove this operator's state (uid or 32-hex id). Repeatable."
        ),
    ] = None,
    by_name: Annotated[
        bool,
        typer.Option(
            "--by-name",
            help="Propose pairs from the operator names recorded in the snapshot and in --against NEW "
            "(metadata V5+) and ask before using them.",
        ),
    ] = False,
    against: Annotated[
        str | None,
        typer.Option("--against", metavar="NEW", help="With --by-name: a savepoint of the changed job."),
    ] = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Never ask (--by-name then only prints its proposal).")
    ] = False,
    s3_endpoint: EndpointOpt = None,
    rebase: RebaseOpt = None,
) -> None:
    """Move operator state to new operator ids (a renamed uid), coordinator state included, or drop it
    explicitly; the result restores without --allowNonRestoredState."""
    from ckptctl.checkpoint.targets import one_checkpoint
    from ckptctl.cli.render import remap as render
    from ckptctl.remap import OperatorRef, RemapError, apply_remap, parse_pair, plan_remap, propose_by_name

    pairs = [parse_pair(p) for p in uid or ()]
    drops = [OperatorRef.parse(d) for d in drop or ()]
    if by_name and against is None:
        raise RemapError("--by-name needs --against NEW (a savepoint of the changed job) to read its names")
    out = get_output()
    storage, mappings = storage_and_rebase(s3_endpoint, rebase)
    ck = one_checkpoint(storage, snapshot, mappings)
    if by_name:
        new = one_checkpoint(storage, against, mappings)
        proposals, notes = propose_by_name(ck.metadata, new.metadata)
        out.result(render.Proposed(proposals, notes), render.proposed)
        if proposals:
            question = f"move the state of {len(proposals)} operator(s) as proposed?"
            refusal = "refusing to remap by name without a person's yes: pass the pairs as --uid OLD=NEW " + (
                "(--yes never accepts a proposal)" if yes else "(no terminal to ask)"
            )
            if yes:
                raise RemapError(refusal)
            if not out.term.confirm(question, no_terminal=refusal):
                out.warn("aborted; nothing written")
                raise typer.Exit(1)
            pairs += [(OperatorRef.parse(p.old["operator_id"]), _new_ref(p.new)) for p in proposals]
    plan = plan_remap(storage, ck, pairs, drops)
    result = apply_remap(storage, ck, plan, dest)
    out.result(render.Done(plan, result), render.done)


def _new_ref(new: dict):
    from ckptctl.remap import OperatorRef

    return OperatorRef.parse(new["uid"]) if new["uid"] else OperatorRef.parse(new["operator_id"])
