"""Running ``gc plan``/``gc apply`` from a test and reading the plan: the helpers the gc behaviour tests share.

Assertions on a plan read its codes (refusal codes, candidate paths, protected reasons), never its prose;
``snapshot`` is what "deletes nothing" is compared with."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from tests.support.gc_support import ckptctl

OLD = ["--older-than", "1d", "--margin", "10m"]


def codes(plan: dict) -> set[str]:
    """The refusal codes of a plan (a prose refusal of the old format shows up as itself)."""
    return {r.get("code") if isinstance(r, dict) else f"<no code: {r}>" for r in plan.get("refusals", [])}


def candidates(plan: dict) -> set[str]:
    return {c["path"] for c in plan["candidates"]}


def protected(plan: dict) -> dict[str, str]:
    return {p["path"]: p["reason"] for p in plan["protected"]}


def snapshot(*dirs: Path) -> dict[str, str]:
    """Every regular file below ``dirs`` with the digest of its content."""
    out = {}
    for d in dirs:
        for p in sorted(d.rglob("*")):
            if p.is_file() and not p.is_symlink():
                out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def plan_to_file(tmp_path: Path, *args: str, expect: int | None = 0, name: str = "plan.json") -> Path:
    plan_file = tmp_path / name
    ckptctl("gc", "plan", *args, "-o", str(plan_file), expect=expect)
    return plan_file


def apply(plan_file: Path, *extra: str, expect: int | None = 0):
    return ckptctl("gc", "apply", str(plan_file), "--yes", *extra, expect=expect)


def edit_plan(plan_file: Path, fn: Callable[[dict], None]) -> None:
    data = json.loads(plan_file.read_text())
    fn(data)
    plan_file.write_text(json.dumps(data))  # allow_nan: NaN/Infinity are written as JSON extensions


def set_key(data, key: str, value) -> int:
    """Set every ``key`` anywhere in a (nested) plan to ``value``; how many were set."""
    n = 0
    if isinstance(data, dict):
        for k in list(data):
            if k == key:
                data[k] = value
                n += 1
            else:
                n += set_key(data[k], key, value)
    elif isinstance(data, list):
        for x in data:
            n += set_key(x, key, value)
    return n
