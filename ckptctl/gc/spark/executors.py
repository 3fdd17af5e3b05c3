"""What runs on Spark executors while a plan is made: listing the scopes, folding slices of the
checkpoints, and deciding the files the rule's SQL form leaves to Python
(:meth:`~ckptctl.gc.rule.FileRule.verdicts` over Arrow batches). Module-level functions: Spark
pickles them by reference and the executors import them."""

from __future__ import annotations

import itertools
import json
import pickle
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from ckptctl import storage as st
from ckptctl.gc.contexts import changelog_ids, forst_parents, referenced_jobs
from ckptctl.gc.decisions import Verdicts
from ckptctl.gc.folding import Folded, fold_references
from ckptctl.gc.reasons import Refusal
from ckptctl.gc.rule import FileRule, RuleColumns, partially_live
from ckptctl.gc.spark.columns import DECISION_SCHEMA, FOLD_SCHEMA, LISTING_SCHEMA
from ckptctl.storage import Storage, StorageOptions


def list_partition(storage_options: StorageOptions, tasks: Iterable[tuple]) -> Iterator[Any]:
    """Arrow record batches of :data:`LISTING_SCHEMA`: files (``f``), and for local walks what they
    saw besides (``d`` directory, ``l`` followed symlink, ``a`` alias, ``m`` mount), or inventory
    read statistics (``s``)."""
    from ckptctl.engine.arrow import arrow_batches

    storage = Storage.shared(storage_options)
    for task in tasks:
        if task[0] == "inventory":
            yield from inventory_batches(storage, task)
        else:
            yield from arrow_batches(listed_rows(storage, task), LISTING_SCHEMA)


def listed_rows(storage: Storage, task: tuple) -> Iterator[tuple]:
    """The rows of one listing task (tuples of :data:`LISTING_SCHEMA`)."""
    kind = task[0]
    if kind == "local":  # every local scope in one walk: an alias across scopes is one too
        seen: dict = {}
        for root_idx, root in task[1]:
            notes = st.WalkNotes(seen=seen)
            for pos, f in enumerate(storage.list_files(root, notes)):
                yield ("f", root_idx, 0, pos, _utf8(f.uri), f.size, _seconds(f.mtime), bool(f.is_link), None)
            # each in the walk's order (pos): the first alias is the one reported
            for pos, (d, mtime) in enumerate(notes.dirs.items()):
                yield ("d", root_idx, 0, pos, _utf8(d), 0, _seconds(mtime), False, None)
            for pos, (link, target) in enumerate(notes.followed):
                yield ("l", root_idx, 0, pos, _utf8(link), 0, None, False, _utf8(target))
            for pos, (uri, first) in enumerate(notes.aliases):
                yield ("a", root_idx, 0, pos, _utf8(uri), 0, None, False, _utf8(first))
            for pos, m in enumerate(notes.mounts):
                yield ("m", root_idx, 0, pos, _utf8(m), 0, None, False, None)
    elif kind == "s3":
        from fsspec.asyn import sync

        from ckptctl.storage.s3list import list_below

        _kind, root_idx, part, uri, prefix, sub = task
        fs, path = storage.fs(uri)
        bucket = path.partition("/")[0]
        try:
            objects = sync(fs.loop, list_below, fs, bucket, prefix, sub)
        except Exception as e:  # noqa: BLE001 - botocore errors are not OSErrors
            raise st.StorageError(st.s3_problem(e) or f"cannot list: {type(e).__name__}: {e}",
                                  path=f"s3://{bucket}/{sub}") from None  # fmt: skip
        for pos, (key, size, modified) in enumerate(objects):
            yield ("f", root_idx, part, pos, f"s3://{bucket}/{key}", size,
                   modified.timestamp() if modified else None, False, None)  # fmt: skip
    else:  # another fsspec store: one listing
        _kind, root_idx, root = task
        for pos, f in enumerate(storage.list_files(root)):
            yield ("f", root_idx, 0, pos, f.uri, f.size, _seconds(f.mtime), bool(f.is_link), None)


