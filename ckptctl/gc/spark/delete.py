"""``gc apply`` at bucket scale: the deletions run on Spark executors, the driver holds only counts.

The candidates (a Spark DataFrame of ``uri``/``path``, ``size``, ``mtime`` [, ``reason``], or rows
of the same) were re-validated by the planner; what can still change is each file itself. So:

1. *Each directory is listed again, once* (one LIST per prefix, never a HEAD per file): the
   candidates are grouped by their directory and each task takes whole directories; a file that
   is gone, changed or re-created since the plan is not deleted (:func:`~ckptctl.gc.apply.why_changed`),
   anything the roots do not hold in normal form is refused (:meth:`~ckptctl.gc.apply.Remover.refusal`).
2. *Deletion in batches of at most ``batch`` files* numbered over all judged files, so S3 gets
   ``ceil(n / 1000)`` ``DeleteObjects`` requests at most. Each batch goes through
   :class:`~ckptctl.gc.apply.Remover` as the driver's apply does: ``O_NOFOLLOW`` directory
   descriptors locally, ``Storage.delete_many`` on S3 (back-off on SlowDown and 5xx, per-key
   ``Errors`` of the answer reported as failed, never as deleted).
3. *A manifest per batch*, written once the batch's deletions are confirmed:
   ``MANIFEST_DIR/batch-<run>-<n>.jsonl``, one line per file with its outcome (``deleted``,
   ``moved``, ``gone``, ``skipped``, ``failed``). A re-run (after a crash, a kill, failures) reads the
   manifests on the executors and leaves out every file an earlier run deleted, moved or found
   gone *with the same size and mtime* (a manifest of another plan, or a file re-created since,
   settles nothing); a skipped or failed file is judged again. A file deleted by a batch that died
   before its manifest is found gone and counted as done, never as failed.
4. *Expired checkpoints' ``_metadata`` first*, on the driver, before any executor deletes a file:
   if one of them cannot go, nothing else goes (the files it names stay restorable).

Only aggregates come back to the driver (:class:`ExecutorApplyResult`: counts, bytes, the first
:data:`SAMPLE` failures and skips), whatever the number of files.
"""

from __future__ import annotations

import functools
import json
import os
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ckptctl import storage as st
from ckptctl.checkpoint.layout import METADATA_FILE
from ckptctl.engine.spark import executor_error
from ckptctl.errors import CkptError, StoreUnanswered
from ckptctl.gc.apply import (
    GcApplyRefused,
    Remover,
    outside_scopes,
    remove_emptied_dirs,
    trash_targets,
    why_changed,
)
from ckptctl.gc.decisions import FileDecision, GcPlan
from ckptctl.storage import Storage, StorageOptions
from ckptctl.storage.retry import first_line, retrying


class SparkApplyFailed(CkptError):
    """The executors' job died (an executor lost, storage unreachable): exit 2, re-run to finish."""


SAMPLE = 20  # failures and skips reported by path; the rest are counted
MANIFEST_PREFIX, MANIFEST_SUFFIX = "batch-", ".jsonl"
# the outcome of a file; the first three settle it (a re-run leaves it out); ``skipped`` and
# ``failed`` are judged again: an expired ``_metadata`` skipped once must stop its files again
DELETED, MOVED, GONE, SKIPPED, FAILED = "deleted", "moved", "gone", "skipped", "failed"
SETTLED = (DELETED, MOVED, GONE)
GO = "go"  # judged deletable by the fresh listing: becomes deleted, moved or failed

Row = tuple[str, int, float | None, str]  # uri, size, mtime, reason
Judged = tuple[str, int, float | None, str, str, str | None]  # Row + verdict, why


