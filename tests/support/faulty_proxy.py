"""An HTTP proxy on loopback that forwards to the S3 endpoint and injects throttling and 5xx answers.

Deterministic: a seeded random number decides which requests fail, and at most ``max_faults``
are injected, so a client that retries always gets through eventually.
"""

from __future__ import annotations

import http.client
import random
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

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
# no answer at all: the request is held open until the proxy closes (a gateway whose backend hung)
HANG = (0, b"")


@dataclass
class Rule:
    """A deterministic rule: requests ``match(method, path)`` selects.

    The first ``fail`` matching requests get ``fault`` instead of being forwarded. ``before`` runs
    once, just before the first matching request that is forwarded (so its effect is visible to
    that request and every later one); ``after_response`` triggers it instead (or too) once an
    upstream answer matches, after the answer was read and before it is returned.
    """

    match: Callable[[str, str], bool]
    fail: int = 0
    fault: tuple[int, bytes] = INTERNAL
    before: Callable[[], None] | None = None
    after_response: Callable[[str, str, bytes], bool] | None = None
    seen: int = 0
    failed: int = 0
    fired: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def fire(self) -> None:
        with self.lock:
            if self.fired or self.before is None:
                return
            self.fired = True
            self.before()


def query(path: str) -> dict[str, str]:
    """The query parameters of a request path (first value of each)."""
    return {k: v[0] for k, v in parse_qs(urlsplit(path).query, keep_blank_values=True).items()}


def is_list(path: str) -> bool:
    return query(path).get("list-type") == "2"


def is_clock_request(method: str, path: str) -> bool:
    """ListObjectsV2 with max-keys=1: the cheap request whose Date header is the storage clock."""
    q = query(path)
    return method == "GET" and q.get("list-type") == "2" and q.get("max-keys") == "1"


def lists_inside(dirname: str) -> Callable[[str, str], bool]:
    """A list request whose prefix or start-after lies inside a ``dirname/`` directory."""
    marker = f"/{dirname}/"

    def match(method: str, path: str) -> bool:
        q = query(path)
        return is_list(path) and any(marker in "/" + q.get(k, "") for k in ("prefix", "start-after"))

    return match


def response_has_key_inside(dirname: str) -> Callable[[str, str, bytes], bool]:
    """A list answer holding an object key inside a ``dirname/`` directory."""
    pattern = re.compile(rb"<Key>(?:[^<]*/)?" + re.escape(dirname.encode()) + rb"/[^<]*</Key>")
    return lambda method, path, body: is_list(path) and pattern.search(body) is not None


class FaultyProxy:
    def __init__(
        self,
        upstream: str,
        fault_rate: float = 0.3,
        max_faults: int = 200,
        seed: int = 7,
        rules: list[Rule] | tuple[Rule, ...] = (),
    ) -> None:
        self.rules = list(rules)
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname, parts.port)
        self.fault_rate = fault_rate
        self.max_faults = max_faults
        self.random = random.Random(seed)
        self.lock = threading.Lock()
        self.requests = 0
        self.faults = 0
        self.faults_by_kind: dict[str, int] = {}
        self.held: list[tuple[str, str]] = []  # the requests left unanswered (HANG)
        self.held_requests: list[tuple[str, str, bytes]] = []  # the same, with what each carried
        self.closing = threading.Event()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                fault = proxy.decide(self.command, self.path)
                if fault is HANG:
                    proxy.held.append((self.command, self.path))
                    proxy.held_requests.append((self.command, self.path, body))
                    proxy.closing.wait()
                    self.close_connection = True
                    return
                if fault is not None:
                    status, payload = fault
                    self.send_response(status)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    # a HEAD answer has no body: one would be read as the next answer
                    if self.command != "HEAD":
                        self.wfile.write(payload)
                    return
                conn = http.client.HTTPConnection(*proxy.upstream, timeout=30)
                headers = {
                    k: v for k, v in self.headers.items() if k.lower() not in ("connection", "keep-alive")
                }
                conn.request(self.command, self.path, body=body, headers=headers)
                response = conn.getresponse()
                data = response.read()
                proxy.after(self.command, self.path, data)
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
        for rule in self.rules:
            if rule.match(method, path):
                with rule.lock:
                    rule.seen += 1
                    fail = rule.failed < rule.fail
                    if fail:
                        rule.failed += 1
                if fail:
                    with self.lock:
                        self.requests += 1
                    return rule.fault
                rule.fire()
        with self.lock:
            self.requests += 1
            if self.faults >= self.max_faults or self.random.random() >= self.fault_rate:
                return None
            self.faults += 1
            kind = "delete" if "delete" in path else "list" if "list-type" in path else method.lower()
            self.faults_by_kind[kind] = self.faults_by_kind.get(kind, 0) + 1
            return SLOW_DOWN if self.random.random() < 0.5 else INTERNAL

    def after(self, method: str, path: str, body: bytes) -> None:
        for rule in self.rules:
            if rule.after_response is not None and not rule.fired and rule.after_response(method, path, body):
                rule.fire()

    def __enter__(self) -> FaultyProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.closing.set()
        self.server.shutdown()
        self.server.server_close()
