"""Enqueuers choose queue numbers (1..1000) and, without strict tenancy, tenant ids: the runner's
broker_queue_depth series and the dashboard's queue table hold at most MAX_DEPTH_ROWS (queue, tenant)
rows, served queues first, the rest summed into one row labelled 'other'."""
from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from conftest import connect
MAX_DEPTH_ROWS = 100  # pgsql_broker.observe.metrics.MAX_DEPTH_ROWS, as documented


def _depth(runner, db: str) -> list:
    text = runner.get("/metrics")[1].decode()
    return [s for f in text_string_to_metric_families(text) if f.name == "broker_queue_depth"
            for s in f.samples if s.labels["database"] == db]


def test_jobs_in_every_queue_and_many_tenants_make_a_bounded_number_of_series(db, start):
    with connect(db) as conn:  # delayed jobs: nothing runs, every row counts as delayed
        conn.execute("INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_queue, run_after) "
                     "SELECT 'q' || i, 'q', 'SELECT 1', i, now() + interval '1 day' FROM generate_series(1, 1000) AS i")
        conn.execute("INSERT INTO broker.broker_jobs (tenant_id, job_name, job_group, execute_str, job_queue, run_after) "
                     "SELECT 'tenant ' || i, 't', 't', 'SELECT 1', 1, now() + interval '1 day' "
                     "FROM generate_series(1, 300) AS i")
        # without strict tenancy broker.tenant_id is an ordinary setting: a tenant id of any length
        conn.execute("INSERT INTO broker.broker_jobs (tenant_id, job_name, job_group, execute_str, job_queue, run_after) "
                     "VALUES (repeat('T', 100000), 'long', 'long', 'SELECT 1', 2, now() + interval '1 day')")
    runner = start(db, extra=("--queue-depth-poll-sec", "0.2"))
    runner.wait_for(lambda r: _depth(r, db), what="queue depth series")
    samples = _depth(runner, db)
    pairs = {(s.labels["queue"], s.labels["tenant"]) for s in samples}
    assert len(pairs) <= MAX_DEPTH_ROWS and ("other", "other") in pairs
    assert sum(s.value for s in samples if s.labels["state"] == "delayed") == 1301  # nothing is lost, only summed
    assert {q for q, _ in pairs} >= {"1", "2", "3", "4"}  # the queues this runner serves come first
    queues = runner.state()["databases"][0]["queues"]
    assert len(queues) <= MAX_DEPTH_ROWS and queues[-1]["job_queue"] == "other"
    assert len(runner.get("/metrics")[1]) < 200_000
    assert max(len(s.labels["tenant"]) for s in samples) <= 200 and max(len(q["tenant_id"]) for q in queues) <= 200
    assert any(s.labels["tenant"].startswith("TTTT") for s in samples)  # shortened, still there


def test_the_documented_bound_is_the_runners():
    from pgsql_broker.observe.metrics import MAX_DEPTH_ROWS as runner_bound
    assert runner_bound == MAX_DEPTH_ROWS
