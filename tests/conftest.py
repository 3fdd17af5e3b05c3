"""Shared test fixtures: a real S3 endpoint (moto in server mode over HTTP on loopback)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import built_commands, class_archive, jvm
from tests.support.fixture_cases import FIXTURES
from tests.support.moto_server import S3_SERVER


def pytest_configure(config) -> None:
    """Every JVM the tests start (and those started by the processes they start) runs with the
    suite's options (C1 only, the parallel collector: tests/support/jvm.py). Set here, not when this
    module is imported: the benches import its helpers, and an import that handed them the suite's
    JIT measured every bench JVM on C1 (a 10^7-row gc plan 1.5x slower). The Spark JVMs and the
    PyFlink gateways map class archives (tests/support/class_archive.py), which the run's first
    process (xdist's controller, before its workers inherit this environment) starts writing in
    the background when this machine has none yet: JVMs started before they are there run without."""
    from tests.support import spark_archive

    # Python's own cache of compiled modules, which a machine may turn off (PYTHONDONTWRITEBYTECODE=1,
    # as the machines this suite runs on do): without it every worker compiled and assertion-rewrote
    # 194 test modules (12.2 CPU-s each; 4.2 from the cache) and every ckptctl process the tests
    # start compiled ckptctl's modules again (`ckptctl ls` of a fixture 1.30 -> 0.85 CPU-s). The
    # cache holds the same code (checked against each source's mtime), in __pycache__ (git ignores it).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False
    built_commands.remember()  # in-process invocations build the click command once, as a process does
    if not hasattr(config, "workerinput"):
        config.stash[_ARCHIVE_WRITER] = class_archive.ensure()
    jvm.hand_on(os.environ)
    if os.environ["SPARK_SUBMIT_OPTS"] == " ".join(jvm.SHORT_LIVED):  # the suite's, not a user's own
        config.stash[_SPARK_ARCHIVE] = spark_archive.archive_path()


def pytest_unconfigure(config) -> None:
    class_archive.finish(config.stash.get(_ARCHIVE_WRITER, None))


def pytest_xdist_auto_num_workers(config) -> int:
    """``-n auto`` (pyproject.toml): a test worker more than this machine's cores (``--maxprocesses``
    caps it). Some tests wait more than they compute: the S3 deadline tests wait out their deadlines
    against endpoints that never answer, the Flink tests wait on the MiniCluster's checkpoints, the
    Ctrl-C tests on a JVM to appear. With a worker per core the 2-core machine stood 15-46 % idle in
    the minutes they ran (r3: a fresh-clone run read every 5 s: 240-300 s 46 %, 300-360 s 27 %), and
    ~17 % over the whole pytest phase. A third worker computes while one of the others waits: the
    same code from a fresh clone, 669.8 s with two workers (r4; r3 688.5 s), 642.2 s with three
    (r5, idle 1-6 % in most minutes), for 1,299 machine CPU-s against 1,209-1,229 (the third
    session's JVM, and contention). Its memory (a Spark session of 1.5 GiB heap,
    tests/support/jvm.py) leaves two thirds of a 24 GB machine to the rest."""
    return len(os.sched_getaffinity(0)) + 1


_ARCHIVE_WRITER = pytest.StashKey()
_SPARK_ARCHIVE = pytest.StashKey()


@pytest.fixture(autouse=True)
def spark_archive_once_there(request, monkeypatch) -> None:
    """The Spark JVMs a test starts (its worker's session, the ckptctl processes it runs) map the
    class archive once it is there, and are not told of it before: a JVM told of a missing archive
    runs without the JDK's own class sharing too, and the archive is written while the run goes on
    (tests/support/class_archive.py). Asked at each test, as the PyFlink gateways ask at each start."""
    options = class_archive.options_once_there(request.config.stash.get(_SPARK_ARCHIVE, None))
    if options:
        monkeypatch.setenv("SPARK_SUBMIT_OPTS", f"{os.environ['SPARK_SUBMIT_OPTS']} {options}")


# Ports nobody listens on: port 9 (discard) on loopback; a stray S3 request fails there, at once.
NOWHERE = "http://127.0.0.1:9"
SUITE_S3_READ_TIMEOUT, SUITE_S3_DEADLINE = 30, 120  # seconds; the product's: 5 and 20


@pytest.fixture(autouse=True)
def aws_sandbox(monkeypatch, tmp_path_factory) -> None:
    """No test may send a request off loopback, the instance-metadata address included: dummy
    credentials, no instance metadata, no profile or config files of the machine, and an S3
    endpoint on loopback for any command that is not given one."""
    nothing = tmp_path_factory.getbasetemp() / "no-aws-config"
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(nothing))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(nothing))
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", NOWHERE)
    # moto answers in milliseconds on an idle machine and in tens of seconds on a loaded one (a
    # listing of 1,000 keys timed out at a load of 25: the product's 5 s read timeout, 20 s deadline):
    # the suite's own S3 waits as long as it takes; the tests of hung endpoints set their own
    monkeypatch.setenv("CKPTCTL_S3_READ_TIMEOUT", str(SUITE_S3_READ_TIMEOUT))
    monkeypatch.setenv("CKPTCTL_S3_DEADLINE", str(SUITE_S3_DEADLINE))
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "CKPTCTL_S3_ENDPOINT",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                 "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class S3Server:
    endpoint: str
    process: subprocess.Popen

    def client(self):
        """A boto3 S3 client of this server (for keys s3fs would not write as they are: ``a/``)."""
        import boto3

        return boto3.client(
            "s3", endpoint_url=self.endpoint, region_name="us-east-1",
            aws_access_key_id="testing", aws_secret_access_key="testing",
        )  # fmt: skip

    def create_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name)

    def put_many(self, objects: dict[str, bytes]) -> None:
        """``{"bucket/key": bytes}`` written side by side, as ``fs.pipe`` does, by one boto3 client
        in 8 threads: the fixtures' 1,333 files took 8.8 CPU-s of the test process through s3fs's
        pipe, 6.7 this way (moto's own ~10 CPU-s either way), and 28 s of wall against 19."""
        from concurrent.futures import ThreadPoolExecutor

        client = self.client()

        def put(item: tuple[str, bytes]) -> None:
            bucket, _, key = item[0].partition("/")
            client.put_object(Bucket=bucket, Key=key, Body=item[1])

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(put, objects.items()))
        self.filesystem().invalidate_cache()  # as fs.pipe does: the (cached) filesystem lists afresh

    def filesystem(self):
        import s3fs

        return s3fs.S3FileSystem(
            key="testing",
            secret="testing",
            client_kwargs={"endpoint_url": self.endpoint, "region_name": "us-east-1"},
        )


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """Start ``moto_server`` as a separate process and point the AWS credential chain at it."""
    port = free_port()
    env = dict(os.environ)
    proc = subprocess.Popen(
        [*S3_SERVER, "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError("moto_server did not start") from None
            time.sleep(0.1)
    saved = {
        k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")
    }
    os.environ.update(
        AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1"
    )
    try:
        yield S3Server(endpoint, proc)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="session", autouse=True)
def flink_jvm_tmp(tmp_path_factory) -> Path:
    """The temp dir (``java.io.tmpdir``) of every Flink JVM a test worker starts: a directory of the
    run's own (pytest keeps the last three runs'), not the machine's /tmp. Flink's MiniCluster
    unpacks its RPC system's jar (21 MB) and the Table planner's (46 MB) and makes its working
    directory there, and removes them as it shuts down, when it gets to: a JVM killed at the end of
    a restore or a session (the harness kills each process group it started) never does. Each run
    left some in /tmp (a minicluster_* directory, the RPC jar, at times the planner's: 8 runs, 7
    directories, 7 + 2 jars), and /tmp of a CI machine only grew."""
    scratch = tmp_path_factory.mktemp("flink-jvm-tmp", numbered=False)
    os.environ["FLINK_ENV_JAVA_OPTS"] = (
        f"{os.environ.get('FLINK_ENV_JAVA_OPTS', '')} -Djava.io.tmpdir={scratch}".strip()
    )
    return scratch


@pytest.fixture(scope="session", autouse=True)
def spark_log_of_the_run(tmp_path_factory) -> Path:
    """Where this worker's Spark JVMs write (``CKPTCTL_SPARK_LOG``, unless the caller set it): a
    file of the run's own. ckptctl's default is a file of the process in TMPDIR, kept when a line
    names it, and the out-of-memory and killed-JVM tests name their worker's: each run left a log per
    worker in the machine's /tmp. The ckptctl processes the tests start write there too unless the
    test gives them one of their own (tests/support/spark_run.py; tests/engine/test_spark_tmp.py
    takes the default's removal apart)."""
    log = tmp_path_factory.mktemp("spark-log", numbered=False) / "spark.log"
    os.environ.setdefault("CKPTCTL_SPARK_LOG", str(log))
    return log


@pytest.fixture(scope="session")
def flink_sessions():
    """One restore_job.py --serve process (one gateway JVM) per Flink version for every real-Flink
    restore of the run (tests/support/flink_harness.py): the JVM and the Table API load once per
    version, not once per test module (~5 s each on 2 cores); each restore is still a job of its
    own on a new MiniCluster. Closed at the end of the run."""
    from tests.support.flink_harness import FlinkSessions

    with FlinkSessions() as sessions:
        yield sessions


@pytest.fixture(scope="session")
def s3_fixtures(s3_server: S3Server) -> str:
    """The fixture data in ``s3://ckptctl-fixtures/`` (same relative layout as fixtures/data):
    every file outside the jobs' ``shared/`` and ``taskowned/`` (each ``_metadata``, what show and
    refs read, and the checkpoint directories ls sees), and every file of the trees the S3 tests
    read deeper (:data:`S3_WHOLE`). All 2,827 files took 21-23 s of each worker (moto stores ~130
    a second) for tests of which all but a handful read ``_metadata`` only; a test reading a file
    left out finds it missing and fails (verify: not sound; ls, states: not what the local run says)."""
    s3_server.create_bucket("ckptctl-fixtures")
    data = FIXTURES / "data"
    whole = tuple(data / t for t in S3_WHOLE)

    def wanted(p) -> bool:
        return not {"shared", "taskowned"} & set(p.relative_to(data).parts) or any(
            p.is_relative_to(w) for w in whole
        )

    # side by side: one at a time, the 2,746 files took 28 s of every worker
    s3_server.put_many({f"ckptctl-fixtures/{p.relative_to(data).as_posix()}": p.read_bytes()
             for p in sorted(data.rglob("*")) if p.is_file() and wanted(p)})  # fmt: skip
    return "s3://ckptctl-fixtures"


# the fixture trees uploaded whole by s3_fixtures: those the S3 tests verify, check, scan or break
S3_WHOLE = (
    "1.20.3/basic",
    "1.20.3/claim",
    "1.20.3/maxpar256",
    "2.2.0/basic",
    "2.2.0/filemerging",
    "2.2.0/states",
)


def pytest_collection_modifyitems(config, items) -> None:
    """The longest tests first, the rest in their order: real-Flink tests (a live ForSt job ~50 s,
    restores 20-30 s each), then those that run Spark (plans of 5-40 s each), then those that talk
    to S3. Collected where they are, Spark's gc, storage and verify tests ran last, and the run ended
    with one worker busy with them while the other had nothing left: the machine was 14-45 % idle
    over a run's last five minutes. With ``--dist worksteal`` (pyproject.toml) a worker that runs
    out takes the other's queued tests from its end: the short ones, once the long ones lead."""

    def weight(item) -> int:
        if item.get_closest_marker("flink") is not None:
            return 0
        uses = getattr(item, "fixturenames", ())
        if "spark" in uses or "spark" in item.nodeid.lower():
            return 1
        return 2 if "s3_server" in uses else 3  # moto's requests: seconds, not the tenths of the rest

    items.sort(key=weight)


@pytest.fixture
def spark():
    """This worker's SparkSession on ``local[*]`` (the master every Spark test shares, so modules do
    not restart the JVM), asked for again by each test: a session whose JVM died under an earlier
    test (the kernel's OOM killer) is replaced by a new one, where a session kept for the module
    failed every later test of it with ``Connection refused``."""
    from ckptctl.engine.spark import spark_session

    return spark_session("local[*]")
