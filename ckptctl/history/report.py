"""``history``'s result: per job, its checkpoints and its operators' series, growth and ranking.

:func:`collect` gathers the rows (the ledger after its update, or the checkpoints on disk alone);
:func:`build` turns an Arrow table of rows into :class:`HistoryReport`, aggregating with Arrow
(a ledger of 1,000 checkpoints of 256 subtasks is 10^6 rows) and looping in Python only over
(checkpoint, operator) pairs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ckptctl.history.growth import Growth, growth
from ckptctl.history.rows import (
    COLUMNS,
    COORDINATOR,
    NO_JOB,
    checkpoint_rows,
    job_key,
    keys_of,
    savepoint_dirs,
)
from ckptctl.history.rules import Rule, verdicts

NUMERIC = [c for c in COLUMNS if c != "path"]


@dataclass
class HistoryReport:
    """``history``: one entry per job (see :meth:`to_json`); ``ok`` is False when a rule broke."""

    root: str
    ledger: str | None
    jobs: list[dict[str, Any]]
    rules: list[str]
    ok: bool
    added: int = 0  # checkpoints this run appended to the ledger
    failed: list[dict[str, Any]] = field(default_factory=list)
    elapsed_seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "root": self.root, "ledger": self.ledger, "ok": self.ok, "rules": self.rules,
            "ledger_added": self.added, "unreadable": self.failed,
            "jobs": [_job_json(j) for j in self.jobs], "elapsed_seconds": self.elapsed_seconds,
        }  # fmt: skip


def _job_json(job: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in job.items() if k != "growth"}
    out.update(_growth_json(job["growth"]))
    out["operators"] = [
        {**{k: v for k, v in o.items() if k not in ("growth", "display")}, "display": o["display"],
         **_growth_json(o["growth"])}
        for o in job["operators"]
    ]  # fmt: skip
    return out


def _growth_json(g: Growth) -> dict[str, Any]:
    return {
        "slope_bytes_per_day": g.bytes_per_day,
        "slope_percent_per_day": g.percent_per_day,
        "slope_bytes_per_checkpoint": g.bytes_per_checkpoint,
        "slope_points": g.points,
    }


def rows_in_memory(loaded: list) -> list[dict[str, Any]]:
    """Rows of loaded checkpoints with no ledger: each job's chain diffed in memory."""
    chains: dict[str, list] = {}
    for ck in loaded:
        chains.setdefault(job_key(ck), []).append(ck)
    rows = []
    for job, cks in chains.items():
        cks.sort(key=lambda c: c.metadata.checkpoint_id)
        previous = base = None
        for ck in cks:
            r = checkpoint_rows(ck, previous, base)
            rows.extend(r)
            if job != NO_JOB:
                previous, base = keys_of(r), ck.metadata.checkpoint_id
    return rows


