"""The JSON contract of the typed results (issue 21): ``--json`` prints a result's ``to_json()``,
streamed for the results that can list millions of files (the reference map, a gc plan), and
carries the fields docs/json.md promises scripts."""

from __future__ import annotations

import io
import json
from pathlib import Path

from typer.testing import CliRunner

from ckptctl.checkpoint.loading import load_checkpoint
from ckptctl.checkpoint.refs import COLUMNS, reference_rows
from ckptctl.cli import app
from ckptctl.gc import build_plan
from ckptctl.inspect.refs import ReferenceMap
from ckptctl.storage import Storage
from tests.support.gc_support import DAY, T0, Scenario

runner = CliRunner()


def json_of(*args: str, code: int = 0):
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == code, (args, result.exit_code, result.stdout, result.stderr)
    return json.loads(result.stdout)


def streamed(result) -> object:
    buf = io.BytesIO()
    result.write_json(buf)
    return json.loads(buf.getvalue())


def test_streamed_reference_map_is_its_to_json_and_what_refs_prints(tmp_path: Path) -> None:
    s = Scenario("2.2.0", "basic", tmp_path)
    chk = sorted(s.checkpoints.glob("*/chk-*"))[-1]
    refs = ReferenceMap(COLUMNS, reference_rows(load_checkpoint(Storage(), str(chk))), None)
    assert refs.rows and streamed(refs) == refs.to_json()
    assert json_of("refs", str(chk)) == refs.to_json()
    empty = ReferenceMap(COLUMNS, [], None)
    assert streamed(empty) == empty.to_json() == []


def test_streamed_gc_plan_is_its_to_json(tmp_path: Path) -> None:
    s = Scenario("2.2.0", "basic", tmp_path)
    job = s.jobs()[0].relative_to(s.root)
    s.plant(f"{job}/shared/orphan", mtime=T0 - DAY)
    plan = build_plan(Storage(), s.gc_options())
    assert plan.candidates, "the planted orphan is a candidate"
    whole, written = json.loads(json.dumps(plan.to_json())), streamed(plan)  # tuples as lists
    for doc in (whole, written):
        doc.pop("created_at")  # the time each document was made
    assert written == whole


def test_json_of_every_converted_command_has_the_documented_fields(tmp_path: Path) -> None:
    """The fields docs/json.md (the JSON contract) and each command's page in docs/ name, from the CLI."""
    s = Scenario("2.2.0", "basic", tmp_path)
    chk = sorted(s.checkpoints.glob("*/chk-*"))
    first, last = str(chk[0]), str(chk[-1])
    ls = json_of("ls", str(s.root), *s.rebase)
    assert ls and all(
        {"path", "job_id", "checkpoint_id", "kind", "format_version", "savepoint_format", "operators",
         "state_size", "incremental_size", "files", "inherited_files", "inherited_bytes", "metadata_mtime",
         "complete", "error"} <= set(row)
        for row in ls
    )  # fmt: skip
    refs = json_of("refs", last, *s.rebase)
    assert refs and all(set(COLUMNS) == set(row) for row in refs)
    show = json_of("show", last, *s.rebase)
    assert show["path"].endswith(Path(last).name) and all("states" in op for op in show["operators"])
    diff = json_of("diff", first, last, *s.rebase)
    for kind in ("added", "removed", "reused"):
        assert diff[f"{kind}_bytes"] == sum(f["size"] for f in diff[kind])
    assert {diff["a"]["checkpoint_id"], diff["b"]["checkpoint_id"]} == {
        int(p.name[4:]) for p in (chk[0], chk[-1])
    }
    verify = json_of("verify", str(s.root), *s.rebase, "--engine", "local")
    assert verify["ok"] and {"checked", "problems", "engine", "master", "checkpoints", "problem_count",
                             "elapsed_seconds"} <= set(verify)  # fmt: skip
    plan = json_of("plan-rescale", last, *s.rebase, "-p", "3")
    assert plan["new_parallelism"] == 3 and plan["checkpoint"].endswith(Path(last).name)
    assert {
        "operator_id",
        "name",
        "old_parallelism",
        "new_parallelism",
        "max_parallelism",
        "subtasks",
    } <= set(plan["operators"][0])
    sweep = json_of("plan-rescale", last, *s.rebase, "-p", "1..3")
    assert [r["parallelism"] for r in sweep["rows"]] == [1, 2, 3] and sweep["recommended"] in (1, 2, 3)
    repair = json_of("repair", last, *s.rebase, "--dry-run")
    assert repair["dry_run"] is True and repair["rewritten_handles"] == 0 and "result" not in repair
    relocate = json_of("relocate", last, str(tmp_path / "moved"), *s.rebase)
    assert relocate["applied"] is False and "result" not in relocate and "copies" not in relocate
    moved = json_of("relocate", last, str(tmp_path / "moved"), *s.rebase, "--apply")
    assert (
        moved["applied"] is True
        and moved["result"]["copied_files"] == moved["files"]
        and moved["verify"]["ok"]
    )
    job = s.jobs()[0].relative_to(s.root)
    s.plant(f"{job}/shared/orphan", mtime=T0 - DAY)
    plan_file = tmp_path / "gc.json"
    gc = json_of("gc", "plan", str(s.checkpoints), *s.rebase, "--clock", "local", "-o", str(plan_file))
    assert [c["path"].rpartition("/")[2] for c in gc["candidates"]] == ["orphan"]
    assert {"refusals", "warnings", "live_files", "candidate_files", "protected", "retained"} <= set(gc)
    applied = json_of("gc", "apply", str(plan_file), "--yes")
    assert applied["deleted_files"] == 1 and {"deleted", "skipped", "failed"} <= set(applied)


