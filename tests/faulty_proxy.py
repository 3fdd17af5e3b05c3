"""An HTTP proxy on loopback that forwards to the S3 endpoint and injects throttling and 5xx answers.

Deterministic: a seeded random number decides which requests fail, and at most ``max_faults``
are injected, so a client that retries always gets through eventually.
"""

from __future__ import annotations

import http.client
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

SLOW_DOWN = (
    503,
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>",
)
INTERNAL = (
    500,
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code>'
    b"<Message>We encountered an internal error. Please try again.</Message></Error>",
)


class FaultyProxy:
    def __init__(self, upstream: str, fault_rate: float = 0.3, max_faults: int = 200, seed: int = 7) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname, parts.port)
        self.fault_rate = fault_rate
        self.max_faults = max_faults
        self.random = random.Random(seed)
        self.lock = threading.Lock()
        self.requests = 0
        self.faults = 0
        self.faults_by_kind: dict[str, int] = {}
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                fault = proxy.decide(self.command, self.path)
                if fault is not None:
                    status, payload = fault
                    self.send_response(status)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                conn = http.client.HTTPConnection(*proxy.upstream, timeout=30)
                headers = {
                    k: v for k, v in self.headers.items() if k.lower() not in ("connection", "keep-alive")
                }
                conn.request(self.command, self.path, body=body, headers=headers)
                response = conn.getresponse()
                data = response.read()
                self.send_response(response.status)
                for k, v in response.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                # a HEAD answer has no body but announces the object's length: pass it through
                length = response.getheader("Content-Length") if self.command == "HEAD" else None
                self.send_header("Content-Length", length or str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def decide(self, method: str, path: str):
        with self.lock:
            self.requests += 1
            if self.faults >= self.max_faults or self.random.random() >= self.fault_rate:
                return None
            self.faults += 1
            kind = "delete" if "delete" in path else "list" if "list-type" in path else method.lower()
            self.faults_by_kind[kind] = self.faults_by_kind.get(kind, 0) + 1
            return SLOW_DOWN if self.random.random() < 0.5 else INTERNAL

    def __enter__(self) -> FaultyProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
