-- sql/instances/queue_stats.sql: queue statistics for monitoring.
-- ---------------------------------------------------------------------------
-- Function: broker.broker_queue_stats()
--   Queue depth for monitoring, across every tenant (the runner's metrics and
--   status run as broker_runtime, which sees one tenant through row-level
--   security). One row per queue and tenant with unfinished or recently
--   finished jobs: ready, blocked (waiting on dependencies), delayed (future
--   run_after), running, and completed/failed/cancelled in the last hour.
--   The last hour is counted in whole minutes of finished_at (date_bin, UTC-
--   aligned): the current minute and the 60 before it, so between 60 and 61
--   minutes. The unfinished jobs come from the partial indexes, the finished
--   ones from the per-minute counters of broker_finished_count, so the cost
--   does not grow with the jobs that finished in the last hour. First merges
--   the counters' deltas (broker._merge_finished_counts, skipped where it
--   cannot write).
-- Example:
--   SELECT * FROM broker.broker_queue_stats() WHERE ready > 0;
--   Calls: _finished_minute, _merge_finished_counts, _claimable, _state
--   Tables: reads broker_jobs, broker_finished_count
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_queue_stats()
RETURNS TABLE (
    job_queue          integer,
    tenant_id          text,
    ready              bigint,
    blocked            bigint,
    delayed            bigint,
    running            bigint,
    completed_last_hour bigint,
    failed_last_hour   bigint,
    cancelled_last_hour bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_since timestamptz := broker._finished_minute(pg_catalog.statement_timestamp()) OPERATOR(pg_catalog.-) interval '60 minutes';
BEGIN
    PERFORM broker._merge_finished_counts();
    RETURN QUERY
    SELECT s.job_queue, s.tenant_id,
           pg_catalog.sum(s.ready)::bigint, pg_catalog.sum(s.blocked)::bigint, pg_catalog.sum(s.delayed)::bigint,
           pg_catalog.sum(s.running)::bigint, pg_catalog.sum(s.completed)::bigint, pg_catalog.sum(s.failed)::bigint,
           pg_catalog.sum(s.cancelled)::bigint
      FROM (SELECT j.job_queue, j.tenant_id,
                   pg_catalog.count(*) FILTER (WHERE broker._claimable(j.complete_status, j.pending_deps)
                                                 AND j.run_after OPERATOR(pg_catalog.<=) pg_catalog.statement_timestamp()) AS ready,
                   pg_catalog.count(*) FILTER (WHERE j.complete_status OPERATOR(pg_catalog.=) broker._state('pending')
                                                 AND j.pending_deps OPERATOR(pg_catalog.>) 0) AS blocked,
                   pg_catalog.count(*) FILTER (WHERE broker._claimable(j.complete_status, j.pending_deps)
                                                 AND j.run_after OPERATOR(pg_catalog.>) pg_catalog.statement_timestamp()) AS delayed,
                   pg_catalog.count(*) FILTER (WHERE j.complete_status OPERATOR(pg_catalog.=) broker._state('running')) AS running,
                   0::numeric AS completed, 0::numeric AS failed, 0::numeric AS cancelled
              FROM broker.broker_jobs AS j
             WHERE j.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[0, 1]::smallint[])
             GROUP BY j.job_queue, j.tenant_id
            UNION ALL
            SELECT f.job_queue, f.tenant_id, 0, 0, 0, 0,
                   COALESCE(pg_catalog.sum(f.jobs) FILTER (WHERE f.complete_status OPERATOR(pg_catalog.=) broker._state('completed')), 0),
                   COALESCE(pg_catalog.sum(f.jobs) FILTER (WHERE f.complete_status OPERATOR(pg_catalog.=) broker._state('failed')), 0),
                   COALESCE(pg_catalog.sum(f.jobs) FILTER (WHERE f.complete_status OPERATOR(pg_catalog.=) broker._state('cancelled')), 0)
              -- (merged rows and deltas apart: each through its partial index, however many dead
              -- deltas a burst of finishes left in the table)
              FROM (SELECT c.job_queue, c.tenant_id, c.complete_status, c.jobs
                      FROM broker.broker_finished_count AS c
                     WHERE c.merged AND c.finished_minute OPERATOR(pg_catalog.>=) v_since
                    UNION ALL
                    SELECT c.job_queue, c.tenant_id, c.complete_status, c.jobs
                      FROM broker.broker_finished_count AS c
                     WHERE NOT c.merged AND c.finished_minute OPERATOR(pg_catalog.>=) v_since) AS f
             GROUP BY f.job_queue, f.tenant_id
            HAVING pg_catalog.sum(f.jobs) OPERATOR(pg_catalog.<>) 0) AS s
     GROUP BY s.job_queue, s.tenant_id
     ORDER BY s.job_queue, s.tenant_id;
END;
$$;
COMMENT ON FUNCTION broker.broker_queue_stats() IS
    'Queue depth across all tenants for monitoring: ready, blocked, delayed, running, and finished in the last hour (whole minutes), per queue and tenant.';
