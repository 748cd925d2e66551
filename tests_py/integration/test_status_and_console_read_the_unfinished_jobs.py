"""The status of an enqueue login and the console's pending and finished-within lists read the jobs they show
through the indexes that hold them (the unfinished jobs alone, the finished ones by finish time; the status's last
hour from the finished counts), not the history beside them: 30,000 jobs finished days ago cost them no sequential scan of broker_jobs, and the rows they fetch
do not grow with that history. Counted through pg_stat_xact_user_tables, not timed."""
from __future__ import annotations

import pytest

from conftest import connect
from pgsql_broker.observe import job_queries
from pgsql_broker.run import queries


@pytest.fixture
def history_db(db):
    with connect(db) as conn:
        conn.execute("""INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, complete_status, started_at,
                                                        finished_at)
                        SELECT 'old', 'old', 'SELECT 1', 2, now() - interval '3 days', now() - interval '3 days'
                          FROM generate_series(1, 30000)""")
        conn.execute("""INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, complete_status, started_at,
                                                        finished_at)
                        SELECT 'recent', 'recent', 'SELECT 1', 3, now(), now() FROM generate_series(1, 10)""")
        conn.execute("""INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_queue)
                        SELECT 'ready', 'ready', 'SELECT 1', 1 + i % 3 FROM generate_series(1, 300) AS i""")
        conn.execute("ANALYZE broker.broker_jobs")
    return db


def _reads(conn, statement: str, params: dict | None = None) -> tuple[list, int, int]:
    """The statement's rows, and the sequential scans of broker_jobs and the rows fetched through its indexes."""
    counters = "SELECT seq_scan, idx_tup_fetch FROM pg_stat_xact_user_tables WHERE relid = 'broker.broker_jobs'::regclass"
    with conn.transaction():
        before = conn.execute(counters).fetchone()
        rows = conn.execute(statement, params).fetchall()
        after = conn.execute(counters).fetchone()
    return rows, after[0] - before[0], after[1] - before[1]


def _list(state=None, finished_within=None) -> dict:
    return {"state": state, "queue": None, "tenant": None, "name": None, "name_like": None,
            "finished_within": finished_within, "before": None, "limit": 50, "cap": 10_001}


def test_an_enqueue_logins_status_reads_the_unfinished_and_the_last_hours_counts(history_db):
    with connect(history_db) as conn:
        rows, seq, fetched = _reads(conn, queries.OWN_QUEUE_STATS)
    assert [(r[0], r[2], r[7]) for r in rows] == [(1, 100, 10), (2, 100, 0), (3, 100, 0)]  # queue, ready, failed
    assert seq == 0 and fetched < 1_000, (seq, fetched)


def test_an_enqueue_logins_status_pays_nothing_for_another_tenants_finishes(history_db):
    """The last hour's finishes come from the finished counts: another tenant's 3,000 jobs finished in the last
    hour add no row of broker_jobs to what a tenant's status reads (it read them all, to count its own)."""
    with connect(history_db) as conn:
        conn.execute("""INSERT INTO broker.broker_jobs (tenant_id, job_name, job_group, execute_str, complete_status,
                                                        started_at, finished_at)
                        SELECT 'other', 'busy', 'busy', 'SELECT 1', 2, now(), now() FROM generate_series(1, 3000)""")
        conn.execute("""DO $$ BEGIN
                          IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'status_test_tenant_login') THEN
                            CREATE ROLE status_test_tenant_login; END IF; END $$""")
        conn.execute("GRANT broker_enqueue TO status_test_tenant_login")
    with connect(history_db) as conn:
        conn.execute("SET ROLE status_test_tenant_login")
        rows, seq, fetched = _reads(conn, queries.OWN_QUEUE_STATS)
    assert [(r[0], r[1], r[2], r[7]) for r in rows] == [(1, "default", 100, 10), (2, "default", 100, 0),
                                                         (3, "default", 100, 0)]  # queue, tenant, ready, failed
    assert seq == 0 and fetched < 1_000, (seq, fetched)


@pytest.mark.parametrize("filters, count", [(_list(state=0), 300), (_list(finished_within="1 hour"), 10)],
                         ids=["pending", "finished within an hour"])
def test_the_consoles_lists_read_what_they_show(history_db, filters, count):
    page_sql, count_sql = job_queries.jobs_statements(filters["finished_within"])
    with connect(history_db) as conn:
        page, seq_page, fetched_page = _reads(conn, page_sql, filters)
        counted, seq_count, fetched_count = _reads(conn, count_sql, filters)
    assert len(page) == min(count, 50) and counted[0][0] == count
    assert seq_page == 0 and seq_count == 0, (seq_page, seq_count)
    assert fetched_page < 1_000 and fetched_count < 1_000, (fetched_page, fetched_count)


def _finished_index_scans(plans: list[str]) -> list[str]:
    """The index conditions of every scan of broker_jobs_finished_idx in the plans' text."""
    conds = []
    for plan in plans:
        lines = plan.splitlines()
        for i, line in enumerate(lines):
            if "broker_jobs_finished_idx" in line:
                conds += [c.split("Index Cond:")[1] for c in lines[i + 1:i + 3] if "Index Cond:" in c]
    return conds


def test_the_jobs_finished_in_a_window_are_read_a_state_at_a_time(history_db):
    """The planner drops the finished index's own predicate (the three finished states) from a scan's conditions;
    with no state's equality left the scan would read the whole index for the window's finish times. Each
    statistic of finished jobs names its state (checked in the plans, as auto_explain logs the functions')."""
    with connect(history_db) as conn:
        plans = []
        conn.add_notice_handler(lambda d: plans.append(d.message_primary or ""))
        conn.execute("LOAD 'auto_explain'")
        for setting in ("log_min_duration = 0", "log_nested_statements = on", "log_level = notice"):
            conn.execute(f"SET auto_explain.{setting}")
        conn.execute("SELECT * FROM broker.broker_tenant_stats('1 minute')").fetchall()
        conn.execute(job_queries.jobs_statements("1 hour")[1], _list(finished_within="1 hour")).fetchall()
    conds = _finished_index_scans(plans)
    assert len(conds) >= 3, plans   # _queue_totals, _tenant_stats_rows, the console's count
    assert all("complete_status =" in c and "finished_at" in c for c in conds), conds
