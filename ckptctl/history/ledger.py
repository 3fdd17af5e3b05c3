"""The ledger: ``history``'s rows (:mod:`ckptctl.history.rows`) kept as a Parquet dataset, on local
disk or S3 through the project's storage layer, so the history outlives ``num-retained``.

A ledger is a directory of ``part-*.parquet`` files. An update lists the checkpoint root once
(``_metadata`` files only, never ``shared/``), reads each ``_metadata`` the ledger does not hold yet
(one ``GET`` each), and writes their rows as one new part. It is idempotent: a checkpoint already
in the ledger is never read or written again, so running it twice adds nothing. A part's name is
derived from what it holds, so two updates racing write the same name, and readers keep one row per
(job, checkpoint, operator, subtask) whatever the parts hold; a savepoint is known by its directory
(:func:`ckptctl.history.rows.savepoint_dirs`), a job's checkpoint by (job, id) whatever its root.

Uploaded bytes of a new checkpoint are measured against the job's newest earlier checkpoint,
from disk when it is still there, else from the file set the ledger kept for it.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ckptctl import storage as st
from ckptctl.checkpoint.layout import CheckpointLocation, scan_root
from ckptctl.checkpoint.rebase import Rebase
from ckptctl.errors import CkptError
from ckptctl.history.rows import COLUMNS, FILE_COLUMNS, NO_JOB, checkpoint_rows, keys_of, savepoint_dirs
from ckptctl.storage import Storage

PART_PREFIX = "part-"
MAX_PARTS = 64  # a ledger is compacted into one part beyond this many
KEY = ("job_id", "checkpoint_id", "operator_id", "subtask")  # and a savepoint's directory (path)


def arrow_schema() -> Any:
    import pyarrow as pa

    fields = [(name, pa.type_for_alias(t)) for name, t in COLUMNS.items()]
    fields += [("files", pa.list_(pa.string())), ("file_sizes", pa.list_(pa.int64()))]
    return pa.schema(fields)


def rows_to_table(rows: list[dict[str, Any]], with_files: bool = True) -> Any:
    import pyarrow as pa

    schema = arrow_schema()
    if not with_files:
        schema = pa.schema([f for f in schema if f.name not in FILE_COLUMNS])
    return pa.table({f.name: pa.array([r[f.name] for r in rows], type=f.type) for f in schema}, schema=schema)


@dataclass
class Ledger:
    """A ledger directory and its parts (listed once)."""

    storage: Storage
    uri: str
    parts: list[str] = field(default_factory=list)

    @classmethod
    def open(cls, storage: Storage, uri: str) -> Ledger:
        uri = st.normalize_uri(uri).rstrip("/")
        if storage.is_file(uri):
            raise CkptError(f"{uri}: a ledger is a directory of Parquet parts, this is a file")
        parts = sorted(
            f.uri for f in storage.list_files(uri)
            if st.basename(f.uri).startswith(PART_PREFIX) and f.uri.endswith(".parquet")
        )  # fmt: skip
        return cls(storage, uri, parts)

    def read(self, columns: Iterable[str] | None = None, checkpoint_id: int | None = None) -> Any:
        """The ledger as one Arrow table (``columns``: only those; strings dictionary-encoded, as
        Parquet holds them), one row per :data:`KEY`; ``checkpoint_id``: only the parts whose name
        says they may hold it."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        cols = list(columns) if columns is not None else None
        wanted = None if cols is None else list(dict.fromkeys([*KEY, "path", *cols]))
        dictionary = [c for c in (wanted or COLUMNS) if COLUMNS.get(c) == "string"]
        parts = [u for u in self.parts if checkpoint_id is None or _may_hold(u, checkpoint_id)]
        tables = []
        for uri in parts:
            data = self.storage.read_bytes(uri)
            try:
                # ParquetFile, not read_table: read_table goes through pyarrow.dataset (its import and a
                # dataset per part: a third of the time of reading 41 parts of a 10^6-row ledger)
                f = pq.ParquetFile(pa.BufferReader(data), read_dictionary=dictionary)
                names = set(f.schema_arrow.names)
                t = f.read(
                    columns=None if wanted is None else [c for c in wanted if c in names], use_threads=True
                )
            except (pa.ArrowException, OSError) as e:
                raise CkptError(f"{uri}: not a ledger part (Parquet): {e}") from None
            tables.append(t)
        if not tables:
            return dictionary_encoded(arrow_schema().empty_table().select(wanted or arrow_schema().names))
        table = pa.concat_tables(tables, promote_options="permissive") if len(tables) > 1 else tables[0]
        if _overlapping(parts):  # racing or interrupted writers: one row per key
            table = _first_per_key(table)
        return table

    def write(self, rows: list[dict[str, Any]]) -> str | None:
        """One new part holding ``rows``; its name says what it holds (see the module docstring)."""
        return self.write_table(rows_to_table(rows)) if rows else None

    def write_table(self, table: Any) -> str | None:
        import pyarrow.parquet as pq

        if table.num_rows == 0:
            return None
        ids = sorted(set(zip(table["job_id"].to_pylist(), table["checkpoint_id"].to_pylist(), strict=True)))
        dirs = savepoint_dirs(table)
        # a savepoint by its directory: another with its id must not overwrite its part
        named = ids if dirs is None else sorted({*ids, *dirs.unique().to_pylist()} - {""}, key=repr)
        digest = hashlib.sha256(repr(named).encode()).hexdigest()[:16]
        first, last = min(i[1] for i in ids), max(i[1] for i in ids)
        uri = f"{self.uri}/{PART_PREFIX}{first:012d}-{last:012d}-{digest}.parquet"
        buf = io.BytesIO()
        pq.write_table(table, buf, compression="zstd")
        self.storage.write_bytes(uri, buf.getvalue())
        if uri not in self.parts:
            self.parts.append(uri)
        return uri

    def compact(self, max_parts: int = MAX_PARTS) -> None:
        """Over ``max_parts`` parts (a cron appending every few minutes), rewrite them as one: the
        merged part is written first, the old ones deleted after, so an interrupted compaction
        leaves duplicates (which readers drop), never a gap."""
        if len(self.parts) <= max_parts:
            return
        import pyarrow.compute as pc

        old = list(self.parts)
        table = self.read().cast(arrow_schema())  # the parts' plain strings again
        merged = self.write_table(table.take(pc.sort_indices(table["checkpoint_id"])))
        gone = [u for u in old if u != merged]
        self.storage.delete_many(gone)
        self.parts = [merged] if merged else []


