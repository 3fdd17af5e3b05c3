"""Every path, name and message taken from the outside is printed as text, never as Rich markup,
by every command, in text and in JSON.

Real fixture checkpoints are copied below a directory whose path holds what Rich would read as
markup or act on: ``vol[/x]`` (a closing tag across a path separator: ``MarkupError``, exit 3),
``[bold]``, ``[link=...]``, ``[spark]``, an ``:emoji:`` code, wide characters and emoji, and
control characters (ESC starting a colour sequence, CR), and a savepoint directory of such a name
is put inside the root so that the commands which print paths relative to it show it too. Each
command's text must hold the name as it is (control characters shown as ``\\x1b``, ``\\r``: a
terminal must not act on a file name), its JSON the name verbatim, and exit as it would with a
plain name. ``-o 'p[spark].json'`` must be the file named, in what gc plan says.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from ckptctl.cli.output import styled, visible
from ckptctl.words import plural
from tests.repair.test_repair import the_broken
from tests.support.fixture_cases import REPO
from tests.support.gc_support import Scenario, ckptctl
from tests.support.paimon_scenarios import CHECKPOINTED, age_files, sync_commit_times

# one path segment (no "/", no "\\": Flink's Path makes it a "/"), and a path of several holding
# what only a path can: "[/x]"
SEGMENT = "sp [bold]b [link=https:e.x]l [spark] :smile: 状态🙂 e\x1b[31mr c\rr  two blanks"
WIDE = {"COLUMNS": "5000"}  # one line per message: the names are looked for whole
PAIMON = REPO / "fixtures" / "paimon"


def strings(value: Any) -> list[str]:
    """Every string in a JSON document (keys and values)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


@pytest.fixture(scope="module")
def odd(tmp_path_factory) -> dict[str, Any]:
    """The basic and claim_native fixtures below ``vol[/x] [bold]...``, a savepoint named
    :data:`SEGMENT` inside the first root, and Paimon's ``pending`` fixture beside them."""
    top = tmp_path_factory.mktemp("odd")
    base = top / "vol[" / "x] [link=https:e.x]l[/link] [bold]b[/i] :smile: 状态 e\x1b[31mr c\rr"
    base.mkdir(parents=True)
    basic = Scenario("2.2.0", "basic", base)
    job = next(basic.checkpoints.iterdir())
    savepoint = basic.checkpoints / SEGMENT
    source = REPO / "fixtures/data/2.2.0/savepoints/savepoints/savepoint-2cadc2-053498faf5d0"
    shutil.copytree(source, savepoint)
    for p in savepoint.rglob("*"):
        os.utime(p, (time.time() - 3 * 86400,) * 2)
    claim = Scenario("2.2.0", "claim_native", base)
    paimon = base / "paimon"
    shutil.copytree(PAIMON / "flink" / "pending", paimon, copy_function=shutil.copy)
    # a running writer: the table's files two days old, its checkpoints minutes old (a stopped
    # writer's plan is refused: its flushed files may be in flight)
    age_files(paimon, 2 * 86400)
    sync_commit_times(paimon / "warehouse/default.db/events")
    age_files(paimon / "checkpoints", CHECKPOINTED)
    (paimon_checkpoints,) = {p.parent for p in paimon.glob("checkpoints/*/chk-*")}
    return {"base": base, "basic": basic, "job": job, "savepoint": savepoint, "claim": claim,
            "paimon_checkpoints": paimon_checkpoints, "table": paimon / "warehouse/default.db/events"}  # fmt: skip


def commands(o: dict[str, Any]) -> list[tuple[str, list[str], int, str]]:
    """(name, arguments, exit code, what the text must show) for every command."""
    basic, claim, base = o["basic"], o["claim"], o["base"]
    chks = sorted(o["job"].glob("chk-*"), key=lambda p: int(p.name[4:]))
    root, sp = str(basic.checkpoints), str(o["savepoint"])
    broken, _ = the_broken(claim)  # a checkpoint FLINK-39964 broke
    newest_paimon = max(o["paimon_checkpoints"].glob("chk-*"), key=lambda p: int(p.name[4:]))
    return [
        ("ls", ["ls", root, *basic.rebase], 0, SEGMENT),
        ("show", ["show", sp], 0, sp),
        ("refs", ["refs", root, *basic.rebase], 0, SEGMENT),
        ("diff", ["diff", str(chks[-1]), sp, *basic.rebase], 0, SEGMENT),
        ("verify", ["verify", root, *basic.rebase], 0, root),
        ("states", ["states", sp], 0, sp),
        ("check", ["check", root, *basic.rebase], 0, root),
        ("check-missing", ["check", str(base / "nothing [here]")], 2, str(base / "nothing [here]")),
        ("repair", ["repair", str(broken), "-o", str(base / "repaired [bold]x"), *claim.rebase], 0,
         str(base / "repaired [bold]x")),
        ("relocate", ["relocate", str(chks[-1]), str(base / "moved [/x] [spark]"), *basic.rebase], 0,
         str(base / "moved [/x] [spark]")),
        ("plan-rescale", ["plan-rescale", str(chks[-1]), "-p", "1", *basic.rebase], 0, ""),
        ("plan-rescale-missing", ["plan-rescale", str(base / "no [b]"), "-p", "1"], 2, str(base / "no [b]")),
        ("paimon", ["paimon", "status", str(newest_paimon), "--table", str(o["table"])], 1, str(o["table"])),
        ("paimon-orphans", ["paimon", "orphans", "--table", str(o["table"]), "--checkpoints",
                            str(o["paimon_checkpoints"])], 0, str(o["table"])),
    ]  # fmt: skip


