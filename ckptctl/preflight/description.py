"""NEW as a small job description, for a job with no staging run: JSON, or the same in YAML.

::

    {"flink": "2.1", "backend": "rocksdb",
     "operators": [
       {"uid": "stateful", "parallelism": 2, "max_parallelism": 128, "max_parallelism_explicit": false,
        "states": [{"name": "v", "kind": "VALUE", "ttl": false},
                   {"name": "buffer", "kind": "SPLIT_DISTRIBUTE", "scope": "operator"}]},
       {"id": "6cdc5bb954874d922eaee11a8e7ca5be", "parallelism": 4}]}

An operator is named by ``uid`` (its id is computed as Flink does), ``uid_hash`` (``setUidHash``)
or ``id``. A description carries no serializer snapshots: every serializer check is ``unknown``
(a description can show that a restore fails -- a missing operator, a parallelism, a state kind,
TTL switched on a release that refuses it -- never that it restores). The same model holds a SQL
compiled plan (:mod:`~ckptctl.preflight.plan`, ``kind="plan"``); :mod:`~ckptctl.preflight.new` tells a
NEW apart by its content.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ckptctl.errors import CkptError
from ckptctl.preflight.uidhash import operator_id_of_uid
from ckptctl.states.catalog import OperatorCatalog, StateEntry

KEYED_KINDS = ("VALUE", "LIST", "MAP", "REDUCING", "AGGREGATING")
OPERATOR_KINDS = ("SPLIT_DISTRIBUTE", "UNION", "BROADCAST")
_HEX32 = re.compile(r"[0-9a-f]{32}")


@dataclass(frozen=True)
class DescribedOperator:
    """What the checks read of an operator of NEW (as ``OperatorState`` gives it for a snapshot)."""

    operator_id: str
    parallelism: int
    max_parallelism: int
    max_parallelism_explicit: bool | None
    uid: str | None = None
    name: str | None = None


@dataclass
class JobDescription:
    uri: str
    flink: str | None
    backend: str | None
    operators: list[DescribedOperator]
    catalog: list[OperatorCatalog] = field(default_factory=list)
    kind: str = "description"  # description | plan
    # plan: per operator id, its exec node's state entries (index, name, TTL in ms)
    plan_ttls: dict[str, list[tuple[int, str, int]]] = field(default_factory=dict)
    unknown_nodes: list[str] = field(default_factory=list)  # plan: exec node types without known uids

    @property
    def what(self) -> str:
        return "a compiled plan" if self.kind == "plan" else "a job description"


def parse_document(data: bytes, uri: str) -> Any:
    """JSON, else YAML (JSON is YAML, but JSON's own parser says where JSON went wrong)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CkptError(f"not a savepoint, compiled plan or job description: not UTF-8 text at byte {e.start}",
                        path=uri) from None  # fmt: skip
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")) or uri.lower().endswith(".json"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise CkptError(f"not a JSON compiled plan or job description: {e}", path=uri) from None
    import yaml  # lazy: only a YAML description needs it

    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(e, "problem", None) or type(e).__name__
        raise CkptError(f"not a YAML job description: {problem}{where}", path=uri) from None
    if not isinstance(doc, dict):
        raise CkptError("not a savepoint, compiled plan or job description", path=uri)
    return doc


def read_description(doc: Any, uri: str) -> JobDescription:
    """A parsed description (JSON or YAML); anything malformed is one line naming the file and what
    is wrong. Bytes are parsed first (:func:`parse_document`)."""
    if isinstance(doc, (bytes, bytearray)):
        doc = parse_document(bytes(doc), uri)
    if not isinstance(doc, dict) or not isinstance(doc.get("operators"), list):
        raise CkptError('a job description is an object with an "operators" list', path=uri)
    backend = doc.get("backend")
    if backend is not None and backend not in ("rocksdb", "hashmap", "forst"):
        raise CkptError(f"backend {backend!r}: one of rocksdb, hashmap, forst", path=uri)
    ops, cat = [], []
    for i, raw in enumerate(doc["operators"]):
        op, oc = _operator(raw, f"{uri}: operators[{i}]")
        ops.append(op)
        cat.append(oc)
    if len({o.operator_id for o in ops}) != len(ops):
        raise CkptError("two operators with the same id", path=uri)
    flink = doc.get("flink")
    return JobDescription(uri, str(flink) if flink is not None else None, backend, ops, cat)


def _operator(raw: Any, where: str) -> tuple[DescribedOperator, OperatorCatalog]:
    if not isinstance(raw, dict):
        raise CkptError(f"{where}: not an object")
    uid, given = raw.get("uid"), raw.get("uid_hash") or raw.get("id")
    if uid is not None and given is None:
        oid = operator_id_of_uid(str(uid))
    elif given is not None and _HEX32.fullmatch(str(given).lower()):
        oid = str(given).lower()
    else:
        raise CkptError(f"{where}: needs a uid, or a uid_hash/id of 32 hex digits")
    p = raw.get("parallelism")
    if not isinstance(p, int) or not 1 <= p <= 32768:
        raise CkptError(f"{where}: parallelism must be an integer in 1..32768")
    explicit = raw.get("max_parallelism_explicit")
    max_p = raw.get("max_parallelism")
    if max_p is None:
        from ckptctl.rescale import default_max_parallelism

        max_p, explicit = default_max_parallelism(p), False
    if not isinstance(max_p, int) or not p <= max_p <= 32768:
        raise CkptError(f"{where}: max_parallelism must be an integer in parallelism..32768")
    name = raw.get("name")
    op = DescribedOperator(oid, p, max_p, explicit if isinstance(explicit, bool) else None, uid, name)
    oc = OperatorCatalog(oid, name, uid, p, max_p)
    for j, st in enumerate(raw.get("states") or ()):
        if not isinstance(st, dict) or not isinstance(st.get("name"), str):
            raise CkptError(f"{where}.states[{j}]: needs a name")
        kind = str(st.get("kind", "")).upper()
        scope = st.get("scope") or ("operator" if kind in OPERATOR_KINDS else "keyed")
        if kind not in (KEYED_KINDS if scope == "keyed" else OPERATOR_KINDS):
            raise CkptError(f"{where}.states[{j}]: kind {kind or None!r} is not a {scope} state kind")
        oc.states[st["name"]] = StateEntry(st["name"], kind, scope, bool(st.get("ttl", False)))
    return op, oc