def _span(uri: str) -> tuple[int, int] | None:
    """The ids a part named ``part-<first>-<last>-<digest>.parquet`` holds (``None``: any)."""
    bits = st.basename(uri)[len(PART_PREFIX) :].split("-")
    if len(bits) != 3 or not bits[0].isdigit() or not bits[1].isdigit():
        return None
    return int(bits[0]), int(bits[1])


def _may_hold(uri: str, checkpoint_id: int) -> bool:
    span = _span(uri)
    return span is None or span[0] <= checkpoint_id <= span[1]


def _overlapping(parts: list[str]) -> bool:
    """Whether two parts may hold the same checkpoint (then rows are deduplicated, else not: the
    check by name spares a group-by over 10^6 rows)."""
    spans = [_span(u) for u in parts]
    if any(s is None for s in spans):
        return len(parts) > 1
    spans.sort()
    return any(b[0] <= a[1] for a, b in zip(spans, spans[1:], strict=False))


def dictionary_encoded(table: Any) -> Any:
    """``table`` with its string columns dictionary-encoded, like the ledger's reads."""
    import pyarrow.compute as pc

    for i, f in enumerate(table.schema):
        if COLUMNS.get(f.name) == "string" and not str(f.type).startswith("dictionary"):
            table = table.set_column(i, f.name, pc.dictionary_encode(table[f.name]))
    return table


