"""``preflight`` of a big ``_metadata`` against a staging savepoint (issue 46: ≤ 2 s for 52 MB).

    .venv/bin/python bench/preflight_bench.py [--operators 8 --subtasks 256 --files 200] [--runs 3]

OLD is the synthetic checkpoint of bench/run.py (ckptctl's writer, ~52 MB, 2,048 incremental
RocksDB handles) with what a real one has and the synthetic one lacks: every handle's meta is the
serialization proxy a real Flink job wrote (inline, as Flink inlines it below 20 KB: the header of
the stateful operator of ``fixtures/upgrades`` pair 2.3.0/backend_switch_checkpoint), and its
operators carry the ids of NEW's, so they map. NEW is that pair's staging savepoint (real Flink).
Its max parallelism (128) is not the synthetic one (4096), so the verdict is ``fails``: every
operator is still mapped and every state checked, which is the work measured.

The baseline, in the same run on the same files: ``ckptctl show`` of OLD (reads and decodes the
whole ``_metadata``). Printed: wall and CPU seconds (the machine may be shared: CPU seconds are
what the process itself cost), peak RSS and the ratio preflight / show.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
PAIR = REPO / "fixtures" / "upgrades" / "data" / "2.3.0" / "backend_switch_checkpoint"


def measure(cmd: list[str], runs: int) -> dict:
    """The fastest of ``runs`` (wall), each in a fresh process (bench/measure.py)."""
    best = None
    for _ in range(runs):
        out = subprocess.run([sys.executable, str(HERE / "measure.py"), *cmd], capture_output=True, text=True)
        r = json.loads(out.stdout)
        if r["rc"] not in (0, 1):  # preflight exits 1 for "fails"
            raise SystemExit(f"failed: {' '.join(cmd)}\n{r['stderr']}")
        if best is None or r["wall"] < best["wall"]:
            best = r
    return best


def build_old(work: Path, operators: int, subtasks: int, files: int) -> tuple[Path, Path]:
    """(OLD's chk dir, NEW's savepoint dir): OLD synthetic with a real header in every handle."""
    from bench.synth import synthetic_checkpoint
    from ckptctl.metadata import read_metadata, write_metadata
    from ckptctl.metadata.handles import ByteStreamHandle

    new_dir = next((PAIR / "new").glob("*/_metadata")).parent
    old_real = next((PAIR / "old").glob("*/chk-*/_metadata"))
    real = read_metadata(old_real.read_bytes(), path=str(old_real))
    meta = next(s.managed_keyed.meta for op in real.operators for s in op.subtasks or () if s.managed_keyed)
    header = ByteStreamHandle("meta", meta.data)  # inline in the fixture, as Flink writes it
    new = read_metadata((new_dir / "_metadata").read_bytes(), path=str(new_dir))
    new_ids = [op.operator_id for op in new.operators]

    job = work / "root" / "0123456789abcdef0123456789abcdef"
    chk = job / "chk-100"
    chk.mkdir(parents=True, exist_ok=True)
    md = synthetic_checkpoint(f"file:{job}", operators=operators, subtasks=subtasks, files_per_subtask=files)
    ops = []
    for i, op in enumerate(md.operators):
        subs = tuple(s._replace(managed_keyed=s.managed_keyed._replace(meta=header)) for s in op.subtasks)
        ops.append(op._replace(operator_id=new_ids[i] if i < len(new_ids) else op.operator_id, subtasks=subs))
    (chk / "_metadata").write_bytes(write_metadata(md._replace(operators=tuple(ops))))
    return chk, new_dir


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--operators", type=int, default=8)
    ap.add_argument("--subtasks", type=int, default=256)
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "ckptctl-preflight-bench"))
    args = ap.parse_args()
    chk, new_dir = build_old(Path(args.workdir), args.operators, args.subtasks, args.files)
    mb = (chk / "_metadata").stat().st_size / 1e6
    print(f"OLD: synthetic _metadata {mb:.1f} MB ({chk}); NEW: {new_dir.relative_to(REPO)}")
    # this checkout's ckptctl (the installed entry point may be another checkout's)
    os.environ["PYTHONPATH"] = str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")
    ckptctl = [sys.executable, "-m", "ckptctl"]
    results = {
        "ckptctl show": measure([*ckptctl, "show", str(chk)], args.runs),
        "ckptctl preflight": measure(
            [*ckptctl, "preflight", str(chk), "--against", str(new_dir), "-n", "--json"], args.runs
        ),
    }
    print(f"\n{'measurement':<20}{'wall s':>9}{'CPU s':>9}{'MB/s':>9}{'peak RSS MiB':>14}")
    for name, r in results.items():
        print(f"{name:<20}{r['wall']:9.2f}{r['cpu']:9.2f}{mb / r['wall']:9.1f}{r['rss_mib']:14.0f}")
    a, b = results["ckptctl preflight"], results["ckptctl show"]
    print(f"\npreflight / show: wall {a['wall'] / b['wall']:.2f}x, CPU {a['cpu'] / b['cpu']:.2f}x")


if __name__ == "__main__":
    main()
