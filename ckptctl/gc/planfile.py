"""The plan file: one schema, written by ``gc plan -o`` and validated whole by ``gc apply``.

A plan is an instruction to delete files, so ``apply`` trusts nothing in it: every field is
type-checked (a ``roots`` string would become one root per character), numbers must be finite
(``NaN`` makes every age comparison false), and a plan that was blocked stays blocked even if
the condition has cleared since. Everything the plan proposes is re-derived by a fresh scan.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from ckptctl.checkpoint.rebase import Rebase
from ckptctl.errors import CkptError, LayoutError
from ckptctl.gc.options import CLOCKS, GcOptions
from ckptctl.storage import StorageOptions, check_user_path

PLAN_FORMAT = 2


class InvalidPlan(CkptError):
    """The file is not a plan ckptctl wrote (or it was edited into something unsafe)."""

    def __init__(self, what: str, path: str | None) -> None:
        super().__init__(f"not a valid plan: {what}", path=path)


class BlockedPlan(CkptError):
    exit_code = 1


def _reject_constant(name: str) -> float:
    raise ValueError(f"non-finite number {name}")


def read_plan(path: str, validator: Callable[[Any, str | None], None] | None = None,
              planner: str = "ckptctl gc plan") -> dict[str, Any]:  # fmt: skip
    """Load and validate a plan file; raises :class:`InvalidPlan` (exit 2) or :class:`BlockedPlan`.

    ``validator``/``planner``: another kind of plan ``gc apply`` executes (its schema check, and the
    command that writes it) -- the caller tells them apart with :func:`load_json` first."""
    data = load_json(path)
    (validator or validate)(data, path)
    if data["blocked"]:
        first = data["refusals"][0]["message"] if data["refusals"] else "see its refusals"
        raise BlockedPlan(
            f"this plan was blocked and can never be applied ({first}); fix the cause and run `{planner}` again",
            path=path,
        )
    return data


def load_json(path: str) -> Any:
    """The plan file's JSON, unvalidated (non-finite numbers refused)."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f, parse_constant=_reject_constant)
    except OSError as e:
        raise CkptError(f"cannot read the plan: {e.strerror or e}", path=path) from None
    except ValueError as e:
        raise InvalidPlan(str(e).splitlines()[0], path) from None


def _check(cond: bool, what: str, path: str | None) -> None:
    if not cond:
        raise InvalidPlan(what, path)


