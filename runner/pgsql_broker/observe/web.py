"""HTTP endpoints on metrics_host:metrics_port: /metrics (Prometheus), /healthz, /api/state and the dashboard at /.

Nothing here is authenticated, so:
- /api/state and the dashboard (job names, tenants, error messages) answer only connections made to and from a
  loopback address, unless the operator sets broker.dashboard_public; /metrics and /healthz (counts per
  queue and tenant, roles) answer on whatever address metrics_host binds (default 127.0.0.1);
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
from importlib import resources
from typing import Callable

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from .metrics import Metrics

log = logging.getLogger("pgsql_broker")
MAX_CONNECTIONS = 32
IDLE_TIMEOUT_SEC = 5.0
REQUEST_DEADLINE_SEC = 30.0
JOB_DETAILS = ("/api/state", "/", "/index.html")
_BUSY = b"HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
_LOCAL_ONLY = (b"job details (/api/state and the dashboard) are served to loopback connections only: connect to "
               b"127.0.0.1 on the runner's host, or set broker.dashboard_public (PGBROKER_DASHBOARD_PUBLIC, "
               b"--dashboard-public) to serve them on every address\n")


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


def serve(host: str, port: int, metrics: Metrics, state: Callable[[], dict], *, job_details_anywhere: bool = False,
          max_connections: int = MAX_CONNECTIONS, idle_timeout: float = IDLE_TIMEOUT_SEC,
          deadline: float = REQUEST_DEADLINE_SEC) -> BoundedHTTPServer:
    page = (resources.files(__package__) / "dashboard.html").read_bytes()

    class Handler(BaseHTTPRequestHandler):
        timeout = idle_timeout  # socket timeout of every read and write

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            path = self.path.split("?", 1)[0]
            if path in JOB_DETAILS and not job_details_anywhere and not (
                    is_loopback(self.connection.getsockname()[0]) and is_loopback(self.client_address[0])):
                self._send(403, "text/plain; charset=utf-8", _LOCAL_ONLY)
            elif path == "/metrics":
                self._send(200, CONTENT_TYPE_LATEST, generate_latest(metrics.registry))
            elif path == "/healthz":
                snapshot = state()
                healthy = snapshot["running"] and all(db["listening"] for db in snapshot["databases"])
                self._send(200 if healthy else 503, "application/json",
                           json.dumps({"healthy": bool(healthy), "databases": {
                               db["database"]: db["role"] for db in snapshot["databases"]}}).encode())
            elif path == "/api/state":
                self._send(200, "application/json", json.dumps(state(), default=str).encode())
            elif path in ("/", "/index.html"):
                self._send(200, "text/html; charset=utf-8", page)
            else:
                self._send(404, "text/plain", b"not found\n")

        def _send(self, code: int, ctype: str, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:  # keep scrapes out of the log
            pass

    server = BoundedHTTPServer((host, port), Handler, max_connections, deadline)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.5}, name="pgsql-broker-http",
                     daemon=True).start()
    return server
