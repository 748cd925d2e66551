"""HTTP endpoints on metrics_host:metrics_port: /metrics (Prometheus), /healthz, /api/state and the dashboard at /."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Callable

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from .metrics import Metrics


def serve(host: str, port: int, metrics: Metrics, state: Callable[[], dict]) -> ThreadingHTTPServer:
    page = (resources.files(__package__) / "dashboard.html").read_bytes()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
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
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:  # keep scrapes out of the log
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="pgsql-broker-http", daemon=True).start()
    return server