def _is_num(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _is_str_list(x: Any) -> bool:
    return isinstance(x, list) and all(isinstance(i, str) for i in x)


def validate(data: Any, path: str | None = None) -> None:
    _check(isinstance(data, dict), "the top level is not a JSON object", path)
    fmt = data.get("format")
    if fmt != PLAN_FORMAT:
        _check(
            False,
            f"format {fmt!r} (this ckptctl writes and applies format {PLAN_FORMAT}; run gc plan again)",
            path,
        )
    o = data.get("options")
    _check(isinstance(o, dict), "'options' is missing or not an object", path)
    _check(
        _is_str_list(o.get("roots")) and bool(o["roots"]),
        "'options.roots' is not a non-empty list of strings",
        path,
    )
    for key in ("savepoint_dirs", "changelog_dirs", "accept_lost"):
        _check(_is_str_list(o.get(key, [])), f"'options.{key}' is not a list of strings", path)
    kl = o.get("keep_last")
    _check(
        kl is None or (isinstance(kl, int) and not isinstance(kl, bool) and kl >= 1),
        "'options.keep_last'",
        path,
    )
    for key in ("older_than", "margin"):
        _check(_is_num(o.get(key)) and o[key] >= 0, f"'options.{key}' is not a finite number >= 0", path)
    mdf = o.get("max_delete_fraction")
    _check(_is_num(mdf) and 0 < mdf <= 1, "'options.max_delete_fraction' is not in (0, 1]", path)
    for key in ("force", "allow_external"):
        _check(isinstance(o.get(key), bool), f"'options.{key}' is not true/false", path)
    try:
        Rebase.from_json(o.get("rebase"), "'options.rebase'")
    except LayoutError:
        _check(False, "'options.rebase'", path)
    _check(o.get("clock", "storage") in CLOCKS, "'options.clock'", path)
    inv = o.get("inventory")
    _check(inv is None or (isinstance(inv, str) and bool(inv)), "'options.inventory' is not a string", path)
    created, rows = o.get("inventory_created"), o.get("inventory_rows")
    _check(created is None or _is_num(created), "'options.inventory_created' is not a finite number", path)
    _check(rows is None or (isinstance(rows, int) and not isinstance(rows, bool) and rows >= 0),
           "'options.inventory_rows' is not a count", path)  # fmt: skip
    _check((inv is None) == (created is None) == (rows is None),
           "'options.inventory', 'inventory_created' and 'inventory_rows' go together", path)  # fmt: skip
    for key in ("roots", "savepoint_dirs", "changelog_dirs", "accept_lost"):
        for value in o.get(key, []):
            try:
                check_user_path(f"options.{key}", value)
            except CkptError as e:
                raise InvalidPlan(e.message, path) from None
    validate_outcome(data, path)


def validate_outcome(data: dict[str, Any], path: str | None) -> None:
    """What every kind of plan ``gc apply`` executes holds (gc's, ``paimon orphans``'): whether it
    is blocked and why, the storage it was made against, and its candidates, each checked."""
    _check(isinstance(data.get("blocked"), bool), "'blocked' is missing or not true/false", path)
    refusals = data.get("refusals")
    _check(
        isinstance(refusals, list) and all(isinstance(r, dict) and isinstance(r.get("message"), str) for r in refusals),
        "'refusals' is not a list of {code, message}", path,
    )  # fmt: skip
    _check(data["blocked"] == bool(refusals), "'blocked' disagrees with 'refusals'", path)
    storage = data.get("storage")
    _check(
        isinstance(storage, dict) and (storage.get("s3_endpoint") is None or isinstance(storage["s3_endpoint"], str)),
        "'storage' is missing or not {s3_endpoint}", path,
    )  # fmt: skip
    cands = data.get("candidates")
    _check(isinstance(cands, list), "'candidates' is missing or not a list", path)
    for i, c in enumerate(cands):
        ok = (
            isinstance(c, dict) and isinstance(c.get("path"), str) and isinstance(c.get("size"), int)
            and not isinstance(c.get("size"), bool) and c["size"] >= 0
            and "mtime" in c and (c["mtime"] is None or _is_num(c["mtime"])) and isinstance(c.get("reason"), str)
        )  # fmt: skip
        _check(ok, f"candidate #{i} is not {{path, size, mtime, reason}}", path)


def options_from_plan(data: dict[str, Any]) -> GcOptions:
    o = data["options"]
    return GcOptions(
        roots=tuple(o["roots"]), savepoint_dirs=tuple(o["savepoint_dirs"]), changelog_dirs=tuple(o["changelog_dirs"]),
        keep_last=o["keep_last"], older_than=float(o["older_than"]), margin=float(o["margin"]),
        max_delete_fraction=float(o["max_delete_fraction"]), force=o["force"], allow_external=o["allow_external"],
        rebase=Rebase.from_json(o["rebase"], "the plan's options"), accept_lost=tuple(o.get("accept_lost", ())),
        clock=o.get("clock", "storage"), collect_dead_jobs=bool(o.get("collect_dead_jobs", False)),
        collect_fixed_id_changelog=bool(o.get("collect_fixed_id_changelog", False)),
        older_than_at=None if o.get("older_than_at") is None else float(o["older_than_at"]),
        inventory=o.get("inventory"),
        inventory_created=None if o.get("inventory_created") is None else float(o["inventory_created"]),
        inventory_rows=o.get("inventory_rows"),
    )  # fmt: skip


def storage_from_plan(data: dict[str, Any], s3_endpoint: str | None) -> StorageOptions:
    """The storage the plan was made against, unless the user names another endpoint now."""
    return StorageOptions.from_env(s3_endpoint or data["storage"].get("s3_endpoint"))
