"""m8: an endpoint that is not S3 (a web server answering 404 with HTML, on loopback) reads "the
endpoint did not answer as S3", not "no such bucket" / "no such directory"."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from tests.support.cli_runner import cli, one_line_error


@pytest.fixture(scope="module")
def web_server() -> Iterator[str]:
    class NotFound(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            body = b"<html><body><h1>404 Not Found</h1></body></html>"
            self.send_response(404)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        do_GET = do_HEAD = do_PUT = do_POST = _answer

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("command", [["ls"], ["verify"], ["check"], ["gc", "plan"]])
def test_a_web_server_is_not_an_s3_endpoint(web_server: str, command: list[str]) -> None:
    line = one_line_error(cli(*command, "s3://flink/ck", "--s3-endpoint", web_server))
    assert "did not answer as S3" in line and "no such" not in line, line


def _answer(status: int, code: str, content_type: str):
    """The error s3fs raises for an HTTP answer: its OSError, caused by botocore's ClientError."""
    from botocore.exceptions import ClientError
    from s3fs.errors import translate_boto_error

    response = {
        "Error": {"Code": code, "Message": ""},
        "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": {"content-type": content_type}},
    }
    return translate_boto_error(ClientError(response, "ListObjectsV2"))


@pytest.mark.parametrize(
    ("error", "retried"),
    [
        (lambda: _answer(404, "", "text/html"), False),  # a web server's page: final (m8)
        (lambda: _answer(400, "400", "text/html"), False),
        (lambda: _answer(503, "SlowDown", "application/xml"), True),  # S3 throttling
        (lambda: _answer(500, "InternalError", "application/xml"), True),
        (lambda: _answer(502, "", "text/html"), True),  # a gateway in front of S3, while it restarts
        (lambda: ConnectionResetError(104, "Connection reset by peer"), True),
    ],
)
def test_an_answer_that_is_not_s3s_is_final_and_transient_ones_are_retried(error, retried) -> None:
    from ckptctl.storage.retry import retry_delay

    assert (retry_delay(error(), 0) is not None) == retried


def test_a_web_servers_answer_is_asked_once(web_server: str, monkeypatch) -> None:
    """Each request is sent once: a non-S3 answer used to be retried until the deadline (the
    module took 86 s), and then said "cannot list: OSError" (the deadline's error lost the answer)."""
    from ckptctl.storage import retry

    delays: list[float | None] = []
    real = retry.retry_delay
    monkeypatch.setattr(retry, "retry_delay", lambda e, n: delays.append(real(e, n)) or delays[-1])
    line = one_line_error(cli("ls", "s3://flink/ck", "--s3-endpoint", web_server))
    assert "did not answer as S3" in line, line
    assert delays and all(d is None for d in delays), delays
