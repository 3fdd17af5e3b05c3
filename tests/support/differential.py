"""Differential testing of ckptctl's reader against Flink's: seeded mutations and both verdicts.

- :func:`mutate` turns a real fixture ``_metadata`` and a seed into a *recipe* (a short list of
  concrete edits: byte flips, int overwrites, truncations, splices, string edits) aimed at the
  fields Flink validates (the Java-serialized trailer, path strings, parallelism, key-group
  ranges, sizes, offsets, subtask indexes) or anywhere; :func:`apply_recipe` replays it.
- :func:`ckptctl_verdict` is ckptctl's answer in the shape ``fixtures/dumper/MetadataVerdict.java``
  prints for Flink's: accept (checkpoint id, operators, hashes of the content) or reject.
- :func:`flink_verdicts` runs MetadataVerdict (one JVM for many files) against a release's jars,
  found in a PyFlink venv or in ``apache-flink-libraries`` (``pip download --no-deps``).

Used by tests/metadata/test_flink_differential.py (committed expectations, no JVM),
fixtures/differential/record.py (records them) and bench/differential.py (live, tens of thousands).
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

from ckptctl.errors import MetadataFormatError
from ckptctl.metadata import reader
from ckptctl.metadata.flinkpath import InvalidPath, check_relative, flink_path_string
from ckptctl.metadata.handles import (
    ByteStreamHandle,
    ChangelogBackendHandle,
    ChangelogBytesHandle,
    ChangelogFileHandle,
    EmptySegmentHandle,
    FileHandle,
    IncrementalHandle,
    KeyGroupsHandle,
    LocalFile,
    RelativeFileHandle,
    SegmentFileHandle,
)
from ckptctl.metadata.javauuid import flink_backend_uuid
from ckptctl.metadata.operators import (
    ChannelHandle,
    FileMergingOperatorHandle,
    MergedChannelHandle,
    OperatorStreamHandle,
)
from ckptctl.metadata.writer import encode_merged_channel_offsets
from tests.support import jvm

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "fixtures" / "data"
VERDICT_SRC = REPO / "fixtures" / "dumper" / "MetadataVerdict.java"
EXPECTATIONS = REPO / "fixtures" / "differential" / "expectations.json"
PINNED = EXPECTATIONS.with_name("pinned.json")
# the releases that wrote the committed fixtures
RELEASES = (
    "1.14.6",
    "1.15.4",
    "1.16.3",
    "1.17.2",
    "1.18.1",
    "1.19.3",
    "1.20.3",
    "2.0.2",
    "2.1.3",
    "2.2.0",
    "2.3.0",
)


# ---------------------------------------------------------------------------------------------
# fixtures


def fixture_files(releases: tuple[str, ...] = RELEASES) -> list[str]:
    """Every committed ``_metadata`` of the given releases, as ids relative to fixtures/data."""
    out = []
    for release in releases:
        for p in sorted((DATA / release).rglob("_metadata")):
            out.append(str(p.parent.relative_to(DATA)))
    return out


def release_of(fixture: str) -> str:
    return fixture.split("/", 1)[0]


def fixture_bytes(fixture: str) -> bytes:
    return (DATA / fixture / "_metadata").read_bytes()


# ---------------------------------------------------------------------------------------------
# content, as MetadataVerdict.java computes it


def _hash(lines: list[str]) -> str:
    # Java sorts by UTF-16 code units and encodes lone surrogates as '?'
    ordered = sorted(lines, key=lambda s: s.encode("utf-16-be", "surrogatepass"))
    text = "\n".join(ordered).encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    data = text.encode("utf-8", "replace")
    return hashlib.sha256(data).hexdigest()[:16]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def _longs(values) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


class _Content:
    def __init__(self) -> None:
        self.handles = 0
        self.refs: list[str] = []
        self.ranges: list[str] = []
        self.details: list[str] = []  # what refs and ranges leave out (MetadataVerdict's "details")

    def range(self, kgr) -> None:
        self.ranges.append(f"{kgr.first}:{kgr.end}")

    def visit(self, h) -> None:  # noqa: C901 - one branch per handle class, like the Java side
        if h is None:
            return
        self.handles += 1
        if isinstance(h, KeyGroupsHandle):
            self.range(h.key_groups)
            self.ranges.append(":".join(["o", str(h.key_groups.first), *map(str, h.offsets)]))
            self.visit(h.delegate)
        elif isinstance(h, IncrementalHandle):
            self.range(h.key_groups)
            self.visit(h.meta)
            for f in h.shared + h.private:
                self.visit(f.handle)
            names = [f"inc|{h.checkpoint_id}|{flink_backend_uuid(h.backend_id)}"]
            for files in (h.shared, h.private):
                names.append("/".join(sorted((f.local_path for f in files), key=_java_order)))
            self.details.append("|".join(names))
        elif isinstance(h, ChangelogBackendHandle):
            self.range(h.key_groups)
            for k in h.materialized + h.non_materialized:
                self.visit(k)
        elif isinstance(h, ChangelogFileHandle):
            self.range(h.key_groups)
            for _offset, s in h.pieces:
                self.visit(s)
        elif isinstance(h, ChangelogBytesHandle):
            self.range(h.key_groups)
            self.details.append("changes" + "".join(f"|{kg}:{_sha(data)}" for kg, data in h.changes))
        elif isinstance(h, FileMergingOperatorHandle):
            self._states(h)
            for d in (h.taskowned_dir, h.shared_dir):
                self.handles += 1
                self.refs.append("dir|" + flink_path_string(d))
            self.visit(h.delegate)
        elif isinstance(h, OperatorStreamHandle):
            self._states(h)
            self.visit(h.delegate)
        elif isinstance(h, ChannelHandle):
            self.details.append(
                f"chan|{h.subtask_index}|{h.info[0]}:{h.info[1]}|{_longs(h.offsets)}|{h.state_size}"
            )
            self.visit(h.delegate)
        elif isinstance(h, MergedChannelHandle):
            blob = h.raw_offsets if h.raw_offsets is not None else encode_merged_channel_offsets(h.channels)
            self.details.append(f"mchan|{h.subtask_index}|{h.state_size}|{_sha(blob)}")
            self.visit(h.delegate)
        elif isinstance(h, ByteStreamHandle):
            self.details.append(f"inline|{h.name}|{_sha(h.data)}")
        elif isinstance(h, EmptySegmentHandle):
            pass
        elif isinstance(h, SegmentFileHandle):
            self.refs.append(f"seg|{flink_path_string(h.path)}|{h.offset}|{h.size}|{h.scope}")
        elif isinstance(h, RelativeFileHandle):
            self.refs.append(f"rel|{h.relative_path}|{h.size}")
        elif isinstance(h, FileHandle):
            self.refs.append(f"file|{flink_path_string(h.path)}|{h.size}")
        else:
            raise TypeError(f"unknown handle {type(h).__name__}")

    def _states(self, h) -> None:
        for st in h.states:
            self.details.append(f"ostate|{st.name}|{st.mode}|{_longs(st.offsets)}")


def _java_order(s: str) -> bytes:
    return s.encode("utf-16-be", "surrogatepass")


def content(md) -> dict:
    """The accept verdict of a decoded model (the fields MetadataVerdict prints)."""
    c = _Content()
    ops = {}
    subtask_lines = []
    for m in md.master_states:
        c.details.append(f"master|{m.name}|{m.version}|{_sha(m.payload)}")
    for op in md.operators:
        if md.version >= 5:  # written by 2.x, whose OperatorState has a name and a uid
            # OperatorState holds an empty name or uid as absent (Optional.empty(), printed null)
            c.details.append(f"name|{op.operator_id}|{op.name or 'null'}|{op.uid or 'null'}")
        n = -1 if op.subtasks is None else len(op.subtasks)
        ops[op.operator_id] = [op.operator_id, op.parallelism, op.max_parallelism, n]
        c.visit(op.coordinator_state)
        subtasks = sorted(op.subtasks or (), key=lambda s: s.index)
        subtask_lines.append(op.operator_id + ":[" + ", ".join(str(s.index) for s in subtasks) + "]")
        for s in subtasks:
            for h in (s.managed_operator, s.raw_operator, s.managed_keyed, s.raw_keyed):
                c.visit(h)
            for h in s.input_channels + s.output_channels:
                c.visit(h)
    return {
        "verdict": "accept",
        "checkpoint_id": md.checkpoint_id,
        "operators": [ops[k] for k in sorted(ops)],
        "subtasks": _hash(subtask_lines),
        "handles": c.handles,
        "refs": len(c.refs),
        "refs_hash": _hash(c.refs),
        "ranges_hash": _hash(c.ranges),
        "details": _hash(c.details),
    }


COMPARED = (
    "verdict",
    "checkpoint_id",
    "operators",
    "subtasks",
    "handles",
    "refs",
    "refs_hash",
    "ranges_hash",
    "details",  # recorded since the details hash exists; older recordings lack it
)


def ckptctl_verdict(data: bytes, path: str = "_metadata") -> dict:
    """ckptctl's answer: accept with the content, or reject with the error (never anything else)."""
    try:
        md = reader.read_metadata(data, path)
    except MetadataFormatError as e:
        return {"verdict": "reject", "error": str(e), "offset": e.offset}
    return content(md)


