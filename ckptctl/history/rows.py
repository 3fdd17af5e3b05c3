"""One checkpoint as ledger rows: one per (job, checkpoint, operator, subtask).

Full and Flink-accounted incremental bytes are the model's own per-subtask figures
(:func:`ckptctl.metadata.walk.subtask_sizes`, what ``ls`` sums per checkpoint). Uploaded bytes are
measured from the files instead: a subtask's files (a segment counts by its offset) that the job's
previous checkpoint did not reference, plus its inline bytes (written into this ``_metadata``);
everything else it references is reused. Comparing that with Flink's ``checkpointed_size`` is how
tests/history/ holds the measure to Flink's REST API.

Each row keeps its subtask's file set (``files``/``file_sizes``): the next checkpoint's uploaded
bytes need it when this one is gone from disk (``num-retained = 1``).
"""

from __future__ import annotations

from typing import Any

from ckptctl.checkpoint.loading import LoadedCheckpoint
from ckptctl.checkpoint.refs import reference_groups
from ckptctl.metadata.walk import coordinator_sizes, subtask_sizes
from ckptctl.pycollector import paused_collector

COORDINATOR = -1  # the subtask index of an operator's coordinator state

# column -> pyarrow type alias; the ledger's schema, in this order
COLUMNS: dict[str, str] = {
    "job_id": "string", "checkpoint_id": "int64", "kind": "string", "path": "string",
    "time": "double", "metadata_bytes": "int64",
    "operator_id": "string", "operator_name": "string", "operator_uid": "string", "state_kinds": "string",
    "subtask": "int32", "full_bytes": "int64", "checkpointed_bytes": "int64", "inline_bytes": "int64",
    "uploaded_bytes": "int64", "reused_bytes": "int64", "file_count": "int32", "base_checkpoint_id": "int64",
}  # fmt: skip
FILE_COLUMNS = ("files", "file_sizes")  # list<string>, list<int64>: read only to extend the ledger
NO_JOB = ""  # savepoints carry no job id: they form a group of their own, each known by its directory


def file_key(path: str, offset: int) -> str:
    """A file's identity in the uploaded/reused diff: its URI, and a segment's offset in it."""
    return path if not offset else f"{path}#{offset}"


def moved_key(key: str, job_id: str) -> str:
    """A file key (:func:`file_key`) as seen from its job's directory, ``<job>/shared/x``, whatever
    root holds it: ``relocate`` copies a job's files to another root under the same (random) names,
    and the job restored there goes on from them, so a checkpoint taken after the move reuses what
    the ledger kept of the one before it under the old root. A key outside a directory named by the
    job (a savepoint's, a file a claim left in place) stays whole."""
    at = key.rfind(f"/{job_id}/") if job_id else -1  # the last: a root may be named by the job too
    return key[at + 1 :] if at >= 0 else key


def job_key(ck: LoadedCheckpoint) -> str:
    return ck.location.job_id if ck.kind == "checkpoint" and ck.location.job_id else NO_JOB


