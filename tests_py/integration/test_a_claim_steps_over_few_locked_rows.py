"""Rows another transaction holds locked cost a claim a few windows, not one step each: tenant b locks 5,000 of its
own pending jobs, each at a priority of its own above tenant a's, in a transaction it keeps open; a's claims
(autocommit, as the runner's) touch at most twice the buffers they did before, and take a's jobs. (Counted by
EXPLAIN's buffers, not timed.)"""
from __future__ import annotations

from conftest import connect

CLAIM = "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) SELECT * FROM broker.broker_get(1, NULL, 60, 10)"


def claim_buffers(conn) -> int:
    plan = conn.execute(CLAIM).fetchone()[0][0]["Plan"]
    return plan["Shared Hit Blocks"] + plan["Shared Read Blocks"]


def test_rows_locked_by_another_tenant_cost_a_claim_a_few_windows(db):
    with connect(db) as conn, connect(db) as holder:
        conn.execute("INSERT INTO broker.broker_jobs (tenant_id, job_name, job_group, execute_str) "
                     "SELECT 'a', 'a ' || i, 'a', 'SELECT 1' FROM generate_series(1, 2000) AS i")
        conn.execute("INSERT INTO broker.broker_jobs (tenant_id, job_name, job_group, execute_str) VALUES ('b', 'b', 'b', 'SELECT 1')")
        conn.execute("ANALYZE broker.broker_jobs")
        for _ in range(5):
            claim_buffers(conn)  # plans made, caches warm
        quiet = min(claim_buffers(conn) for _ in range(5))
        conn.execute("INSERT INTO broker.broker_jobs (tenant_id, job_name, job_group, execute_str, job_priority) "
                     "SELECT 'b', 'b ' || i, 'b', 'SELECT 1', 1000 + i FROM generate_series(1, 5000) AS i")
        holder.execute("BEGIN")
        locked = holder.execute("SELECT count(*) FROM (SELECT 1 FROM broker.broker_jobs WHERE tenant_id = 'b' "
                                "AND job_priority >= 1000 FOR UPDATE) AS x").fetchone()[0]
        assert locked == 5000
        busy = [claim_buffers(conn) for _ in range(5)]
        holder.execute("ROLLBACK")
        assert max(busy) <= 2 * quiet, f"a claim with 5,000 rows locked elsewhere touched {max(busy)} buffers, {quiet} before"
        claimed = conn.execute("SELECT tenant_id, count(*) FROM broker.broker_jobs WHERE complete_status = 1 "
                               "GROUP BY 1 ORDER BY 1").fetchall()
        assert claimed == [("a", 149), ("b", 1)], f"15 claims of 10 took b's one unlocked job and the rest of a's: {claimed}"