def agree(flink: dict, mine: dict) -> bool:
    if flink["verdict"] == "reject" or mine["verdict"] == "reject":
        return flink["verdict"] == mine["verdict"]
    keys = [k for k in COMPARED if k in flink]
    return all(flink[k] == mine.get(k) for k in keys)


# ---------------------------------------------------------------------------------------------
# structure map: where the fields Flink validates lie in a file


class _Tracer(reader.Decoder):
    """The reader's decoder, recording the offsets of the fields the mutator aims at."""

    def __init__(self, buf: bytes) -> None:
        super().__init__(buf, None, 8)
        self.at: dict[str, list] = {
            k: []
            for k in ("par", "maxpar", "index", "kgr", "size", "offset", "path", "code", "flag", "count")
        }

    def _str_at(self, p: int) -> None:
        self.at["path"].append((p, struct.unpack_from(">H", self.buf, p)[0]))

    def stream(self):
        p = self.pos
        self.at["code"].append(p)
        code = self.buf[p] if p < self.end else -1
        h = super().stream()
        if code == 2:
            self.at["size"].append(p + 1)
            self._str_at(p + 9)
        elif code == 6:
            self._str_at(p + 1)
            self.at["size"].append(self.pos - 8)
        elif code == 15:
            self.at["offset"].append(p + 1)
            self.at["size"].append(p + 9)
            self._str_at(p + 21)
        return h

    def key_groups_body(self, code):
        p = self.pos
        h = super().key_groups_body(code)
        self.at["kgr"].append(p)
        self.at["offset"].extend(p + 8 + 8 * i for i in range(len(h.offsets)))
        return h

    def key_group_range(self):
        self.at["kgr"].append(self.pos)
        return super().key_group_range()

    def local_files(self):
        n = self.count("incremental state files", 3)
        out = []
        for _ in range(n):
            self.utf()
            out.append(LocalFile("", self.stream()))
        return tuple(out)

    def keyed(self):
        self.at["code"].append(self.pos)
        return super().keyed()

    def count(self, what, item_min_bytes):
        self.at["count"].append(self.pos)
        return super().count(what, item_min_bytes)

    def collection_count(self, what):
        self.at["count"].append(self.pos)
        return super().collection_count(what)

    def operator(self):
        self.at["code"].append(self.pos)
        h = super().operator()
        if isinstance(h, FileMergingOperatorHandle):
            # the two directory strings precede the is-empty byte and the delegate; find them back
            for d in (h.taskowned_dir, h.shared_dir):
                raw = d.encode("utf-8", "surrogatepass")
                i = self.buf.rfind(struct.pack(">H", len(raw)) + raw, 0, self.pos)
                if i >= 0:
                    self._str_at(i)
        return h

    def subtask(self, index, version):
        self.at["index"].append(self.pos - 4)
        self.at["flag"].append(self.pos)
        return super().subtask(index, version)

    def operator_state(self, version):
        p = self.pos
        if version >= 5:
            p += 2 + struct.unpack_from(">H", self.buf, p)[0]
            p += 2 + struct.unpack_from(">H", self.buf, p)[0]
        self.at["par"].append(p + 16)
        self.at["maxpar"].append(p + 20)
        return super().operator_state(version)


