-- ---------------------------------------------------------------------------
-- Function: broker._run_begin(p_job_id, p_lease_token)
--   Locks a claimed job for execution (FOR NO KEY UPDATE, held until the
--   caller's transaction ends: this lock is what marks the job as executing,
--   and broker_recover_stale_jobs never takes a locked job) and returns it.
-- Errors: P0002 unknown job; 55000 job not running, or lease token mismatch.
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._run_begin(p_job_id bigint, p_lease_token uuid)
RETURNS broker.broker_jobs
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job broker.broker_jobs;
BEGIN
    SELECT * INTO v_job FROM broker.broker_jobs AS j
     WHERE j.job_id OPERATOR(pg_catalog.=) p_job_id
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'broker_run: job % does not exist', p_job_id
            USING ERRCODE = 'no_data_found';
    END IF;
    IF v_job.complete_status OPERATOR(pg_catalog.<>) 1 THEN
        RAISE EXCEPTION 'broker_run: job % is %, not running', p_job_id,
            CASE v_job.complete_status WHEN 0 THEN 'pending' WHEN 2 THEN 'completed'
                                       WHEN 3 THEN 'failed' ELSE 'cancelled' END
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Claim jobs with broker.broker_get() and run the ones it returns.';
    END IF;
    IF p_lease_token IS NOT NULL AND v_job.lease_token OPERATOR(pg_catalog.<>) p_lease_token THEN
        RAISE EXCEPTION 'broker_run: the lease on job % is no longer yours', p_job_id
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'The lease expired, the job was recovered and claimed again.';
    END IF;
    RETURN v_job;
END;
$$;
COMMENT ON FUNCTION broker._run_begin(bigint, uuid) IS
    'Internal: lock a running job for execution and check its lease token.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_run(p_job_id, p_lease_token)
--   Executes a claimed (running) job inside the caller's transaction:
--   * the job's SQL runs in a subtransaction with broker.tenant_id set to the
--     job's tenant; sql jobs via EXECUTE, plpgsql jobs as a DO block;
--   * success: the job's effects and its completion (status 2) commit
--     together, and its dependents are released;
--   * failure (any error, including a statement_timeout cancel): the job's
--     effects roll back, SQLSTATE and message are kept, and the job is
--     retried after a backoff or, with no attempts left, failed with its
--     dependents cancelled.
--   Returns the outcome. Without p_lease_token any running job may be run.
--   Per-job timeout: SET LOCAL statement_timeout to job_timeout before the
--   call (the runner does this); a timeout inside the job fails the attempt.
-- Errors: P0002 unknown job; 55000 job not running or lease lost.
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_run(p_job_id bigint, p_lease_token uuid DEFAULT NULL)
RETURNS TABLE (
    job_id          bigint,
    complete_status smallint,
    attempts        integer,
    error_sqlstate  text,
    error_message   text,
    duration        interval)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_job      broker.broker_jobs;
    v_tenant   text;
    v_state    text;
    v_message  text;
    v_status   smallint;
    v_started  timestamptz;
BEGIN
    v_job := broker._run_begin(p_job_id, p_lease_token);
    v_tenant := pg_catalog.current_setting('broker.tenant_id', true);
    v_started := pg_catalog.clock_timestamp();
    BEGIN
        PERFORM pg_catalog.set_config('broker.tenant_id', v_job.tenant_id, true);
        IF v_job.job_language OPERATOR(pg_catalog.=) 'plpgsql' THEN
            EXECUTE 'DO LANGUAGE plpgsql ' OPERATOR(pg_catalog.||) pg_catalog.quote_literal(v_job.execute_str);
        ELSE
            EXECUTE v_job.execute_str;
        END IF;
    EXCEPTION WHEN OTHERS OR query_canceled THEN
        GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_message = MESSAGE_TEXT;
    END;
    PERFORM pg_catalog.set_config('broker.tenant_id', COALESCE(v_tenant, ''), true);

    IF v_state IS NULL THEN
        PERFORM broker._complete_job(p_job_id);
        v_status := 2;
    ELSE
        v_status := broker._fail_attempt(p_job_id, v_state, v_message);
    END IF;
    RETURN QUERY SELECT p_job_id, v_status, v_job.attempts, v_state, v_message,
                        pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) v_started;
END;
$$;
COMMENT ON FUNCTION broker.broker_run(bigint, uuid) IS
    'Executes a claimed job; its effects and its completion commit in the caller''s transaction, a failure rolls its effects back and retries or fails it. Returns the outcome.';
