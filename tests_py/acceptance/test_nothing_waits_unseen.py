"""Nothing waits unseen (issue 19): jobs ready in a queue number no worker of the runner serves are reported
(a warning logged once, /api/state, /healthz, the metric, `pgsql-broker status`), and /healthz stays 200 with
one database unusable while the runner serves the others (its status says which)."""
from __future__ import annotations

import json
import subprocess
import sys

from conftest import add_job, connect, dsn


def test_ready_jobs_in_an_unserved_queue_are_reported_and_one_bad_database_keeps_the_runner_healthy(db, empty_db,
                                                                                                    start):
    with connect(db) as conn:
        add_job(conn, "beyond", "SELECT 1", job_queue=7)
        served = add_job(conn, "served", "SELECT 1", job_queue=1)
    runner = start(db, empty_db, extra=("--queue-count", "2", "--queue-timer-sec", "0.2"))
    runner.wait_for(lambda r: next(d for d in r.state()["databases"] if d["database"] == db)["unserved_queues"] == [7],
                    what="the unserved queue reported")
    # (the database without pgsql_broker is "starting" until its first attempt fails)
    runner.wait_for(lambda r: json.loads(r.get("/healthz")[1])["status"] == {db: "unserved_queues",
                                                                             empty_db: "unavailable"},
                    what="each database's status in /healthz")
    code, body = runner.get("/healthz")
    assert code == 200 and json.loads(body)["healthy"] is True
    assert f'broker_unserved_queue{{database="{db}",queue="7"}} 1.0' in runner.get("/metrics")[1].decode()
    with connect(db) as conn:
        runner.wait_for(lambda r: conn.execute("SELECT complete_status FROM broker.broker_jobs WHERE job_id = %s",
                                               (served,)).fetchone()[0] == 2, what="the served queue's job")
    warnings = [json.loads(line) for line in runner.log().splitlines()
                if line.startswith("{") and "queue number this runner does not serve" in line]
    assert len(warnings) == 1 and warnings[0]["queue"] == 7  # once, though every poll sees it
    out = subprocess.run([sys.executable, "-m", "pgsql_broker", "status", "--dsn", dsn(db)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "warning: jobs ready in queue(s) 7, which no active instance serves (queue_count 2)" in out.stdout
