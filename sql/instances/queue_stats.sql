-- sql/instances/queue_stats.sql: queue statistics for monitoring.
-- ---------------------------------------------------------------------------
-- Function: broker.broker_queue_stats()
--   Queue depth for monitoring, across every tenant (the runner's metrics and
--   status run as broker_runtime, which sees one tenant through row-level
--   security). One row per queue and tenant with unfinished or recently
--   finished jobs, or a pause: ready, blocked (waiting on dependencies),
--   delayed (future run_after), running, and completed/failed/cancelled in
--   the last hour; paused (broker_pause_queue, for every tenant or this
--   one); the age of the oldest ready job (seconds since its run_after);
--   and in the last hour: attempts lost with their lease (recovered), cancel
--   requests for running jobs and retries (broker_job_actions).
--   Reads the partial indexes only; finished jobs older than an hour cost nothing.
-- Example:
--   SELECT * FROM broker.broker_queue_stats() WHERE ready > 0 OR paused;
--   Calls: _claimable, _state
--   Tables: reads broker_jobs, broker_job_attempts, broker_job_actions, broker_queue_pause
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
    cancelled_last_hour bigint,
    paused             boolean,
    oldest_ready_seconds double precision,
    lost_last_hour     bigint,
    cancels_last_hour  bigint,
    retries_last_hour  bigint)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    WITH since AS (SELECT pg_catalog.statement_timestamp() OPERATOR(pg_catalog.-) interval '1 hour' AS t),
    s AS (
        SELECT j.job_queue, j.tenant_id, j.complete_status, j.pending_deps, j.run_after, NULL::text AS event
          FROM broker.broker_jobs AS j
         WHERE j.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[0, 1]::smallint[])
        UNION ALL
        SELECT j.job_queue, j.tenant_id, j.complete_status, j.pending_deps, j.run_after, NULL
          FROM broker.broker_jobs AS j, since
         WHERE j.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[2, 3, 4]::smallint[])
           AND j.finished_at OPERATOR(pg_catalog.>) since.t
        UNION ALL
        SELECT j.job_queue, j.tenant_id, NULL, NULL, NULL, 'lost'
          FROM broker.broker_job_attempts AS a JOIN broker.broker_jobs AS j ON j.job_id OPERATOR(pg_catalog.=) a.job_id, since
         WHERE a.outcome OPERATOR(pg_catalog.=) 'lost' AND a.finished_at OPERATOR(pg_catalog.>) since.t
        UNION ALL
        SELECT j.job_queue, j.tenant_id, NULL, NULL, NULL, a.action
          FROM broker.broker_job_actions AS a JOIN broker.broker_jobs AS j ON j.job_id OPERATOR(pg_catalog.=) a.job_id, since
         WHERE a.requested_at OPERATOR(pg_catalog.>) since.t
        UNION ALL
        SELECT p.job_queue, p.tenant_id, NULL, NULL, NULL, 'paused'
          FROM broker.broker_queue_pause AS p
         WHERE p.tenant_id IS NOT NULL
    )
    SELECT s.job_queue, s.tenant_id,
           pg_catalog.count(*) FILTER (WHERE broker._claimable(s.complete_status, s.pending_deps)
                                         AND s.run_after OPERATOR(pg_catalog.<=) pg_catalog.statement_timestamp()),
           pg_catalog.count(*) FILTER (WHERE s.complete_status OPERATOR(pg_catalog.=) broker._state('pending') AND s.pending_deps OPERATOR(pg_catalog.>) 0),
           pg_catalog.count(*) FILTER (WHERE broker._claimable(s.complete_status, s.pending_deps)
                                         AND s.run_after OPERATOR(pg_catalog.>) pg_catalog.statement_timestamp()),
           pg_catalog.count(*) FILTER (WHERE s.complete_status OPERATOR(pg_catalog.=) broker._state('running')),
           pg_catalog.count(*) FILTER (WHERE s.complete_status OPERATOR(pg_catalog.=) broker._state('completed')),
           pg_catalog.count(*) FILTER (WHERE s.complete_status OPERATOR(pg_catalog.=) broker._state('failed')),
           pg_catalog.count(*) FILTER (WHERE s.complete_status OPERATOR(pg_catalog.=) broker._state('cancelled')),
           COALESCE(pg_catalog.bool_or(s.event OPERATOR(pg_catalog.=) 'paused'), false)
               OR EXISTS (SELECT 1 FROM broker.broker_queue_pause AS g
                           WHERE g.job_queue OPERATOR(pg_catalog.=) s.job_queue AND g.tenant_id IS NULL),
           COALESCE(pg_catalog.date_part('epoch', pg_catalog.statement_timestamp() OPERATOR(pg_catalog.-) pg_catalog.min(s.run_after)
                        FILTER (WHERE broker._claimable(s.complete_status, s.pending_deps)
                                  AND s.run_after OPERATOR(pg_catalog.<=) pg_catalog.statement_timestamp())), 0),
           pg_catalog.count(*) FILTER (WHERE s.event OPERATOR(pg_catalog.=) 'lost'),
           pg_catalog.count(*) FILTER (WHERE s.event OPERATOR(pg_catalog.=) 'cancel'),
           pg_catalog.count(*) FILTER (WHERE s.event OPERATOR(pg_catalog.=) 'retry')
      FROM s
     GROUP BY s.job_queue, s.tenant_id
    UNION ALL
    -- a queue paused for every tenant, where no tenant has a row above (tenant '': no tenant id is blank)
    SELECT g.job_queue, ''::text, 0, 0, 0, 0, 0, 0, 0, true, 0, 0, 0, 0
      FROM broker.broker_queue_pause AS g
     WHERE g.tenant_id IS NULL
       AND NOT EXISTS (SELECT 1 FROM broker.broker_jobs AS j
                        WHERE j.job_queue OPERATOR(pg_catalog.=) g.job_queue
                          AND j.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[0, 1]::smallint[]))
     ORDER BY 1, 2
$$;
COMMENT ON FUNCTION broker.broker_queue_stats() IS
    'Queue depth across all tenants for monitoring, per queue and tenant: ready, blocked, delayed, running, finished in the last hour, paused, oldest ready job''s age, lost leases, cancels and retries in the last hour.';
