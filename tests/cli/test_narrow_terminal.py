"""Tables on an 80-column terminal: nothing cut mid-cell, ids and numbers whole, paths relative to the root named."""

from __future__ import annotations

from tests.support.cli_runner import DATA, cli, cli_json
from tests.support.fixture_cases import REPO, data_rebase, manifest, rescale_checkpoint

# ---- an 80-column terminal --------------------------------------------------------------------

NARROW = {"COLUMNS": "80"}


def narrow(*args: str) -> str:
    result = cli(*args, env=NARROW)
    assert result.exit_code == 0, result.output
    text = result.stdout
    for line in text.splitlines():
        assert len(line.rstrip()) <= 80, line
    assert "…" not in text, text  # nothing cut mid-cell
    assert "file:/" not in text and str(REPO) not in text, text  # paths relative to the named root
    return text


def table_rows(text: str) -> list[list[str]]:
    """Cells of the boxed rows whose first cell is filled (folded continuation lines skipped)."""
    out = []
    for line in text.splitlines():
        if line.startswith("│"):
            cells = [c.strip() for c in line.strip().strip("│").split("│")]
            if cells[0]:
                out.append(cells)
    return out


def test_ls_at_80_columns_keeps_ids_and_status(monkeypatch) -> None:
    monkeypatch.chdir(REPO)
    for root in ("fixtures/data/2.2.0", "fixtures/data/1.20.3/savepoints"):
        text = narrow("ls", root)
        lines = text.splitlines()
        for r in cli_json("ls", root):
            name = r["path"].rsplit("/", 1)[1]
            line = next(x for x in lines if x.split() and x.split()[0] == name)
            tokens = line.split()
            assert str(r["checkpoint_id"]) in tokens and "ok" in tokens, line
        assert "job basic/checkpoints/" in narrow("ls", "fixtures/data/2.2.0")


def test_refs_at_80_columns_keeps_numbers_whole(monkeypatch) -> None:
    monkeypatch.chdir(REPO)
    for root in ("fixtures/data/2.2.0/filemerging", "fixtures/data/1.20.3/basic"):
        text = narrow("refs", root)
        assert f"under {root}" in text
        rows = table_rows(text)
        expected = cli_json("refs", root)
        assert [r[-1] for r in rows] == [str(e["size"]) for e in expected]
        assert [r[0] for r in rows] == [str(e["checkpoint_id"]) for e in expected]


def test_show_and_check_at_80_columns(monkeypatch) -> None:
    from tests.support.fixture_cases import cases

    monkeypatch.chdir(REPO)
    case = next(c for c in cases() if c.flink_version == "2.2.0" and c.scenario == "basic")
    named = case.checkpoint_dir.relative_to(REPO).as_posix()
    text = narrow("show", named)
    assert named in text.replace("\n", "")  # the title names it as typed (folded if long)
    assert f"{case.checkpoint_dir.name}/" in text and "shared/" in text  # relative to the job directory
    root = "fixtures/data/2.2.0/basic"
    text = narrow("check", root, *data_rebase(DATA))
    assert f"check {root}" in text
    report = cli_json("check", root, *data_rebase(DATA))
    rows = {r[0]: r for r in table_rows(text)}
    for ck in report["checkpoints"]:
        rel = ck["path"].removeprefix(report["root"] + "/")
        assert rows[rel][1] == str(ck["files"]) and rows[rel][2] == "ok"


def test_plan_rescale_at_80_columns() -> None:
    checkpoint = rescale_checkpoint()
    sweep = narrow("plan-rescale", checkpoint, "-p", "1..6")
    rows = table_rows(sweep)
    expected = cli_json("plan-rescale", checkpoint, "-p", "1..6")["rows"]
    assert [r[0] for r in rows] == [f"{e['parallelism']}{' (now)' if e['current'] else ''}" for e in expected]
    assert all("█" in r[2] for r in rows)
    narrow("plan-rescale", checkpoint, "-p", "3")


def test_paimon_status_of_one_checkpoint_at_80_columns_names_it_by_its_directory() -> None:
    """The checkpoint named is the report's root: its row says chk-N, not its URI folded over ten lines."""
    flink = REPO / "fixtures" / "paimon" / "flink" / "rewind"
    (chk,) = flink.glob("checkpoints/*/chk-4")
    result = cli(
        "paimon",
        "status",
        str(chk),
        "--table",
        str(flink / "warehouse" / "default.db" / "events"),
        env=NARROW,
    )
    assert result.exit_code == 1, result.output  # hazard C: it is older than what was committed
    rows = table_rows(result.stdout)
    assert [r[0] for r in rows] == ["chk-4"], result.stdout
    assert all(len(line.rstrip()) <= 80 for line in result.stdout.splitlines())


def test_refs_of_many_rows_draws_the_table_rich_draws(monkeypatch, tmp_path) -> None:
    """Above LONG_ROWS rows refs draws its table line by line (Rich's took 68 s for 10^5
    references): the same text as Rich's table at every width -- folded paths, dropped columns,
    paths with spaces, wide characters, markup-like brackets, emoji codes and tabs, and terminals
    too narrow for the path column (Rich's own table then)."""
    import shutil

    import ckptctl.cli.render.refs as refs_render

    monkeypatch.chdir(REPO)
    odd = tmp_path / "状态 [bold]x [red] :100: a\tb 100%25"
    shutil.copytree(REPO / "fixtures/data/2.2.0/basic", odd)
    original = next(
        e["original_root"] for e in manifest()["entries"] if e["data_dir"].endswith("2.2.0/basic")
    )
    roots = [("fixtures/data/2.2.0/filemerging", data_rebase(DATA)), ("fixtures/data/1.20.3/basic", data_rebase(DATA)),
             ("fixtures/data/2.2.0/changelog", data_rebase(DATA)), (str(odd), ["--rebase", f"{original}={odd}"])]  # fmt: skip
    for root, rebase in roots:
        for columns in ("20", "27", "33", "60", "80", "120", "250"):
            env = {"COLUMNS": columns, "FORCE_COLOR": None, "NO_COLOR": "1"}
            rich = cli("refs", root, *rebase, env=env)
            monkeypatch.setattr(refs_render, "LONG_ROWS", 0)
            drawn = cli("refs", root, *rebase, env=env)
            monkeypatch.setattr(refs_render, "LONG_ROWS", 2_000)
            assert rich.exit_code == drawn.exit_code == 0, drawn.output
            assert [x.rstrip() for x in drawn.stdout.splitlines()] == [
                x.rstrip() for x in rich.stdout.splitlines()
            ], (root, columns)
        assert "状态" in drawn.stdout or root != str(odd)
