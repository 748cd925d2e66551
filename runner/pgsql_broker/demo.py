"""`make demo`: an ETL-shaped DAG run by the broker, start to finish.

Three extract jobs (one fails once and is retried) fan into a transform, which
feeds a load. The broker runs in this process through the library API, logged in as a role
that is only a member of broker_runtime (the jobs run as their enqueuer).
Uses the PG* variables (make demo points them at a throwaway cluster).
"""
from __future__ import annotations

import asyncio
import threading
import time

import psycopg

from .broker import Broker, enqueue
from .install import install
from .install.scripts import roles_sql
from .observe import logs
from .settings import load
from .states import JobState

DAG = [  # (name, group, depends on groups, queue, SQL): the extracts run in parallel on three queues
    ("extract orders", "extract", None, 1, "SELECT pg_sleep(0.3); INSERT INTO staging SELECT 'orders', 120"),
    ("extract customers", "extract", None, 2,
     # fails on its first attempt (a sequence is not rolled back), succeeds on the retry
     "DO $$ BEGIN IF nextval('flaky_source') = 1 THEN RAISE EXCEPTION 'customer source not ready yet'; END IF; END $$;"
     " INSERT INTO staging SELECT 'customers', 45"),
    ("extract payments", "extract", None, 3, "SELECT pg_sleep(0.2); INSERT INTO staging SELECT 'payments', 300"),
    ("transform", "transform", ["extract"], 1, "INSERT INTO report SELECT source, rows * 2 FROM staging"),
    ("load", "load", ["transform"], 1, "UPDATE report SET loaded = true"),
]


RUNNER_LOGIN = "pgsql_broker_demo_runner"  # the runner's login: broker_runtime only, never a superuser


def main() -> None:
    database = "pgsql_broker_demo"
    with psycopg.connect(dbname="postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{database}"')
        admin.execute(f'CREATE DATABASE "{database}"')
    # tracked migrations, the path of a server where one cannot install extension files: so the demo needs no
    # `make install` into the server's directories, and runs as any user
    install(f"dbname={database}", no_extension=True, log=lambda msg: print(f"install: {msg}"))
    with psycopg.connect(dbname=database, autocommit=True) as admin:
        admin.execute(roles_sql())
        admin.execute(f'DROP ROLE IF EXISTS "{RUNNER_LOGIN}"')
        admin.execute(f'CREATE ROLE "{RUNNER_LOGIN}" LOGIN IN ROLE broker_runtime')
    with psycopg.connect(dbname=database, autocommit=True) as conn:
        conn.execute("CREATE TABLE staging (source text, rows int); CREATE TABLE report (source text, rows int, "
                     "loaded boolean DEFAULT false); CREATE SEQUENCE flaky_source")
        conn.execute("SELECT broker.broker_set('retry_base_seconds', '1')")
        for name, group, depends, queue, sql in DAG:
            enqueue(conn, name, sql, job_group=group, depends_on_groups=depends, job_queue=queue, max_attempts=3)
    print(f"enqueued {len(DAG)} jobs; running the broker")

    logs.configure("warning", "text")
    settings = load(env={}, dsns=[f"dbname={database} user={RUNNER_LOGIN}"],
                    flags={"metrics_enabled": False, "queue_timer_sec": 0.5, "stale_job_recovery_sec": 1})
    broker = Broker(settings)
    thread = threading.Thread(target=lambda: asyncio.run(broker.run()), daemon=True)
    started = time.monotonic()
    thread.start()
    with psycopg.connect(dbname=database, autocommit=True) as conn:
        while conn.execute("SELECT count(*) FROM broker.broker_jobs WHERE complete_status <> ALL (%s)",
                           [[int(s) for s in JobState.finished()]]).fetchone()[0]:
            if time.monotonic() - started > 60:
                raise SystemExit("the DAG did not finish within 60 s")
            time.sleep(0.1)
        broker.stop()
        thread.join(30)
        rows = conn.execute("""SELECT job_name, complete_status, attempts, last_error_message,
                                      extract(epoch FROM started_at - min(created_at) OVER ()),
                                      extract(epoch FROM finished_at - min(created_at) OVER ())
                                 FROM broker.broker_jobs ORDER BY finished_at""").fetchall()
        report = conn.execute("SELECT source, rows, loaded FROM report ORDER BY source").fetchall()
    print(f"\n{'job':20s} {'status':9s} {'attempts':>8s} {'last start':>11s} {'finished':>9s}  note")
    for name, status, attempts, error, start, end in rows:
        state = JobState(status).name.lower()
        note = f"earlier attempt failed: {error}" if error and status == JobState.COMPLETED else (error or "")
        print(f"{name:20s} {state:9s} {attempts:8d} {start:10.2f}s {end:8.2f}s  {note}")
    print("\nreport:", ", ".join(f"{s}={r} loaded={l}" for s, r, l in report))
    with psycopg.connect(dbname="postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{database}" WITH (FORCE)')
        admin.execute(f'DROP ROLE IF EXISTS "{RUNNER_LOGIN}"')


if __name__ == "__main__":
    main()
