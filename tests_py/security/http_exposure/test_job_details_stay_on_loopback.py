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
from pgsql_broker.observe.console import ConsoleDatabase
from pgsql_broker.observe.console_api import ConsoleAPI
from pgsql_broker.observe.metrics import Metrics
from job_checks import finished, wait_until

SECRET_STATE = {"running": True, "databases": [{"database": "d", "role": "active", "listening": True,
                                                "failures": [{"job_name": "secret payroll export"}]}]}


def http_get(host: str, port: int, path: str, source: str | None = None, host_header: str | None = None,
             method: str = "GET") -> tuple[int, bytes]:
    with socket.create_connection((host, port), timeout=10, source_address=(source, 0) if source else None) as s:
        s.sendall(f"{method} {path} HTTP/1.0\r\nHost: {host_header or f'{host}:{port}'}\r\n"
                  f"Content-Length: 0\r\n\r\n".encode())
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
        console = ConsoleAPI([ConsoleDatabase("d", "dbname=d", None, "test")], "a-console-token-of-the-test")
        srv = web.serve("127.0.0.1", 0, Metrics(), lambda: SECRET_STATE, console=console, **kwargs)
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
    for path in ("/api/state", "/", "/index.html", "/api/state?x=1", "/console.js", "/api/session", "/api/jobs",
                 "/api/jobs/1", "/api/queues"):
        status, body = http_get("127.0.0.1", port, path, source="127.0.0.2")
        assert status == 403 and b"payroll" not in body, (path, status, body[:200])
        assert b"dashboard_public" in body
    assert http_get("127.0.0.1", port, "/api/jobs/1/retry", source="127.0.0.2", method="POST")[0] == 403
    status, body = http_get("127.0.0.1", port, "/metrics", source="127.0.0.2")
    assert status == 200 and b"payroll" not in body
    assert http_get("127.0.0.1", port, "/healthz", source="127.0.0.2")[0] == 200
    status, body = http_get("127.0.0.1", port, "/api/state")  # the operator, on the runner's host
    assert status == 200 and b"secret payroll export" in body


def test_job_details_are_refused_to_a_page_of_another_name_on_loopback(server):
    """DNS rebinding: a page of another site whose name now resolves to 127.0.0.1 connects over loopback, but
    its requests carry that name in Host: no job details, no console."""
    port = server()
    for path in ("/api/state", "/", "/api/jobs", "/api/session"):
        status, body = http_get("127.0.0.1", port, path, host_header=f"rebound.example:{port}")
        assert status == 403 and b"payroll" not in body, (path, status, body[:200])
    for name in ("127.0.0.1", f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST"):
        assert http_get("127.0.0.1", port, "/api/state", host_header=name)[0] == 200, name
    assert http_get("127.0.0.1", port, "/metrics", host_header="rebound.example")[0] == 200


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


def test_the_host_header_check_reads_names_addresses_and_ports():
    assert all(web._loopback_host(h) for h in ("localhost", "localhost:9469", "127.0.0.1", "127.0.0.9:80", "[::1]:9469",
                                                "::1", "[::ffff:127.0.0.1]:1"))
    assert not any(web._loopback_host(h) for h in (None, "", "rebound.example", "10.0.0.1:9469", "[2001:db8::1]:80",
                                                   "localhost.evil.example", "127.0.0.1.nip.io"))


def test_an_absolute_form_target_is_checked_as_its_path(server):
    """`POST http://host/api/jobs/N/cancel HTTP/1.1` names the same route as `POST /api/jobs/N/cancel`: it gets the
    same loopback check (here from a remote peer: refused). A target that is neither a path nor an http(s) URL is
    refused outright, and a path starting with // reaches no route."""
    port = server()
    for method, target in (("GET", "http://127.0.0.1/api/state"), ("GET", f"http://127.0.0.1:{port}/"),
                           ("POST", "http://127.0.0.1/api/jobs/1/cancel"), ("POST", "HTTP://127.0.0.1/api/jobs/1/retry")):
        status, body = http_get("127.0.0.1", port, target, source="127.0.0.2", method=method)
        assert status == 403 and b"dashboard_public" in body and b"payroll" not in body, (target, status, body[:200])
    for method, target in (("GET", "*"), ("GET", "api/state"), ("GET", "ftp://127.0.0.1/api/state"),
                           ("POST", "http://127.0.0.1//x/api/jobs/1/cancel")):
        status, body = http_get("127.0.0.1", port, target, source="127.0.0.2", method=method)
        assert status == 400 and b"payroll" not in body, (target, status, body[:200])
    # (http.server itself turns a leading // into one /: no route then)
    for method, target in (("GET", "//127.0.0.1/api/state"), ("POST", "//x/api/jobs/1/cancel")):
        status, body = http_get("127.0.0.1", port, target, source="127.0.0.2", method=method)
        assert status in (400, 404) and b"payroll" not in body, (target, status, body[:200])
    # the operator's own absolute-form request still works, and a remote one naming a loopback host in the URL but
    # sent from afar does not
    status, body = http_get("127.0.0.1", port, f"http://127.0.0.1:{port}/api/state")
    assert status == 200 and b"secret payroll export" in body
    assert http_get("127.0.0.1", port, "http://evil.example/api/state")[0] == 403
