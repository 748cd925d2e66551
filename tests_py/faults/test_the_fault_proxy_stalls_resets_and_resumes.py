"""The fault proxy itself (tests_py/faults/proxy.py), against a real PostgreSQL: a stall holds a query until
its client's deadline, and resume() delivers it; a client that gives up during a stall ends its server
session; reset() breaks connections; close() stops listening."""
from __future__ import annotations

import threading

import psycopg
import pytest

from drain import tcp_cluster  # noqa: F401 (the fixture)
from job_checks import wait_until
from proxy import Proxy


def backend_alive(cluster, pid: int) -> bool:
    with cluster.connect() as admin:  # over the socket, past the proxy
        return admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()[0] == 1


def in_thread(fn) -> tuple[threading.Thread, dict]:
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["result"] = fn()
        except Exception as exc:  # the test looks at it
            outcome["error"] = exc
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def test_the_fault_proxy_stalls_resets_and_resumes(tcp_cluster):  # noqa: F811 (the fixture)
    proxy = Proxy(tcp_cluster.port)
    try:
        dsn = tcp_cluster.tcp_dsn("postgres", port=proxy.port)
        conn = psycopg.connect(dsn, autocommit=True)
        assert conn.execute("SELECT 1").fetchone() == (1,)

        proxy.stall()
        query, answer = in_thread(lambda: conn.execute("SELECT 2").fetchone())
        query.join(2)  # the client's deadline: no answer while stalled
        assert query.is_alive() and not answer
        login, logged_in = in_thread(lambda: psycopg.connect(dsn, autocommit=True, connect_timeout=30))
        login.join(1)
        assert login.is_alive()  # a new connection waits too
        proxy.resume()
        query.join(10)
        login.join(10)
        assert answer == {"result": (2,)}  # the held query reached the server after all
        logged_in["result"].close()

        abandoned = psycopg.connect(dsn, autocommit=True)
        pid = abandoned.info.backend_pid
        proxy.stall()
        abandoned.close()  # the client gives up during the stall: its server session ends anyway
        wait_until(lambda: not backend_alive(tcp_cluster, pid), 30, "the abandoned session to end")
        proxy.resume()

        pid = conn.info.backend_pid
        assert proxy.reset() >= 1
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 3")
        wait_until(lambda: not backend_alive(tcp_cluster, pid), 30, "the reset session to end")
        with psycopg.connect(dsn, autocommit=True) as again:  # the proxy still serves new connections
            assert again.execute("SELECT 4").fetchone() == (4,)
    finally:
        proxy.close()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(dsn, connect_timeout=5)
