"""NEW as a SQL compiled plan (``COMPILE PLAN`` JSON), the job that ``EXECUTE PLAN`` runs.

A plan tells the operator ids of the job it runs -- every exec node's transformations get the uids
``<node id>_<transformation>`` (:mod:`~ckptctl.preflight.execnodes`), so their ids are the uids'
hashes -- and each stateful node's state TTL (its ``state`` entries: ``table.exec.state.ttl`` or a
``STATE_TTL`` hint, compiled in). It does not tell the parallelism (the deployment's configuration
decides it), the state names the operators register, nor any serializer: a mapped operator's states
are taken from the snapshot (the same exec node type and version registers the same states), with
the plan's TTL, and every serializer check is ``unknown``. A plan can show that a restore fails
(an operator of the snapshot no uid of the plan reaches, TTL switched on a release that refuses
it), never that it restores.

The plan is read as a :class:`~ckptctl.preflight.description.JobDescription` (one model for every NEW
that is not a snapshot) whose operators carry no parallelism; :func:`fit_to_snapshot` completes it
against the snapshot before the checks run.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ckptctl.errors import CkptError
from ckptctl.preflight.description import DescribedOperator, JobDescription
from ckptctl.preflight.execnodes import TRANSFORMATIONS
from ckptctl.preflight.uidhash import operator_id_of_uid
from ckptctl.states.catalog import OperatorCatalog, StateEntry

if TYPE_CHECKING:
    from ckptctl.states.catalog import OperatorCatalog as Catalog

_TYPE = re.compile(r"(stream|batch)-exec-([a-z0-9-]+?)(?:_(\d+))?")
_DURATION = re.compile(r"\s*(\d+)\s*([a-z]*)\s*")
_UNIT_MS = {"": 1, "ms": 1, "milli": 1, "millis": 1, "millisecond": 1, "milliseconds": 1,
            "s": 1000, "sec": 1000, "secs": 1000, "second": 1000, "seconds": 1000,
            "min": 60_000, "m": 60_000, "minute": 60_000, "minutes": 60_000,
            "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
            "d": 86_400_000, "day": 86_400_000, "days": 86_400_000}  # fmt: skip


def looks_like_plan(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("nodes"), list) and "flinkVersion" in doc


def ttl_ms(text: Any, where: str) -> int:
    """A plan's duration (Flink's ``TimeUtils`` format: ``0 ms``, ``3600000 ms``, ``1 h``)."""
    m = _DURATION.fullmatch(str(text).lower())
    if m is None or m.group(2) not in _UNIT_MS:
        raise CkptError(f"{where}: ttl {text!r} is not a duration")
    return int(m.group(1)) * _UNIT_MS[m.group(2)]


def read_plan(doc: dict, uri: str) -> JobDescription:
    """The operators a compiled plan runs (ids from their uids) and its nodes' state TTLs."""
    ops: list[DescribedOperator] = []
    cat: list[OperatorCatalog] = []
    ttls: dict[str, list[tuple[int, str, int]]] = {}
    unknown: list[str] = []
    for i, node in enumerate(doc["nodes"]):
        where = f"nodes[{i}]"
        if (
            not isinstance(node, dict)
            or not isinstance(node.get("id"), int)
            or not isinstance(node.get("type"), str)
        ):
            raise CkptError(f"{where}: an exec node needs an integer id and a type", path=uri)
        m = _TYPE.fullmatch(node["type"])
        keys = TRANSFORMATIONS.get(m.group(2)) if m and m.group(1) == "stream" else None
        if keys is None:
            unknown.append(node["type"])
            continue
        states = []
        for j, st in enumerate(node.get("state") or ()):
            if not isinstance(st, dict):
                raise CkptError(f"{where}.state[{j}]: not an object", path=uri)
            states.append(
                (
                    int(st.get("index", j)),
                    str(st.get("name", "")),
                    ttl_ms(st.get("ttl", 0), f"{where}.state[{j}]"),
                )
            )
        for key in keys:
            uid = f"{node['id']}_{key}"
            oid = operator_id_of_uid(uid)
            ops.append(DescribedOperator(oid, None, None, False, uid, node["type"]))  # type: ignore[arg-type]
            cat.append(OperatorCatalog(oid, node["type"], uid, 0, 0))
            if states:
                ttls[oid] = states
    flink = doc.get("flinkVersion")
    return JobDescription(uri, str(flink) if flink is not None else None, None, ops, cat, kind="plan",
                          plan_ttls=ttls, unknown_nodes=sorted(set(unknown)))  # fmt: skip


def fit_to_snapshot(new: JobDescription, old_ops: dict, old_cat: dict[str, Catalog], ctx) -> None:
    """What a plan leaves to the deployment or to the exec node's code, taken from the snapshot:
    the parallelism and max parallelism of each mapped operator (not set explicitly: Flink adopts
    the snapshot's), and its states (same names and kinds) with the TTL the plan compiled in."""
    ctx.assume(
        "NEW is a compiled plan: run with table.exec.uid.generation PLAN_ONLY (the default) or ALWAYS and "
        "the default table.exec.uid.format '<id>_<transformation>'; its parallelism and max parallelism "
        "(the deployment's configuration, not the plan) are taken as the snapshot's"
    )
    cats = {oc.operator_id: oc for oc in new.catalog}
    for i, op in enumerate(new.operators):
        old = old_ops.get(op.operator_id)
        p, mp = (old.parallelism, old.max_parallelism) if old is not None else (1, 128)
        new.operators[i] = replace(op, parallelism=p, max_parallelism=mp, max_parallelism_explicit=False)
        oc, ooc = cats[op.operator_id], old_cat.get(op.operator_id)
        oc.parallelism, oc.max_parallelism = p, mp
        if ooc is None:
            continue
        ttls = new.plan_ttls.get(op.operator_id)
        for name, st in ooc.states.items():
            ttl = st.ttl
            if st.scope == "keyed" and not st.timers:
                ttl = _plan_ttl(name, ttls)
                if ttl is None:
                    ttl = st.ttl
                    ctx.assume(f"state {name!r} of operator {op.operator_id} ({op.uid}): the plan does not tell "
                               "its TTL; assumed unchanged")  # fmt: skip
            oc.states[name] = StateEntry(name, st.kind, st.scope, ttl, st.backend_type)


def _plan_ttl(name: str, ttls: list[tuple[int, str, int]] | None) -> bool | None:
    """Whether the plan gives state NAME a TTL: a node with one state entry gives it to all its
    keyed states; a two-input node's entries 0 and 1 are its left and right input's states."""
    if not ttls:
        return None
    if len(ttls) == 1:
        return ttls[0][2] > 0
    side = 0 if name.lower().startswith("left") else 1 if name.lower().startswith("right") else None
    if len(ttls) == 2 and side is not None:
        return next((t > 0 for idx, _, t in ttls if idx == side), None)
    return None
