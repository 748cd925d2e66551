-- sql/instances/queue_stats.sql: queue statistics for monitoring.
-- ---------------------------------------------------------------------------
-- Function: broker.broker_queue_stats()
--   Queue depth for monitoring, across every tenant (the runner's metrics and
--   status run as broker_runtime, which sees one tenant through row-level
--   security). One row per queue and tenant with unfinished or recently
--   finished jobs, or a pause: ready (claimable now), blocked (waiting on
--   dependencies), delayed (future run_after; jobs held back by a limit on
--   their key are in broker_key_stats), running, and completed/failed/cancelled in
--   the last hour; paused (broker_pause_queue, for every tenant or this
--   one); the age of the oldest ready job (seconds since its run_after);
--   and in the last hour: attempts lost with their lease (recovered), cancel
--   requests for running jobs and retries (broker_job_actions).
--   The finished jobs' last hour is counted in whole minutes of finished_at
--   (date_bin, UTC-aligned): the current minute and the 60 before it, so
--   between 60 and 61 minutes. The unfinished jobs come from the partial
--   indexes, the finished ones from the per-minute counters of
--   broker_finished_count, so the cost does not grow with the jobs that
--   finished in the last hour. First merges the counters' deltas
--   (broker._merge_finished_counts, skipped where it cannot write).
-- Example:
--   SELECT * FROM broker.broker_queue_stats() WHERE ready > 0 OR paused;
--   Calls: _finished_minute, _merge_finished_counts, _finished_counts_since, _claimable, _state, _parked
--   Tables: reads broker_jobs, broker_finished_count, broker_job_attempts, broker_job_actions, broker_queue_pause
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
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- (each part through the index that holds what it counts: with many finished jobs and a few hundred
-- unfinished ones the planner may still choose to read the whole table, as PostgreSQL 17 and 18 do at
-- 30,000 rows; sql/flow/stats.sql does the same)
SET enable_seqscan = off
AS $$
DECLARE
    v_since timestamptz := broker._finished_minute(pg_catalog.statement_timestamp()) OPERATOR(pg_catalog.-) interval '60 minutes';
    v_hour  timestamptz := pg_catalog.statement_timestamp() OPERATOR(pg_catalog.-) interval '1 hour';
