-- sql/run/fail.sql: failing an attempt: error text, retry delay, final failure.
-- ---------------------------------------------------------------------------
-- Function: broker._error_text(p_message)
--   A job's error message as it is stored and returned: at most 2,000
--   characters. A longer one is cut so that, with ' [truncated from <n>
--   characters]' appended, it is 2,000 characters (so capping twice changes
--   nothing). Error messages carry text of the job's choosing (and row data)
--   of any length: whole, 20 failing jobs with 16 MB messages filled the
--   runner's memory and its dashboard.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._error_text(p_message text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN pg_catalog.length(p_message) OPERATOR(pg_catalog.<=) 2000 THEN p_message
                ELSE pg_catalog.left(p_message, 2000 OPERATOR(pg_catalog.-) pg_catalog.length(m.marker)) OPERATOR(pg_catalog.||) m.marker END
      FROM (SELECT ' [truncated from ' OPERATOR(pg_catalog.||) pg_catalog.length(p_message)::text
                   OPERATOR(pg_catalog.||) ' characters]' AS marker) AS m
$$;
COMMENT ON FUNCTION broker._error_text(text) IS
    'Internal: a job error message as stored and returned: at most 2,000 characters, a longer one cut and ending in '' [truncated from <n> characters]''.';

-- ---------------------------------------------------------------------------
-- Function: broker._retry_delay(p_attempts)
--   Backoff before the next attempt after p_attempts attempts failed:
--   retry_base_seconds * 2^(p_attempts - 1), at most retry_max_seconds.
--   Calls: _setting_int
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._retry_delay(p_attempts integer)
RETURNS interval
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_base integer := broker._setting_int('retry_base_seconds', 5, 0);
    v_max  integer := broker._setting_int('retry_max_seconds', 3600, 1);
    v_exp  integer := LEAST(GREATEST(p_attempts OPERATOR(pg_catalog.-) 1, 0), 30);
BEGIN
    RETURN pg_catalog.make_interval(secs =>
        LEAST(v_base::double precision OPERATOR(pg_catalog.*) pg_catalog.power(2::double precision, v_exp::double precision),
              v_max::double precision));
END;
$$;
COMMENT ON FUNCTION broker._retry_delay(integer) IS
    'Internal: retry backoff after n failed attempts: retry_base_seconds * 2^(n-1), capped at retry_max_seconds.';

-- ---------------------------------------------------------------------------
-- Function: broker._fail_job(p_job_id, p_sqlstate, p_message)
--   Fails a running job for good (3), whatever attempts it has left, with
--   p_sqlstate and p_message, and cancels its dependents. Returns 3 (NULL: no
--   such job). _fail_attempt's last attempt, and a job refused at run time.
--   Calls: _error_text, _cancel_dependents
--   Tables: writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._fail_job(p_job_id bigint, p_sqlstate text, p_message text)
RETURNS smallint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job record;
BEGIN
    UPDATE broker.broker_jobs AS j
       SET complete_status = broker._state('failed'),
           finished_at = pg_catalog.clock_timestamp(),
           lease_token = NULL, lease_expires_at = NULL,
           last_error_sqlstate = p_sqlstate, last_error_message = broker._error_text(p_message)
     WHERE j.job_id OPERATOR(pg_catalog.=) p_job_id
    RETURNING j.tenant_id, j.job_id, j.job_group, j.job_name INTO v_job;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    PERFORM broker._cancel_dependents(v_job.tenant_id, v_job.job_id, v_job.job_group,
        pg_catalog.format('dependency job %s (%s) failed', v_job.job_id, v_job.job_name));
    RETURN broker._state('failed');
END;
$$;
COMMENT ON FUNCTION broker._fail_job(bigint, text, text) IS
    'Internal: fail a job for good (status 3) whatever attempts it has left, and cancel its dependents.';

-- ---------------------------------------------------------------------------
-- Function: broker._fail_attempt(p_job_id, p_sqlstate, p_message)
--   Records a failed attempt of a running job. While attempts < max_attempts
--   the job returns to pending with run_after = now + backoff; otherwise it
--   is failed (3) and its dependents are cancelled (_fail_job). Returns the
--   new status.
--   Calls: _count_pending_deps, _retry_delay, _error_text, _fail_job
--   Tables: writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._fail_attempt(p_job_id bigint, p_sqlstate text, p_message text)
RETURNS smallint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job broker.broker_jobs;
BEGIN
    SELECT * INTO v_job FROM broker.broker_jobs AS j WHERE j.job_id OPERATOR(pg_catalog.=) p_job_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF v_job.attempts OPERATOR(pg_catalog.<) v_job.max_attempts THEN
        -- Back to pending: count again what it waits on. Jobs that joined one of
        -- its groups while it was running were not counted for it then.
        UPDATE broker.broker_jobs AS j
           SET complete_status = broker._state('pending'),
               pending_deps = broker._count_pending_deps(v_job.tenant_id, v_job.job_id),
               run_after = pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) broker._retry_delay(v_job.attempts),
               lease_token = NULL, lease_expires_at = NULL, lease_instance_id = NULL,
               last_error_sqlstate = p_sqlstate, last_error_message = broker._error_text(p_message)
         WHERE j.job_id OPERATOR(pg_catalog.=) p_job_id;
        RETURN broker._state('pending');
    END IF;
    RETURN broker._fail_job(p_job_id, p_sqlstate, p_message);
END;
$$;
COMMENT ON FUNCTION broker._fail_attempt(bigint, text, text) IS
    'Internal: record a failed attempt; retry with exponential backoff while attempts < max_attempts, else fail and cancel dependents.';
