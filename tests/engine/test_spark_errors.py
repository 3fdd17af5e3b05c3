"""The Spark engine fails fast and quietly: an unreachable or unknown master and a broken Java are one
line naming the fix; a working start shows a status and keeps the JVM's logging off the terminal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli_runner import DATA, in_one_process, run_ckptctl
from tests.support.fixture_cases import data_rebase

# ---- verify on the embedded Spark: fast, quiet failures -------------------------------------

BASIC_CHECKPOINT = DATA / "2.2.0" / "basic"


KINDS = ["yarn-without-conf", "yarn-rm-down", "k8s-down", "unknown"]
HOMES = {"nowhere": "has no bin/java", "jdk11": "is Java 11"}


@pytest.fixture(scope="module")
def refused(tmp_path_factory) -> dict[str, dict]:
    """The runs of the tests below, all in one fresh process that never starts a JVM (each is
    refused before one would start; the Java check is made only while the process has none): per
    case its run (:func:`in_one_process`), its Spark log's path, and what it asked for. A process
    per run cost ~1 CPU-s of imports each, nine of them."""
    from tests.conftest import free_port

    tmp = tmp_path_factory.mktemp("refused")
    cases: dict[str, dict] = {}

    def case(name: str, args: list[str], env: dict[str, str], **facts: str) -> None:
        log = tmp / f"{name}.log"
        cases[name] = {"args": args, "env": {**env, "CKPTCTL_SPARK_LOG": str(log)}, "log": log, **facts}

    master = f"spark://127.0.0.1:{free_port()}"
    case("nothing-listening", ["verify", str(BASIC_CHECKPOINT), "--master", master], {}, master=master)
    for kind in KINDS:
        port = free_port()
        env = {"HADOOP_CONF_DIR": "", "YARN_CONF_DIR": ""}
        master, says = {
            "yarn-without-conf": ("yarn", "HADOOP_CONF_DIR"),
            "yarn-rm-down": ("yarn", "cannot reach the Spark master yarn"),
            "k8s-down": (f"k8s://https://127.0.0.1:{port}", "cannot reach the Spark master"),
            "unknown": ("bogus://x", "unknown Spark master"),
        }[kind]
        if kind == "yarn-rm-down":
            conf = tmp / "hadoop"
            conf.mkdir()
            (conf / "yarn-site.xml").write_text(
                "<configuration><property><name>yarn.resourcemanager.address</name>"
                f"<value>127.0.0.1:{port}</value></property></configuration>"
            )
            env["HADOOP_CONF_DIR"] = str(conf)
        case(kind, ["verify", str(BASIC_CHECKPOINT), "--master", master], env, says=says)
    fake = tmp / "jdk11" / "bin"
    fake.mkdir(parents=True)
    (fake / "java").write_text("#!/bin/sh\necho 'openjdk version \"11.0.22\" 2024-01-16' >&2\n")
    (fake / "java").chmod(0o755)
    for home, path in (("nowhere", tmp / "nowhere"), ("jdk11", fake.parent)):
        env = {"JAVA_HOME": str(path)}
        case(f"{home}-spark", ["verify", str(BASIC_CHECKPOINT), "--engine", "spark"], env)
        # the default engine (auto) checks a small input in-process: no JVM, so no Java needed
        case(f"{home}-auto", ["verify", str(BASIC_CHECKPOINT), "--json", *data_rebase(DATA)], env)
    runs = in_one_process([(c["args"], c["env"]) for c in cases.values()], timeout=240)
    for c, run in zip(cases.values(), runs, strict=True):
        c["run"] = run
    return cases


def test_spark_master_with_nothing_listening_fails_fast_in_one_line(refused) -> None:
    case = refused["nothing-listening"]
    run, master = case["run"], case["master"]
    assert run["code"] == 2 and run["escaped"] is None, run
    errors = [line for line in run["stderr"].splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "cannot reach the Spark master" in errors[0] and master in errors[0]
    assert len(errors[0]) < 300 and "Traceback" not in run["stderr"] and "at org." not in run["stderr"]
    assert [line for line in run["stderr"].splitlines() if not line.startswith(("error:", "warning:"))] == []
    # found before any JVM started (the JVM's output would go to the log): no wait on a JVM or a master
    assert not case["log"].exists()


@pytest.mark.parametrize("kind", KINDS)
def test_every_master_kind_fails_fast_in_one_line(kind: str, refused) -> None:
    """Issue 22 row 3: --master yarn with no YARN hung for 20 minutes (Hadoop retrying 0.0.0.0:8032)."""
    case = refused[kind]
    run, says = case["run"], case["says"]
    assert run["code"] == 2 and run["escaped"] is None, run
    errors = [line for line in run["stderr"].splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and says in errors[0] and "--engine local" in errors[0] or kind == "unknown", run[
        "stderr"
    ]
    assert len(errors) == 1 and says in errors[0], run["stderr"]
    # refused before a JVM started (Hadoop's 20 minutes of retries ran in one): the JVM's log was never opened
    assert not case["log"].exists()


def test_broken_java_home_names_java_17_and_the_local_engine(refused) -> None:
    for home, why in HOMES.items():
        run = refused[f"{home}-spark"]["run"]
        assert run["code"] == 2 and run["escaped"] is None, run
        errors = [line for line in run["stderr"].splitlines() if not line.startswith("warning:")]
        assert len(errors) == 1, run["stderr"]
        assert (
            "the Spark engine needs Java 17+" in errors[0]
            and why in errors[0]
            and "--engine local" in errors[0]
        )
        assert "JAVA_GATEWAY_EXITED" not in run["stderr"]
        auto = refused[f"{home}-auto"]["run"]
        assert auto["code"] == 0 and auto["escaped"] is None, auto
        assert json.loads(auto["stdout"])["engine"] == "local"


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
