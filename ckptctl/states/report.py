"""The ``states`` report: the catalog and, after ``--deep``, the scan, as one document."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class StatesReport:
    """``states``: each operator's states and sizes (the catalog) and, after ``--deep``, the scan;
    :meth:`to_json` is the ``--json`` document."""

    path: str
    checkpoint_id: int
    kind: str
    savepoint_format: str | None
    operators: list[dict[str, Any]]  # each operator's catalog view (with ``usage``, ``paimon`` when known)
    stateless_operators: int
    deep: dict[str, Any] | None
    warnings: list[str] = field(default_factory=list)  # what could not be added (not in the document)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path, "checkpoint_id": self.checkpoint_id, "kind": self.kind,
            "savepoint_format": self.savepoint_format, "operators": self.operators,
            "stateless_operators": self.stateless_operators, "deep": self.deep,
        }  # fmt: skip
