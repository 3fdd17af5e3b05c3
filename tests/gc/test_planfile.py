"""Invariant 9: a plan file is validated whole (types, finite numbers, roots, paths, the endpoint it
was made with), and a blocked plan is never applied."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.gc_plans import OLD, apply, candidates, edit_plan, plan_to_file, set_key, snapshot
from tests.support.gc_support import DAY, T0, Scenario
from tests.support.s3_rewritten import Upload, exists, fixture_entry, plan, socket_port_nobody_listens_on

# ---------------------------------------------------------------------------------------------
# row 7: non-finite numbers in a plan file


@pytest.mark.parametrize(
    "edit",
    [{"older_than": math.nan, "margin": math.nan}, {"margin": math.nan}, {"older_than": math.inf}],
    ids=["nan-both", "margin-nan", "older-than-infinity"],
)
def test_non_finite_numbers_in_plan_are_rejected(tmp_path: Path, edit: dict) -> None:
    """Tracker: row07."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0].name
    sc.plant(f"checkpoints/{job}/shared/old-orphan")
    young = sc.plant(f"checkpoints/{job}/shared/one-minute-old", mtime=time.time() - 60)
    plan_file = plan_to_file(tmp_path, str(sc.checkpoints), *sc.rebase, *OLD, "--force")

    def poison(data: dict) -> None:
        for key, value in edit.items():
            assert set_key(data, key, value) >= 1, key

    edit_plan(plan_file, poison)
    before = snapshot(sc.root)
    result = apply(plan_file, expect=2)
    assert "not a valid plan" in result.stderr and "Traceback" not in result.stderr
    assert young.exists() and snapshot(sc.root) == before


# ---------------------------------------------------------------------------------------------
# row 13: malformed and blocked plans


@pytest.mark.parametrize(
    "damage", ["no-candidates", "candidates-object", "candidates-entry-string", "format-unknown"]
)
def test_malformed_plan_exits_2(tmp_path: Path, damage: str) -> None:
    """Tracker: row13."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    sc.plant(f"checkpoints/{sc.jobs()[0].name}/shared/orphan")
    plan_file = plan_to_file(tmp_path, str(sc.checkpoints), *sc.rebase, *OLD, "--force")

    def damage_it(data: dict) -> None:
        if damage == "no-candidates":
            del data["candidates"]
        elif damage == "candidates-object":
            data["candidates"] = {c["path"]: c for c in data["candidates"]}
        elif damage == "candidates-entry-string":
            data["candidates"] = [c["path"] for c in data["candidates"]]
        else:
            data["format"] = 99

    edit_plan(plan_file, damage_it)
    before = snapshot(sc.root)
    result = apply(plan_file, expect=2)
    assert "not a valid plan" in result.stderr and "Traceback" not in result.stderr
    assert snapshot(sc.root) == before


def test_blocked_plan_is_never_applied(tmp_path: Path) -> None:
    """Tracker: row13."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    job = sc.jobs()[0].name
    orphans = [sc.plant(f"checkpoints/{job}/shared/orphan-{i}") for i in range(3)]
    skewed = sc.plant(f"checkpoints/{job}/shared/from-the-future", mtime=time.time() + 30 * DAY)
    plan_file = plan_to_file(tmp_path, str(sc.checkpoints), *sc.rebase, *OLD, "--force", expect=1)
    assert json.loads(plan_file.read_text())["blocked"] is True
    os.utime(skewed, (T0, T0))  # the condition clears; the plan stays blocked
    before = snapshot(sc.root)
    apply(plan_file, expect=1)
    assert all(o.exists() for o in orphans) and snapshot(sc.root) == before


# ---------------------------------------------------------------------------------------------
# row 16: a plan whose roots are not a list of strings


@pytest.mark.parametrize("roots", ["ck", ["{root}", 5], [["{root}"]], None])
def test_plan_roots_must_be_a_list_of_strings(tmp_path: Path, monkeypatch, roots) -> None:
    """Tracker: row16."""
    sc = Scenario("2.2.0", "basic", tmp_path)
    sc.plant(f"checkpoints/{sc.jobs()[0].name}/shared/orphan")
    plan_file = plan_to_file(tmp_path, str(sc.checkpoints), *sc.rebase, *OLD, "--force")
    # a string would be iterated character by character: run where those characters name nothing
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    value = json.loads(json.dumps(roots).replace("{root}", str(sc.checkpoints)))
    edit_plan(plan_file, lambda data: set_key(data, "roots", value))
    before = snapshot(sc.root)
    result = apply(plan_file, expect=2)
    assert "not a valid plan" in result.stderr and "Traceback" not in result.stderr
    assert snapshot(sc.root) == before


# ---------------------------------------------------------------------------------------------
# row 15: apply uses the endpoint the plan was made with


def test_apply_uses_the_plans_endpoint(s3_server, tmp_path: Path) -> None:
    """Tracker: row15."""
    job = fixture_entry()["job_ids"][0]
    planted = {f"checkpoints/{job}/shared/orphan-{i}": b"o" * 10 for i in range(3)}
    up = Upload(s3_server, "attack-row15", extra=planted)
    orphans = {up.uri(k) for k in planted}
    plan_file = tmp_path / "plan.json"
    p = plan(s3_server.endpoint, up.root, out=plan_file)
    assert orphans <= candidates(p)
    assert p["storage"]["s3_endpoint"] == s3_server.endpoint

    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AWS_ENDPOINT_URL") and k != "CKPTCTL_S3_ENDPOINT" and "PROXY" not in k.upper()
    }
    closed = socket_port_nobody_listens_on()
    env.update(
        AWS_EC2_METADATA_DISABLED="true", AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1", AWS_CONFIG_FILE=str(tmp_path / "none"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
        # a request that misses the plan's endpoint must not leave this machine: it goes to a
        # closed loopback port instead of the real AWS
        HTTP_PROXY=f"http://127.0.0.1:{closed}", HTTPS_PROXY=f"http://127.0.0.1:{closed}",
        NO_PROXY="127.0.0.1,localhost", AWS_RETRY_MODE="standard", AWS_MAX_ATTEMPTS="2",
    )  # fmt: skip
    exe = str(Path(sys.executable).parent / "ckptctl")
    try:
        done = subprocess.run(
            [exe, "gc", "apply", str(plan_file), "--yes", "--json"],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail("gc apply without --s3-endpoint hung instead of using the plan's endpoint")
    assert done.returncode == 0, done.stderr
    assert {d["path"] for d in json.loads(done.stdout)["deleted"]} >= orphans
    for uri in orphans:
        assert not exists(up.s3, uri)
    for uri in up.referenced:
        assert exists(up.s3, uri)


# --- F8: crashes (exit 3) and hangs -----------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("roots", ["/tmp/a\u0000b"]),
        ("savepoint_dirs", ["/tmp/a\u0000b"]),
        ("changelog_dirs", ["/tmp/\ud800"]),
    ],
)
def test_plan_file_paths_with_nul_or_lone_surrogates_are_invalid(tmp_path: Path, field: str, value) -> None:
    """Tracker: f8a."""
    sc = Scenario("1.20.3", "basic", tmp_path)
    plan_file = plan_to_file(tmp_path, str(sc.checkpoints), *sc.rebase, *OLD, "--force")
    edit_plan(plan_file, lambda d: d["options"].__setitem__(field, value))
    result = apply(plan_file, expect=None)
    assert result.exit_code == 2, f"exit {result.exit_code}: {result.stderr.strip()}"
    assert "not a valid plan" in result.stderr
