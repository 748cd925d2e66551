-- sql/instances/queue_stats.sql: queue statistics for monitoring.
-- ---------------------------------------------------------------------------
-- Function: broker.broker_queue_stats()
--   Queue depth for monitoring, across every tenant (the runner's metrics and
--   status run as broker_runtime, which sees one tenant through row-level
--   security). One row per queue and tenant with unfinished or recently
--   finished jobs: ready, blocked (waiting on dependencies), delayed (future
--   run_after), running, and completed/failed/cancelled in the last hour.
--   Reads the partial indexes only; finished jobs older than an hour cost nothing.
-- Example:
--   SELECT * FROM broker.broker_queue_stats() WHERE ready > 0;
--   Calls: _claimable
--   Tables: reads broker_jobs
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
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT s.job_queue, s.tenant_id,
           pg_catalog.count(*) FILTER (WHERE broker._claimable(s.complete_status, s.pending_deps)
                                         AND s.run_after OPERATOR(pg_catalog.<=) pg_catalog.statement_timestamp()),
           pg_catalog.count(*) FILTER (WHERE s.complete_status OPERATOR(pg_catalog.=) broker._state('pending') AND s.pending_deps OPERATOR(pg_catalog.>) 0),
           pg_catalog.count(*) FILTER (WHERE broker._claimable(s.complete_status, s.pending_deps)
                                         AND s.run_after OPERATOR(pg_catalog.>) pg_catalog.statement_timestamp()),
           pg_catalog.count(*) FILTER (WHERE s.complete_status OPERATOR(pg_catalog.=) broker._state('running')),
           pg_catalog.count(*) FILTER (WHERE s.complete_status OPERATOR(pg_catalog.=) broker._state('completed')),
           pg_catalog.count(*) FILTER (WHERE s.complete_status OPERATOR(pg_catalog.=) broker._state('failed')),
           pg_catalog.count(*) FILTER (WHERE s.complete_status OPERATOR(pg_catalog.=) broker._state('cancelled'))
      FROM (SELECT j.job_queue, j.tenant_id, j.complete_status, j.pending_deps, j.run_after
              FROM broker.broker_jobs AS j
             WHERE j.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[0, 1]::smallint[])
            UNION ALL
            SELECT j.job_queue, j.tenant_id, j.complete_status, j.pending_deps, j.run_after
              FROM broker.broker_jobs AS j
             WHERE j.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[2, 3, 4]::smallint[])
               AND j.finished_at OPERATOR(pg_catalog.>) (pg_catalog.statement_timestamp() OPERATOR(pg_catalog.-) interval '1 hour')) AS s
     GROUP BY s.job_queue, s.tenant_id
     ORDER BY s.job_queue, s.tenant_id
$$;
COMMENT ON FUNCTION broker.broker_queue_stats() IS
    'Queue depth across all tenants for monitoring: ready, blocked, delayed, running, and finished in the last hour, per queue and tenant.';
