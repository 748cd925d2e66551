-- sql/run/finish.sql: completing jobs.
-- ---------------------------------------------------------------------------
-- Function: broker._complete_job(p_job_id)
--   Marks a running job completed and releases its dependents.
--   Calls: _release_dependents
--   Tables: writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._complete_job(p_job_id bigint)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job broker.broker_jobs;
BEGIN
    UPDATE broker.broker_jobs AS j
       SET complete_status = broker._state('completed'),
           finished_at = pg_catalog.clock_timestamp(),
           lease_token = NULL, lease_expires_at = NULL
     WHERE j.job_id OPERATOR(pg_catalog.=) p_job_id
    RETURNING j.* INTO v_job;
    IF FOUND THEN
        PERFORM broker._release_dependents(v_job.tenant_id, v_job.job_id, v_job.job_group);
    END IF;
END;
$$;
COMMENT ON FUNCTION broker._complete_job(bigint) IS
    'Internal: mark a job completed (status 2) and release the jobs waiting on it.';

-- ---------------------------------------------------------------------------
-- Function: broker._complete_jobs(p_job_ids)
--   _complete_job for many jobs at once (broker_run_batch, after its jobs
--   ran): one UPDATE, and one release of dependents per tenant. Generic
--   plans: a custom plan of the UPDATE was made again at every call.
--   Calls: _release_dependents_of
--   Tables: writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._complete_jobs(p_job_ids bigint[])
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    r record;
BEGIN
    FOR r IN
        WITH done AS (
            UPDATE broker.broker_jobs AS j
               SET complete_status = broker._state('completed'),
                   finished_at = pg_catalog.clock_timestamp(),
                   lease_token = NULL, lease_expires_at = NULL
             WHERE j.job_id OPERATOR(pg_catalog.=) ANY (p_job_ids)
            RETURNING j.tenant_id, j.job_id, j.job_group
        )
        SELECT d.tenant_id, pg_catalog.array_agg(d.job_id ORDER BY d.job_id) AS ids,
               pg_catalog.array_agg(d.job_group ORDER BY d.job_id) AS groups
          FROM done AS d
         GROUP BY d.tenant_id
         ORDER BY d.tenant_id
    LOOP
        PERFORM broker._release_dependents_of(r.tenant_id, r.ids, r.groups);
    END LOOP;
END;
$$;
COMMENT ON FUNCTION broker._complete_jobs(bigint[]) IS
    'Internal: mark jobs completed (status 2) in one statement and release the jobs waiting on them.';
