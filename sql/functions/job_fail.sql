-- ---------------------------------------------------------------------------
-- Function: broker._error_text(p_message)
--   A job's error message as it is stored and returned: at most 2,000
--   characters. A longer one is cut so that, with ' [truncated from <n>
--   characters]' appended, it is 2,000 characters (so capping twice changes
--   nothing). Error messages carry text of the job's choosing (and row data)
--   of any length: whole, 20 failing jobs with 16 MB messages filled the
--   runner's memory and its dashboard.
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
-- Function: broker._cancel_dependents(p_tenant_id, p_job_id, p_job_group, p_reason)
--   Called when job p_job_id ended failed or cancelled: every pending job
--   waiting on it (by id, or by its group), and transitively every pending job
--   waiting on those, is cancelled with p_reason and cancel_cause_job_id
--   p_job_id (what broker_retry_job brings back with it). Returns how many.
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
               SET complete_status = 4,
                   finished_at = pg_catalog.clock_timestamp(),
                   cancel_reason = p_reason,
                   cancel_cause_job_id = p_job_id
             WHERE d.job_id OPERATOR(pg_catalog.=) ANY (v_locked)
               AND d.complete_status OPERATOR(pg_catalog.=) 0
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

-- ---------------------------------------------------------------------------
-- Function: broker._fail_job(p_job_id, p_sqlstate, p_message)
--   Fails a running job for good (3), whatever attempts it has left, with
--   p_sqlstate and p_message, and cancels its dependents. Returns 3 (NULL: no
--   such job). _fail_attempt's last attempt, and a job refused at run time.
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
       SET complete_status = 3,
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
    RETURN 3;
END;
$$;
COMMENT ON FUNCTION broker._fail_job(bigint, text, text) IS
    'Internal: fail a job for good (status 3) whatever attempts it has left, and cancel its dependents.';

-- ---------------------------------------------------------------------------
-- Function: broker._fail_attempt(p_job_id, p_sqlstate, p_message)
--   Records a failed attempt of a running job (in the attempt history:
--   failed, or lost when p_sqlstate is NULL, as lease recovery passes it).
--   While attempts < max_attempts the job returns to pending with run_after =
--   now + backoff, unless a cancel request was made for this attempt
--   (broker_cancel_job while it ran): then it ends cancelled instead of
--   running again. With no attempts left it is failed (3) and its dependents
--   are cancelled (_fail_job). Returns the new status.
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
    PERFORM broker._record_attempts(ARRAY[p_job_id], CASE WHEN p_sqlstate IS NULL THEN 'lost' ELSE 'failed' END,
                                    ARRAY[p_sqlstate], ARRAY[p_message]);
    IF v_job.attempts OPERATOR(pg_catalog.<) v_job.max_attempts
       AND broker._cancel_requested(p_job_id) IS NOT NULL THEN
        RETURN broker._end_cancelled(p_job_id, broker._cancel_requested(p_job_id));
    END IF;
    IF v_job.attempts OPERATOR(pg_catalog.<) v_job.max_attempts THEN
        -- Back to pending: count again what it waits on. Jobs that joined one of
        -- its groups while it was running were not counted for it then.
        UPDATE broker.broker_jobs AS j
           SET complete_status = 0,
               pending_deps = broker._count_pending_deps(v_job.tenant_id, v_job.job_id),
               run_after = pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) broker._retry_delay(v_job.attempts),
               lease_token = NULL, lease_expires_at = NULL, lease_instance_id = NULL,
               last_error_sqlstate = p_sqlstate, last_error_message = broker._error_text(p_message)
         WHERE j.job_id OPERATOR(pg_catalog.=) p_job_id;
        RETURN 0;
    END IF;
    RETURN broker._fail_job(p_job_id, p_sqlstate, p_message);
END;
$$;
COMMENT ON FUNCTION broker._fail_attempt(bigint, text, text) IS
    'Internal: record a failed attempt; retry with exponential backoff while attempts < max_attempts, else fail and cancel dependents.';
