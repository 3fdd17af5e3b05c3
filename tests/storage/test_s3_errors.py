"""S3 that cannot work (a closed or silent endpoint, a bad setting, no credentials) is one line, exit 2,
within seconds."""

from __future__ import annotations

import pytest

from tests.support.cli_runner import DATA, cli, one_line_error, run_ckptctl


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
