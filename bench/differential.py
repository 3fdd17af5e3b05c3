"""ckptctl's reader against Flink's on seeded mutations of every fixture, live (needs Java).

    .venv/bin/python bench/differential.py [--cases 10000] [--seed 1] [--show 20]

Mutates the committed fixture ``_metadata`` files (tests/support/differential.py: byte flips, int
overwrites, truncations, splices, string edits aimed at the trailer, paths, parallelism, key-group
ranges, sizes, offsets, subtask indexes), asks Flink's ``Checkpoints.loadCheckpointMetadata`` of the
release that wrote each fixture (fixtures/dumper/MetadataVerdict.java, one JVM per release) and
ckptctl, and reports how many agree (both reject, or both accept with the same content), the time
each side took, and the disagreements. Each disagreement is also put to the other releases that
write the same format version: where one of them reads the bytes as ckptctl does, the file is
ambiguous (nothing in it says which release wrote it) and is listed as such. A file Flink's reader
accepts with an operator of more than 2^15 subtasks is listed as ckptctl's own bound (no Flink job
can restore it; see the reader). The exit status is 0 when every disagreement is of those kinds.
"""

from __future__ import annotations

import argparse
import collections
import json
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ckptctl.metadata import read_operators  # noqa: E402
from tests.support import differential as d  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--show", type=int, default=20, help="disagreements to print")
    ap.add_argument("--json", help="write every disagreement to this file")
    args = ap.parse_args()

    t0 = time.monotonic()
    cases = d.cases(args.cases, args.seed)
    t_gen = time.monotonic() - t0
    timings: dict = {}
    with tempfile.TemporaryDirectory(prefix="ckptctl-diff-") as tmp:
        t1 = time.monotonic()
        results = d.run_live(cases, Path(tmp), timings)
        t_run = time.monotonic() - t1

    bad = [(c, fv, mv) for c, fv, mv in results if not d.agree(fv, mv)]
    with tempfile.TemporaryDirectory(prefix="ckptctl-diff-") as tmp:
        ambiguous = release_ambiguous(bad, Path(tmp))
    bounded = [i for i, (_c, fv, mv) in enumerate(bad) if i not in ambiguous and beyond_restore(fv, mv)]
    verdicts = collections.Counter((fv["verdict"], mv["verdict"]) for _c, fv, mv in results)
    releases = collections.Counter(d.release_of(c["fixture"]) for c in cases)
    print(f"{len(results)} mutated files over {len(d.fixture_files())} fixtures {dict(releases)}")
    print(f"(flink, ckptctl) verdicts: {dict(verdicts)}")
    print(
        f"agreement: {len(results) - len(bad)}/{len(results)} ({100 * (len(results) - len(bad)) / len(results):.2f} %)"
    )
    print(
        f"time: generate {t_gen:.1f}s, run {t_run:.1f}s (Flink's JVMs {timings['flink']:.1f}s incl. start-up, "
        f"ckptctl's reader {timings['ckptctl']:.1f}s)"
    )
    if bad:
        print(
            f"of the {len(bad)} disagreements, {len(ambiguous)} are files that another release writing the "
            f"same format version reads as ckptctl does (the bytes do not say which release wrote them):"
        )
        for i, others in ambiguous.items():
            c, fv, _mv = bad[i]
            print(f"  {d.release_of(c['fixture'])} {fv['verdict']}, but {', '.join(others)} agree with ckptctl: "
                  f"{c['fixture']} {json.dumps(c['recipe'])}")  # fmt: skip
        if bounded:
            print(
                f"and {len(bounded)} are ckptctl's own bound: an operator with subtasks and a parallelism above "
                f"2^15, which Flink's reader loads when its heap allows but no Flink job can restore:"
            )
            for i in bounded:
                c, fv, mv = bad[i]
                print(
                    f"  {d.release_of(c['fixture'])} {fv['verdict']}: {c['fixture']} {json.dumps(c['recipe'])}: {mv['error']}"
                )
    kinds = collections.Counter((fv["verdict"], fv.get("exception"), mv["verdict"]) for _c, fv, mv in bad)
    for k, n in kinds.most_common():
        print(f"  {n:5d}  flink {k[0]} {k[1] or ''} / ckptctl {k[2]}")
    for c, fv, mv in bad[: args.show]:
        print(json.dumps({"case": c, "flink": fv, "ckptctl": mv})[:1500])
    if args.json:
        Path(args.json).write_text(
            json.dumps([{"case": c, "flink": fv, "ckptctl": mv} for c, fv, mv in bad], indent=1)
        )
    return 0 if len(bad) == len(ambiguous) + len(bounded) else 1


def beyond_restore(flink: dict, mine: dict) -> bool:
    """Flink's reader accepts an operator whose parallelism no Flink job can run (above
    ``UPPER_BOUND_MAX_PARALLELISM``, 2^15) and ckptctl rejects it at that parallelism."""
    if flink["verdict"] != "accept" or mine["verdict"] != "reject":
        return False
    too_many = any(
        par > read_operators.MAX_PARALLELISM and n > 0 for _op, par, _maxpar, n in flink.get("operators", ())
    )
    return too_many and f"above Flink's limit of {read_operators.MAX_PARALLELISM}" in mine.get("error", "")


# the releases that write each format version (the jars of each are in apache-flink-libraries)
FORMAT_WRITERS = {
    3: ("1.14.6", "1.15.4"),
    4: ("1.16.3", "1.17.2", "1.18.1", "1.19.3", "1.20.3"),
    5: ("2.0.2",),
    6: ("2.1.3", "2.2.0", "2.3.0"),
}


def release_ambiguous(bad: list, workdir: Path) -> dict[int, list[str]]:
    """Disagreements where another release writing the file's format version agrees with ckptctl.

    Such bytes are read differently by two releases that write the same format version (1.14 and
    1.15 lay out changelog handles differently in V3; 1.16-1.19 do not know 1.20's file-merging
    handles in V4), and nothing in the file says which release wrote it. Returns the index into
    ``bad`` and the releases that agree.
    """
    out: dict[int, list[str]] = {}
    by_release: dict[str, list[int]] = {}
    files: dict[int, str] = {}
    for i, (c, _fv, _mv) in enumerate(bad):
        data = d.apply_recipe(d.fixture_bytes(c["fixture"]), c["recipe"])
        version = struct.unpack_from(">i", data, 4)[0] if len(data) >= 8 else None
        f = workdir / "ambiguous" / str(i) / "_metadata"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(data)
        files[i] = str(f)
        for release in FORMAT_WRITERS.get(version, ()):
            if release != d.release_of(c["fixture"]):
                by_release.setdefault(release, []).append(i)
    for release, idxs in by_release.items():
        verdicts = d.flink_verdicts(d.compile_verdict(release, workdir), [files[i] for i in idxs])
        for i, fv in zip(idxs, verdicts, strict=True):
            if d.agree(fv, bad[i][2]):
                out.setdefault(i, []).append(release)
    return out


if __name__ == "__main__":
    raise SystemExit(main())
