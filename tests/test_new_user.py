"""What a new user trips over (issue 10): honest gates, wrong kinds of path, conflicting flags,
readable tables on an 80-column terminal, and the restore bytes of canonical savepoints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ckptctl.cli import app
from tests.support.fixture_cases import FIXTURES, REPO, data_rebase, written_root

runner = CliRunner()
DATA = FIXTURES / "data"


def cli(*args: str, env: dict[str, str] | None = None):
    return runner.invoke(app, list(args), env=env)


def cli_json(*args: str):
    result = cli(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def one_line_error(result, code: int = 2) -> str:
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


# ---- plan-rescale: canonical savepoints ------------------------------------------------------


def canonical_savepoints() -> list[str]:
    rows = cli_json("ls", str(DATA))
    found = [r["path"] for r in rows if r["savepoint_format"] == "CANONICAL"]
    assert found, "the fixtures hold canonical savepoints"
    return found


def test_canonical_savepoint_handles_cost_the_bytes_of_their_key_groups() -> None:
    """Every byte after the serialization header of a key-group file goes to exactly one new
    subtask; no subtask reads more of a file than the file holds (empty key groups have offset 0)."""
    for sp in canonical_savepoints():
        view = cli_json("show", sp)
        handles = {}  # (operator_id, old subtask) -> (file size on disk, first key-group byte)
        for op in view["operators"]:
            for s in op["subtasks"]:
                for h in s["managed_keyed"]:
                    assert h["type"] == "KeyGroupsSavepointStateHandle"
                    size = Path(h["delegate"]["path"].removeprefix("file:")).stat().st_size
                    first = min(o for o in h["offsets"] if o > 0)
                    handles[(op["operator_id"], s["index"])] = (size, first)
        assert handles
        file_bytes = sum(size for size, _ in handles.values())
        for p in (1, 2, 3, 5):
            plan = cli_json("plan-rescale", sp, "-p", str(p))
            read: dict[tuple[str, int], int] = {}
            for op in plan["operators"]:
                for s in op["subtasks"]:
                    for h in s["handles"]:
                        size, _first = handles[(op["operator_id"], h["old_subtask"])]
                        assert 0 <= h["bytes"] <= size, (sp, p, op["name"], s["index"], h)
                        key = (op["operator_id"], h["old_subtask"])
                        read[key] = read.get(key, 0) + h["bytes"]
                    assert s["download_bytes"] == sum(h["bytes"] for h in s["handles"])
            assert read == {k: size - first for k, (size, first) in handles.items()}, (sp, p)
            assert plan["download_bytes"] <= file_bytes


# ---- gates and wrong kinds of path ----------------------------------------------------------


def test_check_fails_on_a_path_without_checkpoints(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    line = one_line_error(cli("check", str(tmp_path / "empty")))
    assert "no checkpoints under" in line and "empty" in line
    line = one_line_error(cli("check", str(REPO / "README.md")))
    assert "not a checkpoint directory" in line and "README.md" in line


@pytest.mark.parametrize("command", ["ls", "show", "refs", "verify", "plan-rescale", "diff"])
def test_a_plain_file_is_not_a_checkpoint_directory(command: str) -> None:
    args = {"plan-rescale": ["-p", "2"], "diff": [str(REPO / "README.md")], "verify": ["--engine", "local"]}
    result = cli(command, str(REPO / "README.md"), *args.get(command, []))
    line = one_line_error(result)
    assert "not a checkpoint directory" in line and "README.md" in line and "Errno" not in line


def test_refs_on_an_empty_directory_is_an_error(tmp_path: Path) -> None:
    line = one_line_error(cli("refs", str(tmp_path)))
    assert "not a checkpoint directory" in line and "no completed checkpoints" in line


# ---- refs: the output format ----------------------------------------------------------------


def test_refs_output_format_from_the_file_extension(tmp_path: Path, monkeypatch) -> None:
    import pyarrow.parquet as pq

    checkpoint = str(DATA / "2.2.0" / "basic")
    expected = cli_json("refs", checkpoint)
    for ext in ("json", "ndjson", "csv", "parquet"):
        target = tmp_path / f"out.{ext}"
        result = cli("refs", checkpoint, "-o", str(target))
        assert result.exit_code == 0, result.output
        assert result.stdout == "" and target.exists()
        if ext == "json":
            assert json.loads(target.read_text()) == expected
        elif ext == "ndjson":
            assert [json.loads(line) for line in target.read_text().splitlines()] == expected
        elif ext == "csv":
            assert len(target.read_text().splitlines()) == len(expected) + 1
        else:
            assert pq.read_table(target).num_rows == len(expected)
    line = one_line_error(cli("refs", checkpoint, "-o", str(tmp_path / "out.txt")))
    assert "cannot tell the format" in line and not (tmp_path / "out.txt").exists()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--json", "-f", "csv"], ("--json", "--format csv", "conflict")),
        (["-f", "csv", "-o", "x.json"], ("--format csv", "x.json", "conflict")),
        (["--json", "-o", "x.csv"], ("--json", "x.csv", "conflict")),
    ],
)
def test_refs_conflicting_formats_are_refused(args: list[str], words: tuple[str, ...], tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = one_line_error(cli("refs", str(DATA / "2.2.0" / "basic"), *args))
    for w in words:
        assert w in line
    assert list(tmp_path.iterdir()) == []


# ---- plan-rescale options -------------------------------------------------------------------


def rescale_checkpoint() -> str:
    truth = json.loads(sorted((REPO / "fixtures" / "rescale").glob("*.json"))[0].read_text())
    return str(REPO / truth["checkpoint"])


@pytest.mark.parametrize("p", ["3", "2..4"])
def test_plan_rescale_missing_histogram_is_an_error(p: str, tmp_path: Path) -> None:
    line = one_line_error(
        cli("plan-rescale", rescale_checkpoint(), "-p", p, "--data-aware", str(tmp_path / "x"))
    )
    assert "no such file" in line and str(tmp_path / "x") in line


def test_plan_rescale_sweep_uses_the_histogram(tmp_path: Path) -> None:
    checkpoint = rescale_checkpoint()
    histogram = tmp_path / "h.parquet"
    result = cli("verify", checkpoint, "--deep", "--engine", "local", "--histogram", str(histogram), "--json",
                 *data_rebase(DATA))  # fmt: skip
    assert result.exit_code == 0, result.output
    sweep = cli_json("plan-rescale", checkpoint, "-p", "2..4", "--data-aware", str(histogram))
    assert sweep["data_aware"]
    for row in sweep["rows"]:
        single = cli_json(
            "plan-rescale", checkpoint, "-p", str(row["parallelism"]), "--data-aware", str(histogram)
        )
        totals = [op["data"] for op in single["operators"] if "data" in op]
        assert totals
        assert row["data"] == {
            k: sum(t[k] for t in totals) for k in ("keep_bytes", "clip_bytes", "copy_bytes")
        }
    assert any(r["data"]["copy_bytes"] > 0 for r in sweep["rows"])
    table = cli("plan-rescale", checkpoint, "-p", "2..4", "--data-aware", str(histogram))
    assert table.exit_code == 0 and "copied bytes" in table.stdout


@pytest.mark.parametrize("version", ["3.7", "1.21", "0.9"])
def test_plan_rescale_unknown_flink_version_is_refused(version: str) -> None:
    line = one_line_error(cli("plan-rescale", rescale_checkpoint(), "-p", "3", "--flink-version", version))
    assert f"unknown Flink version {version}" in line
    for family in ("1.15", "1.16-1.18", "1.19-1.20", "2.x"):
        assert family in line


# ---- check output ---------------------------------------------------------------------------


def test_check_output_wording_and_a_corrupt_metadata_named_once(tmp_path: Path, monkeypatch) -> None:
    import shutil

    root = tmp_path / "root"
    shutil.copytree(DATA / "2.2.0" / "basic", root)
    here = ["--rebase", f"{written_root()}/2.2.0/basic={root}"]
    ok = cli("check", str(root), *here, env={"COLUMNS": "120"})
    assert ok.exit_code == 0, ok.output
    assert "limit no limit" not in ok.stdout and "ok (0 B)" in ok.stdout
    limited = cli("check", str(root), "--max-orphan-bytes", "1GiB", *here, env={"COLUMNS": "120"})
    assert limited.exit_code == 0 and "of 1.0 GiB allowed" in limited.stdout
    victim = sorted(root.rglob("chk-*/_metadata"))[0]
    victim.write_bytes(victim.read_bytes()[:100])
    monkeypatch.chdir(tmp_path)
    bad = cli("check", "root", *here, env={"COLUMNS": "200"})
    assert bad.exit_code == 1
    rel = victim.relative_to(root).as_posix()
    assert bad.stdout.count(rel) == 1, bad.stdout
    assert str(root) not in bad.stdout


# ---- S3: unreachable endpoint, missing credentials ------------------------------------------


def run_ckptctl(*args: str, env: dict[str, str] | None = None, timeout: float = 120):
    """The installed command in a fresh process (timing includes imports, as a user sees it)."""
    import os
    import subprocess
    import sys
    import time

    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", _MAIN, *args],
        capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}, cwd=REPO,
    )  # fmt: skip
    return proc, time.monotonic() - started


_MAIN = "import sys; from ckptctl.cli import main; sys.argv[0] = 'ckptctl'; main()"


@pytest.mark.parametrize(
    "command",
    [["ls"], ["check"], ["verify", "--engine", "local"], ["show"], ["refs"], ["plan-rescale", "-p", "2"]],
)
def test_closed_s3_endpoint_fails_fast_in_one_line(command: list[str]) -> None:
    from tests.conftest import free_port

    endpoint = f"http://127.0.0.1:{free_port()}"  # bound, released: nothing listens there
    proc, elapsed = run_ckptctl(*command, "s3://bucket/checkpoints", "--s3-endpoint", endpoint, timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot reach the S3 endpoint" in lines[0] and endpoint in lines[0], (
        proc.stderr
    )
    assert elapsed < 10, f"{elapsed:.1f}s"


@pytest.fixture
def silent_endpoint():
    """A TCP server on loopback that accepts every connection and never answers (issue 22 row 4)."""
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join(2)
    for c in held:
        c.close()
    server.close()


@pytest.mark.parametrize("command", [["ls"], ["check"], ["verify", "--engine", "local"], ["refs"]])
def test_an_s3_endpoint_that_never_answers_fails_in_one_line_within_the_deadline(command, silent_endpoint) -> None:
    proc, elapsed = run_ckptctl(
        *command, "s3://bucket/checkpoints", "--s3-endpoint", silent_endpoint, timeout=60,
        env={"CKPTCTL_S3_READ_TIMEOUT": "0.5", "CKPTCTL_S3_DEADLINE": "2"},
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "did not answer in time" in lines[0], proc.stderr
    assert elapsed < 15, f"{elapsed:.1f}s"


@pytest.mark.parametrize(
    "env, args, says",
    [
        ({}, ["--s3-endpoint", "127.0.0.1:9000"], "is not a URL"),
        ({"AWS_PROFILE": "no-such-profile-here", "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""},
         ["--s3-endpoint", "http://127.0.0.1:1"], "no-such-profile-here"),
    ],
    ids=["endpoint-without-scheme", "unknown-profile"],
)  # fmt: skip
def test_s3_settings_that_cannot_work_are_one_line_exit_2(env, args, says) -> None:
    proc, elapsed = run_ckptctl("ls", "s3://bucket/checkpoints", *args, env=env, timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "internal error" not in lines[0], proc.stderr
    assert elapsed < 10, f"{elapsed:.1f}s"


@pytest.fixture
def fresh_s3fs():
    """s3fs caches filesystems (and the credentials they resolved) per process: a test without
    credentials must not reuse one made with them, nor leave its own for the next test."""
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()
    yield
    s3fs.S3FileSystem.clear_instance_cache()


@pytest.mark.parametrize(
    "command",
    [["ls"], ["show"], ["refs"], ["diff", "SAME"], ["verify", "--engine", "local"], ["plan-rescale", "-p", "3"],
     ["check"]],
)  # fmt: skip
def test_missing_s3_credentials_say_how_to_provide_them(
    command, s3_server, s3_fixtures, fresh_s3fs, monkeypatch
):
    import time

    from tests.support.fixture_cases import cases

    case = next(c for c in cases() if c.scenario == "basic" and c.flink_version == "2.2.0")
    uri = f"{s3_fixtures}/{case.checkpoint_dir.relative_to(DATA).as_posix()}"
    if command[0] in ("ls", "check"):
        uri = uri.rsplit("/", 1)[0]
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    args = [
        command[0],
        uri,
        *[uri if a == "SAME" else a for a in command[1:]],
        "--s3-endpoint",
        s3_server.endpoint,
    ]
    started = time.monotonic()
    line = one_line_error(cli(*args))
    assert time.monotonic() - started < 5
    assert "no AWS credentials" in line and "AWS_ACCESS_KEY_ID" in line and "AWS_PROFILE" in line
    assert "internal error" not in line


# ---- verify on the embedded Spark: fast, quiet failures -------------------------------------

BASIC_CHECKPOINT = DATA / "2.2.0" / "basic"


def test_spark_master_with_nothing_listening_fails_fast_in_one_line(tmp_path: Path) -> None:
    from tests.conftest import free_port

    master = f"spark://127.0.0.1:{free_port()}"
    proc, elapsed = run_ckptctl(
        "verify",
        str(BASIC_CHECKPOINT),
        "--master",
        master,
        env={"CKPTCTL_SPARK_LOG": str(tmp_path / "s.log")},
    )
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "cannot reach the Spark master" in errors[0] and master in errors[0]
    assert len(errors[0]) < 300 and "Traceback" not in proc.stderr and "at org." not in proc.stderr
    assert [line for line in proc.stderr.splitlines() if not line.startswith(("error:", "warning:"))] == []
    assert elapsed < 20, f"{elapsed:.1f}s"


@pytest.mark.parametrize("kind", ["yarn-without-conf", "yarn-rm-down", "k8s-down", "unknown"])
def test_every_master_kind_fails_fast_in_one_line(kind: str, tmp_path: Path) -> None:
    """Issue 22 row 3: --master yarn with no YARN hung for 20 minutes (Hadoop retrying 0.0.0.0:8032)."""
    from tests.conftest import free_port

    port = free_port()
    env = {"CKPTCTL_SPARK_LOG": str(tmp_path / "s.log"), "HADOOP_CONF_DIR": "", "YARN_CONF_DIR": ""}
    master, says = {
        "yarn-without-conf": ("yarn", "HADOOP_CONF_DIR"),
        "yarn-rm-down": ("yarn", "cannot reach the Spark master yarn"),
        "k8s-down": (f"k8s://https://127.0.0.1:{port}", "cannot reach the Spark master"),
        "unknown": ("bogus://x", "unknown Spark master"),
    }[kind]
    if kind == "yarn-rm-down":
        conf = tmp_path / "hadoop"
        conf.mkdir()
        (conf / "yarn-site.xml").write_text(
            "<configuration><property><name>yarn.resourcemanager.address</name>"
            f"<value>127.0.0.1:{port}</value></property></configuration>"
        )
        env["HADOOP_CONF_DIR"] = str(conf)
    proc, elapsed = run_ckptctl("verify", str(BASIC_CHECKPOINT), "--master", master, env=env, timeout=120)
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and says in errors[0] and "--engine local" in errors[0] or kind == "unknown", proc.stderr
    assert len(errors) == 1 and says in errors[0], proc.stderr
    assert elapsed < 20, f"{elapsed:.1f}s"


def test_broken_java_home_names_java_17_and_the_local_engine(tmp_path: Path) -> None:
    fake = tmp_path / "jdk11" / "bin"
    fake.mkdir(parents=True)
    (fake / "java").write_text("#!/bin/sh\necho 'openjdk version \"11.0.22\" 2024-01-16' >&2\n")
    (fake / "java").chmod(0o755)
    for home, why in ((tmp_path / "nowhere", "has no bin/java"), (fake.parent, "is Java 11")):
        proc, _ = run_ckptctl(
            "verify",
            str(BASIC_CHECKPOINT),
            "--engine",
            "spark",
            env={"JAVA_HOME": str(home), "CKPTCTL_SPARK_LOG": str(tmp_path / "s.log")},
        )
        assert proc.returncode == 2, proc.stderr
        errors = [line for line in proc.stderr.splitlines() if not line.startswith("warning:")]
        assert len(errors) == 1, proc.stderr
        assert (
            "the Spark engine needs Java 17+" in errors[0]
            and why in errors[0]
            and "--engine local" in errors[0]
        )
        assert "JAVA_GATEWAY_EXITED" not in proc.stderr
        # the default engine (auto) checks a small input in-process: no JVM, so no Java needed
        auto, _ = run_ckptctl(
            "verify", str(BASIC_CHECKPOINT), "--json", *data_rebase(DATA),
            env={"JAVA_HOME": str(home), "CKPTCTL_SPARK_LOG": str(tmp_path / "s.log")},
        )  # fmt: skip
        assert auto.returncode == 0, auto.stderr
        assert json.loads(auto.stdout)["engine"] == "local"


def test_spark_start_shows_a_status_and_keeps_jvm_logging_off_the_terminal(tmp_path: Path) -> None:
    log = tmp_path / "spark.log"
    proc, _ = run_ckptctl(
        "verify", str(BASIC_CHECKPOINT), "--master", "local[1]", *data_rebase(DATA),
        env={"FORCE_COLOR": "1", "COLUMNS": "100", "CKPTCTL_SPARK_LOG": str(log)}, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "starting Spark (local[1])" in proc.stderr
    for jvm in ("WARN", "WARNING: Using incubator", "NativeCodeLoader", "log4j", "setLogLevel"):
        assert jvm not in proc.stderr, jvm
    assert log.exists() and "log4j" in log.read_text()  # where the JVM's own output went


# ---- moved roots, diff, --help ----------------------------------------------------------------


def test_verify_on_a_moved_root_warns_once_per_mapping(tmp_path: Path, monkeypatch) -> None:
    import shutil

    root = tmp_path / "moved"
    shutil.copytree(DATA / "2.2.0" / "savepoints", root)
    victim = next(root.glob("savepoints/savepoint-*/*-*-*-*-*"))
    victim.unlink()
    monkeypatch.chdir(tmp_path)
    result = cli("verify", "moved", "--engine", "local", env={"COLUMNS": "200"})
    assert result.exit_code == 1, result.output
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "--rebase" in warnings[0], result.stderr
    assert victim.relative_to(root).as_posix() in result.stdout
    single = cli("verify", str(victim.parent), "--engine", "local", env={"COLUMNS": "200"})
    assert single.exit_code == 1
    assert f"{victim.parent.name}/{victim.name}" in single.stdout  # not a bare UUID


def test_diff_warns_about_order_and_jobs_and_lists_files() -> None:
    from tests.support.fixture_cases import cases

    basic = sorted(
        (c for c in cases() if c.flink_version == "2.2.0" and c.scenario == "basic"),
        key=lambda c: int(c.checkpoint_dir.name.split("-")[1]),
    )
    old, new = str(basic[0].checkpoint_dir), str(basic[-1].checkpoint_dir)
    forward = cli("diff", old, new, env={"COLUMNS": "200"})
    assert forward.exit_code == 0 and "older" not in forward.stderr
    view = cli_json("diff", old, new)
    biggest = max(view["added"], key=lambda f: f["size"])
    rel = biggest["path"].removeprefix("file:" + str(basic[0].checkpoint_dir.parent) + "/")
    assert rel in forward.stdout and len(view["added"]) > 10 and "more" in forward.stdout
    backward = cli("diff", new, old)
    assert backward.exit_code == 0 and "is older than A" in backward.stderr
    other = next(c for c in cases() if c.flink_version == "1.20.3" and c.scenario == "basic")
    across = cli("diff", old, str(other.checkpoint_dir))
    assert across.exit_code == 0 and "different jobs" in across.stderr


@pytest.mark.parametrize(
    "command", ["", "ls", "show", "refs", "diff", "verify", "check", "plan-rescale", "gc", "gc plan", "gc apply", "repair", "relocate"]
)
def test_help_metavars_say_what_to_type(command: str) -> None:
    result = cli(*command.split(), "--help", env={"COLUMNS": "100"})
    assert result.exit_code == 0
    text = result.stdout
    for bad in ("<str>", "<int", "<float>", "<list", "{", "HDFS"):
        assert bad not in text, (bad, text)
    usage = {
        "ls": "ls [OPTIONS] ROOT", "show": "show [OPTIONS] CHECKPOINT", "refs": "refs [OPTIONS] CHECKPOINT|ROOT",
        "diff": "diff [OPTIONS] A B", "verify": "verify [OPTIONS] CHECKPOINT|ROOT", "check": "check [OPTIONS] ROOT",
        "plan-rescale": "plan-rescale [OPTIONS] CHECKPOINT", "gc": "`ckptctl gc ROOT ...` is",
        "gc plan": "gc plan [OPTIONS] ROOT...", "gc apply": "gc apply [OPTIONS] PLAN.json",
        "repair": "repair [OPTIONS] CHECKPOINT", "relocate": "relocate [OPTIONS] SRC DST",
    }  # fmt: skip
    if command:
        assert usage[command] in text


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
    result = cli("paimon", "status", str(chk), "--table", str(flink / "warehouse" / "default.db" / "events"), env=NARROW)
    assert result.exit_code == 1, result.output  # hazard C: it is older than what was committed
    rows = table_rows(result.stdout)
    assert [r[0] for r in rows] == ["chk-4"], result.stdout
    assert all(len(line.rstrip()) <= 80 for line in result.stdout.splitlines())
