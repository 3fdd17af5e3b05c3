"""The deep scan's work on executors (and in-process): one task per keyed handle, records back.

Keyed incremental RocksDB handles are rebuilt and opened like ``verify --deep``
(:mod:`ckptctl.rocksdb.handledir`); per column family (state) entries and bytes per key group, and
for TTL states the last-access timestamp of every entry: Flink's ``TtlSerializer`` writes it
first, 8 bytes big-endian millis (value/reducing/aggregating: at byte 0 of the value; map: after
the null flag; list: each element, when the element's length is fixed, separated by one delimiter
byte). Column families with unmerged list-state merge operands are read by
:mod:`ckptctl.rocksdb.sst`. Canonical savepoint streams (the unified key/value format of
``FullSnapshotAsyncWriter``) are read directly; heap (HashMap) backend snapshots with the
serializers their headers name (:mod:`ckptctl.states.heap`).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from ckptctl.errors import MetadataFormatError, StorageError
from ckptctl.metadata.keyedproxy import parse_backend_header
from ckptctl.states.heap import looks_heap
from ckptctl.storage import Storage, StorageOptions

DAY_MS = 86_400_000
# age buckets: [edge[i-1], edge[i]) in milliseconds; bucket 0 holds timestamps after "now"
AGE_EDGES_MS = (0, 1_000, 10_000, 60_000, 600_000, 3_600_000, 21_600_000, DAY_MS, 7 * DAY_MS, 30 * DAY_MS,
                90 * DAY_MS, 365 * DAY_MS)  # fmt: skip
AGE_LABELS = ("future", "<1s", "1-10s", "10s-1m", "1-10m", "10m-1h", "1-6h", "6h-1d", "1-7d", "7-30d",
              "30-90d", "90-365d", ">365d")  # fmt: skip


def age_bucket(age_ms: int) -> int:
    import bisect

    return 0 if age_ms < 0 else bisect.bisect_right(AGE_EDGES_MS, age_ms)


class StateSpec(NamedTuple):
    """What the executor needs to know about one column family (a state)."""

    name: str
    layout: str  # where a TTL state's timestamps are: value | map | list; none (no TTL)
    element_length: int | None  # list: one element's serialized length (fixed), else None
    ttl_ms: int | None  # the TTL to count expired elements against, if given


class RocksDBTask(NamedTuple):
    """Scan one keyed RocksDB handle (see :class:`ckptctl.verify.tasks.HandleRef`)."""

    index: int
    files: tuple
    key_group_start: int
    key_group_end: int
    prefix_bytes: int
    specs: tuple[StateSpec, ...]
    now_ms: int


class SnapshotTask(NamedTuple):
    """Scan one full-snapshot stream (a canonical savepoint's; see :class:`ckptctl.states.deep.SnapshotRef`)."""

    index: int
    source: tuple  # ("inline", bytes) | ("file", uri, recorded size) | ("range", uri, offset, length)
    key_group_offsets: tuple[tuple[int, int], ...]
    prefix_bytes: int
    specs: tuple[StateSpec, ...]
    now_ms: int
    canonical: bool = True  # a savepoint's: the unified format; else a heap backend's may be too


# The records a task yields. Every task ends with one HandleOutcome (ok or not); the counts of a
# column family come all together or not at all.


class HandleOutcome(NamedTuple):
    index: int
    ok: bool
    detail: str | None


class NotDecoded(NamedTuple):
    """A state of a heap snapshot (or all of it) that could not be read, and why."""

    index: int
    state: str | None
    detail: str


class KeyGroupEntries(NamedTuple):
    index: int
    state: str
    key_group: int
    entries: int
    bytes: int


class AgeCount(NamedTuple):
    """TTL elements of a key group whose last access falls in an age bucket (:data:`AGE_LABELS`)."""

    index: int
    state: str
    key_group: int
    bucket: int
    elements: int
    bytes: int


class TtlSummary(NamedTuple):
    """One column family of a handle: how its TTL timestamps read, what expired, and what read it."""

    index: int
    state: str
    layout: str
    decoded: int
    undecodable: int
    expired_elements: int
    expired_bytes: int
    oldest_ts: int | None
    newest_ts: int | None
    read_with: str  # rocksdb | sst | snapshot


def _ttl_timestamps(layout: str, value: bytes, elem_len: int | None) -> list[tuple[int, int]] | None:
    """(last-access millis, bytes) per element of a TTL value; ``None`` when it cannot be decoded."""
    if layout == "value":
        return [(struct.unpack_from(">q", value, 0)[0], len(value))] if len(value) >= 8 else None
    if layout == "map":
        # RocksDBMapState: a null flag, then the TtlValue (timestamp first) unless null
        if len(value) >= 9 and value[0] == 0:
            return [(struct.unpack_from(">q", value, 1)[0], len(value))]
        return None
    if layout == "list":
        # RocksDB list state: elements separated by one delimiter byte (StringAppendTESTOperator ',')
        if not elem_len or (len(value) + 1) % (elem_len + 1):
            return None
        n = (len(value) + 1) // (elem_len + 1)
        return [(struct.unpack_from(">q", value, i * (elem_len + 1))[0], elem_len) for i in range(n)]
    return None


def scan_states(storage, task: RocksDBTask) -> Iterator[tuple]:
    """One deep-scan task: rebuild the handle's RocksDB directory and count every column family."""
    import shutil
    import tempfile

    from ckptctl.rocksdb.handledir import explain, open_read_only, rebuild_handle_dir

    index, files, _kg_start, _kg_end, prefix_bytes, specs, now_ms = task
    workdir = tempfile.mkdtemp(prefix="ckptctl-states-")
    try:
        try:
            rebuild_handle_dir(storage, files, workdir)
        except (StorageError, OSError) as e:
            yield HandleOutcome(index, False, f"cannot rebuild the RocksDB directory: {e}")
            return
        try:
            db, cfs = open_read_only(workdir)
        except Exception as e:  # noqa: BLE001
            yield HandleOutcome(
                index, False, f"RocksDB cannot open the rebuilt directory: {explain(e, workdir, files)}"
            )
            return
        by_name = {spec.name: spec for spec in specs}
        try:
            for cf in cfs:
                if cf == "default":
                    continue
                spec = by_name.get(cf) or StateSpec(cf, "none", None, None)
                try:
                    yield from _scan_cf(db, cf, spec, index, prefix_bytes, now_ms, workdir)
                except Exception as e:  # noqa: BLE001 - SstFormatError, rocksdict errors: reported per handle
                    yield HandleOutcome(index, False, f"column family '{cf}': {explain(e, workdir, files)}")
        finally:
            db.close()
        yield HandleOutcome(index, True, None)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _scan_cf(db, cf, spec, index, prefix_bytes, now_ms, workdir) -> list[tuple]:
    from ckptctl.rocksdb.keygroups import read_counted

    return read_counted(
        db, workdir, cf, lambda rows, source: _count_cf(rows, source, cf, spec, index, prefix_bytes, now_ms)
    )


class AgeTally:
    """TTL last-access stamps of one state, added up per (key group, age bucket), and what expired."""

    def __init__(self, now_ms: int, ttl_ms: int | None) -> None:
        self.now_ms, self.ttl_ms = now_ms, ttl_ms
        self.ages: dict[tuple[int, int], list[int]] = {}
        self.expired = [0, 0]
        self.decoded = self.undecodable = 0
        self.lo_ts: int | None = None
        self.hi_ts: int | None = None

    def add(self, kg: int, ts: int, nbytes: int) -> None:
        self.decoded += 1
        self.lo_ts = ts if self.lo_ts is None or ts < self.lo_ts else self.lo_ts
        self.hi_ts = ts if self.hi_ts is None or ts > self.hi_ts else self.hi_ts
        age = self.now_ms - ts
        b = self.ages.get((kg, age_bucket(age)))
        if b is None:
            b = self.ages[(kg, age_bucket(age))] = [0, 0]
        b[0] += 1
        b[1] += nbytes
        if self.ttl_ms is not None and age >= self.ttl_ms:
            self.expired[0] += 1
            self.expired[1] += nbytes

    def records(self, index: int, cf: str, layout: str, source: str) -> list[tuple]:
        out: list[tuple] = [
            AgeCount(index, cf, kg, bucket, n, nbytes)
            for (kg, bucket), (n, nbytes) in sorted(self.ages.items())
        ]
        out.append(TtlSummary(index, cf, layout, self.decoded, self.undecodable, self.expired[0], self.expired[1],
                              self.lo_ts, self.hi_ts, source))  # fmt: skip
        return out


def _count_cf(rows, source, cf, spec, index, prefix_bytes, now_ms) -> list[tuple]:
    """Entries and bytes per key group, TTL ages per (key group, bucket); all or nothing (a list, so
    that an iterator failing half-way yields no partial counts)."""
    from ckptctl.rocksdb.keygroups import count_key_groups

    _name, layout, elem_len, ttl_ms = spec
    tally = AgeTally(now_ms, ttl_ms)

    def ttl(kg: int, k: bytes, v: bytes) -> None:
        stamps = _ttl_timestamps(layout, v, elem_len)
        if stamps is None:
            tally.undecodable += 1
            return
        for ts, nbytes in stamps:
            tally.add(kg, ts, nbytes if layout == "list" else nbytes + len(k))

    counts = count_key_groups(rows, prefix_bytes, None if layout == "none" else ttl)
    out: list[tuple] = [
        KeyGroupEntries(index, cf, kg, n, nbytes) for kg, (n, nbytes) in sorted(counts.items())
    ]
    out.extend(tally.records(index, cf, layout, source))
    return out


END_OF_KEY_GROUP_MARK = 0xFFFF
META_DATA_FOLLOWS = 0x80


def full_snapshot_rows(
    data: bytes, offsets: tuple[tuple[int, int], ...], names: list[str], path: str, prefix_bytes: int = 1
):
    """(state name, key, value) of a RocksDB full snapshot / canonical savepoint stream (the unified
    format both backends write for savepoints): per key group at its offset a ``short`` state id,
    then ``int`` length + key, ``int`` length + value pairs; the key's first bit says that a
    ``short`` follows: the next state id, or ``0xFFFF`` at the end of the key group."""
    for kg, off in sorted(offsets, key=lambda x: x[1]):
        if off <= 0:
            continue
        pos = off
        try:
            sid = struct.unpack_from(">H", data, pos)[0]
            pos += 2
            while True:
                if sid >= len(names):
                    raise MetadataFormatError(
                        f"key group {kg}: state id {sid}, the header has {len(names)} states",
                        path=path,
                        offset=pos - 2,
                    )
                klen = struct.unpack_from(">i", data, pos)[0]
                key = data[pos + 4 : pos + 4 + klen]
                pos += 4 + klen
                vlen = struct.unpack_from(">i", data, pos)[0]
                if klen < 1 or vlen < 0 or pos + 4 + vlen > len(data):
                    raise MetadataFormatError(
                        f"key group {kg}: bad key/value lengths {klen}/{vlen}", path=path, offset=pos
                    )
                value = data[pos + 4 : pos + 4 + vlen]
                pos += 4 + vlen
                follows = key[0] & META_DATA_FOLLOWS
                if follows:
                    key = bytes([key[0] & ~META_DATA_FOLLOWS & 0xFF]) + key[1:]
                key_kg = key[0] if prefix_bytes == 1 else int.from_bytes(key[:2], "big")
                if key_kg != kg:
                    raise MetadataFormatError(
                        f"a key of key group {key_kg} in the data of key group {kg}", path=path, offset=pos
                    )
                yield names[sid], key, value
                if follows:
                    nxt = struct.unpack_from(">H", data, pos)[0]
                    pos += 2
                    if nxt == END_OF_KEY_GROUP_MARK:
                        break
                    sid = nxt
        except struct.error:
            raise MetadataFormatError(f"key group {kg}: truncated", path=path, offset=pos) from None


def scan_full_snapshot(storage, task: SnapshotTask) -> Iterator[tuple]:
    """One deep-scan task over a full-snapshot stream (canonical savepoint)."""
    index, source, offsets, prefix_bytes, specs, now_ms, canonical = task
    try:
        if source[0] == "inline":
            data, path = source[1], "(inline)"
        elif source[0] == "file":
            data, path = storage.read_recorded(source[1], source[2]), source[1]
        else:
            data, path = storage.read_range(source[1], source[2], source[3]), source[1]
    except (StorageError, OSError) as e:
        yield HandleOutcome(index, False, f"cannot read the snapshot stream: {e}")
        return
    positive = [o for _kg, o in offsets if o > 0]
    base = source[2] if source[0] == "range" else 0
    try:
        header = parse_backend_header(data[: min(positive) if positive else len(data)], path, base=base)
        if not canonical and looks_heap(data, offsets):
            yield from scan_heap_snapshot(data, offsets, header, path, base, task)
            return
        if header.compressed:
            yield HandleOutcome(index, False, "key groups are compressed (snapshot compression): not counted")
            return
        names = [m.name for m in header.states]
        rows: dict[str, list[tuple[bytes, bytes]]] = {n: [] for n in names}
        for name, k, v in full_snapshot_rows(data, offsets, names, path, prefix_bytes):
            rows[name].append((k, v))
    except MetadataFormatError as e:
        yield HandleOutcome(index, False, str(e))
        return
    by_name = {spec.name: spec for spec in specs}
    for name in names:
        spec = by_name.get(name) or StateSpec(name, "none", None, None)
        yield from _count_cf(rows[name], "snapshot", name, spec, index, prefix_bytes, now_ms)
    yield HandleOutcome(index, True, None)


def scan_heap_snapshot(
    data: bytes, offsets, header, path: str, base: int, task: SnapshotTask
) -> Iterator[tuple]:
    """A heap (HashMap) backend snapshot: read with the serializers its header names
    (:mod:`ckptctl.states.heap`); all records of the stream, or one failed outcome."""
    from ckptctl.states.heap import HeapRow, read_heap_key_groups

    index, specs, now_ms = task.index, task.specs, task.now_ms
    by_name = {spec.name: spec for spec in specs}
    counts: dict[str, dict[int, list[int]]] = {m.name: {} for m in header.states}
    tallies: dict[str, AgeTally] = {}
    stopped: dict[str, str] = {}
    later: set[str] = set()
    try:
        for rec in read_heap_key_groups(data, offsets, header, path, base):
            if rec.__class__ is HeapRow:
                slot = counts[rec.state].setdefault(rec.key_group, [0, 0])
                slot[0] += rec.entries
                slot[1] += rec.bytes
                if rec.stamps:
                    spec = by_name.get(rec.state)
                    tally = tallies.get(rec.state)
                    if tally is None:
                        tally = tallies[rec.state] = AgeTally(now_ms, spec.ttl_ms if spec else None)
                    for ts, nbytes in rec.stamps:
                        tally.add(rec.key_group, ts, nbytes)
            else:
                stopped.setdefault(rec.state, rec.serializer)
                later.update(rec.later_states)
    except MetadataFormatError as e:
        yield HandleOutcome(index, False, str(e))
        return
    for state, serializer in stopped.items():
        yield NotDecoded(
            index, state, f"serializer {serializer} is not one ckptctl reads (entries carry no length)"
        )
    for state in sorted(later - set(stopped)):
        yield NotDecoded(
            index,
            state,
            "not counted: it follows, in some key groups, a state whose serializer cannot be read",
        )
    for m in header.states:
        if m.name in stopped or m.name in later:
            continue
        out: list[tuple] = [
            KeyGroupEntries(index, m.name, kg, n, b) for kg, (n, b) in sorted(counts[m.name].items()) if n
        ]
        spec = by_name.get(m.name)
        layout = spec.layout if spec else "none"
        if layout != "none":
            tally = tallies.get(m.name) or AgeTally(now_ms, spec.ttl_ms)
            out.extend(tally.records(index, m.name, layout, "heap"))
        yield from out
    yield HandleOutcome(index, True, None)


def run_state_tasks(options: StorageOptions, tasks: Iterable[RocksDBTask | SnapshotTask]) -> Iterator[tuple]:
    """The task function of both engines (module level: Spark pickles it, with ``options`` bound,
    by reference)."""
    storage = Storage.shared(options)
    for task in tasks:
        if task.__class__ is SnapshotTask:
            yield from scan_full_snapshot(storage, task)
        else:
            yield from scan_states(storage, task)