BEGIN
    PERFORM broker._merge_finished_counts();
    RETURN QUERY
    WITH s AS (
        SELECT j.job_queue, j.tenant_id,
               pg_catalog.count(*) FILTER (WHERE broker._claimable(j.complete_status, j.pending_deps, j.parked)
                                             AND j.run_after OPERATOR(pg_catalog.<=) pg_catalog.statement_timestamp()) AS ready,
               pg_catalog.count(*) FILTER (WHERE j.complete_status OPERATOR(pg_catalog.=) broker._state('pending')
                                             AND j.pending_deps OPERATOR(pg_catalog.>) 0) AS blocked,
               pg_catalog.count(*) FILTER (WHERE j.complete_status OPERATOR(pg_catalog.=) broker._state('pending')
                                             AND j.pending_deps OPERATOR(pg_catalog.=) 0
                                             AND j.parked OPERATOR(pg_catalog.<=) broker._parked('later')
                                             AND j.run_after OPERATOR(pg_catalog.>) pg_catalog.statement_timestamp()) AS delayed,
               pg_catalog.count(*) FILTER (WHERE j.complete_status OPERATOR(pg_catalog.=) broker._state('running')) AS running,
               0::numeric AS completed, 0::numeric AS failed, 0::numeric AS cancelled,
               pg_catalog.min(j.run_after) FILTER (WHERE broker._claimable(j.complete_status, j.pending_deps, j.parked)
                                                     AND j.run_after OPERATOR(pg_catalog.<=) pg_catalog.statement_timestamp()) AS oldest,
               0::bigint AS lost, 0::bigint AS cancels, 0::bigint AS retries, false AS paused
          FROM broker.broker_jobs AS j
         -- (length(job_group) > 0, always true by its CHECK, makes broker_jobs_group_idx usable: it holds the
         -- unfinished jobs alone, so this reads them, not the finished history beside them. The index's
         -- predicate says job_group IS NOT NULL, which this implies; a query's own "job_group IS NOT NULL"
         -- on this NOT NULL column is dropped by PostgreSQL 17 and later before an index is chosen.)
         WHERE j.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[0, 1]::smallint[])
           AND pg_catalog.length(j.job_group) OPERATOR(pg_catalog.>) 0
         GROUP BY j.job_queue, j.tenant_id
        UNION ALL
        SELECT f.job_queue, f.tenant_id, 0, 0, 0, 0,
               COALESCE(pg_catalog.sum(f.jobs) FILTER (WHERE f.complete_status OPERATOR(pg_catalog.=) broker._state('completed')), 0),
               COALESCE(pg_catalog.sum(f.jobs) FILTER (WHERE f.complete_status OPERATOR(pg_catalog.=) broker._state('failed')), 0),
               COALESCE(pg_catalog.sum(f.jobs) FILTER (WHERE f.complete_status OPERATOR(pg_catalog.=) broker._state('cancelled')), 0),
               NULL::timestamptz, 0, 0, 0, false
          FROM broker._finished_counts_since(v_since) AS f
         GROUP BY f.job_queue, f.tenant_id
        HAVING pg_catalog.sum(f.jobs) OPERATOR(pg_catalog.<>) 0
        UNION ALL
        -- the last hour's lost attempts, cancel requests and retries: events, few
        SELECT j.job_queue, j.tenant_id, 0, 0, 0, 0, 0, 0, 0, NULL, pg_catalog.count(*), 0, 0, false
          FROM broker.broker_job_attempts AS a JOIN broker.broker_jobs AS j ON j.job_id OPERATOR(pg_catalog.=) a.job_id
         WHERE a.outcome OPERATOR(pg_catalog.=) 'lost' AND a.finished_at OPERATOR(pg_catalog.>) v_hour
         GROUP BY j.job_queue, j.tenant_id
        UNION ALL
        SELECT j.job_queue, j.tenant_id, 0, 0, 0, 0, 0, 0, 0, NULL, 0,
               pg_catalog.count(*) FILTER (WHERE a.action OPERATOR(pg_catalog.=) 'cancel'),
               pg_catalog.count(*) FILTER (WHERE a.action OPERATOR(pg_catalog.=) 'retry'), false
          FROM broker.broker_job_actions AS a JOIN broker.broker_jobs AS j ON j.job_id OPERATOR(pg_catalog.=) a.job_id
         WHERE a.requested_at OPERATOR(pg_catalog.>) v_hour
         GROUP BY j.job_queue, j.tenant_id
        UNION ALL
        SELECT p.job_queue, p.tenant_id, 0, 0, 0, 0, 0, 0, 0, NULL, 0, 0, 0, true
          FROM broker.broker_queue_pause AS p
         WHERE p.tenant_id IS NOT NULL
    )
    SELECT s.job_queue, s.tenant_id,
           pg_catalog.sum(s.ready)::bigint, pg_catalog.sum(s.blocked)::bigint, pg_catalog.sum(s.delayed)::bigint,
           pg_catalog.sum(s.running)::bigint, pg_catalog.sum(s.completed)::bigint, pg_catalog.sum(s.failed)::bigint,
           pg_catalog.sum(s.cancelled)::bigint,
           pg_catalog.bool_or(s.paused)
               OR EXISTS (SELECT 1 FROM broker.broker_queue_pause AS g
                           WHERE g.job_queue OPERATOR(pg_catalog.=) s.job_queue AND g.tenant_id IS NULL),
           COALESCE(pg_catalog.date_part('epoch', pg_catalog.statement_timestamp() OPERATOR(pg_catalog.-) pg_catalog.min(s.oldest)), 0),
           pg_catalog.sum(s.lost)::bigint, pg_catalog.sum(s.cancels)::bigint, pg_catalog.sum(s.retries)::bigint
      FROM s
     GROUP BY s.job_queue, s.tenant_id
    UNION ALL
    -- a queue paused for every tenant, where no tenant has a row above (tenant '': no tenant id is blank)
    SELECT g.job_queue, ''::text, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, true,
           0::double precision, 0::bigint, 0::bigint, 0::bigint
      FROM broker.broker_queue_pause AS g
     WHERE g.tenant_id IS NULL
       AND NOT EXISTS (SELECT 1 FROM s WHERE s.job_queue OPERATOR(pg_catalog.=) g.job_queue)
     ORDER BY 1, 2;
END;
$$;
COMMENT ON FUNCTION broker.broker_queue_stats() IS
    'Queue depth across all tenants for monitoring, per queue and tenant: ready, blocked, delayed, running, finished in the last hour (whole minutes), paused, oldest ready job''s age, lost leases, cancels and retries in the last hour.';
