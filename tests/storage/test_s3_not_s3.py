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
