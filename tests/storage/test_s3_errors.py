"""S3 that cannot work (a closed or silent endpoint, a bad setting, no credentials) is one line, exit 2,
within seconds.

"Within seconds" is held by what the command did, not by the clock: how often it tried the
endpoint, how many calls waited out the deadline, whether it retried. Wall-clock bounds of 5-10 s
failed on a loaded 2-core machine (imports alone took ten times longer: ``assert 10.96 < 10``) while
the command made the same single attempt."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from tests.support.cli_runner import DATA, cli, one_line_error, run_ckptctl, run_ckptctl_counting_connections

# one storage call's connections: s3fs's own quick tries of a refused connection (2-4 per command,
# counted); ckptctl's back-off loop on top of them made 8 calls of those before its deadline
MAX_TRIES_OF_A_REFUSED_ENDPOINT = 4


@pytest.mark.parametrize(
    "command",
    [["ls"], ["check"], ["verify", "--engine", "local"], ["show"], ["refs"], ["plan-rescale", "-p", "2"]],
)
def test_closed_s3_endpoint_fails_fast_in_one_line(command: list[str]) -> None:
    from tests.conftest import free_port

    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"  # bound, released: nothing listens there
    proc, tried = run_ckptctl_counting_connections(
        *command, "s3://bucket/checkpoints", "--s3-endpoint", endpoint
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot reach the S3 endpoint" in lines[0] and endpoint in lines[0], (
        proc.stderr
    )
    # a refused connection is final: one call (s3fs's own quick tries), not retried with back-off
    # until the deadline
    assert 1 <= tried.count(f"127.0.0.1:{port}") <= MAX_TRIES_OF_A_REFUSED_ENDPOINT, tried


@dataclass
class Silent:
    url: str
    asked: list[str]  # the request line of each connection ("HEAD /bucket/key HTTP/1.1")


@pytest.fixture
def silent_endpoint():
    """A TCP server on loopback that accepts every connection, reads its request and never
    answers (issue 22 row 4)."""
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    asked: list[str] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn = server.accept()[0]
            except OSError:
                continue
            held.append(conn)
            conn.settimeout(5)
            try:
                asked.append(conn.recv(8192).split(b"\r\n", 1)[0].decode("latin-1"))
            except OSError:
                asked.append("")  # connected, asked nothing (within 5 s)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield Silent(f"http://127.0.0.1:{server.getsockname()[1]}", asked)
    stop.set()
    thread.join(6)
    for c in held:
        c.close()
    server.close()


DEADLINE, READ_TIMEOUT = 2.0, 0.5
# Behind the faulty proxy the endpoint answers what it does not hold (moto, through the proxy):
# those answers must come within the read timeout however loaded the machine is (0.5 s did not,
# under load: a listing timed out and no request of the kind held was ever sent)
PROXIED = {"CKPTCTL_S3_READ_TIMEOUT": "3", "CKPTCTL_S3_DEADLINE": "6"}


@pytest.mark.parametrize(
    "command", [["ls"], ["check"], ["verify", "--engine", "local"], ["refs"], ["show"], ["gc"]]
)
def test_an_s3_endpoint_that_never_answers_fails_in_one_line_within_the_deadline(
    command, silent_endpoint
) -> None:
    """One storage call waits out the deadline, and the command stops there: each next request
    (the directory test after the ``_metadata`` read, the next checkpoint, the next file) would
    wait as long, and used to -- refs and verify waited two deadlines, as the error of the first
    call was taken for "not a checkpoint" and a second call asked again."""
    proc, _ = run_ckptctl(
        *command, "s3://bucket/checkpoints", "--s3-endpoint", silent_endpoint.url, timeout=120,
        env={"CKPTCTL_S3_READ_TIMEOUT": str(READ_TIMEOUT), "CKPTCTL_S3_DEADLINE": str(DEADLINE)},
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert (
        len(lines) == 1 and "did not answer in time" in lines[0] and "s3://bucket/checkpoints" in lines[0]
    ), proc.stderr
    asked = silent_endpoint.asked
    assert asked, "no request reached the endpoint"
    # one call, retried: every request is about one object (a GET and HEADs of a _metadata, or a
    # listing of the bucket); a second call asks about another (the directory test of the path)
    objects = {
        line.split(" ")[1].partition("?")[0] if line.count(" ") == 2 else line for line in asked if line
    }
    assert len(objects) == 1, asked


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
    proc, tried = run_ckptctl_counting_connections("ls", "s3://bucket/checkpoints", *args, env=env)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "internal error" not in lines[0], proc.stderr
    assert tried == [], tried  # refused before any request: nothing can answer it


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
    from ckptctl.storage import retry
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
    retried = []
    real = retry.retry_delay
    monkeypatch.setattr(retry, "retry_delay", lambda e, n: retried.append(e) or real(e, n))
    line = one_line_error(cli(*args))
    assert [e for e in retried if real(e, 0) is not None] == []  # final at once, no back-off
    assert "no AWS credentials" in line and "AWS_ACCESS_KEY_ID" in line and "AWS_PROFILE" in line
    assert "internal error" not in line


# the threads of ckptctl.engine.local.run_local, Storage.stat_many, states' header reads (nested: a
# chunk checked in the caller's thread first, then the pool)
SIDE_BY_SIDE = 16


@pytest.mark.parametrize(("command", "held_below"), [(["verify", "--engine", "local"], "/shared/"),
                                                    (["check"], "/shared/"), (["gc"], "/_metadata"),
                                                    (["ls"], "/_metadata"), (["states"], "/chk-")])  # fmt: skip
def test_an_endpoint_that_stops_answering_midway_stops_the_command_at_its_first_deadline(
    command, held_below, s3_server, s3_fixtures
) -> None:
    """The endpoint answers the listings but holds the requests for shared files (verify, check),
    for every ``_metadata`` (gc) or for a checkpoint's own files but its ``_metadata`` (states: the
    keyed state's meta files) -- a gateway whose backend for those keys hung. A command that
    reports one file's storage error and goes on (verify's per-file checks, gc's refusal of an
    unreadable _metadata, states' headers read side by side) used to wait out the deadline for
    each next file too: it stops at the first one, in one line, and gc plans nothing. ``ls`` read
    every ``_metadata`` in turn, each waiting out the deadline, and listed them as rows in error."""
    from tests.support.faulty_proxy import HANG, FaultyProxy, Rule
    from tests.support.fixture_cases import REPO, manifest

    e = next(e for e in manifest()["entries"] if e["flink_version"] == "2.2.0" and e["scenario"] == "basic")
    base = f"{s3_fixtures}/2.2.0/basic"

    def hangs(method: str, path: str) -> bool:  # a GET or HEAD of such a key (listings pass)
        key = path.partition("?")[0]
        return (
            method in ("GET", "HEAD")
            and held_below in key
            and not (held_below == "/chk-" and key.endswith("/_metadata"))
        )

    target = f"{base}/checkpoints"
    if command == ["states"]:  # one checkpoint: the newest of the fixture's job
        newest = max((REPO / e["data_dir"]).glob("checkpoints/*/chk-*"), key=lambda d: int(d.name[4:]))
        target = f"{base}/{newest.relative_to(REPO / e['data_dir']).as_posix()}"

    with FaultyProxy(
        s3_server.endpoint, fault_rate=0.0, rules=[Rule(hangs, fail=10**9, fault=HANG)]
    ) as proxy:
        proc, _ = run_ckptctl(
            *command, target, "--rebase", f"{e['original_root']}={base}", "--s3-endpoint", proxy.endpoint,
            timeout=300, env=PROXIED,
        )  # fmt: skip
    held = proxy.held
    assert held, f"no request below {held_below} was held"
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "did not answer in time" in lines[0] and held_below in lines[0], proc.stderr
    # before: every shared file's request held in turn (352 of them, 29 s with a 4 s deadline, and exit 1:
    # "cannot read"). Now the objects asked for are those of the calls under way when the first
    # one's deadline passed, not every one of the 71 shared files (18-22 counted at a load of 30)
    objects = {path.partition("?")[0] for _method, path in held}
    assert len(objects) <= 2 * SIDE_BY_SIDE, (len(objects), len(held))


@pytest.mark.parametrize(("trash", "engine"), [(False, "local"), (True, "local"), (False, "spark")])
def test_gc_apply_stops_at_the_first_delete_the_endpoint_does_not_answer(
    tmp_path, s3_server, trash, engine
) -> None:
    """The endpoint answers apply's listings and reads but holds every DeleteObjects (or, with
    --trash, every CopyObject): a gateway whose write path hung. Apply reported each batch's keys
    as failed and went on to the next batch, waiting out the deadline again -- a 20 s wait per
    1,000 candidates at the default deadline, hours on a big plan, for nothing. It stops at the
    first unanswered request, in one line; the manifest says where, a re-run finishes the job. On
    Spark the task stops, and the line says why (it said "PythonException", nothing more)."""
    from tests.support.faulty_proxy import HANG, FaultyProxy, Rule
    from tests.support.s3_copied import exists, gc_args, upload_scenario

    bucket = "apply-held" + ("-trash" if trash else "") + ("-spark" if engine == "spark" else "")
    up = upload_scenario(s3_server, bucket)
    plan_file = tmp_path / "plan.json"
    # the plan in-process: this test is about apply's process (its one line, its exit), and a
    # process of its own cost ~2 CPU-s of imports
    planned = cli("gc", "plan", *gc_args(bucket, up["entry"], s3_server.endpoint), "-o", str(plan_file))
    assert planned.exit_code == 0, planned.output
    assert len(json.loads(plan_file.read_text())["candidates"]) == len(up["orphans"]) >= 5

    def writes(method: str, path: str) -> bool:
        return method == "POST" and "delete" in path.partition("?")[2] if not trash else method == "PUT"

    extra = ["--trash", f"s3://{bucket}-trash/gc"] if trash else []
    if trash:
        s3_server.create_bucket(f"{bucket}-trash")
    with FaultyProxy(
        s3_server.endpoint, fault_rate=0.0, rules=[Rule(writes, fail=10**9, fault=HANG)]
    ) as proxy:
        proc, _ = run_ckptctl(
            "gc", "apply", str(plan_file), "--yes", "--batch-size", "1", "--s3-endpoint", proxy.endpoint, *extra,
            "--engine", engine, timeout=300, env=PROXIED,
        )  # fmt: skip
    assert proxy.held, "no write was held"
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "did not answer in time" in lines[0], proc.stderr
    # before: a batch of one candidate each, every one waiting out the deadline (6 x 2 s, exit 1; on
    # Spark, a line per candidate, exit 1). Now only the first batch was sent (again, when a request
    # timed out): one distinct write held
    if engine == "local":  # on Spark each task's first batch is under way at once
        assert len(set(proxy.held_requests)) == 1, proxy.held
    assert all(exists(up["fs"], o) for o in up["orphans"])  # nothing deleted while the writes hung
