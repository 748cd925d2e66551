"""The runner as a library inside another application: its HTTP server listens on loopback only unless told
otherwise, and its log lines keep their fields (job id, error, database) in whatever handlers and formats the
host application configured, without pgsql_broker.observe.logs.configure()."""
from __future__ import annotations

import asyncio
import io
import logging
import threading
import time

from conftest import connect
from runner_process import db_dsn


def _wait(predicate, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_a_library_broker_listens_on_loopback_and_logs_its_fields_through_the_hosts_handlers(db):
    from pgsql_broker import Broker, enqueue, load_settings

    host_output = io.StringIO()  # the host application's own logging set-up: plain messages, its format
    handler = logging.StreamHandler(host_output)
    handler.setFormatter(logging.Formatter("HOST %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    broker_logger = logging.getLogger("pgsql_broker")
    saved = (broker_logger.handlers[:], broker_logger.propagate, broker_logger.level)
    broker_logger.handlers[:], broker_logger.propagate = [], True
    broker_logger.setLevel(logging.INFO)
    try:
        settings = load_settings(env={}, dsns=[db_dsn(db)], flags={"metrics_port": 0, "queue_timer_sec": 0.2,
                                                                    "allow_privileged_login": True})
        broker = Broker(settings)
        thread = threading.Thread(target=lambda: asyncio.run(broker.run()), daemon=True)
        thread.start()
        _wait(lambda: broker.http_port is not None, "the HTTP server")
        assert broker._http.server_address[0] == "127.0.0.1"  # not 0.0.0.0
        with connect(db) as conn:
            job = enqueue(conn, "fails", "SELECT 1/0")
        _wait(lambda: f"job_id={job}" in host_output.getvalue(), "the failed job's line")
        broker.stop()
        thread.join(30)
        assert not thread.is_alive()
    finally:
        root.removeHandler(handler)
        broker_logger.handlers[:], broker_logger.propagate = saved[0], saved[1]
        broker_logger.setLevel(saved[2])
    line = next(line for line in host_output.getvalue().splitlines() if f"job_id={job}" in line)
    assert line.startswith("HOST WARNING pgsql_broker: job failed")
    assert f"database={db}" in line and '"division by zero"' in line and "sqlstate=22012" in line
