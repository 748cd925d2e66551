-- sql/run/autonomous.sql: starting autonomous jobs, keeping their leases, recording their outcome (the runner's side).
-- ---------------------------------------------------------------------------
-- Function: broker.broker_autonomous_begin(p_job_id, p_lease_token)
--   Starts a claimed autonomous job (one that runs outside a transaction
--   block): returns what the runner needs to run it on a connection of its
--   own, in a transaction of its own that commits before the job runs (so
--   the job runs at least once: a crash before broker_autonomous_end leaves
--   it running under its lease, and lease recovery retries it). The runner
--   keeps the lease alive while the job runs (broker_autonomous_extend).
--   Checked here, as broker_run checks a regular job: the enqueuer may still
--   have it run (_authority_lost), and the run_as role still has its
--   arrangement (broker_allow_autonomous); otherwise the job fails for good
--   (42501, its dependents cancelled) and refused says why.
--   via: 'set_role' (the runner SET ROLEs to run_as; maintenance statements
--   only) or 'login' (the runner logs in as run_as).
-- Errors: P0002 unknown job; 55000 job not running, lease lost, or not an
--   autonomous job (run those with broker_run).
-- Example:
--   SELECT * FROM broker.broker_autonomous_begin(42, '1d2e...'::uuid);
--   Calls: _run_begin, _authority_lost, _autonomous_via, _record_attempts, _fail_job
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_autonomous_begin(p_job_id bigint, p_lease_token uuid)
RETURNS TABLE (job_id bigint, execute_str text, run_as name, via text, search_path text, tenant_id text, refused text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job    broker.broker_jobs;
    v_via    text;
    v_denied text;
BEGIN
    v_job := broker._run_begin(p_job_id, p_lease_token);
    IF NOT v_job.autonomous THEN
        RAISE EXCEPTION 'broker_autonomous_begin: job % is not autonomous', p_job_id
            USING ERRCODE = 'object_not_in_prerequisite_state', HINT = 'Run it with broker.broker_run().';
    END IF;
    v_denied := broker._authority_lost(v_job.enqueued_by, v_job.tenant_id, v_job.run_as, 'enqueuer');
    IF v_denied IS NULL THEN
        v_via := broker._autonomous_via(v_job.run_as);
        IF v_via IS NULL THEN
            v_denied := pg_catalog.format('role %I may no longer run autonomous jobs (broker_allow_autonomous)', v_job.run_as);
        END IF;
    END IF;
    IF v_denied IS NOT NULL THEN
        PERFORM broker._record_attempts(ARRAY[p_job_id], 'failed', ARRAY['42501'], ARRAY[v_denied]);
        PERFORM broker._fail_job(p_job_id, '42501', v_denied);
    END IF;
    RETURN QUERY SELECT p_job_id, CASE WHEN v_denied IS NULL THEN v_job.execute_str END, v_job.run_as, v_via,
                        v_job.job_search_path, v_job.tenant_id, v_denied;
END;
$$;
COMMENT ON FUNCTION broker.broker_autonomous_begin(bigint, uuid) IS
    'Starts a claimed autonomous job: checks its enqueuer''s rights and its role''s arrangement (else fails it, 42501) and returns its SQL, run_as, how to run it (set_role or login), search_path and tenant.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_autonomous_extend(p_job_ids, p_lease_tokens, p_lease_seconds)
--   Keeps the leases of autonomous jobs alive while the runner executes them
--   (no transaction holds their rows locked, so the lease is what marks them
--   as executing): each job still running under the token given with it
--   gets lease_expires_at = now + p_lease_seconds. Returns the ids extended.
-- Errors: 22004 NULL; 22023 arrays of different lengths, more than 1000
--   jobs, or a lease outside 1..3600 seconds.
-- Example:
--   SELECT broker.broker_autonomous_extend(ARRAY[42], ARRAY['1d2e...'::uuid], 60);
--   Calls: _check_lease_args, _state, _check_lease_seconds
--   Tables: writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_autonomous_extend(p_job_ids bigint[], p_lease_tokens uuid[], p_lease_seconds integer)
RETURNS TABLE (job_id bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM broker._check_lease_args('broker_autonomous_extend', p_job_ids, p_lease_tokens);
    PERFORM broker._check_lease_seconds('broker_autonomous_extend', p_lease_seconds);
    RETURN QUERY
    UPDATE broker.broker_jobs AS j
       SET lease_expires_at = pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => p_lease_seconds)
      FROM ROWS FROM (pg_catalog.unnest(p_job_ids), pg_catalog.unnest(p_lease_tokens)) AS u(id, token)
     WHERE j.job_id OPERATOR(pg_catalog.=) u.id
       AND j.complete_status OPERATOR(pg_catalog.=) broker._state('running')
       AND j.autonomous
       AND j.lease_token OPERATOR(pg_catalog.=) u.token
    RETURNING j.job_id;
END;
$$;
COMMENT ON FUNCTION broker.broker_autonomous_extend(bigint[], uuid[], integer) IS
    'Extends the leases of running autonomous jobs (under their claim''s tokens) while the runner executes them; returns the ids extended.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_autonomous_end(p_job_id, p_lease_token, p_error_sqlstate,
--     p_error_message, p_duration, p_final)
--   Records the outcome of an autonomous job in a transaction of its own,
--   with its row in the attempt history, through the functions every job's
--   outcome goes through: completed
--   (p_error_sqlstate NULL) and its dependents released, or a failed attempt
--   (retried after the backoff, or failed with its dependents cancelled), or
--   with p_final failed for good whatever attempts are left (the runner
--   refused to run the text). A permission error gets the role appended, as
--   for regular jobs; a statement cancelled (57014) under a cancel request
--   ends the job cancelled (_cancel_running). Returns the outcome as
--   broker_run does.
-- Errors: P0002 unknown job; 55000 job not running or lease lost (the lease
--   expired and the job was recovered meanwhile: that outcome stands).
-- Example:
--   SELECT * FROM broker.broker_autonomous_end(42, '1d2e...'::uuid, NULL, NULL, interval '12 seconds');
--   Calls: _run_begin, _record_attempts, _complete_job, _state, _error_text, _grant_hint, _fail_job, _cancel_running, _fail_attempt
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_autonomous_end(p_job_id bigint, p_lease_token uuid, p_error_sqlstate text,
                                             p_error_message text, p_duration interval, p_final boolean DEFAULT false)
RETURNS TABLE (
    job_id          bigint,
    complete_status smallint,
    attempts        integer,
    error_sqlstate  text,
    error_message   text,
    duration        interval)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job     broker.broker_jobs := broker._run_begin(p_job_id, p_lease_token);
    v_status  smallint;
    v_message text;
BEGIN
    IF NOT v_job.autonomous THEN
        RAISE EXCEPTION 'broker_autonomous_end: job % is not autonomous', p_job_id
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF p_error_sqlstate IS NULL THEN
        PERFORM broker._record_attempts(ARRAY[p_job_id], 'completed');
        PERFORM broker._complete_job(p_job_id);
        v_status := broker._state('completed');
    ELSE
        v_message := broker._error_text(COALESCE(p_error_message, ''));
        IF p_error_sqlstate OPERATOR(pg_catalog.=) '42501' THEN
            v_message := v_message OPERATOR(pg_catalog.||) pg_catalog.format(' (the job runs as role %I', v_job.run_as)
                OPERATOR(pg_catalog.||) COALESCE('; needed: ' OPERATOR(pg_catalog.||) broker._grant_hint(v_job.run_as, p_error_message), '')
                OPERATOR(pg_catalog.||) ')';
        END IF;
        IF p_final THEN  -- (_fail_attempt and _cancel_running record their attempt themselves)
            PERFORM broker._record_attempts(ARRAY[p_job_id], 'failed', ARRAY[p_error_sqlstate], ARRAY[v_message]);
        END IF;
        v_status := CASE WHEN p_final THEN broker._fail_job(p_job_id, p_error_sqlstate, v_message)
                         ELSE COALESCE(broker._cancel_running(p_job_id, p_error_sqlstate, v_message),
                                       broker._fail_attempt(p_job_id, p_error_sqlstate, v_message)) END;
    END IF;
    RETURN QUERY SELECT p_job_id, v_status, v_job.attempts, p_error_sqlstate, v_message, COALESCE(p_duration, interval '0');
END;
$$;
COMMENT ON FUNCTION broker.broker_autonomous_end(bigint, uuid, text, text, interval, boolean) IS
    'Records the outcome of an autonomous job (completed, a failed attempt, or with p_final failed for good) in its own transaction; returns it as broker_run does.';
