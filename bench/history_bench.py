"""``history`` over a large ledger, against the floor of reading that ledger, in the same run.

    .venv/bin/python bench/history_bench.py [--checkpoints 1000 --operators 4 --subtasks 256] [--runs 3]

Synthesises a ledger as a cron leaves it just before a compaction (one compacted part and a part
per later update, ckptctl's own writer: :mod:`ckptctl.history.ledger`): N checkpoints of one job,
each operator's state growing at its own rate, 3 files per subtask. Then measures, each in a
fresh process (:func:`bench.measure.best_of`), best of ``--runs``, wall and CPU seconds:

* **floor**: pyarrow reading the parts' figure columns (what any reader of the ledger must read)
  and one group-by (job, checkpoint, operator) sum;
* **history**: ``ckptctl history EMPTY_ROOT --ledger LEDGER --json`` end to end (imports, the
  ledger update finding nothing new, the report, the JSON).

Target (the issue's: 1,000 checkpoints of 256 subtasks in <= 2 s): history within TARGET_RATIO of
the floor measured in the same run, and the wall time printed beside it. Not a test.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench.measure import best_of as measure  # noqa: E402  (the one loop of the benches)

TARGET_RATIO = 2.0  # history / floor, wall; the CPU ratio beside it swings less on a shared machine
TARGET_SECONDS = 2.0

FLOOR = r"""
import sys, glob
import pyarrow as pa, pyarrow.parquet as pq
from ckptctl.history.report import NUMERIC
parts = sorted(glob.glob(sys.argv[1] + "/part-*.parquet"))
t = pa.concat_tables([pq.read_table(p, columns=NUMERIC) for p in parts])
g = t.group_by(["job_id", "checkpoint_id", "operator_id"]).aggregate([("full_bytes", "sum"), ("uploaded_bytes", "sum")])
print(g.num_rows)
"""


def synth(ledger: Path, checkpoints: int, operators: int, subtasks: int, tail: int) -> int:
    import pyarrow as pa

    from ckptctl.history.ledger import Ledger, arrow_schema
    from ckptctl.storage import Storage, StorageOptions

    led = Ledger(Storage(StorageOptions.from_env(None)), "file:" + str(ledger))
    job = "0123456789abcdef0123456789abcdef"
    ops = [f"{i:032x}" for i in range(1, operators + 1)]
    schema = arrow_schema()

    def table(first: int, last: int) -> pa.Table:
        cols: dict[str, list] = {f.name: [] for f in schema}
        for cid in range(first, last + 1):
            for k, op in enumerate(ops):
                for s in range(subtasks):
                    full = 100_000 + cid * (k + 1) * 50 + s
                    files = [f"file:/ck/{job}/shared/{cid}-{k}-{s}-{n}" for n in range(3)]
                    row = {
                        "job_id": job, "checkpoint_id": cid, "kind": "checkpoint", "path": f"file:/ck/{job}/chk-{cid}",
                        "time": 1.7e9 + cid * 60.0, "metadata_bytes": 5_000_000, "operator_id": op,
                        "operator_name": f"op-{k}", "operator_uid": f"uid-{k}", "state_kinds": "keyed",
                        "subtask": s, "full_bytes": full, "checkpointed_bytes": full // 10, "inline_bytes": 0,
                        "uploaded_bytes": full // 10, "reused_bytes": full - full // 10, "file_count": 3,
                        "base_checkpoint_id": cid - 1 if cid > 1 else None, "files": files,
                        "file_sizes": [full // 3] * 3,
                    }  # fmt: skip
                    for name, v in row.items():
                        cols[name].append(v)
        return pa.table({f.name: pa.array(cols[f.name], type=f.type) for f in schema}, schema=schema)

    led.write_table(table(1, checkpoints - tail))
    for cid in range(checkpoints - tail + 1, checkpoints + 1):
        led.write_table(table(cid, cid))
    return len(led.parts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoints", type=int, default=1000)
    ap.add_argument("--operators", type=int, default=4)
    ap.add_argument("--subtasks", type=int, default=256)
    ap.add_argument("--tail", type=int, default=40, help="checkpoints in a part of their own each")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ledger, root = Path(tmp) / "ledger", Path(tmp) / "root"
        root.mkdir()
        parts = synth(ledger, args.checkpoints, args.operators, args.subtasks, args.tail)
        rows = args.checkpoints * args.operators * args.subtasks
        size = sum(p.stat().st_size for p in ledger.iterdir())
        print(f"ledger: {args.checkpoints} checkpoints x {args.operators} operators x {args.subtasks} subtasks = "
              f"{rows:,} rows in {parts} parts, {size / 2**20:.1f} MiB")  # fmt: skip
        floor = measure([sys.executable, "-c", FLOOR, str(ledger)], args.runs)
        cmd = [sys.executable, "-m", "ckptctl", "history", str(root), "--ledger", str(ledger), "--json"]
        hist = measure(cmd, args.runs)
    ratio = hist["wall"] / floor["wall"]
    cpu_ratio = hist["cpu_min"] / floor["cpu_min"]
    print(f"  {'':33}{'wall s':>8}{'CPU s':>8}{'RSS MiB':>9}")
    print(
        f"  floor (pyarrow read + group-by)  {floor['wall']:8.2f}{floor['cpu_min']:8.2f}{floor['rss_mib']:9.0f}"
    )
    print(
        f"  ckptctl history --ledger         {hist['wall']:8.2f}{hist['cpu_min']:8.2f}{hist['rss_mib']:9.0f}"
        f"  {ratio:4.2f}x floor (wall), {cpu_ratio:4.2f}x (CPU)"
    )
    ok = ratio <= TARGET_RATIO
    print(
        f"  target: <= {TARGET_RATIO:.1f}x floor ({TARGET_SECONDS:.0f} s on an idle machine): {'met' if ok else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
