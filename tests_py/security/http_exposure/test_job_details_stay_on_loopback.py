"""The HTTP endpoints are unauthenticated: by default they listen on 127.0.0.1 only; bound to another
address (metrics_host), /metrics and /healthz answer there but /api/state and the dashboard, which
show every tenant's job names and error messages, answer only loopback connections unless the
operator sets dashboard_public."""
from __future__ import annotations

import json
import socket

import pytest

from conftest import add_job, connect
from test_runner import finished, wait_until


def external_address() -> str:
    """A non-loopback IPv4 address of this machine (the tests need one)."""
    candidates = []
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))  # no packet is sent: this only picks the outgoing interface
            candidates.append(s.getsockname()[0])
    except OSError:
        pass
    try:
        candidates += [a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)]
    except OSError:
        pass
    for address in candidates:
        if not address.startswith("127."):
            return address
    pytest.fail("this test needs a non-loopback IPv4 address on the machine")


def http_get(host: str, port: int, path: str) -> tuple[int, bytes]:
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(f"GET {path} HTTP/1.0\r\nHost: x\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def _failed_job(db: str) -> int:
    with connect(db) as conn:
        return add_job(conn, "secret payroll export", "SELECT * FROM payroll_table_of_another_tenant")


def test_by_default_nothing_listens_beyond_loopback(db, start):
    runner = start(db, metrics_host=None)  # the runner's own default
    runner.wait_for(lambda r: r.role(db) == "active", what="active")
    listening = [json.loads(line) for line in runner.log().splitlines() if '"metrics and dashboard listening"' in line]
    assert listening and listening[0]["address"] == f"127.0.0.1:{runner.port}"
    with pytest.raises(ConnectionRefusedError):
        http_get(external_address(), runner.port, "/healthz")
    assert http_get("127.0.0.1", runner.port, "/healthz")[0] == 200


def test_job_details_are_refused_on_a_non_loopback_address(db, start):
    runner = start(db, metrics_host="0.0.0.0", extra=("--queue-depth-poll-sec", "0.2"))
    runner.wait_for(lambda r: r.role(db) == "active", what="active")
    job = _failed_job(db)
    wait_until(lambda: finished(db, job), what="the failing job")
    runner.wait_for(lambda r: r.state()["databases"][0]["failures"], what="the failure in the state")
    outside = external_address()
    for path in ("/api/state", "/", "/index.html", "/api/state?x=1"):
        status, body = http_get(outside, runner.port, path)
        assert status == 403 and b"payroll" not in body, (path, status, body[:200])
        assert b"dashboard_public" in body
    status, body = http_get(outside, runner.port, "/metrics")
    assert status == 200 and b"broker_jobs_failed_total" in body and b"payroll" not in body
    assert http_get(outside, runner.port, "/healthz")[0] == 200
    status, body = http_get("127.0.0.1", runner.port, "/api/state")  # the operator, on the runner's host
    assert status == 200 and b"secret payroll export" in body


def test_dashboard_public_serves_job_details_on_every_address_and_says_so(db, start):
    runner = start(db, metrics_host="0.0.0.0", extra=("--dashboard-public",))
    runner.wait_for(lambda r: r.role(db) == "active", what="active")
    job = _failed_job(db)
    wait_until(lambda: finished(db, job), what="the failing job")
    runner.wait_for(lambda r: r.state()["databases"][0]["failures"], what="the failure in the state")
    status, body = http_get(external_address(), runner.port, "/api/state")
    assert status == 200 and b"secret payroll export" in body
    assert "dashboard_public: job names, tenants and error messages" in runner.log()
