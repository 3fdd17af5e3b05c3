"""Run one command as the only child of this process and print its wall time, CPU time and peak
RSS (JSON); :func:`best_of` is the benches' loop over such runs (``bench/run.py``,
``bench/history_bench.py``).

``resource.getrusage(RUSAGE_CHILDREN)`` reports the largest child so far; a fresh wrapper per
measurement makes that exactly the measured command's peak, and its CPU seconds (user + system)
exactly the command's. On a machine shared with other jobs the wall time swings with their load;
the CPU time much less: compare both.
"""

import json
import resource
import subprocess
import sys
import time
from pathlib import Path


def best_of(cmd: list[str], runs: int = 3) -> dict:
    """``cmd`` run ``runs`` times, each in a fresh wrapper: the run of least wall time, with the
    least CPU time of all runs beside it (``cpu_min``). Exits naming the command when it fails."""
    best, cpu_min = None, None
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), *cmd], capture_output=True, text=True
        )
        r = json.loads(out.stdout)
        if r["rc"] != 0:
            raise SystemExit(f"failed: {' '.join(cmd)}\n{r['stderr']}")
        cpu_min = r["cpu"] if cpu_min is None else min(cpu_min, r["cpu"])
        if best is None or r["wall"] < best["wall"]:
            best = r
    assert best is not None
    return {**best, "cpu_min": cpu_min}


if __name__ == "__main__":
    cmd = sys.argv[1:]
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        json.dumps(
            {
                "wall": wall,
                "cpu": usage.ru_utime + usage.ru_stime,
                "rss_mib": usage.ru_maxrss / 1024,
                "rc": proc.returncode,
                "stderr": proc.stderr.decode()[-500:],
            }
        )
    )
