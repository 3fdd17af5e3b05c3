"""ckptctl's reader against Flink's on seeded mutations of every fixture, live (needs Java).

    .venv/bin/python bench/differential.py [--cases 10000] [--seed 1] [--show 20]

Mutates the committed fixture ``_metadata`` files (tests/differential.py: byte flips, int
overwrites, truncations, splices, string edits aimed at the trailer, paths, parallelism, key-group
ranges, sizes, offsets, subtask indexes), asks Flink's ``Checkpoints.loadCheckpointMetadata`` of the
release that wrote each fixture (fixtures/dumper/MetadataVerdict.java, one JVM per release) and
ckptctl, and reports how many agree (both reject, or both accept with the same content), the time
each side took, and the disagreements.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests import differential as d  # noqa: E402


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
    kinds = collections.Counter((fv["verdict"], fv.get("exception"), mv["verdict"]) for _c, fv, mv in bad)
    for k, n in kinds.most_common():
        print(f"  {n:5d}  flink {k[0]} {k[1] or ''} / ckptctl {k[2]}")
    for c, fv, mv in bad[: args.show]:
        print(json.dumps({"case": c, "flink": fv, "ckptctl": mv})[:1500])
    if args.json:
        Path(args.json).write_text(
            json.dumps([{"case": c, "flink": fv, "ckptctl": mv} for c, fv, mv in bad], indent=1)
        )
    return 0 if not bad else 1


if __name__ == "__main__":
    raise SystemExit(main())
