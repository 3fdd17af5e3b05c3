"""README.md and docs/ point at the tests that prove what they say, and docs/cli.md is the commands' help.

Every test file README.md or a page of docs/ names exists, every gc invariant in docs/gc.md names at
least one (issue 21: the test of an invariant is found from the docs), every relative link resolves,
and docs/cli.md is what ``python -m ckptctl.cli.docs`` renders today (issue 49)."""

from __future__ import annotations

import re

from ckptctl.cli import docs as cli_docs
from tests.support.fixture_cases import REPO

DOCS = sorted((REPO / "docs").glob("*.md"))
PAGES = {path.relative_to(REPO).as_posix(): path.read_text() for path in [REPO / "README.md", *DOCS]}
TEST_PATH = re.compile(r"\btests/[\w/]+\.py\b")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def gc_invariants() -> list[str]:
    """The numbered items of docs/gc.md's list of gc invariants, one string each."""
    text = PAGES["docs/gc.md"]
    first = text.index("\n1. ", text.index("**The invariants**"))
    block = text[first : text.index("\n\n", first + 1)]
    items = re.split(r"\n(?=\d+\. )", block)[1:]
    assert [int(item.split(".", 1)[0]) for item in items] == list(range(1, len(items) + 1)), items
    return items


def test_the_docs_are_there_and_the_readme_is_one_screen() -> None:
    for page in ("gc", "s3", "spark", "verify", "rescale", "states", "relocate-repair", "paimon", "preflight",
                 "history", "json", "exit-codes", "design", "benchmarks", "cli"):  # fmt: skip
        assert f"docs/{page}.md" in PAGES, page
    assert len(PAGES["README.md"].splitlines()) <= 150


def test_every_test_file_the_docs_name_exists() -> None:
    named = {(page, p) for page, text in PAGES.items() for p in TEST_PATH.findall(text)}
    assert len({p for _, p in named}) > 50, "the docs name too few test files"
    missing = sorted(f"{page}: {p}" for page, p in named if not (REPO / p).is_file())
    assert not missing, f"test files named that do not exist: {missing}"


def test_every_gc_invariant_names_its_tests() -> None:
    items = gc_invariants()
    assert len(items) >= 9
    without = [item.splitlines()[0] for item in items if not TEST_PATH.search(item)]
    assert not without, f"gc invariants without a test file: {without}"


def test_every_relative_link_resolves() -> None:
    broken = [
        f"{page}: {target}"
        for page, text in PAGES.items()
        for target in LINK.findall(text)
        if "://" not in target and not ((REPO / page).parent / target).exists()
    ]
    assert not broken, broken


def test_the_command_reference_is_the_commands_help() -> None:
    fresh = cli_docs.render()
    for command in ("ls", "show", "refs", "diff", "gc plan", "gc apply", "plan-rescale", "verify", "states",
                    "check", "repair", "relocate", "paimon", "preflight", "remap", "history"):  # fmt: skip
        assert f"\n## ckptctl {command}\n" in fresh, command
    stale = "stale" if cli_docs.CLI_MD.read_text() != fresh else ""
    assert not stale, f"docs/cli.md is stale: regenerate it with `{cli_docs.REGENERATE}` and commit it"