@dataclass
class Totals:
    """What batches did, merged across executors: counts and bytes, and the first few paths."""

    files: dict[str, int] = field(default_factory=dict)  # outcome -> files
    bytes: dict[str, int] = field(default_factory=dict)  # outcome -> bytes
    failures: list[dict[str, Any]] = field(default_factory=list)
    skips: list[dict[str, Any]] = field(default_factory=list)
    batches: int = 0
    emptied: set[str] = field(default_factory=set)  # local directories files were deleted from

    def count(self, outcome: str, size: int, n: int = 1) -> None:
        self.files[outcome] = self.files.get(outcome, 0) + n
        self.bytes[outcome] = self.bytes.get(outcome, 0) + size

    def note(self, outcome: str, path: str, why: str | None) -> None:
        sample = self.failures if outcome == FAILED else self.skips if outcome == SKIPPED else None
        if sample is not None and len(sample) < SAMPLE:
            sample.append({"path": path, ("error" if outcome == FAILED else "reason"): why})

    def merge(self, other: Totals) -> Totals:
        for outcome, n in other.files.items():
            self.count(outcome, other.bytes.get(outcome, 0), n)
        self.failures = (self.failures + other.failures)[:SAMPLE]
        self.skips = (self.skips + other.skips)[:SAMPLE]
        self.batches += other.batches
        self.emptied |= other.emptied
        return self


@dataclass
class ExecutorApplyResult:
    """The outcome of :func:`delete_on_executors`. ``earlier`` counts the files earlier runs'
    manifests had settled (left out this time); ``not_attempted`` the files left alone because
    an expired ``_metadata`` could not be deleted first."""

    totals: Totals
    earlier: dict[str, int]
    not_attempted: int
    trashed_to: str | None
    manifest_dir: str
    skipped_by_code: dict[str, int] = field(default_factory=dict)  # re-validation's skips, by code

    @property
    def complete(self) -> bool:
        """Every file was dealt with: none failed, none left alone behind a stuck ``_metadata``
        (exit 0 only then; a skipped file is a decision, not a failure)."""
        return not self.totals.files.get(FAILED) and not self.not_attempted

    def to_json(self) -> dict[str, Any]:
        f, b = self.totals.files, self.totals.bytes
        done = DELETED if self.trashed_to is None else MOVED
        return {
            "engine": "spark", "deleted_files": f.get(done, 0), "deleted_bytes": b.get(done, 0),
            "gone_files": f.get(GONE, 0), "skipped_files": f.get(SKIPPED, 0), "skipped": self.totals.skips,
            "skipped_by_code": self.skipped_by_code,
            "failed_files": f.get(FAILED, 0), "failed": self.totals.failures, "not_attempted_files": self.not_attempted,
            "settled_by_earlier_runs": self.earlier, "batches": self.totals.batches,
            "trash": self.trashed_to, "manifest": self.manifest_dir,
        }  # fmt: skip


def delete_on_executors(
    spark: Any,
    options: StorageOptions,
    candidates: Any,
    roots: Iterable[str],
    manifest_dir: str,
    *,
    trash: str | None = None,
    batch: int = 1000,
) -> ExecutorApplyResult:
    """Delete (or move to ``trash``) re-validated candidates on ``spark``'s executors; see the module."""
    if not 1 <= batch <= 1000:
        raise GcApplyRefused(f"a batch holds 1 to 1000 files (S3's DeleteObjects limit), not {batch}")
    roots = tuple(roots)
    manifest_dir = outside_scopes("--manifest", manifest_dir, roots)
    trash_root = outside_scopes("--trash", trash, roots) if trash else None
    try:
        return _delete_in_stages(spark, options, candidates, roots, manifest_dir, trash_root, batch)
    except CkptError:
        raise
    except Exception as e:  # noqa: BLE001 - Py4JJavaError with an executor's traceback
        raised = executor_error(
            e
        )  # a task's own error (an endpoint that stopped answering), not "PythonException"
        why = str(raised) if raised is not None else f"{type(e).__name__}: {first_line(e)}"
        raise SparkApplyFailed(
            f"the Spark job failed ({why}); the batches that finished are in {manifest_dir}: run the same apply "
            "again to finish"
        ) from None


