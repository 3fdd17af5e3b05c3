"""NEW as a small JSON job description, for a job with no staging run.

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
TTL switched on a release that refuses it -- never that it restores).
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


def looks_like_description(path: str) -> bool:
    return path.lower().endswith(".json")


def read_description(data: bytes, uri: str) -> JobDescription:
    """Parse a description; anything malformed is one line naming the file and what is wrong."""
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CkptError(f"not a JSON job description: {e}", path=uri) from None
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
