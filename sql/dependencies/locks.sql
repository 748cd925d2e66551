-- sql/dependencies/locks.sql: taking the dependency locks of jobs and groups.
-- ---------------------------------------------------------------------------
-- Function: broker._lock_dependency_keys(p_tenant_id, p_shared_groups,
--     p_exclusive_groups, p_shared_jobs, p_exclusive_jobs)
--   Takes transaction advisory locks that keep pending_deps exact:
--   * enqueueing a job that depends on group G (or job J) locks G (J) exclusively
--     while it counts G's unfinished members;
--   * enqueueing a member of G, and finishing or cancelling a job of G (or J),
--     lock G (J) shared before they change the counters of G's dependents.
--   Keys (broker._dependency_lock_key) are the tenant's own: no lock one
--   tenant holds is one another tenant's work needs. Per tenant they are
--   hashed into 1024 buckets per kind (bounded lock-table use for bulk
--   enqueues; a collision only serialises a little more) and taken in one
--   global order (by key), a key wanted in both modes exclusively, so callers
--   that take all their keys here cannot deadlock on them.
-- Errors: 42501 a caller outside the broker's own code naming a tenant it may
--   not act for (strict tenancy).
--   Calls: _tenant_allowed, _dependency_lock_key
--   Tables: reads broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._lock_dependency_keys(
    p_tenant_id text,
    p_shared_groups text[],
    p_exclusive_groups text[],
    p_shared_jobs bigint[],
    p_exclusive_jobs bigint[])
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    -- broker_enqueue may call this (broker_add_job, SECURITY INVOKER, does): a
    -- caller that may not write the job table (it is not the broker's own
    -- code) locks only the keys of a tenant it may act for.
    IF NOT pg_catalog.has_table_privilege('broker.broker_jobs', 'UPDATE')
       AND NOT broker._tenant_allowed(p_tenant_id, CURRENT_USER) THEN
        RAISE EXCEPTION 'role % may not take the dependency locks of tenant %', pg_catalog.quote_ident(CURRENT_USER),
            pg_catalog.quote_literal(p_tenant_id)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- force_generic_plan: the key query reads no table, and a custom plan (the
    -- default choice for it) would be planned again at every call.
    IF COALESCE(pg_catalog.cardinality(p_exclusive_groups), 0) OPERATOR(pg_catalog.=) 0
       AND COALESCE(pg_catalog.cardinality(p_exclusive_jobs), 0) OPERATOR(pg_catalog.=) 0
       AND COALESCE(pg_catalog.cardinality(p_shared_groups), 0) OPERATOR(pg_catalog.<=) 1
       AND COALESCE(pg_catalog.cardinality(p_shared_jobs), 0) OPERATOR(pg_catalog.<=) 1 THEN
        -- the common case (enqueue of a job, completion of a job): at most one
        -- shared key of each kind, the group's first (its key sorts first)
        IF p_shared_groups[1] IS NOT NULL THEN
            PERFORM pg_catalog.pg_advisory_xact_lock_shared(broker._dependency_lock_key(p_tenant_id, p_shared_groups[1], NULL));
        END IF;
        IF p_shared_jobs[1] IS NOT NULL THEN
            PERFORM pg_catalog.pg_advisory_xact_lock_shared(broker._dependency_lock_key(p_tenant_id, NULL, p_shared_jobs[1]));
        END IF;
        RETURN;
    END IF;
    -- Any set of keys: one statement; the aggregate takes them in the order of the sort.
    PERFORM pg_catalog.count(CASE WHEN k.excl THEN pg_catalog.pg_advisory_xact_lock(k.key)
                                 ELSE pg_catalog.pg_advisory_xact_lock_shared(k.key) END)
      FROM (SELECT u.key, pg_catalog.bool_or(u.excl) AS excl
              FROM (SELECT broker._dependency_lock_key(p_tenant_id, g, NULL) AS key, false AS excl
                      FROM pg_catalog.unnest(p_shared_groups) AS g
                    UNION ALL
                    SELECT broker._dependency_lock_key(p_tenant_id, g, NULL), true
                      FROM pg_catalog.unnest(p_exclusive_groups) AS g
                    UNION ALL
                    SELECT broker._dependency_lock_key(p_tenant_id, NULL, j), false
                      FROM pg_catalog.unnest(p_shared_jobs) AS j
                    UNION ALL
                    SELECT broker._dependency_lock_key(p_tenant_id, NULL, j), true
                      FROM pg_catalog.unnest(p_exclusive_jobs) AS j) AS u
             WHERE u.key IS NOT NULL
             GROUP BY u.key
             ORDER BY u.key) AS k;
END;
$$;
COMMENT ON FUNCTION broker._lock_dependency_keys(text, text[], text[], bigint[], bigint[]) IS
    'Internal: transaction advisory locks (shared/exclusive, global order, keys of the tenant only) that serialise dependency counting against finishing jobs.';

-- ---------------------------------------------------------------------------
-- Function: broker._lock_dependents(p_tenant_id, p_job_ids, p_groups)
--   Row-locks, in job_id order, the pending jobs that wait on any of the
--   jobs p_job_ids (id edges) or groups p_groups (group edges) of a tenant.
--   Returns their ids (NULL: none), which _cancel_dependents cancels as they
--   are. Every pending_deps update goes through this first, so concurrent
--   enqueues and finishes touching the same dependents queue up instead of
--   deadlocking.
--   Calls: none
--   Tables: reads broker_jobs, broker_job_dependency
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._lock_dependents(p_tenant_id text, p_job_ids bigint[], p_groups text[])
RETURNS bigint[]
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT pg_catalog.array_agg(locked.job_id ORDER BY locked.job_id) FROM (
        SELECT d.job_id FROM broker.broker_jobs AS d
         WHERE d.complete_status OPERATOR(pg_catalog.=) broker._state('pending')
           AND d.job_id IN (SELECT e.job_id FROM broker.broker_job_dependency AS e
                             WHERE e.depends_on_job_id IS NOT NULL  -- (the partial indexes: not implied by = ANY)
                               AND e.depends_on_job_id OPERATOR(pg_catalog.=) ANY (p_job_ids)
                            UNION
                            SELECT e.job_id FROM broker.broker_job_dependency AS e
                             WHERE e.tenant_id OPERATOR(pg_catalog.=) p_tenant_id
                               AND e.depends_on_group IS NOT NULL
                               AND e.depends_on_group OPERATOR(pg_catalog.=) ANY (p_groups))
         ORDER BY d.job_id
           FOR NO KEY UPDATE OF d) AS locked);
END;
$$;
COMMENT ON FUNCTION broker._lock_dependents(text, bigint[], text[]) IS
    'Internal: row-lock, in job_id order, the pending jobs waiting on the given job ids or groups; returns their ids.';