def build(
    table: Any,
    root: str,
    *,
    ledger: str | None = None,
    incomplete: dict[str, list[int]] | None = None,
    job: str | None = None,
    operator: str | None = None,
    since: float | None = None,
    since_is_instant: bool = False,
    budget: int | None = None,
    rules: list[Rule] | None = None,
    files: dict[str, Any] | None = None,
) -> HistoryReport:
    """The report of ``table`` (rows, :data:`NUMERIC` columns at least). ``since``: seconds before
    each job's newest checkpoint, or an instant (``since_is_instant``); ``operator``: an id, uid or
    name to show (and judge) alone; ``files``: per job, what ``--states`` read
    (:class:`ckptctl.history.files.JobFiles`)."""
    import pyarrow.compute as pc

    rules = rules or []
    if job is not None:
        table = table.filter(pc.equal(table["job_id"], job))
    strings = ["kind", "operator_name", "operator_uid", "state_kinds"]
    table = table.unify_dictionaries()  # one dictionary per column over all parts: Arrow groups by it
    table, codes = _codes(table, strings)
    keys = ["job_id", "checkpoint_id", "operator_id"]
    dirs = savepoint_dirs(table)
    if dirs is not None:  # a savepoint is its directory: two with one id are two entries
        table, keys = table.append_column("__dir", dirs), [*keys, "__dir"]
    per_op = table.group_by(keys, use_threads=False).aggregate(
        [
            ("full_bytes", "sum"), ("uploaded_bytes", "sum"), ("reused_bytes", "sum"),
            ("checkpointed_bytes", "sum"), ("file_count", "sum"), ("subtask", "count"),
            ("full_bytes", "max"), ("time", "max"), ("metadata_bytes", "max"),
            ("base_checkpoint_id", "max"), *((f"__{name}", "min") for name in strings),
        ]
    )  # fmt: skip
    cols = {name: per_op[name].to_pylist() for name in per_op.column_names}
    where = cols.get("__dir") or [""] * per_op.num_rows
    # the strings, alike in every row of a group, by their dictionary codes (no string aggregation)
    for name in strings:
        values = codes[name]
        cols[f"{name}_max"] = [None if c is None else values[c] for c in cols[f"__{name}_min"]]
    jobs: dict[str, dict[int, dict[str, Any]]] = {}
    for i in range(per_op.num_rows):
        cks = jobs.setdefault(cols["job_id"][i], {})
        entry = (cols["checkpoint_id"][i], where[i])
        ck = cks.get(entry)
        if ck is None:
            ck = cks[entry] = {
                "checkpoint_id": cols["checkpoint_id"][i], **({"path": where[i]} if where[i] else {}),
                "kind": cols["kind_max"][i], "time": cols["time_max"][i],
                "metadata_bytes": cols["metadata_bytes_max"][i], "base_checkpoint_id": cols["base_checkpoint_id_max"][i],
                "full_bytes": 0, "uploaded_bytes": 0, "reused_bytes": 0, "checkpointed_bytes": 0, "files": 0,
                "operators": {},
            }  # fmt: skip
        for k, src in (("full_bytes", "full_bytes_sum"), ("uploaded_bytes", "uploaded_bytes_sum"),
                       ("reused_bytes", "reused_bytes_sum"), ("checkpointed_bytes", "checkpointed_bytes_sum"),
                       ("files", "file_count_sum")):  # fmt: skip
            ck[k] += cols[src][i]
        ck["operators"][cols["operator_id"][i]] = i
    out_jobs = []
    latest_rows = _latest_subtasks(table, {j: max(c) for j, c in jobs.items() if c}, dirs is not None)
    for job_id, cks in jobs.items():
        out_jobs.append(
            _job(job_id, [cks[c] for c in sorted(cks)], cols, latest_rows.get(job_id, {}), operator, since,
                 since_is_instant, budget, rules, (incomplete or {}).get(job_id, []),
                 None if files is None else files.get(job_id))
        )  # fmt: skip
    ok = not any(v["broken"] for j in out_jobs for v in j["verdicts"])
    return HistoryReport(root, ledger, out_jobs, [r.text for r in rules], ok)


def _codes(table: Any, names: list[str]) -> tuple[Any, dict[str, list]]:
    """``table`` with a ``__<name>`` column of dictionary codes per string column ``name`` (one
    dictionary per column across all chunks), and each column's dictionary values."""
    import pyarrow as pa
    import pyarrow.compute as pc

    values: dict[str, list] = {}
    for name in names:
        col = table[name]
        if not pa.types.is_dictionary(col.type):
            col = pc.dictionary_encode(col)
        col = col.unify_dictionaries() if hasattr(col, "unify_dictionaries") else col
        chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
        values[name] = chunks[0].dictionary.to_pylist() if chunks else []
        indices = (
            pa.chunked_array([c.indices for c in chunks], type=chunks[0].indices.type) if chunks else None
        )
        table = table.append_column(f"__{name}", indices if indices is not None else pa.array([], pa.int32()))
    return table, values


