"""README.md points at the tests that prove what it says: every test file it names exists, and
every gc invariant names at least one (issue 21: the test of an invariant is found from README)."""

from __future__ import annotations

import re

from tests.support.fixture_cases import REPO

README = (REPO / "README.md").read_text()
TEST_PATH = re.compile(r"\btests/[\w/]+\.py\b")


def gc_invariants() -> list[str]:
    """The numbered items of README's list of gc invariants, one string each."""
    first = README.index("\n1. ", README.index("**The invariants**"))
    block = README[first : README.index("\n\n", first + 1)]
    items = re.split(r"\n(?=\d+\. )", block)[1:]
    assert [int(item.split(".", 1)[0]) for item in items] == list(range(1, len(items) + 1)), items
    return items


def test_every_test_file_readme_names_exists() -> None:
    named = set(TEST_PATH.findall(README))
    assert named, "README names no test file"
    missing = sorted(p for p in named if not (REPO / p).is_file())
    assert not missing, f"README names test files that do not exist: {missing}"


def test_every_gc_invariant_names_its_tests() -> None:
    items = gc_invariants()
    assert len(items) >= 9
    without = [item.splitlines()[0] for item in items if not TEST_PATH.search(item)]
    assert not without, f"gc invariants without a test file: {without}"
