"""The tutorial's mixed pipeline (docs/tutorial.md, "A step in Python"), with a real runner, a real task worker and a
local HTTP server: a SQL extract, then a Python task that calls the HTTP API and writes what it got in ctx.conn, then
a SQL load that waits on the task. When the task fails for good, the load is cancelled, as after a SQL job."""
from __future__ import annotations

import http.server
import json
import threading

import pytest

from conftest import connect
from job_checks import wait_until
from worker_process import WorkerProcess, worker_login

APP = """
import json, urllib.request

@worker.task("fetch_rate")
async def fetch_rate(args, ctx):
    def get():
        with urllib.request.urlopen(args["url"], timeout=10) as response:
            return json.load(response)
    rates = await asyncio.to_thread(get)
    await ctx.conn.execute("INSERT INTO rates (currency, rate) VALUES (%s, %s)", [args["currency"], rates[args["currency"]]])
    return {"rate": rates[args["currency"]]}
"""


@pytest.fixture
def rates_api():
    """An HTTP API on 127.0.0.1: GET /rates answers {"EUR": 0.5}; anything else 404."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"EUR": 0.5}).encode() if self.path == "/rates" else b"{}"
            self.send_response(200 if self.path == "/rates" else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def enqueue_pipeline(conn, url: str, tag: str) -> dict[str, int]:
    ids = {}
    ids["extract"] = conn.execute(
        "SELECT job_id FROM broker.broker_add_job(%s, 'INSERT INTO staging SELECT * FROM orders_src')",
        (f"extract {tag}",)).fetchone()[0]
    ids["fetch"] = conn.execute(
        "SELECT job_id FROM broker.broker_add_task('fetch_rate', jsonb_build_object('url', %s::text, 'currency', 'EUR'), "
        "p_depends_on_job_ids => ARRAY[%s]::bigint[])", (url, ids["extract"])).fetchone()[0]
    ids["load"] = conn.execute(
        "SELECT job_id FROM broker.broker_add_job(%s, $$INSERT INTO report SELECT 'in EUR', "
        "sum(amount) * (SELECT rate FROM rates) FROM staging$$, p_depends_on_job_ids => ARRAY[%s]::bigint[])",
        (f"load {tag}", ids["fetch"])).fetchone()[0]
    return ids


def status(conn, job_id: int) -> int:
    return conn.execute("SELECT complete_status FROM broker.broker_jobs WHERE job_id = %s", (job_id,)).fetchone()[0]


def test_sql_then_python_then_sql_runs_in_order_and_a_failed_task_cancels_the_load(db, start, tmp_path, rates_api):
    with connect(db) as conn:
        conn.execute("""CREATE TABLE orders_src (id int PRIMARY KEY, amount numeric NOT NULL);
                        INSERT INTO orders_src SELECT g, g * 10 FROM generate_series(1, 100) AS g;
                        CREATE TABLE staging (LIKE orders_src);
                        CREATE TABLE rates (currency text PRIMARY KEY, rate numeric NOT NULL);
                        CREATE TABLE report (made_by text, total numeric)""")
        good = enqueue_pipeline(conn, rates_api + "/rates", "good")
        with worker_login(db, ("rates",)) as login:
            worker = WorkerProcess(tmp_path, db, login, APP)
            runner = start(db)
            try:
                wait_until(lambda: status(conn, good["load"]) == 2, timeout=60, what="the load completed")
                assert conn.execute("SELECT made_by, total FROM report").fetchall() == [("in EUR", 25250)]
                finished = conn.execute("SELECT job_id FROM broker.broker_jobs WHERE job_id = ANY(%s) ORDER BY finished_at",
                                        (list(good.values()),)).fetchall()
                assert [j for (j,) in finished] == [good["extract"], good["fetch"], good["load"]]
                assert conn.execute("SELECT output FROM broker.broker_job_attempts WHERE job_id = %s",
                                    (good["fetch"],)).fetchone() == ('{"rate": 0.5}',)
                # the API answers 404 this time: the task fails for good (one attempt), the load is cancelled
                bad = enqueue_pipeline(conn, rates_api + "/gone", "bad")
                wait_until(lambda: status(conn, bad["load"]) == 4, timeout=60, what="the load cancelled")
                assert status(conn, bad["fetch"]) == 3
                assert conn.execute("SELECT last_error_sqlstate, last_error_message LIKE 'HTTPError: HTTP Error 404%%' "
                                    "FROM broker.broker_jobs WHERE job_id = %s", (bad["fetch"],)).fetchone() == ("38000", True)
                assert conn.execute("SELECT cancel_reason FROM broker.broker_jobs WHERE job_id = %s",
                                    (bad["load"],)).fetchone()[0] == f"dependency job {bad['fetch']} (fetch_rate) failed"
            finally:
                worker.kill()
                runner.kill()
