"""Review c2: a table's title uses the terminal's width, not its table's. ``COLUMNS=120 ckptctl verify
<dir>/chk-9`` printed ``verify <scratch>/…/567`` / ``bd59…/chk-`` / ``9``: Rich wraps a title to the
width of the (small) summary table under it. Every renderer's table is :func:`ckptctl.cli.output.Table`."""

from __future__ import annotations

from tests.support.cli_runner import cli
from tests.support.fixture_cases import REPO, manifest


def test_verify_titles_its_summary_in_one_line_on_a_wide_terminal() -> None:
    entry = next(
        e for e in manifest()["entries"] if e["flink_version"] == "2.2.0" and e["scenario"] == "basic"
    )
    chk = max(
        (REPO / entry["data_dir"]).glob("checkpoints/*/chk-*/_metadata"), key=lambda p: int(p.parent.name[4:])
    )
    result = cli("verify", str(chk.parent), "--rebase", f"{entry['original_root']}={REPO / entry['data_dir']}",
                 env={"COLUMNS": "300"})  # fmt: skip
    assert result.exit_code == 0, result.output
    title = result.stdout.splitlines()[0]
    assert title.rstrip() == f"verify {chk.parent}", result.stdout


def test_a_title_wider_than_its_table_keeps_one_line_and_stays_text() -> None:
    """paimon orphans with no row, check, diff, gc: the same table, the same title line (and a title
    is text: a path holding ``[bold]`` prints as it is)."""
    import io

    from ckptctl.cli.output import Table
    from ckptctl.cli.terminal import text_console

    title = "paimon orphans /warehouse/[bold]db.db/a-table-with-a-long-name/" + "x" * 40
    table = Table(title=title, title_justify="left")
    table.add_column("files")
    table.add_row("0")
    out = io.StringIO()
    text_console(file=out, width=120, force_terminal=False).print(table)
    lines = out.getvalue().splitlines()
    assert lines[0] == title, out.getvalue()
    assert table.title == title  # drawn again the same way


def test_every_renderer_draws_its_tables_with_the_one_table() -> None:
    render = REPO / "ckptctl" / "cli" / "render"
    direct = [p.name for p in sorted(render.glob("*.py")) if "from rich.table import Table" in p.read_text()]
    assert direct == [], direct