def _delete_in_stages(
    spark: Any,
    options: StorageOptions,
    candidates: Any,
    roots: tuple[str, ...],
    manifest_dir: str,
    trash_root: str | None,
    batch: int,
) -> ExecutorApplyResult:
    storage = Storage.shared(options)
    sc = spark.sparkContext
    parts = max(sc.defaultParallelism * 4, 1)
    rows = _as_rows(sc, candidates, parts)
    earlier: dict[str, int] = {}
    manifests = _manifests_in(storage, manifest_dir)
    if manifests:  # an earlier run: what its manifests settled is left out
        entries = sc.parallelize(manifests, min(len(manifests), parts)).flatMap(
            functools.partial(_settled_in, options)
        )  # fmt: skip
        unreadable = entries.filter(lambda kv: kv[0] is None).values().take(1)
        if unreadable:  # before anything is deleted, and not "run again": it would fail the same way
            raise GcApplyRefused(unreadable[0])
        recorded = entries.reduceByKey(lambda a, _b: a)
        keyed = rows.keyBy(lambda r: r[:3])  # the same file: path, size and mtime
        earlier = dict(keyed.join(recorded).map(lambda kv: kv[1][1]).countByValue())
        rows = keyed.subtractByKey(recorded).values()
    run = uuid.uuid4().hex[:12]
    apply_batches = functools.partial(_apply_batches, options, roots, manifest_dir, trash_root, run)
    judge = functools.partial(_judge_prefixes, options, roots)

    # stage 1, on the driver: the expired checkpoints' _metadata
    first = rows.filter(_is_metadata).collect()
    totals = Totals()
    if first:
        judged = list(judge(_by_prefix(first)))
        numbered = [(f"m{n}", judged[n * batch : (n + 1) * batch]) for n in range(-(-len(judged) // batch))]
        totals = next(apply_batches(numbered))
        if totals.files.get(FAILED) or totals.files.get(SKIPPED):
            rest = rows.filter(lambda r: not _is_metadata(r)).count()
            return ExecutorApplyResult(totals, earlier, rest, trash_root, manifest_dir)

    # stage 2, on the executors: whole directories listed again, then numbered batches deleted
    judged_rdd = (
        rows.filter(lambda r: not _is_metadata(r)).keyBy(lambda r: st.parent(r[0]))
        .groupByKey(parts).mapPartitions(judge)
    )  # fmt: skip
    from pyspark import StorageLevel

    judged_rdd.persist(StorageLevel.MEMORY_AND_DISK)  # numbered below: listed once, not once per pass
    try:
        by_batch = judged_rdd.zipWithIndex().map(lambda ji: (ji[1] // batch, ji[0])).groupByKey(parts)
        totals = totals.merge(by_batch.mapPartitions(apply_batches).fold(Totals(), Totals.merge))
    finally:
        judged_rdd.unpersist()
    return ExecutorApplyResult(totals, earlier, 0, trash_root, manifest_dir)


@dataclass
class ToApply:
    """What ``gc apply`` deletes on executors: the candidates (a DataFrame of ``path, size, mtime,
    reason``, persisted, when a Spark plan was re-validated on Spark: the driver never holds them,
    ``tests/gc/test_apply_spark_driver.py``; or rows of the same), their totals for the
    confirmation, and the candidates re-validation skipped, counted, the first :data:`SAMPLE` by path."""

    frame: Any
    files: int
    bytes: int
    skipped: int
    skips: list[dict[str, Any]]
    by_code: dict[str, int] = field(
        default_factory=dict
    )  # the skipped by code (ckptctl.gc.revalidation.SKIP_WORDS)

    @classmethod
    def of(cls, go: list[FileDecision], skipped: list[dict[str, Any]]) -> ToApply:
        """What an in-process re-validation kept and skipped (lists on the driver already)."""
        from collections import Counter

        rows = [(d.path, d.size, d.mtime, str(d.reason)) for d in go]
        by_code = dict(Counter(s.get("code") for s in skipped))
        return cls(rows, len(go), sum(d.size for d in go), len(skipped), skipped[:SAMPLE], by_code)

    def release(self) -> None:
        if hasattr(self.frame, "unpersist"):
            self.frame.unpersist()


def apply_plan_on_executors(
    storage: Storage,
    fresh: GcPlan,
    go: ToApply,
    *,
    master: str,
    manifest_dir: str,
    trash: str | None = None,
    batch: int = 1000,
) -> ExecutorApplyResult:
    """``gc apply --engine spark``: what re-validation kept, deleted on the executors of
    ``master``; its skips counted with the executors', and the local directories the run emptied
    removed as :func:`~ckptctl.gc.apply.apply_plan` removes them."""
    from ckptctl.engine.spark import spark_session

    roots = fresh.options.scopes()
    try:
        result = delete_on_executors(
            spark_session(master), storage.options, go.frame, roots, manifest_dir, trash=trash, batch=batch
        )
    finally:
        go.release()
    if go.skipped:
        result.totals.count(SKIPPED, 0, go.skipped)
    result.totals.skips = (list(go.skips) + result.totals.skips)[:SAMPLE]  # with their codes
    result.skipped_by_code = dict(go.by_code)
    remover = Remover(storage, roots)
    try:
        remove_emptied_dirs(remover, fresh, result.totals.emptied)
    finally:
        remover.close()
    return result


def why_dropped_on_executors(options: StorageOptions, skipped: Any, fresh_lists: Any) -> Any:
    """Review m16 on Spark: why each candidate of the plan that the fresh plan no longer proposes
    is not deleted, in the words and codes of the in-process re-validation
    (:func:`~ckptctl.gc.revalidation.why_dropped`: already gone (done), referenced again, guarded now),
    decided on the executors by that same function: the driver holds no path. ``skipped``: rows
    of ``path, code, reason``, ``code`` null for those; ``fresh_lists``: the fresh plan's lists,
    whose ``protected`` rows say why a file is guarded now. Each directory's paths go to one task,
    which lists it once (as in-process), never a request per file."""
    from pyspark.sql import functions as F

    guards = fresh_lists.filter(F.col("outcome") == "protected").select(
        "path", F.col("reason").alias("guard")
    )
    dropped = skipped.filter(F.col("code").isNull()).select("path").join(guards, "path", "left")
    directory = F.expr("substring(path, 1, length(path) - length(substring_index(path, '/', -1)))")
    rows = dropped.repartition(directory).rdd.mapPartitions(functools.partial(_why_dropped, options))
    decided = dropped.sparkSession.createDataFrame(rows, "path string, code string, reason string")
    return skipped.filter(F.col("code").isNotNull()).unionByName(decided)


def _why_dropped(options: StorageOptions, rows: Iterable[Any]) -> Iterator[tuple[str, str, str]]:
    from ckptctl.gc.revalidation import why_dropped

    rows = list(rows)
    guarded = {r.path: r.guard for r in rows if r.guard is not None}
    for s in why_dropped(Storage.shared(options), [r.path for r in rows], guarded):
        yield s["path"], s["code"], s["reason"]


def _is_metadata(row: Row) -> bool:
    return st.basename(row[0]) == METADATA_FILE


def _as_rows(sc: Any, candidates: Any, parts: int) -> Any:
    """An RDD of :data:`Row` from a DataFrame (``uri`` or ``path`` column) or rows of the same."""
    if hasattr(candidates, "columns") and hasattr(candidates, "rdd"):
        from pyspark.sql import functions as F

        columns = candidates.columns
        uri = "uri" if "uri" in columns else "path"
        reason = F.col("reason") if "reason" in columns else F.lit("")
        return candidates.select(F.col(uri), F.col("size"), F.col("mtime"), reason).rdd.map(_row)
    return sc.parallelize([_row(c) for c in candidates], parts)


def _row(values: Iterable[Any]) -> Row:
    uri, size, mtime, *rest = values
    if mtime is not None and not isinstance(mtime, int | float):
        mtime = mtime.timestamp()  # a Parquet timestamp
    return str(uri), int(size), None if mtime is None else float(mtime), str(rest[0] or "") if rest else ""


def _by_prefix(rows: Iterable[Row]) -> Iterator[tuple[str, list[Row]]]:
    groups: dict[str, list[Row]] = {}
    for r in rows:
        groups.setdefault(st.parent(r[0]), []).append(r)
    yield from groups.items()


# -- stage 1 of a task: judge whole directories against one fresh listing each -----------------


def _judge_prefixes(
    options: StorageOptions, roots: tuple[str, ...], groups: Iterable[tuple[str, Iterable[Row]]]
):
    """Every candidate of each directory with its verdict: ``go``, or gone/skipped/failed and why."""
    storage = Storage.shared(options)
    remover = Remover(storage, roots)
    try:
        for prefix, rows in groups:  # a path given twice is judged, deleted and counted once
            yield from _judge_prefix(storage, remover, prefix, sorted(set(rows)))
    finally:
        remover.close()


def _judge_prefix(storage: Storage, remover: Remover, prefix: str, rows: list[Row]) -> Iterator[Judged]:
    refused = {r[0]: remover.refusal(r[0]) for r in rows}
    allowed = [r[0] for r in rows if refused[r[0]] is None]
    listing, error = _listing(storage, remover, prefix, allowed[0], allowed[-1]) if allowed else ({}, None)
    for uri, size, mtime, reason in rows:
        if refused[uri] is not None:
            yield uri, size, mtime, reason, SKIPPED, refused[uri]
        elif listing is None:
            yield uri, size, mtime, reason, FAILED, error
        else:
            current = listing.get(st.basename(uri))
            if current is None:
                yield uri, size, mtime, reason, GONE, None
            elif current.is_link:
                yield (
                    uri,
                    size,
                    mtime,
                    reason,
                    SKIPPED,
                    "not a regular file (a symbolic link?): never deleted",
                )
            else:
                why = why_changed(size, mtime, current, "the plan")
                yield uri, size, mtime, reason, GO if why is None else SKIPPED, why


def _listing(
    storage: Storage, remover: Remover, prefix: str, first: str, last: str
) -> tuple[dict[str, st.FileInfo] | None, str | None]:
    """The directory's files now, by name: locally through the remover's ``O_NOFOLLOW``
    descriptors, on S3 one delimiter listing of the key range ``first``..``last``."""
    if st.scheme_of(prefix) == "file":
        return remover.list_dir(prefix)
    try:
        return _list_s3_range(storage, prefix, first, last), None
    except StoreUnanswered as e:  # each next directory would wait out the same deadline: the task stops
        raise e.at(prefix) from None
    except Exception as e:  # noqa: BLE001 - retried already (SlowDown, 5xx): tried again next run
        return None, f"cannot list its directory: {type(e).__name__}: {first_line(e)}"


def _list_s3_range(storage: Storage, prefix: str, first: str, last: str) -> dict[str, st.FileInfo]:
    """ListObjectsV2 of the objects directly in ``prefix`` (``Delimiter=/``) from just before
    ``first`` and no further than the page holding ``last``: S3 lists keys in UTF-8 byte order,
    which is Python's order of ``str``."""
    fs, path = storage.fs(prefix)
    bucket, _, key = path.partition("/")
    key_prefix = key.rstrip("/") + "/"
    first_key, last_key = first[len("s3://" + bucket) + 1 :], last[len("s3://" + bucket) + 1 :]
    request: dict[str, Any] = {
        "Bucket": bucket,
        "Prefix": key_prefix,
        "Delimiter": "/",
        "StartAfter": first_key[:-1],
    }
    found: dict[str, st.FileInfo] = {}
    while True:
        page = retrying(lambda r=dict(request): fs.call_s3("list_objects_v2", **r))
        objects = page.get("Contents") or []
        for obj in objects:
            name = obj["Key"][len(key_prefix) :]
            found[name] = st.FileInfo(
                f"s3://{bucket}/{obj['Key']}", int(obj["Size"]), obj["LastModified"].timestamp()
            )
        if not page.get("IsTruncated") or (objects and objects[-1]["Key"] >= last_key):
            return found
        request.pop("StartAfter", None)
        request["ContinuationToken"] = page["NextContinuationToken"]


# -- stage 2 of a task: delete numbered batches, then write their manifests ----------------------


def _apply_batches(
    options: StorageOptions,
    roots: tuple[str, ...],
    manifest_dir: str,
    trash_root: str | None,
    run: str,
    batches: Iterable[tuple[Any, Iterable[Judged]]],
) -> Iterator[Totals]:
    """Each batch's deletions, then its manifest; one :class:`Totals` for all of them."""
    storage = Storage.shared(options)
    remover = Remover(storage, roots)
    totals = Totals()
    try:
        for number, judged in batches:
            _apply_batch(storage, remover, manifest_dir, trash_root, f"{run}-{number}", list(judged), totals)
    finally:
        remover.close()
    yield totals


def _apply_batch(
    storage: Storage,
    remover: Remover,
    manifest_dir: str,
    trash_root: str | None,
    name: str,
    judged: list[Judged],
    totals: Totals,
) -> None:
    remover.close()  # each batch walks from the root again: a directory swapped for a link is seen
    going = {j[0]: (j[1], j[2]) for j in judged if j[4] == GO}  # checked again at the unlink
    targets = trash_targets(storage, trash_root, going) if trash_root else {}
    bad: dict[str, str] = {}
    if going:
        bad = dict(remover.move(targets, going) if trash_root else remover.delete(list(going), going))
    records = []
    for uri, size, mtime, reason, verdict, why in judged:
        if verdict == GO:
            verdict, why = (FAILED, bad[uri]) if uri in bad else (MOVED if trash_root else DELETED, None)
        record = {
            "batch": name,
            "path": uri,
            "size": size,
            "mtime": mtime,
            "reason": reason,
            "outcome": verdict,
        }
        if why is not None:
            record["why"] = why
        if verdict == MOVED:
            record["trash_path"] = targets[uri]
        records.append(record)
        if verdict in (DELETED, MOVED) and st.scheme_of(uri) == "file":
            totals.emptied.add(st.parent(uri))
        totals.count(verdict, size)
        totals.note(verdict, uri, why)
    _write_manifest(storage, st.join(manifest_dir, MANIFEST_PREFIX + name + MANIFEST_SUFFIX), records)
    totals.batches += 1


def _write_manifest(storage: Storage, uri: str, records: list[dict[str, Any]]) -> None:
    """The batch's manifest, whole or not at all: locally written aside, fsynced and renamed into
    place; on S3 one PUT (retried like every storage call)."""
    data = "".join(json.dumps(r) + "\n" for r in records).encode()
    if st.scheme_of(uri) == "file":
        path = uri[5:]
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(path + ".tmp", path)
        return
    fs, path = storage.fs(uri)
    retrying(lambda: fs.pipe_file(path, data))


# -- re-runs: what earlier manifests settled ---------------------------------------------------


def _manifests_in(storage: Storage, manifest_dir: str) -> list[str]:
    """The batch manifests of earlier runs (one name per batch, not per file). Anything else in
    the directory: it is not a manifest directory of ckptctl's, refused."""
    names = []
    for f in storage.list_files(manifest_dir):
        name = st.basename(f.uri)
        if name.startswith(MANIFEST_PREFIX) and name.endswith(MANIFEST_SUFFIX):
            names.append(f.uri)
        elif not name.endswith(MANIFEST_SUFFIX + ".tmp"):  # a manifest a crash left half-written
            raise GcApplyRefused(
                f"--manifest {manifest_dir} holds {name}, not a gc batch manifest: refusing to use it"
            )
    return names


def _settled_in(
    options: StorageOptions, manifest: str
) -> Iterator[tuple[tuple[str, int, float | None] | None, str]]:
    """((path, size, mtime), outcome) of every file a manifest records as settled; ``(None,
    error)`` for a line that is not one a batch writes (edited, truncated, another tool's), which
    refuses the run: no guessing what it settled."""
    offset = 0
    for line in Storage.shared(options).read_bytes(manifest).split(b"\n"):
        if line.strip():
            try:
                record = json.loads(line)
                key = (record["path"], record["size"], record["mtime"])
                valid = (
                    isinstance(key[0], str) and type(key[1]) is int and isinstance(key[2], int | float | None)
                )
            except (ValueError, KeyError, TypeError):
                valid = False
            if not valid:
                yield (
                    None,
                    (
                        f"--manifest {manifest}: byte {offset}: not a line of a gc batch manifest; refusing to use it "
                        "(move the directory aside to judge every file again)"
                    ),
                )
                return
            if record.get("outcome") in SETTLED:
                yield key, record["outcome"]
        offset += len(line) + 1