def structure(data: bytes) -> tuple[dict[str, list], int]:
    """Offsets of the targeted fields of an (unmutated) file, and where its trailer starts."""
    t = _Tracer(data)
    version = struct.unpack_from(">i", data, 4)[0]
    t.i64()
    for _ in range(t.count("master states", 12)):
        t.master_state()
    for _ in range(t.count("operator states", 28)):
        t.operator_state(version)
    return t.at, t.pos


def _trailer_strings(data: bytes, start: int) -> list[tuple[int, int]]:
    """(offset of the u16 length, length) of the class names, field names and strings of the trailer."""
    out = []
    i = start
    while i + 3 <= len(data):
        if data[i] in (0x72, 0x74, 0x4C, 0x5A) or (i > start and data[i - 1] in (0x72, 0x74)):
            n = struct.unpack_from(">H", data, i + 1)[0]
            body = data[i + 3 : i + 3 + n]
            if 1 <= n <= 200 and len(body) == n and all(0x20 < b < 0x7F for b in body):
                out.append((i + 1, n))
                i += 3 + n
                continue
        i += 1
    return out


# ---------------------------------------------------------------------------------------------
# mutations

I32 = [-1, 0, 1, 2, 3, 7, 127, 128, 129, 255, 256, 32767, 32768, 65535, 65536, -(2**31), 2**31 - 1, -2]
I64 = [-1, 0, 1, -2, 2**31, -(2**63), 2**63 - 1, 1 << 40]
PATH_CHARS = [b"\x00", b"\x01", b"\x1f", b"\x7f", b" ", b":", b"/", b"\\", b"?", b"#", b"%", b"[", b"]",
              b"@", b".", b"+", b"-", b"~", b"A", b"9", b"\xc2\x85", b"\xc2\xa0", b"\xe2\x80\xa8", b"\xc3\xa9",
              b"//", b"/./", b"/../", b"%41", b"%zz", b"\t", b"\n", b"C:", b"a:"]  # fmt: skip


