"""The ``states`` command's document: the catalog of a checkpoint's states, the ``--deep`` scan,
and what Paimon's Flink sink keeps in its state, as one :class:`~ckptctl.states.report.StatesReport`.

Not imported by the package: it reads Paimon's sink state (:mod:`ckptctl.paimon.sinkstate`), which
itself reads state streams with this package's reader.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckptctl.states.report import StatesReport

if TYPE_CHECKING:
    from ckptctl.checkpoint.loading import LoadedCheckpoint
    from ckptctl.engine import Engine
    from ckptctl.states.catalog import OperatorCatalog
    from ckptctl.states.deep import DeepResult
    from ckptctl.storage import Storage


def states_report(
    storage: Storage,
    ck: LoadedCheckpoint,
    *,
    deep: bool,
    now_ms: int | None,
    ttl_default: int | None,
    ttl_named: dict[str, int],
    engine: Engine,
    histogram: str | None,
) -> StatesReport:
    """The ``states`` document of ``ck``: its catalog, the ``--deep`` scan on ``engine`` (its
    histogram written to ``histogram``), and what Paimon's sink keeps in its state."""
    from ckptctl.states import catalog, deep_scan, write_histogram

    cat = catalog(storage, ck)
    result = None
    if deep:
        result = deep_scan(
            storage, ck, cat, now_ms=now_ms, ttl_default=ttl_default, ttl_named=ttl_named, engine=engine,
        )  # fmt: skip
        if histogram:
            write_histogram(result, ck.location.uri, histogram)
    report = catalog_report(ck, cat, result)
    add_paimon(storage, ck, report)
    return report


def catalog_report(
    ck: LoadedCheckpoint, cat: list[OperatorCatalog], result: DeepResult | None
) -> StatesReport:
    """The catalog (and the deep scan's ``result``) as the ``states`` document."""
    md = ck.metadata
    ops = []
    for oc in cat:
        if not oc.has_state:
            continue
        view = oc.to_json()
        if result is not None:
            for s in view["states"]:
                u = result.usage.get((oc.operator_id, s["name"]))
                s["usage"] = u.to_json() if u is not None else None
        ops.append(view)
    deep = None
    if result is not None:
        deep = {
            "engine": result.engine, "now_ms": result.now_ms, "now_source": result.now_source,
            "handles": result.handles, "problems": result.problems, "not_scanned": result.not_scanned,
            "elapsed_seconds": round(result.elapsed, 3),
        }  # fmt: skip
    return StatesReport(
        path=ck.location.uri,
        checkpoint_id=md.checkpoint_id,
        kind=ck.kind,
        savepoint_format=md.properties.savepoint_format if md.properties else None,
        operators=ops,
        stateless_operators=sum(1 for oc in cat if not oc.has_state),
        deep=deep,
    )


def add_paimon(storage: Storage, ck: LoadedCheckpoint, report: StatesReport) -> None:
    """An operator of Paimon's Flink sink gets ``paimon``: its commit user and the committables its
    state holds, decoded (what a restore hands to Paimon; ``ckptctl paimon`` judges them)."""
    from ckptctl.errors import CkptError
    from ckptctl.paimon.sinkstate import read_sink_state, sink_handles

    if next(sink_handles(ck), None) is None:
        return
    try:
        state = read_sink_state(storage, ck)
    except CkptError as e:
        report.warnings.append(f"Paimon sink state not decodable: {e}")
        return
    by_id = {op.operator_id: op for op in state.operators}
    for view in report.operators:
        op = by_id.get(view["operator_id"])
        if op is None:
            continue
        view["paimon"] = {
            "commit_user": op.commit_user, "commit_users": op.distinct_commit_users,
            "committables": [
                {"identifier": c.identifier, "watermark": c.watermark, "messages": len(c.messages),
                 "files": sum(len(v) for m in c.messages for v in m.lists.values()),
                 "manifest_version": c.manifest_version, "message_version": c.message_version}
                for c in op.committables
            ],
            "pending_tag_ids": op.tag_ids, "writer_states": len(op.writer_states), "problems": op.problems,
        }  # fmt: skip
