"""The HTTP endpoints are unauthenticated: by default they listen on 127.0.0.1 only; bound to another
address (metrics_host), /metrics and /healthz answer there but /api/state and the dashboard, which
show every tenant's job names and error messages, answer only loopback connections unless the
operator sets dashboard_public.

No test here listens beyond 127.0.0.1 (the project's rule for tests): the real runner is checked for
its default address and for passing dashboard_public through; the refusal of job details to a
non-loopback peer is checked on the runner's HTTP server itself, on 127.0.0.1, with the loopback test
narrowed to 127.0.0.1 so that a client connecting from 127.0.0.2 stands for a remote one."""
from __future__ import annotations

import json
import socket

import pytest

from conftest import add_job, connect
from pgsql_broker.observe import web
from pgsql_broker.observe.metrics import Metrics
from job_checks import finished, wait_until

SECRET_STATE = {"running": True, "databases": [{"database": "d", "role": "active", "listening": True,
                                                "failures": [{"job_name": "secret payroll export"}]}]}


def http_get(host: str, port: int, path: str, source: str | None = None) -> tuple[int, bytes]:
    with socket.create_connection((host, port), timeout=10, source_address=(source, 0) if source else None) as s:
        s.sendall(f"GET {path} HTTP/1.0\r\nHost: x\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


@pytest.fixture
def server(monkeypatch):
    """The runner's HTTP server on 127.0.0.1 for a fixed state; 127.0.0.2 counts as a remote peer."""
    monkeypatch.setattr(web, "is_loopback", lambda address: address == "127.0.0.1")
    started = []

    def start(**kwargs):
        srv = web.serve("127.0.0.1", 0, Metrics(), lambda: SECRET_STATE, **kwargs)
        started.append(srv)
        return srv.server_address[1]
    yield start
    for srv in started:
        srv.shutdown()
        srv.server_close()


def test_by_default_the_runner_listens_on_loopback_only(db, start):
    runner = start(db, metrics_host=None)  # the runner's own default
    runner.wait_for(lambda r: r.role(db) == "active", what="active")
    listening = [json.loads(line) for line in runner.log().splitlines() if '"metrics and dashboard listening"' in line]
    assert listening and listening[0]["address"] == f"127.0.0.1:{runner.port}"
    assert listening[0]["job_details"] == "loopback peers only"
    assert http_get("127.0.0.1", runner.port, "/healthz")[0] == 200


def test_job_details_are_refused_to_a_remote_peer(server):
    port = server()
    for path in ("/api/state", "/", "/index.html", "/api/state?x=1"):
        status, body = http_get("127.0.0.1", port, path, source="127.0.0.2")
        assert status == 403 and b"payroll" not in body, (path, status, body[:200])
        assert b"dashboard_public" in body
    status, body = http_get("127.0.0.1", port, "/metrics", source="127.0.0.2")
    assert status == 200 and b"payroll" not in body
    assert http_get("127.0.0.1", port, "/healthz", source="127.0.0.2")[0] == 200
    status, body = http_get("127.0.0.1", port, "/api/state")  # the operator, on the runner's host
    assert status == 200 and b"secret payroll export" in body


def test_dashboard_public_serves_job_details_to_every_peer(server):
    port = server(job_details_anywhere=True)
    status, body = http_get("127.0.0.1", port, "/api/state", source="127.0.0.2")
    assert status == 200 and b"secret payroll export" in body


def test_the_runner_passes_dashboard_public_through_and_logs_it(db, start):
    runner = start(db, extra=("--dashboard-public",))
    runner.wait_for(lambda r: r.role(db) == "active", what="active")
    job = None
    with connect(db) as conn:
        job = add_job(conn, "secret payroll export", "SELECT * FROM payroll_table_of_another_tenant")
    wait_until(lambda: finished(db, job), what="the failing job")
    runner.wait_for(lambda r: r.state()["databases"][0]["failures"], what="the failure in the state")
    status, body = http_get("127.0.0.1", runner.port, "/api/state")
    assert status == 200 and b"secret payroll export" in body
    listening = [json.loads(line) for line in runner.log().splitlines() if '"metrics and dashboard listening"' in line]
    assert listening and listening[0]["job_details"] == "every peer"
