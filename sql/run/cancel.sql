-- sql/run/cancel.sql: cancelling jobs: pending ones at once (broker_cancel_job, the cancel_reason trigger), running ones
-- by a cancel request the runner acts on (broker_cancel_requests) and the run path's rule (_cancel_running).
-- ---------------------------------------------------------------------------
-- Function: broker._cancel_requests(p_job_ids)
--   The rule of a cancel request, for many jobs at once: the jobs of
--   p_job_ids with a cancel request made for their current attempt (a
--   broker_job_actions row 'cancel' made since the job was claimed), each
--   with the reason of its latest one. Inlined into the caller's query, so
--   it reads with that query's snapshot: callers read it in a statement of
--   its own, as a request is committed by another session while the job
--   waits or runs.
--   Calls: none
--   Tables: reads broker_job_actions, broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._cancel_requests(p_job_ids bigint[])
RETURNS TABLE (job_id bigint, reason text)
LANGUAGE sql STABLE
AS $$
    SELECT DISTINCT ON (a.job_id) a.job_id, COALESCE(a.reason, 'cancelled by ' OPERATOR(pg_catalog.||) a.requested_by)
      FROM broker.broker_job_actions AS a
      JOIN broker.broker_jobs AS j ON j.job_id OPERATOR(pg_catalog.=) a.job_id
     WHERE a.job_id OPERATOR(pg_catalog.=) ANY (p_job_ids)
       AND a.action OPERATOR(pg_catalog.=) 'cancel'
       AND a.requested_at OPERATOR(pg_catalog.>=) j.started_at
     ORDER BY a.job_id, a.action_id DESC
$$;
COMMENT ON FUNCTION broker._cancel_requests(bigint[]) IS
    'Internal: the jobs with a cancel request for their current attempt, each with its latest reason (the rule of a cancel request).';

-- ---------------------------------------------------------------------------
-- Function: broker._cancel_requested(p_job_id)
--   The reason of the cancel request made for the current attempt of job
--   p_job_id (_cancel_requests), or NULL when there is none. Read with a
--   fresh snapshot: the request is committed by another session while the
--   job runs.
--   Calls: _cancel_requests
--   Tables: reads broker_job_actions, broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._cancel_requested(p_job_id bigint)
RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT r.reason FROM broker._cancel_requests(ARRAY[p_job_id]) AS r);
END;
$$;
COMMENT ON FUNCTION broker._cancel_requested(bigint) IS
    'Internal: the reason of a cancel request for the current attempt of a running job, or NULL.';

-- ---------------------------------------------------------------------------
-- Function: broker._cancel_handed_back(p_job_ids)
--   For jobs just handed back to pending unrun or interrupted
--   (broker_release_jobs, broker_interrupt_jobs): those with a cancel request
--   made while they were claimed are not run again but cancelled, by the
--   cancel of a pending job (cancel_reason, trigger
--   broker_jobs_cancel_request_trg: dependents and all). Claimed anew, the
--   request would no longer be for the job's current attempt.
--   Calls: _cancel_requests
--   Tables: writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._cancel_handed_back(p_job_ids bigint[])
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    UPDATE broker.broker_jobs AS j SET cancel_reason = r.reason
      FROM broker._cancel_requests(p_job_ids) AS r
     WHERE j.job_id OPERATOR(pg_catalog.=) r.job_id
       AND j.complete_status OPERATOR(pg_catalog.=) broker._state('pending');
END;
$$;
COMMENT ON FUNCTION broker._cancel_handed_back(bigint[]) IS
    'Internal: jobs handed back to pending with a cancel request made while they were claimed end cancelled instead.';

-- ---------------------------------------------------------------------------
-- Function: broker._end_cancelled(p_job_id, p_reason)
--   Ends running job p_job_id cancelled (4) with p_reason, and cancels its
--   dependents as a pending job's cancel does. Returns 4 (NULL: the job is
--   not running).
--   Calls: _cancel_dependents
--   Tables: writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._end_cancelled(p_job_id bigint, p_reason text)
RETURNS smallint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job record;
BEGIN
    UPDATE broker.broker_jobs AS j
       SET complete_status = broker._state('cancelled'),
           finished_at = pg_catalog.clock_timestamp(),
           lease_token = NULL, lease_expires_at = NULL,
           cancel_reason = p_reason
     WHERE j.job_id OPERATOR(pg_catalog.=) p_job_id
       AND j.complete_status OPERATOR(pg_catalog.=) broker._state('running')
    RETURNING j.tenant_id, j.job_id, j.job_group, j.job_name INTO v_job;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    PERFORM broker._cancel_dependents(v_job.tenant_id, v_job.job_id, v_job.job_group,
        pg_catalog.format('dependency job %s (%s) was cancelled', v_job.job_id, v_job.job_name));
    RETURN 4;
END;
$$;
COMMENT ON FUNCTION broker._end_cancelled(bigint, text) IS
    'Internal: end a running job cancelled (status 4) with a reason, and cancel its dependents.';

