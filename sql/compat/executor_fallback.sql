-- sql/compat/executor_fallback.sql: running batches on executors made by 0.1.0 (no run_jobs).
-- Kept in 0.3.0 (its upgrade changes no executor). The upgrade that drops it re-creates every
-- executor with broker_create_executor (which adds run_jobs), then drops _run_jobs_compat and the
-- fallback branches of broker_run and broker_run_batch that call it.
-- ---------------------------------------------------------------------------
-- Function: broker._run_jobs_compat(p_call, p_sqls, p_languages,
--     p_search_paths, p_tenant_id)
--   What an executor's run_jobs does, for an executor without run_jobs (made
--   by 0.1.0): each job through p_call (the SELECT that calls its run_job, see
--   _executor_call) in a subtransaction of its own, with broker.tenant_id
--   p_tenant_id; its error (NULL: success; the message then reports the run,
--   as run_jobs does) and run time, in order.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._run_jobs_compat(p_call text, p_sqls text[], p_languages text[], p_search_paths text[],
    p_tenant_id text)
RETURNS TABLE (error_sqlstate text, error_message text, duration interval)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_started timestamptz;
    v_set     text;
    -- as run_jobs (sql/run/executors.sql): no job after the batch budget's deadline, the running job named
    v_deadline timestamptz := pg_catalog.to_timestamp(NULLIF(pg_catalog.current_setting('broker.batch_deadline', true), '')::float8);
    v_ids     bigint[] := NULLIF(pg_catalog.current_setting('broker.batch_job_ids', true), '')::bigint[];
BEGIN
    FOR i IN 1 .. COALESCE(pg_catalog.array_length(p_sqls, 1), 0) LOOP
        EXIT WHEN i OPERATOR(pg_catalog.>) 1 AND pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>=) v_deadline;
        IF v_ids IS NOT NULL THEN
            v_set := pg_catalog.set_config('application_name', 'pgsql_broker job ' OPERATOR(pg_catalog.||) v_ids[i], true);
        END IF;
        error_sqlstate := NULL;
        error_message := NULL;
        v_started := pg_catalog.clock_timestamp();
        BEGIN
            PERFORM pg_catalog.set_config('broker.tenant_id', p_tenant_id, true);
            PERFORM pg_catalog.set_config('broker.job_rows', '', true);
            PERFORM pg_catalog.set_config('broker.job_output', '', true);
            EXECUTE p_call USING p_sqls[i], p_languages[i], p_search_paths[i];
            -- the run's report, as run_jobs gives it (a 0.1.0 run_job leaves no row count)
            error_message := pg_catalog.current_setting('broker.job_rows', true) OPERATOR(pg_catalog.||) pg_catalog.chr(31)
                OPERATOR(pg_catalog.||) pg_catalog.current_setting('broker.job_output', true);
        EXCEPTION WHEN OTHERS OR query_canceled OR assert_failure THEN
            GET STACKED DIAGNOSTICS error_sqlstate = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT;
        END;
        duration := pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) v_started;
        RETURN NEXT;
        -- under a batch budget, its statement_timeout ended this job: start no other
        EXIT WHEN v_deadline IS NOT NULL AND error_sqlstate OPERATOR(pg_catalog.=) '57014';
    END LOOP;
END;
$$;
COMMENT ON FUNCTION broker._run_jobs_compat(text, text[], text[], text[], text) IS
    'Internal: run_jobs for an executor that has only run_job: each job through it, in a subtransaction of its own.';