def savepoint_dirs(table: Any) -> Any | None:
    """What tells the ledger's entries apart beside (job, checkpoint id), one value per row: a
    savepoint's directory (its ``_metadata`` holds no job id, so two jobs' savepoints, or one job's
    taken into two directories, share checkpoint ids), normalised as the storage layer spells URIs
    (a row written under another spelling is the same savepoint); ``""`` for a job's checkpoint,
    which (job, id) identifies wherever its root is. ``None`` when the table holds no savepoint
    (told by the job column's dictionary: a ledger of jobs alone costs no pass over its rows)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ckptctl.storage import normalize_uri

    jobs = table["job_id"]
    if table.num_rows == 0 or "path" not in table.column_names:
        return None
    if pa.types.is_dictionary(jobs.type) and all(NO_JOB not in c.dictionary.to_pylist() for c in jobs.chunks):
        return None
    outside = pc.equal(jobs, NO_JOB)
    if not pc.any(outside).as_py():
        return None
    where = pc.if_else(outside, table["path"].cast(pa.string()), pa.scalar("", pa.string()))
    spelled = pc.unique(where)
    canonical = pa.array([normalize_uri(u) if u else "" for u in spelled.to_pylist()], pa.string())
    return pc.take(canonical, pc.index_in(where, value_set=spelled))


def checkpoint_rows(
    ck: LoadedCheckpoint, previous: dict[str, int] | None, previous_id: int | None
) -> list[dict[str, Any]]:
    """Rows of one loaded checkpoint. ``previous``: the file keys (:func:`file_key`) of the job's
    previous checkpoint (``previous_id``), ``None`` for the first one known (all of it uploaded)."""
    md, loc = ck.metadata, ck.location
    job = job_key(ck)
    before = None if previous is None else {moved_key(k, job) for k in previous}
    with paused_collector():
        files: dict[tuple[str, int], dict[str, int]] = {}  # (operator, subtask) -> key -> size
        for g in reference_groups(ck):
            shared = g.shared
            # shared: checkpoint, job_id, checkpoint_id, kind, operator_id, operator_name, subtask, slot, scope, ...
            into = files.setdefault((shared[4], COORDINATOR if shared[6] is None else shared[6]), {})
            for _type, _local, path, _written, offset, size in g.files:
                k = file_key(path, offset)  # the same file twice in one subtask counts once
                into[k] = size
        head = {
            "job_id": job, "checkpoint_id": md.checkpoint_id, "kind": ck.kind, "path": loc.uri,
            "time": loc.metadata.mtime if loc.metadata is not None else None,
            "metadata_bytes": loc.metadata.size if loc.metadata is not None else None,
        }  # fmt: skip
        rows = []
        for op in md.operators:
            kinds = state_kinds(op)
            common = {
                **head, "operator_id": op.operator_id, "operator_name": op.display_name,
                "operator_uid": op.display_uid, "state_kinds": ",".join(kinds),
            }  # fmt: skip
            parts = [(COORDINATOR, coordinator_sizes(op))] if op.coordinator_state is not None else []
            parts += [(s.index, subtask_sizes(s)) for s in op.subtasks or ()]
            for index, (full, incremental, inline) in parts:
                own = files.get((op.operator_id, index), {})
                reused = sum(n for k, n in own.items() if before is not None and moved_key(k, job) in before)
                new = sum(own.values()) - reused
                rows.append(
                    {
                        **common, "subtask": index, "full_bytes": full, "checkpointed_bytes": incremental,
                        "inline_bytes": inline, "uploaded_bytes": new + inline, "reused_bytes": reused,
                        "file_count": len(own), "base_checkpoint_id": previous_id if previous is not None else None,
                        "files": list(own), "file_sizes": list(own.values()),
                    }
                )  # fmt: skip
    return rows


def state_kinds(op: Any) -> list[str]:
    """What kinds of state an operator holds, as far as the metadata tells: keyed, operator
    (split list), union, broadcast, channel (unaligned in-flight data), coordinator."""
    kinds: set[str] = set()
    if op.coordinator_state is not None:
        kinds.add("coordinator")
    for s in op.subtasks or ():
        if s.managed_keyed is not None or s.raw_keyed is not None:
            kinds.add("keyed")
        for h in (s.managed_operator, s.raw_operator):
            if h is None:
                continue
            modes = {st.mode_name for st in h.states} or {"SPLIT_DISTRIBUTE"}
            kinds.update({"UNION": "union", "BROADCAST": "broadcast"}.get(m, "operator") for m in modes)
        if s.input_channels or s.output_channels:
            kinds.add("channel")
    order = ("keyed", "operator", "union", "broadcast", "channel", "coordinator")
    return [k for k in order if k in kinds]


def keys_of(rows: list[dict[str, Any]]) -> dict[str, int]:
    """The file keys of one checkpoint's rows (the next checkpoint's ``previous``)."""
    out: dict[str, int] = {}
    for r in rows:
        out.update(zip(r["files"], r["file_sizes"], strict=True))
    return out
