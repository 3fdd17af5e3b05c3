"""One decoded Flink ``_metadata`` file: its header, master hook states, operators and trailer.

The top of the model (:mod:`ckptctl.metadata.operators` below it, then
:mod:`ckptctl.metadata.handles`): what :func:`ckptctl.metadata.read_metadata` returns and
:func:`ckptctl.metadata.write_metadata` takes.
"""

from __future__ import annotations

from typing import NamedTuple

from ckptctl.metadata.operators import OperatorState


class MasterState(NamedTuple):
    """State of a master checkpoint hook: opaque payload."""

    version: int
    name: str
    payload: bytes


class CheckpointProperties(NamedTuple):
    """The decoded V4+ trailer (Java-serialized ``CheckpointProperties``), as far as ckptctl needs it.

    ``fields`` holds every primitive and enum/string field found, by Java field name, so that
    version-specific fields are never lost; the named attributes are the ones commands rely on.
    """

    checkpoint_type: str | None  # "Checkpoint", "Full Checkpoint", "Savepoint", ...
    is_savepoint: bool
    savepoint_format: str | None  # "CANONICAL" / "NATIVE" for savepoints
    sharing_strategy: str | None
    fields: tuple[tuple[str, object], ...]


class CheckpointMetadata(NamedTuple):
    """One decoded ``_metadata`` file."""

    version: int
    checkpoint_id: int
    master_states: tuple[MasterState, ...]
    operators: tuple[OperatorState, ...]
    trailer: bytes  # raw Java-serialized CheckpointProperties (V4+), b"" for V3
    properties: CheckpointProperties | None
