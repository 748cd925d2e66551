-- sql/dependencies/cycle.sql: the dependency cycle check.
-- ---------------------------------------------------------------------------
-- Function: broker._dependency_cycle(p_origins, p_max_reach)
--   For _dependency_after_insert: a pending job that waits, through unfinished
--   jobs (only pending ones wait), on one of the jobs p_origins again, by id
--   or by its group, with the origin it leads back to; no row when none does.
--   The walk follows the edges of the jobs it reached (index probes on
--   job_id) to their targets (the primary key, or the group index with the
--   edge's tenant), so it reads only the tenant's own jobs and edges,
--   whatever other tenants have (nested loops only: a hash join would read
--   every tenant's unfinished jobs). It stops once it has reached more than
--   p_max_reach (origin, job) pairs (100,000 unless told): 54000.
-- Errors: 54000 more than p_max_reach pairs reachable.
--   Calls: none
--   Tables: reads broker_jobs, broker_job_dependency
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._dependency_cycle(p_origins bigint[], p_max_reach integer DEFAULT 100000)
RETURNS TABLE (job_id bigint, job_name text, origin_id bigint, origin_name text, origin_group text)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $$
DECLARE
    v record;
BEGIN
    WITH RECURSIVE reach (origin, tenant_id, job_id, complete_status) AS (
        SELECT o.job_id, o.tenant_id, o.job_id, 0::smallint
          FROM broker.broker_jobs AS o
         WHERE o.job_id OPERATOR(pg_catalog.=) ANY (p_origins)
        UNION
        SELECT r.origin, r.tenant_id, n.job_id, n.complete_status
          FROM reach AS r
         CROSS JOIN LATERAL (
               SELECT t.job_id, t.complete_status
                 FROM broker.broker_job_dependency AS e
                 JOIN broker.broker_jobs AS t ON t.job_id OPERATOR(pg_catalog.=) e.depends_on_job_id
                WHERE e.job_id OPERATOR(pg_catalog.=) r.job_id
                  AND e.depends_on_job_id IS NOT NULL
                  AND t.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[0, 1]::smallint[])
               UNION ALL
               SELECT t.job_id, t.complete_status
                 FROM broker.broker_job_dependency AS e
                 JOIN broker.broker_jobs AS t
                   ON t.tenant_id OPERATOR(pg_catalog.=) r.tenant_id
                  AND t.job_group OPERATOR(pg_catalog.=) e.depends_on_group
                WHERE e.job_id OPERATOR(pg_catalog.=) r.job_id
                  AND e.depends_on_group IS NOT NULL
                  AND t.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[0, 1]::smallint[])) AS n
         WHERE r.complete_status OPERATOR(pg_catalog.=) broker._state('pending')
    ), capped AS MATERIALIZED (
        -- (the recursion runs only as far as this LIMIT reads)
        SELECT * FROM reach LIMIT p_max_reach OPERATOR(pg_catalog.+) 1
    )
    SELECT (SELECT pg_catalog.count(*) FROM capped) AS reached, c.*
      INTO v
      FROM (SELECT 1) AS one
      LEFT JOIN LATERAL (
           SELECT w.job_id, w.job_name, j.job_id AS origin_id, j.job_name AS origin_name, j.job_group AS origin_group
             FROM capped AS r
             JOIN broker.broker_jobs AS j ON j.job_id OPERATOR(pg_catalog.=) r.origin
             JOIN broker.broker_jobs AS w ON w.job_id OPERATOR(pg_catalog.=) r.job_id
            WHERE r.complete_status OPERATOR(pg_catalog.=) broker._state('pending')
              AND (EXISTS (SELECT 1 FROM broker.broker_job_dependency AS e
                            WHERE e.job_id OPERATOR(pg_catalog.=) r.job_id
                              AND e.depends_on_job_id IS NOT NULL
                              AND e.depends_on_job_id OPERATOR(pg_catalog.=) j.job_id)
                   OR EXISTS (SELECT 1 FROM broker.broker_job_dependency AS e
                               WHERE e.job_id OPERATOR(pg_catalog.=) r.job_id
                                 AND e.depends_on_group IS NOT NULL
                                 AND e.depends_on_group OPERATOR(pg_catalog.=) j.job_group))
            LIMIT 1) AS c ON true;
    IF v.reached OPERATOR(pg_catalog.>) p_max_reach THEN
        RAISE EXCEPTION 'dependency cycle check: more than % unfinished jobs are reachable from the job(s) getting new dependencies (job %)',
            p_max_reach, p_origins[1]
            USING ERRCODE = 'program_limit_exceeded',
                  HINT = 'Split the work into smaller dependency graphs.';
    END IF;
    IF v.job_id IS NOT NULL THEN
        RETURN QUERY SELECT v.job_id, v.job_name, v.origin_id, v.origin_name, v.origin_group;
    END IF;
END;
$$;
COMMENT ON FUNCTION broker._dependency_cycle(bigint[], integer) IS
    'Internal: a pending job that waits, transitively through unfinished jobs of its tenant, on one of the given jobs (or their groups) again, with that job; 54000 past p_max_reach.';