def _i32(data: bytes, p: int) -> int:
    return struct.unpack_from(">i", data, p)[0]


def _edit_string(rng: random.Random, data: bytes, lenpos: int, n: int) -> list:
    """Replace a slice of the string whose u16 length is at ``lenpos`` and fix the length."""
    start = lenpos + 2
    a = start + rng.randrange(n + 1)
    b = min(start + n, a + rng.choice([0, 0, 1, 1, 1, 2, 5]))
    choice = rng.random()
    if choice < 0.6:
        repl = rng.choice(PATH_CHARS)
    elif choice < 0.8:
        repl = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 3)))
    else:
        repl = b""
        b = min(start + n, a + rng.randrange(1, max(2, n)))
    return ["edit", lenpos, a, b, repl.hex()]


def mutate(data: bytes, seed: int) -> list:
    """A deterministic recipe of 1-2 edits for ``data`` from ``seed``."""
    rng = random.Random(seed)
    at, trailer = structure(data)
    recipe = []
    for _ in range(1 if rng.random() < 0.8 else 2):
        kind = rng.choices(
            ["trailer", "trailer_str", "path", "par", "index", "kgr", "size", "offset", "anywhere", "splice",
             "truncate", "code", "flag", "count"],
            weights=[10, 12, 16, 8, 6, 8, 6, 6, 14, 6, 4, 6, 3, 4],
        )[0]  # fmt: skip
        if kind in ("trailer", "trailer_str") and trailer >= len(data):
            kind = "anywhere"
        if (
            kind in ("par", "index", "kgr", "size", "offset", "path")
            and not at[kind if kind != "par" else "par"]
        ):
            kind = "anywhere"
        if kind == "trailer":
            p = rng.randrange(trailer, len(data))
            r = rng.random()
            if r < 0.4:
                recipe.append(["flip", p, rng.randrange(8)])
            elif r < 0.7:
                recipe.append(["set", p, rng.randrange(256)])
            elif r < 0.85:
                recipe.append(["trunc", p])
            else:
                recipe.append(["set", p, rng.choice([0x70, 0x71, 0x72, 0x73, 0x74, 0x78, 0x7E, 0, 1, 2])])
        elif kind == "trailer_str":
            strings = _trailer_strings(data, trailer)
            if not strings:
                recipe.append(["flip", rng.randrange(len(data)), rng.randrange(8)])
                continue
            lenpos, n = rng.choice(strings)
            r = rng.random()
            if r < 0.5:
                p = lenpos + 2 + rng.randrange(n)
                recipe.append(
                    ["set", p, rng.choice([0x2E, 0x24, 0x5F, 0x41, 0x61, 0x30, 0x3B, 0x2F, data[p] ^ 0x20])]
                )
            elif r < 0.7:
                recipe.append(
                    ["edit", lenpos, lenpos + 2 + n, lenpos + 2 + n, rng.choice([b"X", b"_", b"$1"]).hex()]
                )
            elif r < 0.85:
                p = lenpos + 2 + n  # the serialVersionUID follows a class name
                recipe.append(["flip", p + rng.randrange(8), rng.randrange(8)])
            else:
                recipe.append(
                    ["i32", lenpos - 2, rng.choice(I32)] if lenpos - 2 > trailer else ["flip", lenpos, 0]
                )
        elif kind == "path":
            lenpos, n = rng.choice(at["path"])
            if rng.random() < 0.2:
                recipe.append(["set", lenpos + 2 + rng.randrange(max(n, 1)), rng.randrange(256)])
            else:
                recipe.append(_edit_string(rng, data, lenpos, n))
        elif kind in ("par", "index", "kgr"):
            key = kind if kind != "par" else rng.choice(["par", "maxpar"])
            p = rng.choice(at[key])
            if kind == "kgr" and rng.random() < 0.5:
                p += 4  # the count
            old = _i32(data, p)
            r = rng.random()
            if r < 0.5:
                v = rng.choice(I32)
            elif r < 0.8:
                v = old + rng.choice([-2, -1, 1, 2])
            else:  # another field's value: a duplicate subtask index, max parallelism as parallelism
                q = rng.choice(at[rng.choice(["par", "maxpar", "index"])])
                v = _i32(data, q)
            recipe.append(["i32", p, v])
        elif kind in ("size", "offset"):
            p = rng.choice(at[kind])
            v = (
                rng.choice(I64)
                if rng.random() < 0.7
                else struct.unpack_from(">q", data, p)[0] + rng.choice([-1, 1])
            )
            recipe.append(["i64", p, v])
        elif kind == "code":  # a handle type byte: another code, or one Flink does not know
            recipe.append(["set", rng.choice(at["code"]), rng.choice([*range(18), 18, 44, 127, 128, 255])])
        elif kind == "flag":  # the presence flags of the operator-state handles
            p = rng.choice(at["flag"]) + rng.choice([0, 0, 4]) + rng.choice([0, 3])
            recipe.append(["set", p, rng.choice([0, 1, 2, 255])])
        elif kind == "count":
            recipe.append(
                ["i32", rng.choice(at["count"]), rng.choice([-1, -2, 0, 1, 2, 3, 2**31 - 1, -(2**31)])]
            )
        elif kind == "anywhere":
            p = rng.randrange(8, len(data))
            r = rng.random()
            if r < 0.5:
                recipe.append(["flip", p, rng.randrange(8)])
            elif r < 0.75:
                recipe.append(["set", p, rng.randrange(256)])
            elif p + 4 <= len(data):
                recipe.append(["i32", p, rng.choice(I32)])
        elif kind == "splice":
            n = rng.choice([1, 2, 4, 8, 16, 64, 256])
            src = rng.randrange(8, max(9, len(data) - n))
            dst = rng.randrange(8, len(data))
            recipe.append(["copy" if rng.random() < 0.5 else "insert", src, n, dst])
        else:
            recipe.append(["trunc", rng.randrange(8, len(data))])
    return recipe


