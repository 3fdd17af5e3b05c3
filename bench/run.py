"""Benchmarks of the metadata reader and ``refs``, against Flink's own Java reader in the same run.

    .venv/bin/python bench/run.py [--operators 8 --subtasks 256 --files 200] [--flink-lib DIR]

Builds a synthetic checkpoint with ckptctl's writer (default ~50 MB, ~415k file references),
then measures, each in a fresh process: ``ckptctl --help`` start-up; ckptctl parse only;
``ckptctl refs --format ndjson -o FILE`` end to end; and, when a Flink distribution is found
(``--flink-lib``, ``$FLINK_LIB``, or a venv made by ``fixtures/generate.sh``), Flink's
``Checkpoints.loadCheckpointMetadata`` parse only and parse + the same NDJSON (bench/java).
Prints MB/s, references/s, peak RSS and the ratios ckptctl/Java.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from bench.measure import best_of as measure  # noqa: E402  (the one loop of the benches)


def find_flink_lib(explicit: str | None) -> str | None:
    candidates = [explicit, os.environ.get("FLINK_LIB")]
    for root in (
        os.environ.get("FLINK_VENV_ROOT"),
        os.path.expanduser("~/.cache/ckptctl-flink"),
        "/work/flinkenv",
    ):
        if root:
            candidates += sorted(glob.glob(f"{root}/*/lib/python3*/site-packages/pyflink/lib"))
    for c in candidates:
        if c and glob.glob(f"{c}/flink-dist*.jar"):
            return c
    return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--operators", type=int, default=8)
    ap.add_argument("--subtasks", type=int, default=256)
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--flink-lib")
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "ckptctl-bench"))
    args = ap.parse_args()

    from bench.synth import synthetic_bytes

    work = Path(args.workdir)
    job = work / "root" / "0123456789abcdef0123456789abcdef"
    chk = job / "chk-100"
    chk.mkdir(parents=True, exist_ok=True)
    meta = chk / "_metadata"
    data = synthetic_bytes(
        f"file:{job}", operators=args.operators, subtasks=args.subtasks, files_per_subtask=args.files
    )
    meta.write_bytes(data)
    refs = args.operators * args.subtasks * (args.files + 4)
    mb = len(data) / 1e6
    print(f"synthetic _metadata: {mb:.1f} MB, {refs:,} file references ({meta})")

    ckptctl = str(Path(sys.executable).parent / "ckptctl")
    results: dict[str, dict] = {}
    results["ckptctl --help"] = measure([ckptctl, "--help"], runs=5)
    parse = f"from ckptctl.metadata import read_metadata; read_metadata(open({str(meta)!r},'rb').read())"
    results["ckptctl parse"] = measure([sys.executable, "-c", parse], args.runs)
    out_py = work / "ckptctl.ndjson"
    results["ckptctl refs ndjson"] = measure(
        [ckptctl, "refs", str(chk), "--format", "ndjson", "-o", str(out_py)], args.runs
    )

    lib = find_flink_lib(args.flink_lib)
    java = shutil.which("java")
    if lib and java and shutil.which("javac"):
        classes = work / "java"
        classes.mkdir(exist_ok=True)
        cp = f"{lib}/*"
        subprocess.run(
            ["javac", "-nowarn", "-cp", cp, "-d", str(classes), str(HERE / "java" / "FlinkRefs.java")],
            check=True,
        )
        run_cp = f"{cp}:{classes}"
        out_java = work / "java.ndjson"
        results["flink parse"] = measure([java, "-cp", run_cp, "FlinkRefs", "parse", str(meta)], args.runs)
        results["flink refs ndjson"] = measure(
            [java, "-cp", run_cp, "FlinkRefs", "ndjson", str(meta), str(out_java)], args.runs
        )
        same = sorted(out_py.read_text().splitlines()) == sorted(out_java.read_text().splitlines())
        print(f"Flink distribution: {lib}; outputs identical: {same}")
    else:
        print(
            "no Flink distribution found (run fixtures/generate.sh or pass --flink-lib): Java baseline skipped"
        )

    print(f"\n{'measurement':<22}{'wall s':>9}{'MB/s':>9}{'refs/s':>12}{'peak RSS MiB':>14}")
    for name, r in results.items():
        rate = "" if "help" in name else f"{mb / r['wall']:9.1f}{refs / r['wall']:12,.0f}"
        print(f"{name:<22}{r['wall']:9.2f}{rate or ' ' * 21}{r['rss_mib']:14.0f}")
    if "flink parse" in results:
        print()
        for mine, theirs in (("ckptctl parse", "flink parse"), ("ckptctl refs ndjson", "flink refs ndjson")):
            a, b = results[mine], results[theirs]
            print(
                f"{mine} / {theirs}: time {a['wall'] / b['wall']:.2f}x, peak RSS {a['rss_mib'] / b['rss_mib']:.2f}x"
            )
    print(f"ckptctl --help: {results['ckptctl --help']['wall'] * 1000:.0f} ms")


if __name__ == "__main__":
    main()
