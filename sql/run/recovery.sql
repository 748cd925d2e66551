-- sql/run/recovery.sql: recovering jobs whose lease expired (broker_recover_stale_jobs).
-- ---------------------------------------------------------------------------
-- Function: broker.broker_recover_stale_jobs(p_limit)
--   Recovers running jobs whose lease has expired AND that nobody is
--   executing: a job under execution is row-locked by broker_run until its
--   transaction ends, and locked rows are skipped, however long they run.
--   A recovered job counts the lost attempt: it returns to pending (after the
--   retry backoff) while attempts < max_attempts, else it fails and its
--   dependents are cancelled. Returns (job_id, complete_status) per job.
-- Errors: 22023 p_limit < 1.
-- Example:
--   SELECT * FROM broker.broker_recover_stale_jobs();
--   Calls: _fail_attempt
--   Tables: reads broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_recover_stale_jobs(p_limit integer DEFAULT 1000)
RETURNS TABLE (job_id bigint, complete_status smallint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r record;
BEGIN
    IF p_limit IS NULL OR p_limit OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'broker_recover_stale_jobs: p_limit must be >= 1' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR r IN
        SELECT j.job_id, j.lease_expires_at, j.lease_instance_id
          FROM broker.broker_jobs AS j
         WHERE j.complete_status OPERATOR(pg_catalog.=) broker._state('running')
           AND j.lease_expires_at OPERATOR(pg_catalog.<) pg_catalog.clock_timestamp()
         ORDER BY j.lease_expires_at
         LIMIT p_limit
           FOR NO KEY UPDATE SKIP LOCKED
    LOOP
        job_id := r.job_id;
        complete_status := broker._fail_attempt(r.job_id, NULL,
            pg_catalog.format('lease expired at %s and no session was executing the job (instance %s)',
                              r.lease_expires_at, COALESCE(r.lease_instance_id::text, 'unknown')));
        RETURN NEXT;
    END LOOP;
END;
$$;
COMMENT ON FUNCTION broker.broker_recover_stale_jobs(integer) IS
    'Returns to pending (or fails, when attempts are spent) running jobs whose lease expired and that no session is executing; returns (job_id, new complete_status).';
