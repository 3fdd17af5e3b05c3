"""Throwaway: capture CLI outputs over every fixture scenario, for a byte-identical before/after diff.

python bench/capture_outputs.py OUTDIR [WORKERS]
python bench/capture_outputs.py compare BEFORE AFTER   (differences but times and clocks; exit 1 if any)

Environment: PYTHONHASHSEED (set it: gc's FLINK-39964 warning names an example taken from a set),
CAPTURE_CODE=DIR to run the ckptctl package under DIR instead of this checkout's.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PY = str(REPO / ".venv/bin/python")
sys.path.insert(0, str(REPO))
from tests.support.fixture_cases import data_rebase, scenario_roots  # noqa: E402

COMMANDS = [
    "ls",
    "show",
    "refs",
    "diff",
    "repair",
    "relocate",
    "plan-rescale",
    "states",
    "verify",
    "check",
    "gc",
    "gc plan",
    "gc apply",
    "paimon",
    "paimon status",
    "paimon orphans",
    "relocate-apply",
]


def newest(root: Path) -> Path | None:
    best = None
    for m in root.rglob("_metadata"):
        mm = re.fullmatch(r"chk-(\d+)", m.parent.name)
        if mm and (best is None or int(mm.group(1)) > best[0]):
            best = (int(mm.group(1)), m.parent)
    return best[1] if best else None


def jobs() -> list[tuple[str, list[str]]]:
    out = [("help/root", ["--help"])]
    for c in COMMANDS:
        out.append((f"help/{c.replace(' ', '_')}", [*c.split(), "--help"]))
    rb = data_rebase(REPO / "fixtures" / "data")
    for version, scenario, root, _orig in scenario_roots():
        r = str(root)
        key = f"{version}/{scenario}"
        out += [
            (f"{key}/ls", ["ls", r]),
            (f"{key}/refs", ["refs", r]),
            (f"{key}/refs_rebase", ["refs", r, *rb]),
            (f"{key}/plan_rescale", ["plan-rescale", "--json", "-p", "3", r]),
            (f"{key}/plan_rescale_rebase", ["plan-rescale", "--json", "-p", "3", r, *rb]),
            (f"{key}/gc", ["gc", "--json", "--clock", "local", r]),
            (f"{key}/gc_rebase", ["gc", "--json", "--clock", "local", r, *rb]),
            (f"{key}/gc_text_rebase", ["gc", "--clock", "local", r, *rb]),
            (f"{key}/check_rebase", ["check", r, *rb]),
            (f"{key}/check_json_rebase", ["check", "--json", r, *rb]),
            (f"{key}/check", ["check", "--json", r]),
            (f"{key}/verify_rebase", ["verify", "--engine", "local", r, *rb]),
            (f"{key}/verify_json_rebase", ["verify", "--json", "--engine", "local", r, *rb]),
            (f"{key}/verify_json", ["verify", "--json", "--engine", "local", r]),
        ]
        n = newest(root)
        if n is not None:
            out += [
                (f"{key}/show_json", ["show", "--json", str(n)]),
                (f"{key}/show_json_rebase", ["show", "--json", str(n), *rb]),
                (f"{key}/show_rebase", ["show", str(n), *rb]),
                (f"{key}/repair_dry_rebase", ["repair", "--dry-run", str(n), *rb]),
                (f"{key}/repair_dry_json_rebase", ["repair", "--json", "--dry-run", str(n), *rb]),
            ]
    return out


def run(outdir: Path, name: str, args: list[str]) -> None:
    env = dict(os.environ, COLUMNS="120", NO_COLOR="1", TZ="UTC")
    env.pop("CKPTCTL_DEBUG", None)
    if os.environ.get("CAPTURE_CODE"):  # another checkout's ckptctl package (e.g. a git archive of the base)
        env.update(PYTHONSAFEPATH="1", PYTHONPATH=os.environ["CAPTURE_CODE"])
    p = subprocess.run([PY, "-m", "ckptctl", *args], capture_output=True, env=env, cwd=REPO, timeout=900)
    d = outdir / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "args").write_text(json.dumps(args) + "\n")
    (d / "stdout").write_bytes(p.stdout)
    (d / "stderr").write_bytes(p.stderr)
    (d / "rc").write_text(f"{p.returncode}\n")


# what differs from run to run: durations and the clock (gc's now, cutoff, plan time)
VOLATILE = [
    (re.compile(rb'("(?:elapsed_seconds|now|cutoff|created_at|seconds)": )[0-9.e+-]+'), rb"\1X"),
    (re.compile(rb"(\xe2\x80\x94 local, )[0-9.]+s"), rb"\1Xs"),
]


def normalized(path: Path) -> bytes:
    data = path.read_bytes()
    for pattern, repl in VOLATILE:
        data = pattern.sub(repl, data)
    return data


def compare(before: Path, after: Path) -> int:
    names = sorted({p.relative_to(d) for d in (before, after) for p in d.rglob("*") if p.is_file()})
    differ = [n for n in names if not (before / n).is_file() or not (after / n).is_file()
              or normalized(before / n) != normalized(after / n)]  # fmt: skip
    for n in differ:
        print("differs:", n)
    print(f"{len(names)} files compared ({len({n.parent for n in names})} invocations), {len(differ)} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    if sys.argv[1] == "compare":
        sys.exit(compare(Path(sys.argv[2]), Path(sys.argv[3])))
    outdir = Path(sys.argv[1])
    todo = jobs()
    with ThreadPoolExecutor(int(sys.argv[2]) if len(sys.argv) > 2 else 4) as ex:
        list(ex.map(lambda j: run(outdir, *j), todo))
    print(len(todo), "outputs in", outdir)