def inventory_batches(storage: Storage, task: tuple) -> Iterator[Any]:
    """An inventory data file's current objects under the scopes as ``f`` rows, column by column
    (10^7 of them: no Python object per row), then its read statistics (one ``s`` row). The order
    key is (scope, 0, 0, uri): the local planner sorts an inventory's files by URI."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ckptctl.engine.arrow import arrow_batches, arrow_schema
    from ckptctl.inventory.report import ReadStats
    from ckptctl.inventory.rows import iter_batches

    _kind, inv, scopes = task
    stats = ReadStats()
    schema = arrow_schema(LISTING_SCHEMA)
    for batch in iter_batches(storage, inv, scopes, stats):
        uri, n = batch.column("uri"), batch.num_rows
        root_idx = pa.nulls(n, pa.int32())
        for i in reversed(range(len(scopes))):  # the first scope the file is under
            root_idx = pc.if_else(
                pc.starts_with(uri, scopes[i].rstrip("/") + "/"), pa.scalar(i, pa.int32()), root_idx
            )
        yield _record_batch(schema, n, kind="f", root_idx=root_idx, part=0, pos=0, uri=uri, size=batch.column("size"),
                            mtime=batch.column("mtime"), is_link=False)  # fmt: skip
    yield from arrow_batches(
        [("s", 0, 0, stats.rows_kept, None, stats.rows_read, None, False, None)], LISTING_SCHEMA
    )


def _record_batch(schema, n: int, **columns) -> Any:
    """A record batch of ``n`` rows of ``schema``: ``columns`` by name, each an Arrow array or a
    value every row has; the others null."""
    import pyarrow as pa

    def column(f) -> Any:
        value = columns.get(f.name)
        if value is None:
            return pa.nulls(n, f.type)
        return (
            value
            if isinstance(value, (pa.Array, pa.ChunkedArray))
            else pa.repeat(pa.scalar(value, f.type), n)
        )

    return pa.RecordBatch.from_arrays([column(f) for f in schema], schema=schema)


def _utf8(uri: str, what: str = "a name that is not UTF-8 cannot be planned on Spark: rename it") -> str:
    """``uri``, which Spark can hold: a local name of bytes that are no UTF-8 (a surrogate escape
    in Python), or a path a ``_metadata`` spells with a lone surrogate (Java strings may hold one),
    is one line naming it, not a task's traceback (an Arrow or Spark string is UTF-8; the
    in-process planner plans such names)."""
    if not uri.isascii():
        try:
            uri.encode()
        except UnicodeEncodeError:
            raise st.StorageError(f"{what}, or plan with --engine local",
                                  path=uri.encode(errors="backslashreplace").decode()) from None  # fmt: skip
    return uri


def _seconds(mtime) -> float | None:
    """An mtime as Spark's DoubleType takes it (an int is refused)."""
    return None if mtime is None else float(mtime)


def fold_partition(storage_options, retained_set, rebase, prefixes, rows: Iterable[tuple]) -> Iterator[Any]:
    """Arrow batches of :data:`FOLD_SCHEMA` for a slice of the checkpoints (in order): the live
    paths, the segments, the paths only expired checkpoints reference, and one ``small`` row with
    the rest of the :class:`Folded` (pickled; proportional to checkpoints and external
    references), with the counts of live and segment rows and the live paths' possible ForSt
    directories: each a Spark job of its own when the driver asked for them later (three of a
    small plan's ~40). The paths go to Arrow a column at a time: a tuple per path cost a quarter
    of decoding them (2M live paths at 10^7 files)."""
    import pyarrow as pa

    from ckptctl.engine.arrow import arrow_batches, arrow_schema

    indexed = list(rows)
    if not indexed:
        return
    out = fold_references(storage_options, [loc for _i, loc in indexed], retained_set, rebase, prefixes)
    part = indexed[0][0]
    for p in itertools.chain(out.live, out.spans, out.expired_refs):
        if not p.isascii():
            _utf8(
                p, "a checkpoint references a path that is not UTF-8 (a lone surrogate): Spark cannot hold it"
            )
    schema = arrow_schema(FOLD_SCHEMA)
    for kind, paths in (("live", out.live), ("expired", out.expired_refs)):
        paths = list(paths)
        for at in range(0, len(paths), 1 << 16):
            chunk = pa.array(paths[at : at + (1 << 16)], pa.string())
            yield _record_batch(schema, len(chunk), kind=kind, path=chunk, part=part)
    yield from arrow_batches(((("span", p, offset, size, part, None) for p, spans in out.spans.items()
                              for offset, size in spans)), FOLD_SCHEMA)  # fmt: skip
    counts = (len(out.live), sum(len(spans) for spans in out.spans.values()))
    forst = forst_parents(itertools.chain(out.live, out.spans))
    out.live, out.spans, out.expired_refs = set(), {}, set()
    out.refusals = [r for r in out.refusals if r[0] != Refusal.MOVED_DIRECTORY.value]  # merged on the driver
    yield from arrow_batches([("small", None, None, None, part, pickle.dumps(FoldSmall(out, *counts, forst)))],
                             FOLD_SCHEMA)  # fmt: skip


class FoldSmall(NamedTuple):
    """A fold task's ``small`` row: what it folded but the paths, and what the driver needs of
    the paths it keeps (counted as they were made, not by a later pass)."""

    folded: Folded
    live_rows: int
    span_rows: int
    forst_parents: set[str]


