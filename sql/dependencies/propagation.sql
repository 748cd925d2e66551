-- sql/dependencies/propagation.sql: a failed or cancelled job cancels its dependents; counting blockers.
-- ---------------------------------------------------------------------------
-- Function: broker._cancel_dependents(p_tenant_id, p_job_id, p_job_group, p_reason)
--   Called when job p_job_id ended failed or cancelled: every pending job
--   waiting on it (by id, or by its group), and transitively every pending job
--   waiting on those, is cancelled with p_reason. Returns how many.
--   Calls: _lock_dependency_keys, _lock_dependents
--   Tables: writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._cancel_dependents(p_tenant_id text, p_job_id bigint, p_job_group text, p_reason text)
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_ids    bigint[] := ARRAY[p_job_id];
    v_groups text[]   := ARRAY[p_job_group];
    v_total  integer  := 0;
    v_n      integer;
    v_locked bigint[];
BEGIN
    LOOP
        -- Lock the frontier before reading its dependents, so an enqueue that
        -- is counting one of these jobs as unfinished commits first and is seen.
        PERFORM broker._lock_dependency_keys(p_tenant_id, v_groups, NULL, v_ids, NULL);

        -- the pending jobs waiting on the frontier, locked (their keys are held, so the set
        -- cannot grow before they are cancelled)
        v_locked := broker._lock_dependents(p_tenant_id, v_ids, v_groups);

        WITH victims AS (
            UPDATE broker.broker_jobs AS d
               SET complete_status = broker._state('cancelled'),
                   finished_at = pg_catalog.clock_timestamp(),
                   cancel_reason = p_reason
             WHERE d.job_id OPERATOR(pg_catalog.=) ANY (v_locked)
               AND d.complete_status OPERATOR(pg_catalog.=) broker._state('pending')
            RETURNING d.job_id, d.job_group
        )
        SELECT pg_catalog.array_agg(v.job_id), pg_catalog.array_agg(DISTINCT v.job_group), pg_catalog.count(*)
          INTO v_ids, v_groups, v_n
          FROM victims AS v;

        EXIT WHEN v_n OPERATOR(pg_catalog.=) 0;
        v_total := v_total OPERATOR(pg_catalog.+) v_n;
    END LOOP;
    RETURN v_total;
END;
$$;
COMMENT ON FUNCTION broker._cancel_dependents(text, bigint, text, text) IS
    'Internal: a job failed or was cancelled; cancel (status 4) every pending job waiting on it by id or group, transitively, with the given reason.';

-- ---------------------------------------------------------------------------
-- Function: broker._count_pending_deps(p_tenant_id, p_job_id)
--   Recounts from its edges how many unfinished jobs job p_job_id waits on,
--   holding the dependency locks exclusively (as an enqueue of it would).
--   Calls: _lock_dependency_keys
--   Tables: reads broker_job_dependency, broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._count_pending_deps(p_tenant_id text, p_job_id bigint)
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_ids    bigint[];
    v_groups text[];
BEGIN
    SELECT pg_catalog.array_agg(e.depends_on_job_id) FILTER (WHERE e.depends_on_job_id IS NOT NULL),
           pg_catalog.array_agg(e.depends_on_group) FILTER (WHERE e.depends_on_group IS NOT NULL)
      INTO v_ids, v_groups
      FROM broker.broker_job_dependency AS e
     WHERE e.job_id OPERATOR(pg_catalog.=) p_job_id;
    IF v_ids IS NULL AND v_groups IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM broker._lock_dependency_keys(p_tenant_id, NULL, v_groups, NULL, v_ids);
    RETURN (SELECT pg_catalog.count(*) FROM broker.broker_jobs AS t
             WHERE t.job_id OPERATOR(pg_catalog.=) ANY (v_ids)
               AND t.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[0, 1]::smallint[]))::integer
         OPERATOR(pg_catalog.+)
           (SELECT pg_catalog.count(*) FROM broker.broker_jobs AS m
             WHERE m.tenant_id OPERATOR(pg_catalog.=) p_tenant_id
               AND m.job_group OPERATOR(pg_catalog.=) ANY (v_groups)
               AND m.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[0, 1]::smallint[]))::integer;
END;
$$;
COMMENT ON FUNCTION broker._count_pending_deps(text, bigint) IS
    'Internal: recount the unfinished dependencies of a job from its edges (under the dependency locks).';