NAMES = ["ls", "show", "refs", "diff", "verify", "states", "check", "check-missing", "repair", "relocate",
         "plan-rescale", "plan-rescale-missing", "paimon", "paimon-orphans"]  # fmt: skip


def shown(text: str, expected: str) -> None:
    """``expected`` (from the outside) is in ``text`` as the terminal shows it (a table's title
    wraps at the table's width: compared without blanks), and nothing in ``text`` is a control
    character a terminal would act on."""
    assert "".join(visible(expected).split()) in "".join(text.split()), (visible(expected), text[-3000:])
    assert "\x1b" not in text and "\r" not in text, text[-3000:]
    assert "internal error" not in text and "MarkupError" not in text, text[-3000:]


@pytest.mark.parametrize("name", NAMES)
def test_every_command_prints_odd_names_as_text(odd: dict[str, Any], name: str) -> None:
    (_, args, code, expected), *_ = [c for c in commands(odd) if c[0] == name]
    assert [c[0] for c in commands(odd)] == NAMES
    text = ckptctl(*args, expect=code, env=WIDE)
    shown(text.stdout + text.stderr, expected)
    if name.endswith("-missing"):
        return
    as_json = ckptctl(*args, "--json", expect=code, env=WIDE)
    found = strings(json.loads(as_json.stdout))
    assert any(expected in s for s in found), expected


@pytest.mark.parametrize("output", ["p[spark].json", "out[/x].json", "[bold]p[/bold].json"])
def test_gc_plan_names_the_file_it_wrote_and_apply_reads_it(odd: dict[str, Any], output: str) -> None:
    """``-o 'p[spark].json'`` said "plan written to …/p.json; apply with: ckptctl gc apply …/p.json":
    another file. The line names the file written, and gc apply of that name prints its own."""
    basic = odd["basic"]
    orphan = odd["job"] / "shared" / f"orphan of {output.replace('/', ' ')}"
    orphan.write_bytes(b"x")
    os.utime(orphan, (time.time() - 5 * 86400,) * 2)
    plan_file = odd["base"] / output
    plan_file.parent.mkdir(parents=True, exist_ok=True)
    args = [str(basic.checkpoints), *basic.rebase, "--older-than", "1h", "--margin", "0s"]
    text = ckptctl("gc", "plan", *args, "-o", str(plan_file), env=WIDE).stdout
    shown(text, f"plan written to {plan_file}; apply with: ckptctl gc apply {plan_file}")
    assert plan_file.exists()
    candidates = json.loads(plan_file.read_text())["candidates"]
    assert candidates, "the plan must have something to apply"
    applied = ckptctl("gc", "apply", str(plan_file), "--yes", env=WIDE)
    shown(applied.stdout + applied.stderr, f"deleted: {plural(len(candidates), 'file')}")
    assert not any(Path(c["path"].removeprefix("file:")).exists() for c in candidates)


def test_styled_text_shows_every_value_as_it_is() -> None:
    """The one helper that mixes ckptctl's styles with outside text: each value comes out as it is
    (markup, backslashes before a tag, a trailing backslash, emoji codes), in the styles around it,
    control characters shown as escapes."""
    for value in ["[bold]x", "[/x]", "vol[/x]", "a\\[b]", "end\\", "[link=https://e.x]y[/link]", ":smile:",
                  "p[spark].json", "状态🙂", "{}", "e\x1b[31mr", "c\rr", "rtl\u202eabc", "no utf-8 \udcff"]:  # fmt: skip
        text = styled("[error]{}[/error] and {}", value, value)
        assert text.plain == f"{visible(value)} and {visible(value)}"
        assert [(s.start, s.end, str(s.style)) for s in text.spans] == [(0, len(visible(value)), "error")]
    assert visible("e\x1b[31mr c\rr\tt\n\u202e\udcff") == "e\\x1b[31mr c\\rr\\tt\\n\\u202e\\xff"
    assert visible("状态🙂 [bold] :smile:") == "状态🙂 [bold] :smile:"
