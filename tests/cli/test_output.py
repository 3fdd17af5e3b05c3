"""The command line's shared surface (issue 12): the same output flags on every command, declared
once; typed option values whose bad input is one line and exit code 2; one Output per invocation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ckptctl.cli import OUTPUT_OPTIONS, app
from ckptctl.cli.output import human_bytes
from ckptctl.cli.params import parse_age, parse_bytes, parse_parallelism
from tests.support.fixture_cases import REPO, manifest
from tests.support.gc_support import DAY, T0, Scenario

runner = CliRunner()


def cli(*args: str):
    return runner.invoke(app, list(args))


def one_line_error(result, code: int = 2) -> str:
    assert result.exit_code == code, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output and "Usage:" not in result.output
    return lines[0]


def moved_root() -> str:
    """A fixture scenario root as it is now (moved away from where Flink wrote it)."""
    entry = next(e for e in manifest()["entries"] if e["scenario"] == "basic")
    return str(REPO / entry["data_dir"])


def checkpoint_dir() -> str:
    root = REPO / next(e for e in manifest()["entries"] if e["scenario"] == "basic")["data_dir"]
    return str(sorted(root.glob("checkpoints/*/chk-*"))[0])


# ---- every command takes the same output flags ------------------------------------------------


def walk(command: typer.main.TyperGroup, path: tuple[str, ...] = ()):
    """Every (path, command) of the tree, groups included."""
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from walk(sub, (*path, name))


def flags(command) -> dict[str, tuple]:
    """The output options of a command as (opts, secondary opts, is_flag, count, help)."""
    return {
        p.name: (tuple(p.opts), tuple(p.secondary_opts), p.is_flag, p.count, p.help, p.expose_value)
        for p in command.params
        if p.name in OUTPUT_OPTIONS
    }


def test_every_command_accepts_the_same_output_flags() -> None:
    tree = list(walk(typer.main.get_command(app)))
    leaves = [(path, c) for path, c in tree if not hasattr(c, "commands")]
    # ls show refs diff repair relocate relocate-apply plan-rescale states verify check, gc plan/apply
    assert len(leaves) >= 13
    reference = flags(tree[0][1])  # the app itself: ckptctl --json ls ...
    assert set(reference) == set(OUTPUT_OPTIONS)
    assert reference["json"][0] == ("--json",)
    assert set(reference["verbose"][0]) == {"-v", "--verbose"}
    assert set(reference["quiet"][0]) == {"-q", "--quiet"}
    for path, command in tree:
        assert flags(command) == reference, " ".join(path)


# a real Flink job writing a Paimon table (fixtures/paimon): every checkpoint committed, the newest safe
PAIMON_RUN = Path(__file__).resolve().parents[2] / "fixtures" / "paimon" / "flink" / "rewind"
PAIMON_TABLE = "warehouse/default.db/events"


def json_runs(s: Scenario, tmp: Path) -> list[tuple[tuple[str, ...], list[str]]]:
    """One --json invocation per command of the tree (path, arguments), in an order where the
    plan files the apply commands read are written first."""
    chk = sorted(s.checkpoints.glob("*/chk-*"))
    gc_args = [str(s.checkpoints), *s.rebase, "--clock", "local", "--older-than", "1d", "--margin", "0s"]
    relocate_args = [str(chk[-1]), str(tmp / "relocated")]
    return [
        (("ls",), [str(s.root), *s.rebase]),
        (("show",), [str(chk[-1]), *s.rebase]),
        (("refs",), [str(chk[-1]), *s.rebase]),
        (("diff",), [str(chk[0]), str(chk[-1]), *s.rebase]),
        (("repair",), [str(chk[-1]), *s.rebase, "--dry-run"]),
        (("plan-rescale",), [str(chk[-1]), *s.rebase, "-p", "2..3"]),
        (("states",), [str(chk[-1]), *s.rebase, "--engine", "local"]),
        (("verify",), [str(s.root), *s.rebase, "--engine", "local"]),
        (("check",), [str(s.root), *s.rebase]),
        (("history",), [str(s.root), *s.rebase, "--ledger", str(tmp / "ledger")]),
        (("preflight",), [str(chk[-1]), "--against", str(chk[-1]), *s.rebase]),
        (("gc", "plan"), [*gc_args, "-o", str(tmp / "gc.json")]),
        (("gc", "apply"), [str(tmp / "gc.json"), "--yes", "--trash", str(tmp / "trash")]),
        (("relocate",), [*relocate_args, *s.rebase, "-o", str(tmp / "relocate.json")]),
        (("relocate-apply",), [str(tmp / "relocate.json")]),
        (
            ("remap",),
            [str(chk[-1]), *s.rebase, "-o", str(tmp / "remapped"), "--drop", _first_operator(chk[-1])],
        ),
        (("paimon", "status"), [str(PAIMON_RUN / "checkpoints"), "--table", str(PAIMON_RUN / PAIMON_TABLE)]),
        # a cut-off before any checkout: the job's newest checkpoint (checked out when the repo was)
        # is never older than it, which a stopped job's must not be (failing checkpoints are refused)
        (
            ("paimon", "orphans"),
            [
                "--table",
                str(PAIMON_RUN / PAIMON_TABLE),
                "--checkpoints",
                str(PAIMON_RUN / "checkpoints"),
                "--older-than",
                "2020-01-01T00:00:00Z",
            ],
        ),
    ]


def _first_operator(chk: Path) -> str:
    from ckptctl.metadata import read_metadata

    return read_metadata((chk / "_metadata").read_bytes(), path=str(chk)).operators[0].operator_id


def test_json_is_one_document_on_stdout_for_every_command(tmp_path: Path) -> None:
    """--json on every command of the tree: stdout is one JSON document and nothing else, whatever
    stderr says; a command added without a case here fails the test."""
    s = Scenario("2.2.0", "basic", tmp_path)
    job = s.jobs()[0].relative_to(s.root)
    s.plant(f"{job}/shared/orphan", mtime=T0 - DAY)  # something for gc apply to remove
    runs = json_runs(s, tmp_path)
    tree = list(walk(typer.main.get_command(app)))
    assert {path for path, _ in runs} == {path for path, c in tree if not hasattr(c, "commands")}
    for path, args in runs:
        result = cli(*path, *args, "--json")
        assert result.exit_code == 0, (path, result.exit_code, result.stdout, result.stderr)
        assert isinstance(json.loads(result.stdout), dict | list), path
        assert "Traceback" not in result.stderr, path
    assert "orphan" in {p.name for p in (tmp_path / "trash").rglob("*")}  # gc apply did its work
    assert (tmp_path / "relocated").is_dir()


def test_output_flags_before_or_after_the_command_name_are_the_same() -> None:
    root = moved_root()
    after = cli("ls", root, "--json")
    before = cli("--json", "ls", root)
    assert after.exit_code == before.exit_code == 0, after.output + before.output
    assert json.loads(after.stdout) == json.loads(before.stdout)
    assert after.stdout == before.stdout


def test_quiet_silences_warnings_not_results() -> None:
    root = moved_root()  # moved: ls warns about the inferred --rebase
    loud = cli("ls", root)
    quiet = cli("ls", root, "-q")
    assert loud.exit_code == quiet.exit_code == 0
    assert "warning:" in loud.stderr and quiet.stderr == ""
    assert quiet.stdout == loud.stdout


def test_verbose_says_what_is_done_on_stderr_only() -> None:
    root = moved_root()
    normal = cli("ls", root, "--json")
    verbose = cli("-v", "ls", root, "--json")
    assert normal.exit_code == verbose.exit_code == 0
    assert "reading _metadata:" in verbose.stderr and "reading _metadata:" not in normal.stderr
    assert verbose.stdout == normal.stdout


def test_quiet_still_shows_errors() -> None:
    line = one_line_error(cli("-q", "ls", str(REPO / "README.md")))
    assert "is a file" in line


# ---- typed option values ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, option",
    [
        (["gc", "plan", "ROOT", "--older-than", "5 fortnights"], "--older-than"),
        (["gc", "plan", "ROOT", "--margin", "2026-01-01T00:00:00"], "--margin"),  # no time zone
        (["gc", "plan", "ROOT", "--older-than", "2999-01-01T00:00:00Z"], "--older-than"),  # future
        (["check", "ROOT", "--max-orphan-bytes", "lots"], "--max-orphan-bytes"),
        (["relocate", "ROOT", "DST", "--bwlimit", "5 furlongs"], "--bwlimit"),
        (["plan-rescale", "CHK", "-p", "8..2"], "--parallelism"),
        (["plan-rescale", "CHK", "-p", "two"], "--parallelism"),
        (["ls", "ROOT", "--rebase", "no-equals-sign"], "--rebase"),
        (["verify", "ROOT", "--rebase", "=/only/new"], "--rebase"),
    ],
)
def test_bad_option_values_are_one_line_exit_2(args: list[str], option: str) -> None:
    args = [moved_root() if a == "ROOT" else checkpoint_dir() if a == "CHK" else a for a in args]
    line = one_line_error(cli(*args))
    assert option in line


def test_typed_values_reach_the_command_converted() -> None:
    assert parse_age("90m", "x") == 5400
    assert parse_age("7d", "x") == 7 * 86400
    assert parse_bytes("50MiB", "x") == 50 << 20
    assert parse_parallelism("2..4") == [2, 3, 4]
    assert parse_parallelism("3") == [3]
    # end to end: a sweep of 2..4 plans each parallelism once; -p 3 plans one
    sweep = cli("plan-rescale", checkpoint_dir(), "-p", "2..4", "--json")
    assert sweep.exit_code == 0, sweep.output
    assert [r["parallelism"] for r in json.loads(sweep.stdout)["rows"]] == [2, 3, 4]
    one = cli("plan-rescale", checkpoint_dir(), "-p", "3", "--json")
    assert one.exit_code == 0, one.output
    assert json.loads(one.stdout)["new_parallelism"] == 3


def test_repeated_rebase_options_make_one_mapping() -> None:
    """Two --rebase values, each parsed by the MAPPING type, reach the core as one Rebase."""
    entry = next(e for e in manifest()["entries"] if e["scenario"] == "basic")
    root = str(REPO / entry["data_dir"])
    result = cli(
        "ls", root, "--rebase", f"{entry['original_root']}={root}", "--rebase", "/nowhere=/elsewhere"
    )
    assert result.exit_code == 0, result.output
    assert "warning" not in result.stderr  # the given mapping covers the move: nothing inferred


# ---------------------------------------------------------------------------------------------
# issue 22's minor rows: what a new user types first


def test_output_flags_before_gc_and_relocate_apply(tmp_path: Path) -> None:
    from ckptctl.cli import gc_alias

    assert gc_alias(["--json", "gc", "ROOT"]) == ["--json", "gc", "plan", "ROOT"]
    assert gc_alias(["-q", "--json", "relocate", "apply", "P"]) == ["-q", "--json", "relocate-apply", "P"]
    s = Scenario("2.2.0", "basic", tmp_path)
    result = runner.invoke(
        app, gc_alias(["--json", "gc", str(s.checkpoints), "--rebase", f"{s.original}={s.root}"])
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["format"] == 2


def test_python_dash_m_and_dash_h() -> None:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "ckptctl", "-h"], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0 and "Usage: ckptctl" in proc.stdout
    proc = subprocess.run(
        [sys.executable, "-m", "ckptctl", "--version"], capture_output=True, text=True, cwd=REPO
    )
    assert proc.returncode == 0 and proc.stdout.startswith("ckptctl ")
    assert "Usage: ckptctl verify" in cli("verify", "-h").stdout


@pytest.mark.parametrize(
    "args",
    [
        ["refs", "ROOT", "-o", "MISSING/refs.csv"],
        ["check", "ROOT", "--junit", "MISSING/junit.xml"],
        ["verify", "ROOT", "--engine", "local", "--report", "MISSING/r.parquet"],
        ["gc", "plan", "ROOT", "-o", "MISSING/plan.json"],
    ],
    ids=["refs", "check", "verify", "gc"],
)
def test_an_output_into_a_missing_directory_fails_before_the_scan(args: list[str], tmp_path: Path) -> None:
    s = Scenario("2.2.0", "basic", tmp_path)
    argv = [str(s.checkpoints) if a == "ROOT" else a.replace("MISSING", str(tmp_path / "nope")) for a in args]
    line = one_line_error(cli(*argv, "--rebase", f"{s.original}={s.root}"))
    assert "no such directory" in line


def test_gc_refuses_the_filesystem_root_and_a_foreign_manifest(tmp_path: Path) -> None:
    line = one_line_error(cli("gc", "plan", "/"))
    assert "filesystem root" in line
    s = Scenario("2.2.0", "basic", tmp_path)
    job = s.jobs()[0].name
    orphan = s.plant(f"checkpoints/{job}/shared/orphan-x", size=123)
    plan = tmp_path / "plan.json"
    rebase = ["--rebase", f"{s.original}={s.root}"]
    assert cli("gc", "plan", str(s.checkpoints), *rebase, "--older-than", "1d", "--margin", "10m", "--force",
               "-o", str(plan)).exit_code == 0  # fmt: skip
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    result = cli("gc", "apply", str(plan), "--yes", "--manifest", str(notes))
    assert result.exit_code != 0 and "not a ckptctl gc manifest" in result.stderr
    assert notes.read_text() == "my notes\n" and orphan.exists()


def test_one_duration_grammar_for_every_duration_option() -> None:
    """--older-than 5 was 5 s while --ttl 5 was 5 ms; --ttl 1min and --older-than 1ms were refused;
    neither took 1h30m (issue 22). One grammar now: a bare number is seconds everywhere."""
    from ckptctl.cli.params import parse_ttl
    from ckptctl.durations import parse_seconds

    for text, seconds in (("5", 5), ("90s", 90), ("1min", 60), ("1h30m", 5400), ("500ms", 0.5), ("1.5h", 5400),
                          ("2w", 1209600), ("1 day", 86400)):  # fmt: skip
        assert parse_seconds(text) == seconds
        assert parse_age(text, "--older-than") == seconds
        assert parse_ttl(text, "--ttl") == (None, round(seconds * 1000))
        assert parse_ttl(f"count={text}", "--ttl") == ("count", round(seconds * 1000))
    for bad in ("1h30", "abc", "5 parsecs", "", "h"):
        with pytest.raises(Exception, match="duration|unit"):
            parse_seconds(bad)
    assert "must not be negative" in one_line_error(cli("gc", "plan", "/tmp", "--older-than", "-5h"))


@pytest.mark.parametrize("command", [["ls"], ["gc", "plan"], ["check"]])
def test_an_empty_directory_is_one_rule_exit_2(command: list[str], tmp_path: Path) -> None:
    line = one_line_error(cli(*command, str(tmp_path)))
    assert str(tmp_path) in line


def test_show_on_a_root_suggests_ls_and_the_newest_checkpoint() -> None:
    root = REPO / "fixtures" / "data" / "2.2.0" / "basic" / "checkpoints"
    line = one_line_error(cli("show", str(root)))
    # the newest by time; equal times (a checkout that stamped them alike) by checkpoint number
    newest = max(
        root.rglob("chk-*/_metadata"), key=lambda p: (p.stat().st_mtime, int(p.parent.name[4:]))
    ).parent
    assert f"ckptctl ls {root}" in line and str(newest) in line


def test_verify_report_must_be_parquet_and_junit_says_no_limit(tmp_path: Path) -> None:
    from ckptctl.check import junit_xml

    line = one_line_error(
        cli("verify", moved_root(), "--engine", "local", "--report", str(tmp_path / "x.csv"))
    )
    assert "*.parquet" in line
    report = {"root": "file:/r", "checkpoints": [], "problems": [], "ok": True,
              "orphans": {"files": 0, "bytes": 0, "limit": None, "ok": True, "error": None},
              "elapsed_seconds": 0.0, "checked": {}}  # fmt: skip
    xml = junit_xml(report)
    assert "limit None" not in xml and "no limit" in xml


def test_durations_refuse_the_absurd_and_the_ambiguous() -> None:
    from ckptctl.durations import parse_seconds

    with pytest.raises(Exception, match="too long"):
        parse_seconds("9" * 400)
    with pytest.raises(Exception, match="ambiguous"):
        parse_seconds("1M")
    assert "too long" in one_line_error(cli("gc", "plan", "/tmp", "--older-than", "9" * 400))


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text()
    | st.builds(Path, st.text(max_size=5))
)  # not JSON: written as default=str writes it
_KEYS = (
    st.text() | st.integers() | st.booleans() | st.none() | st.floats(allow_nan=False, allow_infinity=False)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.tuples(inner, inner) | st.dictionaries(_KEYS, inner, max_size=4)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(value=_VALUES)
def test_json_documents_read_back_as_json_dumps_writes_them(value) -> None:
    """--json documents are indented for their first levels only (the C encoder writes the rest):
    whatever the value, what a reader gets is what ``json.dumps`` gives, keys of every kind included."""
    from ckptctl.cli.output import readable_json

    text = readable_json(value)
    assert json.loads(text) == json.loads(json.dumps(value, indent=2, default=str))
    for depth, line in ((len(x) - len(x.lstrip(" ")), x) for x in text.splitlines()):
        assert depth <= 2 * 4, line  # nothing below the fourth level gets a line of its own


def test_a_key_json_refuses_is_refused() -> None:
    from ckptctl.cli.output import readable_json

    for doc in ({(1, 2): 0}, {"a": {"b": {"c": {"d": {(1,): 0}}}}}):
        with pytest.raises(TypeError):
            json.dumps(doc)
        with pytest.raises(TypeError):
            readable_json(doc)


def test_a_deep_document_keeps_its_deep_values_on_one_line() -> None:
    from ckptctl.cli.output import readable_json

    doc = {"operators": [{"id": "a", "subtasks": [{"handles": [{"path": "x", "size": 1}] * 3}] * 2}]}
    lines = readable_json(doc).splitlines()
    assert (
        '        {"handles": [{"path": "x", "size": 1}, {"path": "x", "size": 1}, {"path": "x", "size": 1}]},'
        in lines
    )
    assert len(lines) == 11, lines


def test_show_counts_each_handles_files_when_they_are_too_many_to_read(monkeypatch) -> None:
    """A checkpoint of 10^5 files drew 10^5 tree lines (15 s): above FILE_LINES file lines, each
    handle's shared and private files are counted on one line each (distinct files with their
    bytes, inline handles apart), and refs named for the whole list. Below it, every file keeps
    its line."""
    from ckptctl.cli.render import show
    from tests.support.fixture_cases import cases

    monkeypatch.chdir(REPO)
    case = next(c for c in cases() if c.flink_version == "1.20.3" and c.scenario == "basic")
    named = case.checkpoint_dir.relative_to(REPO).as_posix()
    doc = json.loads(cli("show", named, "--json").stdout)
    handles = [
        h for op in doc["operators"] for s in op["subtasks"] for h in s["managed_keyed"] if h.get("shared")
    ]
    assert handles, "the fixture has incremental handles"
    every = cli("show", named).stdout
    assert all(f"shared {f['local_path']}:" in every for h in handles for f in h["shared"])

    def counted(key: str, files: list[dict]) -> str:
        placed = [f["handle"] for f in files if "path" in f["handle"]]
        inline = [f["handle"] for f in files if "path" not in f["handle"]]
        text = f"{key}: {len({h['path'] for h in placed}):,} files  {human_bytes(sum(h['state_size'] for h in placed))}"
        return text + (
            f" + {len(inline):,} inline  {human_bytes(sum(h['state_size'] for h in inline))}"
            if inline
            else ""
        )

    monkeypatch.setattr(show, "FILE_LINES", 1)
    result = cli("show", named)
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "shared 0" not in text and "private " not in text.replace("private:", "")
    for key in ("shared", "private"):
        lines = [line.split("── ", 1)[1] for line in text.splitlines() if f"── {key}: " in line]
        assert lines == [counted(key, h[key]) for h in handles], key
    assert any(" inline " in line for line in text.splitlines()), "the fixture's private inline handles"
    assert f"`ckptctl refs {named}` lists each one" in " ".join(text.split())


def test_a_quick_verify_never_says_the_files_are_well_formed(monkeypatch) -> None:
    """--quick reads no file: its verdict says present with the recorded size, not well-formed."""
    from tests.support.cli_runner import DATA
    from tests.support.fixture_cases import data_rebase

    monkeypatch.chdir(REPO)
    root = "fixtures/data/2.2.0/basic"
    quick = cli("verify", root, "--quick", "--engine", "local", *data_rebase(DATA))
    full = cli("verify", root, "--engine", "local", *data_rebase(DATA))
    assert quick.exit_code == full.exit_code == 0, quick.output + full.output
    assert "present with its recorded size (--quick: contents not read)" in quick.stdout
    assert "well-formed" not in quick.stdout and "well-formed" in full.stdout