-- ---------------------------------------------------------------------------
-- Function: broker._cancel_running(p_job_id, p_sqlstate, p_message)
--   The run path's cancel rule: an attempt that ended with 57014
--   (query_canceled) while a cancel request exists for it was stopped by
--   that request: the attempt is recorded cancelled and the job ends
--   cancelled with the request's reason (_end_cancelled). Returns 4, or NULL
--   when this is not such an attempt (the caller handles it as before).
--   Calls: _cancel_requested, _record_attempts, _end_cancelled
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._cancel_running(p_job_id bigint, p_sqlstate text, p_message text)
RETURNS smallint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_reason text;
BEGIN
    IF p_sqlstate IS DISTINCT FROM '57014' THEN
        RETURN NULL;
    END IF;
    v_reason := broker._cancel_requested(p_job_id);
    IF v_reason IS NULL THEN
        RETURN NULL;
    END IF;
    PERFORM broker._record_attempts(ARRAY[p_job_id], 'cancelled', ARRAY[p_sqlstate], ARRAY[p_message]);
    RETURN broker._end_cancelled(p_job_id, v_reason);
END;
$$;
COMMENT ON FUNCTION broker._cancel_running(bigint, text, text) IS
    'Internal: a run that ended with 57014 under a cancel request ends cancelled (attempt recorded); NULL when that is not the case.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_cancel_requests(p_job_ids)
--   For the runner: which of the jobs p_job_ids (the ones it is running) are
--   still running with a cancel request for their current attempt, whatever
--   their tenant. A NOTIFY '<database>/cancel/<job id>' is only a hint (any
--   login may send one): the runner cancels a job's statement only when this
--   names the job, so no one can stop another tenant's job without a request
--   the policies accepted.
-- Errors: 22023 more than 1000 ids.
-- Example:
--   SELECT * FROM broker.broker_cancel_requests(ARRAY[41, 42]);
--   Calls: _cancel_requests
--   Tables: reads broker_jobs, broker_job_actions
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_cancel_requests(p_job_ids bigint[])
RETURNS TABLE (job_id bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.cardinality(p_job_ids) OPERATOR(pg_catalog.>) 1000 THEN
        RAISE EXCEPTION 'broker_cancel_requests: at most 1000 jobs per call, got %', pg_catalog.cardinality(p_job_ids)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
        SELECT j.job_id FROM broker.broker_jobs AS j
         WHERE j.job_id OPERATOR(pg_catalog.=) ANY (p_job_ids)
           AND j.complete_status OPERATOR(pg_catalog.=) broker._state('running')
           AND j.job_id OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT r.job_id FROM broker._cancel_requests(p_job_ids) AS r))
         ORDER BY j.job_id;
END;
$$;
COMMENT ON FUNCTION broker.broker_cancel_requests(bigint[]) IS
    'For the runner: the jobs among those given that are running with a cancel request for their current attempt (a NOTIFY is only a hint).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_cancel_job(p_job_id, p_reason)
--   Cancels a job of the caller's tenant:
--   * pending: it is cancelled at once, and, transitively, every pending job
--     waiting on it (sets cancel_reason with the caller's rights; the
--     trigger broker_jobs_cancel_request_trg does the cancelling);
--   * running: a cancel request is recorded (broker_job_actions, committed
--     with the caller's transaction) and the runner holding the job is told
--     (NOTIFY pgsql_broker '<database>/cancel/<job id>'): it cancels the
--     statement running the job, which then ends cancelled with p_reason and
--     its dependents cancelled. A job that finishes before the cancel lands
--     keeps its result; one that fails meanwhile is not retried.
--   Returns the number of jobs cancelled (for a running job: 1, the request).
-- Errors: 22004 NULL id; P0002 no such job in this tenant; 55000 the job
--   already finished (completed, failed or cancelled).
-- Example:
--   SELECT broker.broker_cancel_job(42, 'superseded by job 57');
--   Calls: broker_current_tenant
--   Tables: writes broker_jobs, broker_job_actions
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
    IF v_status OPERATOR(pg_catalog.=) broker._state('running') THEN
        -- the trigger broker_job_actions_trg checks it is still running and tells its runner
        INSERT INTO broker.broker_job_actions (job_id, action, reason)
        VALUES (p_job_id, 'cancel', pg_catalog.left(v_reason, 2000));
        RETURN 1;
    END IF;
    RAISE EXCEPTION 'broker_cancel_job: job % is %; only pending or running jobs can be cancelled', p_job_id,
        CASE v_status WHEN 2 THEN 'completed' WHEN 3 THEN 'failed' ELSE 'cancelled' END
        USING ERRCODE = 'object_not_in_prerequisite_state';
END;
$$;
COMMENT ON FUNCTION broker.broker_cancel_job(bigint, text) IS
    'Cancels a pending or running job of the current tenant and every pending job that waits on it; returns how many were cancelled (a running job: 1, ended by its runner).';

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
