-- pgsql_broker 0.1.0 -> 0.2.0 (hand-written upgrade; the full 0.2.0 script is built from sql/).
\echo Use "ALTER EXTENSION pgsql_broker UPDATE TO '0.2.0'" to load this file. \quit

-- source: sql/functions/broker_queue_stats.sql
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
           pg_catalog.count(*) FILTER (WHERE s.complete_status OPERATOR(pg_catalog.=) 0 AND s.pending_deps OPERATOR(pg_catalog.=) 0
                                         AND s.run_after OPERATOR(pg_catalog.<=) pg_catalog.statement_timestamp()),
           pg_catalog.count(*) FILTER (WHERE s.complete_status OPERATOR(pg_catalog.=) 0 AND s.pending_deps OPERATOR(pg_catalog.>) 0),
           pg_catalog.count(*) FILTER (WHERE s.complete_status OPERATOR(pg_catalog.=) 0 AND s.pending_deps OPERATOR(pg_catalog.=) 0
                                         AND s.run_after OPERATOR(pg_catalog.>) pg_catalog.statement_timestamp()),
           pg_catalog.count(*) FILTER (WHERE s.complete_status OPERATOR(pg_catalog.=) 1),
           pg_catalog.count(*) FILTER (WHERE s.complete_status OPERATOR(pg_catalog.=) 2),
           pg_catalog.count(*) FILTER (WHERE s.complete_status OPERATOR(pg_catalog.=) 3),
           pg_catalog.count(*) FILTER (WHERE s.complete_status OPERATOR(pg_catalog.=) 4)
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
REVOKE ALL ON FUNCTION broker.broker_queue_stats() FROM PUBLIC;