def decide_batches(rule: FileRule, contexts, batches: Iterable[Any]) -> Iterator[Any]:
    """:meth:`FileRule.verdicts` over the Arrow batches of a partition of joined rows. Arrow
    batches of :data:`DECISION_SCHEMA` rows: candidates, protected, partially live files, and one
    ``live`` row per batch counting its live files (``pos``) and bytes (``size``). Each row's
    directory is found in Arrow (a split at the last ``/``, dictionary-encoded: a context per
    distinct directory); no file becomes a Python object but a segment's file and the names
    :func:`ckptctl.gc.rule._by_name` reads."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ckptctl.engine.arrow import arrow_batches, arrow_schema

    schema = arrow_schema(DECISION_SCHEMA)
    shipped, labels = contexts.value
    get = shipped.get
    verdicts = Verdicts()
    reasons: list[str] = []
    ids: list[int | None] = []  # each verdict's evidence as a label, or
    inline: list[str | None] = []  # its text, when no label has it

    def rows(outcome: str, batch, codes, jobs, mask) -> Any:
        at = pc.filter(codes, mask)
        return pa.RecordBatch.from_arrays([
            pa.repeat(outcome, len(at)), *(pc.filter(batch.column(n), mask) for n in
                                                                   ("root_idx", "part", "pos", "uri", "size", "mtime")),
            pc.take(pa.array(reasons, pa.string()), at), pc.take(pa.array(ids, pa.int32()), at),
            pc.take(pa.array(inline, pa.string()), at), pc.filter(jobs, mask),
        ], schema=schema)  # fmt: skip

    for batch in batches:
        live = pc.fill_null(batch.column("live"), False)
        live_files = pc.sum(pc.cast(live, "int64")).as_py() or 0
        live_bytes = pc.sum(pc.filter(batch.column("size"), live)).as_py() or 0
        segment = pc.and_(pc.fill_null(pc.greater(pc.list_value_length(batch.column("spans")), 0), False),
                          pc.invert(live))  # fmt: skip
        partial = []
        for i in pc.indices_nonzero(segment).to_pylist():  # file-merging files some checkpoint uses a part of
            row = {c: batch.column(c)[i].as_py() for c in ("root_idx", "part", "pos", "uri", "size", "spans")}
            part = partially_live(row["size"], [(s["offset"], s["size"]) for s in row["spans"]])
            live_files += 1
            live_bytes += row["size"]
            if part:
                partial.append(("partial", row["root_idx"], row["part"], row["pos"], row["uri"], row["size"], None,
                                None, None, json.dumps(part), None))  # fmt: skip
        split = pc.split_pattern(batch.column("uri"), "/", max_splits=1, reverse=True)
        dirs = pc.dictionary_encode(pc.list_element(split, 0))
        ctxs = [get(d) for d in dirs.dictionary.to_pylist()]
        codes, taken, kept = rule.verdicts(
            RuleColumns(ctxs, dirs.indices, pc.list_element(split, 1), batch.column("mtime"), batch.column("is_link"),
                        pc.or_(live, segment), batch.column("expired")), verdicts,
        )  # fmt: skip
        for reason, ev in verdicts.pairs[len(reasons) :]:
            text = json.dumps(ev or {})
            reasons.append(str(reason))
            ids.append(labels.evidence_id.get(text))
            inline.append(None if ids[-1] is not None else text)
        jobs = pc.take(pa.array([c[4] for c in ctxs], pa.int32()), dirs.indices)
        yield rows("candidates", batch, codes, jobs, taken)
        yield rows("protected", batch, codes, jobs, kept)
        yield from arrow_batches(partial, DECISION_SCHEMA)
        yield from arrow_batches([("live", 0, 0, live_files, None, live_bytes, None, None, None, None, None)],
                                 DECISION_SCHEMA)  # fmt: skip


def unpickled(fn, ddl: str | None, batches) -> Iterator[Any]:
    """:meth:`ckptctl.gc.spark.work.SparkWork.on_executors` in a task: its items unpickled, ``fn``'s rows in Arrow
    batches of ``ddl`` (``None``: ``fn`` yields record batches itself)."""
    from ckptctl.engine.arrow import arrow_batches

    items = (pickle.loads(b) for batch in batches for b in batch.column(0).to_pylist())  # noqa: S301 - the driver's
    out = fn(items)
    yield from out if ddl is None else arrow_batches(out, ddl)


def referenced_partition(rows) -> Iterator[str]:
    yield from referenced_jobs(r[0] for r in rows)


def changelog_partition(rows) -> Iterator[str]:
    yield from changelog_ids(r[0] for r in rows)