def apply_recipe(data: bytes, recipe: list) -> bytes:
    buf = bytearray(data)
    for step in recipe:
        op = step[0]
        if op == "flip":
            if step[1] < len(buf):
                buf[step[1]] ^= 1 << step[2]
        elif op == "set":
            if step[1] < len(buf):
                buf[step[1]] = step[2]
        elif op == "i32":
            if step[1] + 4 <= len(buf):
                struct.pack_into(">i", buf, step[1], step[2])
        elif op == "i64":
            if step[1] + 8 <= len(buf):
                struct.pack_into(">q", buf, step[1], step[2])
        elif op == "trunc":
            del buf[step[1] :]
        elif op == "edit":
            _, lenpos, a, b, repl = step
            if b <= len(buf):
                repl = bytes.fromhex(repl)
                n = struct.unpack_from(">H", buf, lenpos)[0] + len(repl) - (b - a)
                buf[a:b] = repl
                struct.pack_into(">H", buf, lenpos, n & 0xFFFF)
        elif op in ("copy", "insert"):
            _, src, n, dst = step
            chunk = bytes(buf[src : src + n])
            if op == "copy":
                buf[dst : dst + len(chunk)] = chunk
            else:
                buf[dst:dst] = chunk
        else:
            raise ValueError(f"unknown mutation {op!r}")
    return bytes(buf)


