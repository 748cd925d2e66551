-- ---------------------------------------------------------------------------
-- Function: broker.broker_cancel_job(p_job_id, p_reason)
--   Cancels a pending job of the caller's tenant and, transitively, every
--   pending job waiting on it. Returns the number of jobs cancelled.
-- Errors: 22004 NULL id; P0002 no such job in this tenant; 55000 the job is
--   running or already finished.
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_cancel_job(p_job_id bigint, p_reason text DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job    broker.broker_jobs;
    v_tenant text := broker.broker_current_tenant();
    v_reason text := COALESCE(NULLIF(pg_catalog.btrim(p_reason), ''), 'cancelled by ' OPERATOR(pg_catalog.||) CURRENT_USER);
BEGIN
    IF p_job_id IS NULL THEN
        RAISE EXCEPTION 'broker_cancel_job: p_job_id must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT * INTO v_job FROM broker.broker_jobs AS j
     WHERE j.job_id OPERATOR(pg_catalog.=) p_job_id AND j.tenant_id OPERATOR(pg_catalog.=) v_tenant;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'broker_cancel_job: job % does not exist', p_job_id USING ERRCODE = 'no_data_found';
    END IF;
    PERFORM broker._lock_dependency_keys(v_tenant, ARRAY[v_job.job_group], NULL, ARRAY[p_job_id], NULL);
    UPDATE broker.broker_jobs AS j
       SET complete_status = 4, finished_at = pg_catalog.clock_timestamp(), cancel_reason = v_reason
     WHERE j.job_id OPERATOR(pg_catalog.=) p_job_id AND j.complete_status OPERATOR(pg_catalog.=) 0;
    IF NOT FOUND THEN
        SELECT * INTO v_job FROM broker.broker_jobs AS j WHERE j.job_id OPERATOR(pg_catalog.=) p_job_id;
        RAISE EXCEPTION 'broker_cancel_job: job % is %; only pending jobs can be cancelled', p_job_id,
            CASE v_job.complete_status WHEN 1 THEN 'running' WHEN 2 THEN 'completed'
                                       WHEN 3 THEN 'failed' ELSE 'cancelled' END
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN 1 OPERATOR(pg_catalog.+) broker._cancel_dependents(v_tenant, v_job.job_id, v_job.job_group,
        pg_catalog.format('dependency job %s (%s) was cancelled', v_job.job_id, v_job.job_name));
END;
$$;
COMMENT ON FUNCTION broker.broker_cancel_job(bigint, text) IS
    'Cancels a pending job of the current tenant and every pending job that waits on it; returns how many were cancelled.';