def test_ls_counts_what_the_reference_map_counts_on_every_fixture() -> None:
    """``ls`` counts a checkpoint's own files and its inherited ones (FLINK-39964) from the
    handles, without a row per reference: the same numbers as the reference map split by
    :func:`split_inherited`, on every fixture checkpoint (the broken CLAIM ones included)."""
    from ckptctl.checkpoint.flink39964 import split_inherited
    from ckptctl.checkpoint.loading import load_checkpoint
    from ckptctl.checkpoint.refs import reference_rows
    from ckptctl.inspect.ls import summary_view
    from ckptctl.storage import Storage
    from tests.support.fixture_cases import cases

    storage = Storage()
    inherited_seen = 0
    for case in cases():
        ck = load_checkpoint(storage, "file:" + str(case.checkpoint_dir))
        own, inherited = split_inherited(ck, reference_rows(ck))
        row = summary_view(ck)
        assert row["files"] == len({r.path for r in own}), case.id
        assert row["inherited_files"] == len({r.written_path for r in inherited}), case.id
        assert row["inherited_bytes"] == sum({r.written_path: r.size for r in inherited}.values()), case.id
        inherited_seen += row["inherited_files"]
    assert inherited_seen, "no fixture checkpoint inherits a savepoint's files"


def documented_fields() -> tuple[set[str], set[str]]:
    """The field names docs/json.md promises for ``ls --json`` (its paragraph, less what the
    parentheses say of the values) and for ``refs --format json`` (its table's first column)."""
    import re

    from tests.support.fixture_cases import REPO

    text = (REPO / "docs" / "json.md").read_text()
    ls = text[text.index("`ckptctl ls --json`") : text.index("`ckptctl refs --format")].split(":", 1)[1]
    while re.search(r"\([^()]*\)", ls):
        ls = re.sub(r"\([^()]*\)", "", ls)
    table = text[text.index("| field | meaning |") :].split("\n\n", 1)[0]
    first_column = " ".join(line.split("|")[1] for line in table.splitlines()[2:])
    return set(re.findall(r"`(\w+)`", ls)), set(re.findall(r"`(\w+)`", first_column))


def test_the_json_contract_page_names_fields_the_cli_prints(tmp_path: Path) -> None:
    ls_fields, refs_fields = documented_fields()
    assert len(ls_fields) >= 15 and len(refs_fields) >= 15
    s = Scenario("2.2.0", "basic", tmp_path)
    last = str(sorted(s.checkpoints.glob("*/chk-*"))[-1])
    assert all(ls_fields <= set(row) for row in json_of("ls", str(s.root), *s.rebase))
    assert all(refs_fields <= set(row) for row in json_of("refs", last, *s.rebase))
