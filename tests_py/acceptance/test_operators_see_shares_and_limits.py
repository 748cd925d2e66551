"""Flow control seen by an operator (issue 33), with the real runner and the real command line: two tenants share
queue 1, a key at its cap of 1 runs one job and parks the other. `pgsql-broker status` prints each tenant's part
of the queue and the key's limit, `pgsql-broker jobs show` says why the parked job waits, and /metrics exports
the tenants' and the key's gauges. The jobs sleep long enough to hold the state while it is read; the test kills
the runner at its end."""
from __future__ import annotations

import re
import subprocess
import sys

from conftest import add_job, connect
from job_checks import wait_until
from runner_process import db_dsn

HOLD = "SELECT pg_sleep(120)"


def cli(db: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pgsql_broker", *args, "--dsn", db_dsn(db)],
                          capture_output=True, text=True, timeout=60)


def states(db: str) -> dict[int, tuple[int, int]]:
    with connect(db) as conn:
        return {r[0]: (r[1], r[2]) for r in conn.execute("SELECT job_id, complete_status, parked FROM broker.broker_jobs")}


def test_status_jobs_show_and_metrics_show_shares_limits_and_why_a_job_waits(db, start):
    with connect(db) as conn:
        conn.execute("SELECT broker.broker_set_limit('stripe', 1, NULL)")
        conn.execute("SELECT broker.broker_set_tenant_weight('acme', 2)")
        first = add_job(conn, "charge 1", HOLD, concurrency_key="stripe")
        second = add_job(conn, "charge 2", HOLD, concurrency_key="stripe")
        conn.execute("SELECT broker.broker_add_job('acme report', %s, p_tenant_id => 'acme')", (HOLD,))
    runner = start(db, extra=("--workers-per-queue", "4", "--queue-depth-poll-sec", "0.2"))
    # one stripe job runs, the other is parked at the cap (2), acme's job runs
    wait_until(lambda: sorted(states(db).values()) == [(0, 2), (1, 0), (1, 0)], what="one charge running, one parked")
    running, waiting = (first, second) if states(db)[first][0] == 1 else (second, first)

    status = cli(db, "status")
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    assert "  limit 'stripe' tenant 'default': running 1 of 1, rate -, waiting 1" in lines, status.stdout
    acme = next(line for line in lines if line.startswith("  tenant 'acme' queue 1:"))
    assert "weight 2, ready 0, running 1, served 1" in acme and "(50% of the queue)" in acme, acme
    default = next(line for line in lines if line.startswith("  tenant 'default' queue 1:"))
    assert "weight 1, ready 0, running 1, served 1" in default, default

    show = cli(db, "jobs", "show", str(waiting))
    assert show.returncode == 0, show.stderr
    assert "  waiting:     limit stripe (1 of 1 running)" in show.stdout.splitlines(), show.stdout
    shown = cli(db, "jobs", "show", str(running))
    assert "waiting:" not in shown.stdout, shown.stdout  # running: it waits for nothing

    def metric(name: str, labels: str) -> float | None:
        text = runner.get("/metrics")[1].decode()
        found = re.search(rf'^{name}\{{database="[^"]*",{labels}\}} (\S+)$', text, re.M)
        return float(found.group(1)) if found else None
    runner.wait_for(lambda r: metric("broker_key_waiting", 'key="stripe",tenant="default"') == 1, what="the key's gauges")
    assert metric("broker_key_running", 'key="stripe",tenant="default"') == 1
    assert metric("broker_key_max_running", 'key="stripe",tenant="default"') == 1
    assert metric("broker_key_per_second", 'key="stripe",tenant="default"') is None  # no rate: no series
    assert metric("broker_tenant_running", 'queue="1",tenant="acme"') == 1
    assert metric("broker_tenant_ready", 'queue="1",tenant="default"') == 0
    assert metric("broker_tenant_share_served", 'queue="1",tenant="acme"') == 0.5