def _latest_subtasks(
    table: Any, latest: dict[str, tuple[int, str]], with_dirs: bool
) -> dict[str, dict[str, list[tuple[int, int]]]]:
    """Per job, per operator: (subtask, full bytes) of the job's newest entry ((checkpoint id,
    savepoint directory or ``""``); ``with_dirs``: the table has the ``__dir`` column)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out: dict[str, dict[str, list[tuple[int, int]]]] = {}
    if not latest:
        return out
    ids = pa.array(sorted({c for c, _d in latest.values()}), type=pa.int64())
    t = table.filter(pc.is_in(table["checkpoint_id"], value_set=ids))
    names = ["job_id", "checkpoint_id", "operator_id", "subtask", "full_bytes"]
    t = t.select([*names, "__dir"] if with_dirs else names)
    cols = [t[c].to_pylist() for c in t.column_names]
    if not with_dirs:
        cols.append([""] * t.num_rows)
    for j, c, o, s, f, d in zip(*cols, strict=True):
        if latest.get(j) == (c, d):
            out.setdefault(j, {}).setdefault(o, []).append((s, f))
    return out


def _display(name: str | None, uid: str | None, operator_id: str) -> str:
    return name or uid or operator_id[:8]


def _job(
    job_id: str, checkpoints: list[dict[str, Any]], cols: dict[str, list], latest_subtasks: dict,
    operator: str | None, since: float | None, since_is_instant: bool, budget: int | None,
    rules: list[Rule], incomplete: list[int], files: Any = None,
) -> dict[str, Any]:  # fmt: skip
    newest_time = max((c["time"] for c in checkpoints if c["time"] is not None), default=None)
    if since is not None:
        cut = since if since_is_instant else (None if newest_time is None else newest_time - since)
        if cut is not None:
            checkpoints = [c for c in checkpoints if c["time"] is not None and c["time"] >= cut]
    ids = [c["checkpoint_id"] for c in checkpoints]
    gaps = sorted(set(range(ids[0], ids[-1] + 1)) - set(ids)) if ids and job_id != NO_JOB else []
    times = [c["time"] for c in checkpoints]
    # operators in the newest checkpoint first, then any gone since (renamed, removed)
    op_ids: dict[str, None] = {}
    for c in reversed(checkpoints):
        op_ids.update(dict.fromkeys(c["operators"]))
    operators = []
    for oid in op_ids:
        series, name, uid, kinds = [], None, None, ""
        for c in checkpoints:
            i = c["operators"].get(oid)
            if i is None:
                series.append({"checkpoint_id": c["checkpoint_id"], "full_bytes": 0, "uploaded_bytes": 0})
                continue
            name, uid, kinds = (
                cols["operator_name_max"][i],
                cols["operator_uid_max"][i],
                cols["state_kinds_max"][i],
            )
            series.append(
                {
                    "checkpoint_id": c["checkpoint_id"], "full_bytes": cols["full_bytes_sum"][i],
                    "uploaded_bytes": cols["uploaded_bytes_sum"][i],
                    "largest_subtask_bytes": cols["full_bytes_max"][i], "subtasks": cols["subtask_count"][i],
                }
            )  # fmt: skip
        if operator is not None and operator not in (oid, name, uid):
            continue
        fulls = [s["full_bytes"] for s in series]
        g = growth(times, fulls)
        subs = sorted(s for s in latest_subtasks.get(oid, []) if s[0] != COORDINATOR)
        largest = max(subs, key=lambda s: s[1], default=None)
        mean = sum(f for _s, f in subs) / len(subs) if subs else 0
        operators.append(
            {
                "operator_id": oid, "name": name, "uid": uid, "display": _display(name, uid, oid),
                "state_kinds": [k for k in kinds.split(",") if k],
                "subtasks": len(subs), "full_bytes": fulls[-1] if fulls else 0,
                "uploaded_bytes": series[-1]["uploaded_bytes"] if series else 0,
                "mean_bytes": sum(fulls) / len(fulls) if fulls else 0,
                "largest_subtask": None if largest is None else {"index": largest[0], "full_bytes": largest[1]},
                "skew": (largest[1] / mean) if largest is not None and mean > 0 else None,
                "series": series, "growth": g,
                "days_to_budget": g.days_to(fulls[-1], budget) if fulls else None,
                "states": None if files is None else files.states.get(oid, []),
            }
        )  # fmt: skip
    rank_key = (
        "bytes_per_day"
        if any(o["growth"].bytes_per_day is not None for o in operators)
        else "bytes_per_checkpoint"
    )
    # the fastest growing first; operators that hold no state at all last
    ranked = sorted(
        operators,
        key=lambda o: (
            not any(s["full_bytes"] for s in o["series"]),
            -(getattr(o["growth"], rank_key) or 0.0),
        ),
    )
    for n, o in enumerate(ranked, 1):
        o["rank"] = n
        o["suspect"] = _suspect(o)
    fulls = [c["full_bytes"] for c in checkpoints]
    g = growth(times, fulls)
    view = {
        "job_id": job_id or None, "kind": "savepoints" if job_id == NO_JOB else "job",
        "checkpoints": [
            {
                **{k: v for k, v in c.items() if k != "operators"},
                "reuse_ratio": (c["reused_bytes"] / (c["reused_bytes"] + c["uploaded_bytes"]))
                if c["reused_bytes"] + c["uploaded_bytes"] else None,
            }
            for c in checkpoints
        ],
        "missing_checkpoint_ids": gaps, "incomplete_checkpoint_ids": sorted(incomplete),
        "full_bytes": fulls[-1] if fulls else 0,
        "uploaded_bytes": checkpoints[-1]["uploaded_bytes"] if checkpoints else 0,
        "mean_bytes": sum(fulls) / len(fulls) if fulls else 0,
        "growth": g, "days_to_budget": g.days_to(fulls[-1], budget) if fulls else None,
        "budget_bytes": budget, "ranked_by": rank_key, "operators": ranked,
        # --states: the checkpoint the states were counted in, file merging's figures, what could not be read
        "states_checkpoint_id": None if files is None else files.checkpoint_id,
        "file_merging": None if files is None else files.file_merging,
        "files_problems": None if files is None else files.problems,
    }  # fmt: skip
    view["verdicts"] = verdicts(rules, view, ranked)
    return view


def _suspect(o: dict[str, Any]) -> str | None:
    """What kind of unbounded growth a growing operator's state suggests, as far as the metadata tells."""
    g = o["growth"]
    if o["rank"] != 1 or not g.bytes_per_checkpoint or not o["mean_bytes"]:
        return None
    # the fitted line rose by at least half the window's mean: more than the sawtooth of compactions
    if g.bytes_per_checkpoint * max(g.points - 1, 1) < 0.5 * o["mean_bytes"]:
        return None
    kinds = set(o["state_kinds"])
    if "union" in kinds:
        return (
            "union list state grows: union state is copied to every subtask and multiplies on each failover"
        )
    if "keyed" in kinds:
        return _keyed_suspect(o["states"])
    if "channel" in kinds:
        return "in-flight data (unaligned checkpoints) grows: back-pressure?"
    if "operator" in kinds:
        return "operator list state grows"
    return None


def _keyed_suspect(states: list[dict[str, Any]] | None) -> str:
    """Growing keyed state, named by state when ``--states`` read them (their TTL, entries, bytes)."""
    from ckptctl.sizes import human_bytes

    if states is None:
        return (
            "keyed state grows: a key space that keeps growing without state TTL? (--states names the states)"
        )
    keyed = [s for s in states if s["scope"] == "keyed" and s["kind"] != "TIMERS"]
    no_ttl = [s for s in keyed if s["ttl"] is False]
    if not no_ttl:
        return (
            "keyed state grows though its states have TTL: a key space growing faster than the TTL expires it"
        )
    named = ", ".join(
        f"'{s['name']}' ({s['entries']} entries, {human_bytes(s['bytes'])})" for s in no_ttl[:3]
    )
    more = f" and {len(no_ttl) - 3} more" if len(no_ttl) > 3 else ""
    return f"keyed state without TTL grows: {named}{more}: a key space that keeps growing is never expired"
