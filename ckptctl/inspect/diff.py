"""``diff``: files added, removed and reused between two checkpoints, and the bytes each uploaded."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ckptctl.checkpoint.flink39964 import split_inherited
from ckptctl.checkpoint.loading import LoadedCheckpoint
from ckptctl.checkpoint.refs import Ref, reference_rows
from ckptctl.metadata.walk import state_sizes

if TYPE_CHECKING:
    from ckptctl.checkpoint.rebase import Rebase
    from ckptctl.storage import Storage


def diff_checkpoints(storage: Storage, a: str, b: str, mappings: Rebase) -> CheckpointDiff:
    """The :class:`CheckpointDiff` from the checkpoint A names to the one B names, with its
    warnings (:func:`diff_warnings`)."""
    from ckptctl.checkpoint.targets import one_checkpoint

    ck_a = one_checkpoint(storage, a, mappings)
    ck_b = one_checkpoint(storage, b, mappings)
    diff = diff_view(ck_a, ck_b)
    diff.checkpoints = [ck_a, ck_b]
    diff.warnings = diff_warnings(ck_a, ck_b)
    return diff


def diff_warnings(a: LoadedCheckpoint, b: LoadedCheckpoint) -> list[str]:
    """A diff reads as 'from A to B': say so when B is the older one or another job's."""
    out = []
    ja, jb = a.location.job_id, b.location.job_id
    if ja and jb and ja != jb:
        out.append(f"A and B belong to different jobs ({ja} and {jb}): the diff compares unrelated files")
    elif b.metadata.checkpoint_id < a.metadata.checkpoint_id:
        out.append(
            f"B (checkpoint {b.metadata.checkpoint_id}) is older than A (checkpoint {a.metadata.checkpoint_id}): "
            "'added' and 'removed' are reversed; name the older checkpoint first"
        )
    return out


@dataclass
class CheckpointDiff:
    """``diff``: files (``{"path", "size"}``) added, removed and reused from checkpoint A to B;
    ``a`` and ``b`` say which checkpoints, what each uploaded and what it inherited (FLINK-39964)."""

    a: dict[str, Any]
    b: dict[str, Any]
    added: list[dict[str, Any]]
    removed: list[dict[str, Any]]
    reused: list[dict[str, Any]]
    checkpoints: list[LoadedCheckpoint] = field(default_factory=list, repr=False)  # A and B, when read
    warnings: list[str] = field(default_factory=list)

    def files(self, kind: str) -> list[dict[str, Any]]:
        """The ``added``, ``removed`` or ``reused`` files."""
        return {"added": self.added, "removed": self.removed, "reused": self.reused}[kind]

    def bytes(self, kind: str) -> int:
        return sum(f["size"] for f in self.files(kind))

    def to_json(self) -> dict[str, Any]:
        return {
            "a": self.a, "b": self.b, "added": self.added, "removed": self.removed, "reused": self.reused,
            "added_bytes": self.bytes("added"), "removed_bytes": self.bytes("removed"),
            "reused_bytes": self.bytes("reused"),
        }  # fmt: skip


def diff_view(a: LoadedCheckpoint, b: LoadedCheckpoint) -> CheckpointDiff:
    """Files added, removed and reused from checkpoint A to checkpoint B (by physical file)."""
    own_a, inherited_a = split_inherited(a, reference_rows(a))
    own_b, inherited_b = split_inherited(b, reference_rows(b))
    fa = _file_sizes(own_a)
    fb = _file_sizes(own_b)
    _fa, inc_a, _ = state_sizes(a.metadata)
    _fb, inc_b, _ = state_sizes(b.metadata)

    def files(paths: Iterable[str], sizes: dict[str, int]) -> list[dict[str, Any]]:
        return [{"path": p, "size": sizes[p]} for p in sorted(paths)]

    return CheckpointDiff(
        a={
            "path": a.location.uri,
            "checkpoint_id": a.metadata.checkpoint_id,
            "uploaded_bytes": inc_a,
            "inherited": _inherited_view(inherited_a),
        },
        b={
            "path": b.location.uri,
            "checkpoint_id": b.metadata.checkpoint_id,
            "uploaded_bytes": inc_b,
            "inherited": _inherited_view(inherited_b),
        },
        added=files(set(fb) - set(fa), fb),
        removed=files(set(fa) - set(fb), fa),
        reused=files(set(fa) & set(fb), fb),
    )


def _inherited_view(rows: list[Ref]) -> dict[str, Any]:
    sizes = {r.written_path: r.size for r in rows}
    return {
        "files": len(sizes), "bytes": sum(sizes.values()),
        "relative_paths": sorted(sizes),
    }  # fmt: skip


def _file_sizes(rows: list[Ref]) -> dict[str, int]:
    """Physical file → bytes referenced (a merged file's size is the span its segments cover)."""
    out: dict[str, int] = {}
    for r in rows:
        path = r.path
        out[path] = max(out.get(path, 0), r.offset + r.size)
    return out
