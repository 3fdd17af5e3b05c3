"""Run one command as the only child of this process and print its wall time and peak RSS (JSON).

``resource.getrusage(RUSAGE_CHILDREN)`` reports the largest child so far; a fresh wrapper per
measurement makes that exactly the measured command's peak.
"""

import json
import resource
import subprocess
import sys
import time

if __name__ == "__main__":
    cmd = sys.argv[1:]
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    rss_kib = usage.ru_maxrss
    print(
        json.dumps(
            {
                "wall": wall,
                "cpu": usage.ru_utime + usage.ru_stime,  # a shared machine: CPU seconds say what wall hides
                "rss_mib": rss_kib / 1024,
                "rc": proc.returncode,
                "stderr": proc.stderr.decode()[-500:],
            }
        )
    )
