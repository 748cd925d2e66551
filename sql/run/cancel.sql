-- sql/run/cancel.sql: cancelling pending jobs (broker_cancel_job and the cancel_reason trigger).
-- ---------------------------------------------------------------------------
-- Function: broker.broker_cancel_job(p_job_id, p_reason)
--   Cancels a pending job of the caller's tenant and, transitively, every
--   pending job waiting on it. Returns the number of jobs cancelled.
--   SECURITY INVOKER: it sets cancel_reason on the job with the caller's
--   rights (policies: own tenant, pending jobs only); the trigger
--   broker_jobs_cancel_request_trg does the cancelling.
-- Errors: 22004 NULL id; P0002 no such job in this tenant; 55000 the job is
--   running or already finished.
-- Example:
--   SELECT broker.broker_cancel_job(42, 'superseded by job 57');
--   Calls: broker_current_tenant
--   Tables: writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_cancel_job(p_job_id bigint, p_reason text DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_status smallint;
    v_tenant text := broker.broker_current_tenant();
    v_reason text := COALESCE(NULLIF(pg_catalog.btrim(p_reason), ''), 'cancelled by ' OPERATOR(pg_catalog.||) CURRENT_USER);
BEGIN
    IF p_job_id IS NULL THEN
        RAISE EXCEPTION 'broker_cancel_job: p_job_id must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    UPDATE broker.broker_jobs AS j
       SET cancel_reason = v_reason
     WHERE j.job_id OPERATOR(pg_catalog.=) p_job_id
       AND j.tenant_id OPERATOR(pg_catalog.=) v_tenant
       AND j.complete_status OPERATOR(pg_catalog.=) broker._state('pending');
    IF FOUND THEN
        RETURN pg_catalog.current_setting('broker.last_cancel_count')::integer;
    END IF;
    SELECT j.complete_status INTO v_status FROM broker.broker_jobs AS j
     WHERE j.job_id OPERATOR(pg_catalog.=) p_job_id AND j.tenant_id OPERATOR(pg_catalog.=) v_tenant;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'broker_cancel_job: job % does not exist', p_job_id USING ERRCODE = 'no_data_found';
    END IF;
    RAISE EXCEPTION 'broker_cancel_job: job % is %; only pending jobs can be cancelled', p_job_id,
        CASE v_status WHEN 1 THEN 'running' WHEN 2 THEN 'completed' WHEN 3 THEN 'failed' ELSE 'cancelled' END
        USING ERRCODE = 'object_not_in_prerequisite_state';
END;
$$;
COMMENT ON FUNCTION broker.broker_cancel_job(bigint, text) IS
    'Cancels a pending job of the current tenant and every pending job that waits on it; returns how many were cancelled.';

-- ---------------------------------------------------------------------------
-- Trigger function: broker._jobs_cancel_request()
--   BEFORE UPDATE on broker_jobs when a pending job gets a cancel_reason (the
--   one column enqueuers may update, and only on pending jobs of their tenant,
--   see the policies): the job becomes cancelled and its dependents follow.
--   The number of jobs cancelled goes to broker.last_cancel_count.
--   Calls: _lock_dependency_keys, _cancel_dependents
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._jobs_cancel_request()
RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_n integer;
BEGIN
    PERFORM broker._lock_dependency_keys(NEW.tenant_id, ARRAY[NEW.job_group], NULL, ARRAY[NEW.job_id], NULL);
    NEW.complete_status := broker._state('cancelled');
    NEW.finished_at := pg_catalog.clock_timestamp();
    v_n := broker._cancel_dependents(NEW.tenant_id, NEW.job_id, NEW.job_group,
        pg_catalog.format('dependency job %s (%s) was cancelled', NEW.job_id, NEW.job_name));
    PERFORM pg_catalog.set_config('broker.last_cancel_count', (v_n OPERATOR(pg_catalog.+) 1)::text, true);
    RETURN NEW;
END;
$$;
COMMENT ON FUNCTION broker._jobs_cancel_request() IS
    'Internal trigger: setting cancel_reason on a pending job cancels it and, transitively, its dependents.';

CREATE TRIGGER broker_jobs_cancel_request_trg
    BEFORE UPDATE OF cancel_reason ON broker.broker_jobs
    FOR EACH ROW
    WHEN (OLD.complete_status OPERATOR(pg_catalog.=) 0 AND NEW.complete_status OPERATOR(pg_catalog.=) 0
          AND OLD.cancel_reason IS NULL AND NEW.cancel_reason IS NOT NULL)
    EXECUTE FUNCTION broker._jobs_cancel_request();
COMMENT ON TRIGGER broker_jobs_cancel_request_trg ON broker.broker_jobs IS
    'A cancel_reason set on a pending job cancels it and its dependents.';
