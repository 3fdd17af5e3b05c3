"""``show``: one checkpoint, operators → subtasks → state handles, key groups, sizes and files."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ckptctl.checkpoint.loading import LoadedCheckpoint
    from ckptctl.checkpoint.rebase import Rebase
    from ckptctl.storage import Storage


@dataclass
class CheckpointView:
    """``show``: one checkpoint's :func:`~ckptctl.inspect.views.checkpoint_view` (with ``states``
    each operator's states); ``checkpoint`` the one shown, ``warnings`` what could not be added."""

    view: dict[str, Any]
    checkpoint: LoadedCheckpoint | None = field(default=None, repr=False)
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return self.view


def show_checkpoint(storage: Storage, path: str, mappings: Rebase, states: bool) -> CheckpointView:
    """The checkpoint PATH names; with ``states`` each operator gets ``states``, the catalog of
    ``ckptctl states`` (``show --json``). A PATH that holds checkpoints rather than being one is
    refused with the newest one named (:func:`not_a_checkpoint_hint`)."""
    from ckptctl.checkpoint.targets import one_checkpoint
    from ckptctl.errors import LayoutError
    from ckptctl.inspect.views import checkpoint_view

    try:
        ck = one_checkpoint(storage, path, mappings)
    except LayoutError as e:
        raise LayoutError(not_a_checkpoint_hint(storage, path, e)) from None
    shown = CheckpointView(checkpoint_view(ck), ck)
    if states:
        add_states(storage, shown)
    return shown


def add_states(storage: Storage, shown: CheckpointView) -> None:
    """Each operator of ``shown`` gets ``states``: a list, empty for stateless operators; null
    when the state meta data cannot be read (and a warning says why)."""
    from ckptctl.errors import CkptError
    from ckptctl.states import catalog

    try:
        by_id = {oc.operator_id: oc for oc in catalog(storage, shown.checkpoint)}
    except CkptError as e:
        shown.warnings.append(f"states not listed: {e}")
        by_id = None
    for op in shown.view["operators"]:
        oc = by_id.get(op["operator_id"]) if by_id is not None else None
        op["states"] = None if by_id is None else [s.to_json() for s in oc.states.values()] if oc else []


def checkpoint_number(metadata_uri: str) -> int:
    """N of the ``chk-N`` directory holding a ``_metadata`` (-1 for any other directory)."""
    from ckptctl.checkpoint.layout import CHK_RE

    m = CHK_RE.match(metadata_uri.rsplit("/", 2)[-2])
    return int(m.group(1)) if m else -1


def not_a_checkpoint_hint(storage: Storage, path: str, error: Exception) -> str:
    """`show ROOT`: the error, plus what to type instead (ls, and the newest checkpoint below)."""
    from ckptctl.storage import StorageError, normalize_uri

    try:
        uri = normalize_uri(path)
        found = [] if storage.stat(uri) is not None else list(storage.find_metadata(uri))  # a file: no hint
    except StorageError:
        found = []
    if not found:
        return str(error)
    # the newest by time, equal times (a copy, a checkout) by checkpoint number
    newest = max(found, key=lambda f: (f.mtime or 0, checkpoint_number(f.uri), f.uri)).uri.rsplit("/", 1)[0]
    return (
        f"{path} is not a checkpoint but holds {len(found)} (list them: ckptctl ls {path}); "
        f"the newest is {newest}"
    )
