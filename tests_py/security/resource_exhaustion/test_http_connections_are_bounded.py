"""Idle or slow HTTP clients cannot take the runner's file descriptors (and so its database
connections) or threads: at most MAX_CONNECTIONS are served at once, more are answered 503 and
closed, idle ones are closed after IDLE_TIMEOUT_SEC and slow ones cut at REQUEST_DEADLINE_SEC."""
from __future__ import annotations

import socket
import time

from conftest import add_job, connect
from pgsql_broker.observe import web
from pgsql_broker.observe.metrics import Metrics
from job_checks import finished, wait_until


def _closed_by_server(sock: socket.socket) -> bool:
    """True once the server closed the connection (what it sent before, say a 503, is read and dropped)."""
    sock.setblocking(False)
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return True
    except BlockingIOError:
        return False
    except OSError:  # reset
        return True


def test_250_idle_connections_do_not_take_the_runners_database_session(db, start):
    # 128 descriptors: 250 idle connections held open would leave none for the database connections;
    # idle workers close their connection at once, so each job needs a new one
    runner = start(db, max_files=128, extra=("--worker-idle-timeout-sec", "0.1", "--queue-timer-sec", "0.5"))
    runner.wait_for(lambda r: r.role(db) == "active", what="active")
    instance = runner.state()["databases"][0]["instance_id"]
    idle = [socket.create_connection(("127.0.0.1", runner.port), timeout=10) for _ in range(250)]
    try:
        with connect(db) as conn:
            jobs = [add_job(conn, f"during the flood {i}", "SELECT 1") for i in range(3)]
        wait_until(lambda: all(finished(db, j) for j in jobs), timeout=60, what="jobs run during the flood")
        # the server closes every one of them: at once beyond the cap, after the idle timeout within it
        wait_until(lambda: all(_closed_by_server(s) for s in idle), timeout=60, what="the idle connections closed")
    finally:
        for s in idle:
            s.close()
    assert runner.get("/healthz")[0] == 200  # the slots are free again
    state = runner.state()["databases"][0]
    assert (state["role"], state["instance_id"]) == ("active", instance)
    assert "database unavailable" not in runner.log() and "unexpected error" not in runner.log()


def test_connections_beyond_the_cap_get_503_and_slow_ones_are_cut():
    server = web.serve("127.0.0.1", 0, Metrics(), lambda: {"running": True, "databases": []},
                       max_connections=2, idle_timeout=30, deadline=1.0)
    port = server.server_address[1]
    try:
        first, second = (socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(2))
        wait_until(lambda: server.open_connections == 2, what="two connections served")
        with socket.create_connection(("127.0.0.1", port), timeout=10) as third:
            assert third.recv(100).startswith(b"HTTP/1.0 503")
        # a client dribbling its request one byte at a time is cut at the deadline, however it keeps sending
        request = b"GET /metrics HTTP/1.0\r\n" + b"X-Slow: " + b"a" * 10_000
        cut = False
        for byte in request:
            try:
                first.sendall(bytes([byte]))
            except OSError:
                cut = True
                break
            if _closed_by_server(first):
                cut = True
                break
            time.sleep(0.05)
        assert cut, "the slow client was never cut"
        wait_until(lambda: server.open_connections <= 1, what="the slot freed")
        second.close()
        wait_until(lambda: server.open_connections == 0, what="all slots free")
    finally:
        server.shutdown()
        server.server_close()
