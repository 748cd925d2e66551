"""HTTP endpoints on metrics_host:metrics_port: /metrics (Prometheus), /healthz, /api/state (this runner's own
state) and the console at / with its API under /api/ (observe/console_api.py, which authenticates its actions).

- /api/state and the console (job names, tenants, error messages) answer only connections made to and from a
  loopback address with a loopback Host header, unless the operator sets broker.dashboard_public; /metrics and
  /healthz (counts per queue and tenant, roles) answer on whatever address metrics_host binds (default
  127.0.0.1);
- at most MAX_CONNECTIONS connections are served at once (more are answered 503 and closed), a connection
  must send its request within IDLE_TIMEOUT_SEC and every read or write must progress within it, and a
  connection open longer than REQUEST_DEADLINE_SEC is cut: idle or slow clients cannot take the runner's
  file descriptors (and with them its database connections) or its threads.
"""
from __future__ import annotations

import ipaddress
import json
import logging
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable
from urllib.parse import urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from .console_api import MAX_BODY_BYTES, ConsoleAPI, Reply
from .metrics import Metrics

log = logging.getLogger("pgsql_broker")
MAX_CONNECTIONS = 32
IDLE_TIMEOUT_SEC = 5.0
REQUEST_DEADLINE_SEC = 30.0
JOB_DETAILS = ("/api/state", "/", "/index.html")
_BUSY = b"HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
_LOCAL_ONLY = (b"job details (/api/state and the console) are served to loopback connections only, addressed as "
               b"127.0.0.1, [::1] or localhost: connect so on the runner's host, or set broker.dashboard_public "
               b"(PGBROKER_DASHBOARD_PUBLIC, --dashboard-public) to serve them on every address and name\n")


def is_loopback(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


class BoundedHTTPServer(ThreadingHTTPServer):
    """A thread per connection, at most max_connections of them, each cut after `deadline` seconds."""

    daemon_threads = True
    request_queue_size = 64

    def __init__(self, address, handler, max_connections: int, deadline: float):
        self._slots = threading.BoundedSemaphore(max_connections)
        self._open: dict[socket.socket, float] = {}
        self._open_lock = threading.Lock()
        self.deadline = deadline
        super().__init__(address, handler)

    def verify_request(self, request, client_address) -> bool:
        if not self._slots.acquire(blocking=False):
            try:
                request.setblocking(False)
                request.send(_BUSY)
            except OSError:
                pass
            return False  # socketserver closes it
        with self._open_lock:
            self._open[request] = time.monotonic()
        return True

    def process_request(self, request, client_address) -> None:
        try:
            super().process_request(request, client_address)
        except BaseException:  # no thread started: give the slot back (socketserver closes the socket)
            with self._open_lock:
                self._open.pop(request, None)
            self._slots.release()
            raise

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._open_lock:
                self._open.pop(request, None)
            self._slots.release()

    def service_actions(self) -> None:
        """Called by serve_forever between polls: cut connections open past the deadline."""
        now = time.monotonic()
        with self._open_lock:
            late = [s for s, opened in self._open.items() if now - opened > self.deadline]
        for sock in late:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def handle_error(self, request, client_address) -> None:  # a cut or broken connection: no traceback
        log.debug("HTTP connection from %s ended with an error", client_address[0], exc_info=True)

    @property
    def open_connections(self) -> int:
        with self._open_lock:
            return len(self._open)


def health_of(db: dict) -> str:
    """One database's status in /healthz (docs/operations.md says what each means)."""
    if db["role"] in ("active", "standby"):
        return "unserved_queues" if db["role"] == "active" and db.get("unserved_queues") else db["role"]
    return "unavailable" if db.get("error") else db["role"]
def _loopback_host(host_header: str | None) -> bool:
    """Is the Host header a loopback name or address? A page of another site that a DNS name rebound to
    127.0.0.1 sends its own name: it is refused the job details."""
    host = (host_header or "").strip().lower()
    host = host[1:].split("]", 1)[0] if host.startswith("[") else host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    return host == "localhost" or is_loopback(host)


def request_target(raw: str, host_header: str | None) -> tuple[str, str, str | None] | None:
    """(path, origin-form target, host) of a request line's target, parsed once for the routing, the loopback check
    and the console alike: a path (origin form), or an absolute http(s) URL (absolute form, whose host stands in
    for the Host header, RFC 9112 3.2.2). None for anything else, which is refused: asterisk or authority form,
    another scheme, and a path starting with //, in either form (a URL parser reads a host there, so the console
    would route another path than the check saw)."""
    if raw.startswith("/") and not raw.startswith("//"):
        return raw.partition("?")[0], raw, host_header
    url = urlsplit(raw)
    path = url.path or "/"
    if url.scheme.lower() not in ("http", "https") or not url.netloc or path.startswith("//"):
        return None
    return path, path + (f"?{url.query}" if url.query else ""), url.netloc


def serve(host: str, port: int, metrics: Metrics, state: Callable[[], dict], *, job_details_anywhere: bool = False,
          console: ConsoleAPI | None = None, max_connections: int = MAX_CONNECTIONS,
          idle_timeout: float = IDLE_TIMEOUT_SEC, deadline: float = REQUEST_DEADLINE_SEC) -> BoundedHTTPServer:
    """`console`: the console's page and API (observe/console_api.py); without it / is not served."""

    class Handler(BaseHTTPRequestHandler):
        timeout = idle_timeout  # socket timeout of every read and write

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self._dispatch("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._dispatch("POST")

        def _dispatch(self, method: str) -> None:
            parsed = request_target(self.path, self.headers.get("Host"))
            if parsed is None:
                self._send(400, "text/plain", b"the request target must be a path or an http(s) URL\n")
                return
            path, target, host = parsed
            details = path in JOB_DETAILS or (console is not None and console.serves(path))
            if details and not job_details_anywhere and not (
                    is_loopback(self.connection.getsockname()[0]) and is_loopback(self.client_address[0])
                    and _loopback_host(host)):
                self._send(403, "text/plain; charset=utf-8", _LOCAL_ONLY)
            elif method == "POST":
                length = self.headers.get("Content-Length") or "0"
                if not (length.isascii() and length.isdigit()) or int(length) > MAX_BODY_BYTES or console is None:
                    self._send(413 if console else 404, "text/plain", b"refused\n")
                    return
                self._reply(console.handle("POST", target, self.headers, self.rfile.read(int(length))))
            elif path == "/metrics":
                self._send(200, CONTENT_TYPE_LATEST, generate_latest(metrics.registry))
            elif path == "/healthz":
                # healthy while the process works, whatever one database does: an orchestrator that restarts
                # the runner for one database down would interrupt the others (each one's status is in the body)
                snapshot = state()
                healthy = bool(snapshot["running"])
                self._send(200 if healthy else 503, "application/json", json.dumps({
                    "healthy": healthy, "databases": {db["database"]: db["role"] for db in snapshot["databases"]},
                    "status": {db["database"]: health_of(db) for db in snapshot["databases"]}}).encode())
            elif path == "/api/state":
                self._send(200, "application/json", json.dumps(state(), default=str).encode())
            elif console is not None and console.serves(path):
                self._reply(console.handle("GET", target, self.headers))
            else:
                self._send(404, "text/plain", b"not found\n")

        def _reply(self, reply: Reply) -> None:
            self._send(reply.status, reply.content_type, reply.body, reply.headers)

        def _send(self, code: int, ctype: str, body: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:  # keep scrapes out of the log
            pass

    server = BoundedHTTPServer((host, port), Handler, max_connections, deadline)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.5}, name="pgsql-broker-http",
                     daemon=True).start()
    return server