def _first_per_key(table: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    n = table.num_rows
    keys, extra = list(KEY), ["__i"]
    dirs = savepoint_dirs(table)
    if dirs is not None:  # two savepoints with one id are two entries
        table, keys, extra = table.append_column("__dir", dirs), [*keys, "__dir"], ["__i", "__dir"]
    table = table.append_column("__i", pa.array(range(n), type=pa.int64()))
    first = table.group_by(keys, use_threads=False).aggregate([("__i", "min")])
    if first.num_rows == n:
        return table.drop_columns(extra)
    keep = pc.sort_indices(first["__i_min"])
    return table.take(pc.take(first["__i_min"], keep)).drop_columns(extra)


@dataclass
class Update:
    """What one ledger update did: the checkpoints it added and their rows."""

    ledger: str
    added: list[tuple[str, int]]
    already: int
    part: str | None
    failed: list[dict[str, Any]]
    rows: list[dict[str, Any]] = field(default_factory=list)
    loaded: list[Any] = field(default_factory=list)  # the checkpoints read (LoadedCheckpoint)


def on_disk(storage: Storage, root: str) -> tuple[Any, list[CheckpointLocation]]:
    """One listing of ``root`` (never ``shared/``): its layout and its complete checkpoint locations."""
    root = st.normalize_uri(root)
    layout = scan_root(storage, root, storage.list_checkpoint_areas(root))
    return layout, [loc for loc in layout.locations() if loc.complete]


def update_ledger(
    storage: Storage,
    root: str,
    ledger_uri: str | Ledger,
    rebase: Rebase | None = None,
    disk: Any = None,
    have: Any = None,
) -> Update:
    """Append every complete checkpoint under ``root`` the ledger lacks (see the module docstring).
    ``disk``: the result of :func:`on_disk` when the caller listed the root already; ``have``: the
    ledger's table when the caller read it already (its job_id and checkpoint_id columns)."""
    ledger = ledger_uri if isinstance(ledger_uri, Ledger) else Ledger.open(storage, ledger_uri)
    if have is None:
        have = ledger.read(columns=["job_id", "checkpoint_id", "path"])
    known = checkpoints_of(have)
    _layout, locations = disk if disk is not None else on_disk(storage, root)
    savepoints = ledgered_outside_jobs(have)
    loaded, failed = load_new(storage, locations, known, rebase, savepoints)
    # the job's newest ledgered checkpoint before each new one, for its uploaded bytes
    newest = {}
    for job, cid in known:
        newest.setdefault(job, []).append(cid)
    rows, added = [], []
    chains = _chains(loaded)
    for job, cks in chains.items():
        earlier = sorted(newest.get(job, ()))
        first = cks[0].metadata.checkpoint_id
        base_id = next((c for c in reversed(earlier) if c < first), None) if job != NO_JOB else None
        previous = _ledger_keys(ledger, job, base_id) if base_id is not None else None
        for ck in cks:
            ck_rows = checkpoint_rows(ck, previous, base_id)
            rows.extend(ck_rows)
            added.append((job, ck.metadata.checkpoint_id))
            if job != NO_JOB:
                previous, base_id = keys_of(ck_rows), ck.metadata.checkpoint_id
    part = ledger.write(rows)
    ledger.compact()
    already = sum(1 for job, _cid in known if job != NO_JOB) + len(savepoints)
    return Update(ledger.uri, added, already, part, failed, rows, loaded)


def checkpoints_of(table: Any) -> set[tuple[str, int]]:
    """The (job, checkpoint id) pairs of a ledger table: the distinct values of one int64 column
    (job's dictionary code << 40 | checkpoint id), a quarter of a group-by's time over 10^6 rows."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if table.num_rows == 0:
        return set()
    jobs = table["job_id"].unify_dictionaries() if pa.types.is_dictionary(table["job_id"].type) else None
    if jobs is None or jobs.num_chunks == 0 or pc.max(table["checkpoint_id"]).as_py() >= 1 << 40:
        done = table.select(["job_id", "checkpoint_id"]).group_by(
            ["job_id", "checkpoint_id"], use_threads=False
        )
        done = done.aggregate([])
        return set(zip(done["job_id"].to_pylist(), done["checkpoint_id"].to_pylist(), strict=True))
    names = jobs.chunk(0).dictionary.to_pylist()
    codes = pa.chunked_array([c.indices.cast(pa.int64()) for c in jobs.chunks], type=pa.int64())
    keys = pc.unique(pc.add(pc.shift_left(codes, 40), table["checkpoint_id"])).to_pylist()
    return {(names[k >> 40], k & ((1 << 40) - 1)) for k in keys}


def ledgered_outside_jobs(table: Any) -> set[str]:
    """The directories of the ledger's savepoints (rows of no job), normalised: a savepoint is
    known by its directory alone (its id is inside its ``_metadata`` and other jobs' savepoints
    share it), so the update knows one it holds without reading it again."""
    import pyarrow.compute as pc

    dirs = savepoint_dirs(table)
    return set() if dirs is None else set(pc.unique(dirs).to_pylist()) - {""}


def load_new(
    storage: Storage, locations: list[CheckpointLocation], known: set, rebase: Rebase | None,
    known_paths: set[str] = frozenset(),  # type: ignore[assignment]
):  # fmt: skip
    """Load the checkpoints at ``locations`` not in ``known`` ((job, id) pairs) nor at
    ``known_paths`` (savepoints already ledgered), one ``GET`` each; an unreadable one is
    reported, never fatal (the next update tries again)."""
    from ckptctl.checkpoint.loading import load_checkpoint

    loaded, failed = [], []
    for loc in locations:
        if loc.kind == "checkpoint" and (loc.job_id, loc.dir_checkpoint_id) in known:
            continue  # not read again: the update costs one GET per new _metadata only
        if (loc.kind != "checkpoint" or not loc.job_id) and st.normalize_uri(loc.uri) in known_paths:
            continue  # a savepoint (or a directory of no job) ledgered by an earlier update
        try:
            ck = load_checkpoint(storage, loc, rebase)
        except CkptError as e:
            failed.append({"path": loc.uri, "error": str(e)})
            continue
        from ckptctl.history.rows import job_key

        job = job_key(ck)
        if job != NO_JOB and (job, ck.metadata.checkpoint_id) in known:
            continue  # a savepoint's id says nothing of which it is: known_paths did
        loaded.append(ck)
    return loaded, failed


def _chains(loaded: list) -> dict[str, list]:
    from ckptctl.history.rows import job_key

    chains: dict[str, list] = {}
    for ck in loaded:
        chains.setdefault(job_key(ck), []).append(ck)
    for cks in chains.values():
        cks.sort(key=lambda c: c.metadata.checkpoint_id)
    return chains


def _ledger_keys(ledger: Ledger, job: str, checkpoint_id: int) -> dict[str, int]:
    """The file keys the ledger kept for one checkpoint of one job."""
    import pyarrow.compute as pc

    t = ledger.read(columns=list(FILE_COLUMNS), checkpoint_id=checkpoint_id)
    t = t.filter(pc.and_(pc.equal(t["job_id"], job), pc.equal(t["checkpoint_id"], checkpoint_id)))
    out: dict[str, int] = {}
    for files, sizes in zip(t["files"].to_pylist(), t["file_sizes"].to_pylist(), strict=True):
        out.update(zip(files, sizes, strict=True))
    return out