def cases(n: int, seed: int = 0, releases: tuple[str, ...] = RELEASES) -> list[dict]:
    """``n`` mutation cases, round-robin over ``releases`` and, within each, over its fixtures.

    Every release gets the same share whatever its number of fixtures (1.14.6 has 3, 2.2.0 over 40).
    """
    by_release = [files for files in (fixture_files((r,)) for r in releases) if files]
    originals = {f: fixture_bytes(f) for files in by_release for f in files}
    out = []
    for i in range(n):
        files = by_release[i % len(by_release)]
        f = files[(i // len(by_release)) % len(files)]
        case_seed = seed * 1_000_003 + i
        out.append({"fixture": f, "seed": case_seed, "recipe": mutate(originals[f], case_seed)})
    return out


# ---------------------------------------------------------------------------------------------
# path strings alone: Flink's Path against ckptctl.metadata.flinkpath

PATH_BASES = ["file:/tmp/ckpt/shared/abc-123", "s3://bucket/a/b", "hdfs://nn:8020/x/y/z", "a1b2c3-d4e5",
              "file:///x/y", "C:/x", "/abs/p", "rel/p", "x"]  # fmt: skip
PATH_EDITS = [*":/\\?#%[]@.+-~ \x00\x01\x1f\x7f\x85\xa0\u2028\xe99aAZ{}|^`'\"", "//", "/./", "/../", "..", "%41",
              "%zz", "C:", "a:", "::"]  # fmt: skip
PATHS = REPO / "fixtures" / "differential" / "paths.json"


def _edit(rng: random.Random, s: str, edits: list[str], max_cut: int) -> str:
    """One random edit of ``s`` at a random position: replace a character with one of ``edits``
    (half the time), insert one (30 %), or cut 1..``max_cut`` characters."""
    p = rng.randrange(len(s) + 1)
    r = rng.random()
    if r < 0.5:
        return s[:p] + rng.choice(edits) + s[p + 1 :]
    if r < 0.8:
        return s[:p] + rng.choice(edits) + s[p:]
    return s[:p] + s[p + rng.randint(1, max_cut) :]


def path_strings(n: int, seed: int) -> list[str]:
    """``n`` non-empty strings: path-like bases with 1-3 random character edits."""
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < n:
        s = rng.choice(PATH_BASES)
        for _ in range(rng.randint(1, 3)):
            s = _edit(rng, s, PATH_EDITS, 3)
        if s:
            out.append(s)
    return out


UUIDS = PATHS.with_name("uuids.json")
# backend identifiers: Flink writes a random UUID; the edits reach UUID.fromString's lenient path
# (Long.parseLong per component: signs, Unicode digits, fullwidth letters, overflow, lengths) and
# the name-based fallback (lone surrogates become '?')
UUID_EDITS = [
    "-",
    "+",
    "--",
    "0",
    "f",
    "F",
    "g",
    " ",
    "\u0660",
    "\u0669",
    "\uff10",
    "\uff21",
    "\uff46",
    "\uff47",
    "\u00b2",
    "\ud800",
    "\udc00",
    "\U0001f600",
    "ffffffffffffffff",
    "7fffffffffffffff",
    "\x00",
    "é",
]


def uuid_strings(n: int, seed: int) -> list[str]:
    """``n`` backend-identifier-like strings: random UUIDs with 0-3 character edits."""
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < n:
        a, b, c, e, f = (rng.getrandbits(n) for n in (32, 16, 16, 16, 48))
        s = f"{a:08x}-{b:04x}-{c:04x}-{e:04x}-{f:012x}"
        if rng.random() < 0.3:
            s = s.upper()
        for _ in range(rng.randint(0, 3)):
            s = _edit(rng, s, UUID_EDITS, 8)
        out.append(s)
    return out


def flink_uuids(classpath: str, strings: list[str]) -> list[str]:
    """The UUID Flink's deserializer makes of each string as a backend identifier."""
    p = subprocess.run(
        [shutil.which("java") or "java", "-Xmx256m", *jvm.SHORT_LIVED, "-cp", classpath, "MetadataVerdict", "uuids"],
        input="\n".join(_utf16_hex(s) for s in strings) + "\n", capture_output=True, text=True, check=True,
    )  # fmt: skip
    out = p.stdout.split()
    if len(out) != len(strings):
        raise RuntimeError(f"MetadataVerdict uuids answered {len(out)} of {len(strings)}: {p.stderr[-2000:]}")
    return out


def _utf16_hex(s: str) -> str:
    return s.encode("utf-16-be", "surrogatepass").hex()


def flink_path_verdicts(classpath: str, strings: list[str]) -> list[tuple[str, str]]:
    """(``new Path(s)``, ``new Path(dir, s)``) per string: "ok:<toString>"/"ok" or "err:<exception>"."""
    p = subprocess.run(
        [shutil.which("java") or "java", "-Xmx256m", *jvm.SHORT_LIVED, "-cp", classpath, "MetadataVerdict", "paths"],
        input="\n".join(_utf16_hex(s) for s in strings) + "\n", capture_output=True, text=True, check=True,
    )  # fmt: skip
    out = []
    for line in p.stdout.splitlines():
        a, r = line.split(" ")
        if a.startswith("ok:"):
            a = "ok:" + bytes.fromhex(a[3:]).decode("utf-16-be", "surrogatepass")
        out.append((a, r))
    if len(out) != len(strings):
        raise RuntimeError(f"MetadataVerdict paths answered {len(out)} of {len(strings)}: {p.stderr[-2000:]}")
    return out


def ckptctl_path_verdict(s: str) -> tuple[str, str]:
    try:
        a = "ok:" + flink_path_string(s)
    except InvalidPath:
        a = "err"
    try:
        check_relative(s)
        r = "ok"
    except InvalidPath:
        r = "err"
    return a, r


def path_agree(flink: tuple[str, str], mine: tuple[str, str]) -> bool:
    return all(f == m or (m == "err" and f.startswith("err:")) for f, m in zip(flink, mine, strict=True))


# ---------------------------------------------------------------------------------------------
# Flink's side


def cache_root() -> Path:
    return Path(os.environ.get("FLINK_VENV_ROOT") or Path.home() / ".cache" / "ckptctl-flink")


def flink_lib(version: str, download: bool = True) -> Path:
    """A directory with ``flink-dist-<version>.jar``: a PyFlink venv's, or apache-flink-libraries'."""
    for c in [os.environ.get(f"FLINK_LIB_{version.replace('.', '_')}"),
              *glob.glob(f"{cache_root()}/{version}/lib/python3*/site-packages/pyflink/lib"),
              str(cache_root() / "libraries" / version / "lib")]:  # fmt: skip
        if c and glob.glob(f"{c}/flink-dist*.jar"):
            return Path(c)
    if not download:
        raise FileNotFoundError(f"no jars of Flink {version}")
    sys.path.insert(0, str(REPO))
    from tests.support.flink_harness import file_lock

    target = cache_root() / "libraries" / version
    with file_lock(cache_root() / "libraries" / f".{version}.lock"):
        if not glob.glob(f"{target}/lib/flink-dist*.jar"):
            with tempfile.TemporaryDirectory() as tmp:
                subprocess.run(
                    [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp,
                     f"apache-flink-libraries=={version}"],
                    check=True,
                )  # fmt: skip
                (dist,) = glob.glob(f"{tmp}/apache[-_]flink[-_]libraries-*")  # 2.x: underscores
                _extract_lib(Path(dist), target)
    return target / "lib"


def _extract_lib(dist: Path, target: Path) -> None:
    """The jars of an apache-flink-libraries sdist (``*/deps/lib/``) or wheel (``pyflink/lib/``)."""
    (target / "lib").mkdir(parents=True, exist_ok=True)
    if dist.suffix == ".whl":
        with zipfile.ZipFile(dist) as z:
            for name in z.namelist():
                if name.startswith("pyflink/lib/") and name.endswith(".jar"):
                    (target / "lib" / name.rsplit("/", 1)[1]).write_bytes(z.read(name))
        return
    with tarfile.open(dist) as tar:
        members = []
        for m in tar.getmembers():
            _top, _, rest = m.name.partition("/")
            if rest.startswith("deps/lib/") and m.name.endswith(".jar"):
                m.name = "lib/" + rest[len("deps/lib/") :]
                members.append(m)
        tar.extractall(target, members=members, filter="data")


def compile_verdict(version: str, workdir: Path) -> str:
    """MetadataVerdict compiled against ``version``'s jars (once per machine; ``workdir`` is not
    used any more); returns the class path to run it."""
    from tests.support.java_build import compiled

    lib = flink_lib(version)
    return f"{compiled(VERDICT_SRC, f'{lib}/*')}:{lib}/*"


def flink_verdicts(classpath: str, files: list[str]) -> list[dict]:
    """Flink's verdict on each file, in order (one JVM)."""
    java = shutil.which("java")
    if java is None:
        raise RuntimeError("java not on PATH")
    p = subprocess.run(
        [java, "-Xmx256m", "-Xss4m", "-XX:+UseSerialGC", *jvm.SHORT_LIVED, "-cp", classpath,
         "MetadataVerdict"],
        input="\n".join(files) + "\n", capture_output=True, text=True, check=True,
    )  # fmt: skip
    out = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    if len(out) != len(files):
        raise RuntimeError(f"MetadataVerdict answered {len(out)} of {len(files)} files: {p.stderr[-2000:]}")
    return out


def run_live(
    case_list: list[dict], workdir: Path, timings: dict | None = None
) -> list[tuple[dict, dict, dict]]:
    """Write each case's bytes, ask Flink (the release that wrote the fixture) and ckptctl.

    ``timings`` (if given) receives the seconds spent in ckptctl's reader and in Flink's JVMs.
    """
    timings = {} if timings is None else timings
    timings.setdefault("ckptctl", 0.0)
    timings.setdefault("flink", 0.0)
    by_release: dict[str, list[int]] = {}
    for i, c in enumerate(case_list):
        by_release.setdefault(release_of(c["fixture"]), []).append(i)
    originals = {f: fixture_bytes(f) for f in {c["fixture"] for c in case_list}}
    results: list = [None] * len(case_list)
    for release, idxs in by_release.items():
        cp = compile_verdict(release, workdir)
        files = []
        mine = []
        for i in idxs:
            c = case_list[i]
            data = apply_recipe(originals[c["fixture"]], c["recipe"])
            f = workdir / "cases" / release / f"{i}" / "_metadata"
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_bytes(data)
            files.append(str(f))
            t0 = time.perf_counter()
            mine.append(ckptctl_verdict(data, str(f)))
            timings["ckptctl"] += time.perf_counter() - t0
        t0 = time.perf_counter()
        flink = flink_verdicts(cp, files)
        timings["flink"] += time.perf_counter() - t0
        for i, fv, mv in zip(idxs, flink, mine, strict=True):
            results[i] = (case_list[i], fv, mv)
    return results
