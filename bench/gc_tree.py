"""A synthetic checkpoint root for the GC benchmark: one job, N files in shared/, K checkpoints.

Files are empty (only names and mtimes matter to the planner). Each checkpoint references
``refs`` shared files; consecutive checkpoints share most of them, as incremental checkpoints do.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.synth import synthetic_checkpoint
from ckptctl.metadata import write_metadata

JOB = "0123456789abcdef0123456789abcdef"


def build(root: Path, files: int, checkpoints: int, refs_per_checkpoint: int, subtasks: int = 256) -> dict:
    job = root / JOB
    shared = job / "shared"
    shared.mkdir(parents=True, exist_ok=True)
    rng = uuid.UUID(int=42)
    names = [str(uuid.uuid5(rng, str(i))) for i in range(files)]
    old = time.time() - 7 * 86400
    existing = {e.name for e in os.scandir(shared)}
    for name in names:
        if name not in existing:
            fd = os.open(shared / name, os.O_CREAT | os.O_WRONLY, 0o644)
            os.close(fd)
            os.utime(shared / name, (old, old))
    operators = 8
    per_subtask = max(1, refs_per_checkpoint // (operators * subtasks) - 4)
    step = refs_per_checkpoint // 10  # each checkpoint drops 10% of the previous one's files
    for k in range(checkpoints):
        pool = [f"file:{shared / n}" for n in names[k * step : k * step + operators * subtasks * per_subtask]]
        md = synthetic_checkpoint(
            f"file:{job}", checkpoint_id=100 + k, operators=operators, subtasks=subtasks,
            files_per_subtask=per_subtask, shared_pool=pool,
        )  # fmt: skip
        # private files and meta handles are referenced too: create them so the tree is consistent
        chk = job / f"chk-{100 + k}"
        chk.mkdir(exist_ok=True)
        for op in md.operators:
            for s in op.subtasks:
                h = s.managed_keyed
                for f in h.private:
                    p = f.handle.path[len("file:") :]
                    if not os.path.exists(p):
                        os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o644))
                        os.utime(p, (old, old))
                meta = chk / h.meta.relative_path
                if not meta.exists():
                    meta.touch()
                    os.utime(meta, (old, old))
        (chk / "_metadata").write_bytes(write_metadata(md))
        os.utime(chk / "_metadata", (old + 3600 * (k + 1),) * 2)
    return {"root": str(root), "files": sum(1 for _ in shared.iterdir()), "checkpoints": checkpoints}


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--files", type=int, default=1_000_000)
    ap.add_argument("--checkpoints", type=int, default=3)
    ap.add_argument("--refs", type=int, default=400_000)
    a = ap.parse_args()
    t = time.time()
    print(build(Path(a.root), a.files, a.checkpoints, a.refs), f"{time.time() - t:.1f}s")
