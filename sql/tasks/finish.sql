-- sql/tasks/finish.sql: a worker's heartbeat and the end of a task (broker_extend_task,
-- broker_complete_task, broker_fail_task).
-- ---------------------------------------------------------------------------
-- Function: broker._task_leases(p_fn, p_job_ids, p_lease_tokens)
--   Of the caller's claimed tasks p_job_ids, those whose lease is still the
--   token given with each (in p_job_ids' order), every one of them locked
--   (FOR NO KEY UPDATE, in job_id order) until the caller's transaction
--   ends; a task whose lease expired and was recovered, claimed again or
--   ended is left out. Only tasks of the caller's tenant are found, and
--   under strict tenancy only by a role mapped to it (_task_actor).
-- Errors: 22004 a NULL array, id or token; 22023 arrays of different
--   lengths or more than 1,000, or a task named twice (each would be ended
--   once per repetition: an attempt row each); 42501 the role may not act
--   for the tenant; P0002 a task not of the tenant (as p_fn).
--   Calls: _check_lease_args, broker_current_tenant, _tenant_allowed, _task_actor
--   Tables: reads broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._task_leases(p_fn text, p_job_ids bigint[], p_lease_tokens uuid[])
RETURNS bigint[]
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
DECLARE
    v_tenant  text := broker.broker_current_tenant();
    v_missing bigint;
    v_twice   bigint;
BEGIN
    PERFORM broker._check_lease_args(p_fn, p_job_ids, p_lease_tokens);
    IF pg_catalog.array_position(p_job_ids, NULL) IS NOT NULL OR pg_catalog.array_position(p_lease_tokens, NULL) IS NOT NULL THEN
        RAISE EXCEPTION '%: p_job_id and p_lease_token must not be NULL', p_fn USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF pg_catalog.cardinality(p_job_ids) OPERATOR(pg_catalog.>) 1 THEN
        SELECT u.id INTO v_twice FROM pg_catalog.unnest(p_job_ids) AS u(id) GROUP BY u.id
        HAVING pg_catalog.count(*) OPERATOR(pg_catalog.>) 1 ORDER BY u.id LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION '%: task % is named more than once', p_fn, v_twice USING ERRCODE = 'invalid_parameter_value',
                HINT = 'Name each task once, with its lease token.';
        END IF;
    END IF;
    IF NOT broker._tenant_allowed(v_tenant, broker._task_actor()) THEN
        RAISE EXCEPTION '%: role % may not act for tenant %', p_fn, pg_catalog.quote_ident(broker._task_actor()),
            pg_catalog.quote_literal(v_tenant)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    PERFORM FROM broker.broker_jobs AS j
      WHERE j.job_id OPERATOR(pg_catalog.=) ANY (p_job_ids)
        AND j.tenant_id OPERATOR(pg_catalog.=) v_tenant
        AND j.job_language OPERATOR(pg_catalog.=) 'task'
      ORDER BY j.job_id
        FOR NO KEY UPDATE;
    SELECT u.id INTO v_missing FROM pg_catalog.unnest(p_job_ids) AS u(id)
     WHERE NOT EXISTS (SELECT FROM broker.broker_jobs AS j
                        WHERE j.job_id OPERATOR(pg_catalog.=) u.id
                          AND j.tenant_id OPERATOR(pg_catalog.=) v_tenant
                          AND j.job_language OPERATOR(pg_catalog.=) 'task')
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION '%: task % does not exist', p_fn, v_missing USING ERRCODE = 'no_data_found';
    END IF;
    RETURN ARRAY(SELECT u.id FROM ROWS FROM (pg_catalog.unnest(p_job_ids), pg_catalog.unnest(p_lease_tokens)) WITH ORDINALITY AS u(id, token, o)
                  WHERE EXISTS (SELECT FROM broker.broker_jobs AS j
                                 WHERE j.job_id OPERATOR(pg_catalog.=) u.id
                                   AND j.complete_status OPERATOR(pg_catalog.=) broker._state('running')
                                   AND j.lease_token OPERATOR(pg_catalog.=) u.token)
                  ORDER BY u.o);
END;
$$;
COMMENT ON FUNCTION broker._task_leases(text, bigint[], uuid[]) IS
    'Internal: of the caller''s claimed tasks, those whose lease is still the token''s, locked; P0002 for a task not of the tenant.';

-- ---------------------------------------------------------------------------
-- Function: broker._task_lease(p_fn, p_job_id, p_lease_token)
--   Whether the caller's claimed task p_job_id is still under lease
--   p_lease_token, locked until the caller's transaction ends
--   (_task_leases of one task, with its errors).
--   Calls: _task_leases
--   Tables: reads broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._task_lease(p_fn text, p_job_id bigint, p_lease_token uuid)
RETURNS boolean
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT pg_catalog.cardinality(broker._task_leases(p_fn, ARRAY[p_job_id], ARRAY[p_lease_token])) OPERATOR(pg_catalog.>) 0
$$;
COMMENT ON FUNCTION broker._task_lease(text, bigint, uuid) IS
    'Internal: whether the caller''s claimed task is still under the token''s lease (locked); P0002 for a task not of the tenant.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_extend_task(p_job_id, p_lease_token, p_lease_seconds)
--   The heartbeat of a running task: its lease runs p_lease_seconds (default:
--   setting lease_seconds, else 60) from now. Returns 'extended'; 'cancelled'
--   when a cancel request was made for this attempt (broker_cancel_job: the
--   lease is extended, so that the worker can stop the handler and call
--   broker_fail_task, which ends the task cancelled); 'lost' when the lease
--   is no longer the token's (the worker must stop and roll back: the task
--   is someone else's).
-- Errors: those of _task_lease; 22023 a lease outside 1..3600 seconds.
-- Example:
--   SELECT broker.broker_extend_task(42, '9b2f...'::uuid, 60);
--   Calls: _setting_int, _task_lease, _cancel_requested, _check_lease_seconds
--   Tables: writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_extend_task(p_job_id bigint, p_lease_token uuid, p_lease_seconds integer DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_lease integer := COALESCE(p_lease_seconds, broker._setting_int('lease_seconds', 60, 1));
BEGIN
    PERFORM broker._check_lease_seconds('broker_extend_task', v_lease);
    IF NOT broker._task_lease('broker_extend_task', p_job_id, p_lease_token) THEN
        RETURN 'lost';
    END IF;
    UPDATE broker.broker_jobs AS j
       SET lease_expires_at = pg_catalog.statement_timestamp() OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => v_lease)
     WHERE j.job_id OPERATOR(pg_catalog.=) p_job_id;
    RETURN CASE WHEN broker._cancel_requested(p_job_id) IS NULL THEN 'extended' ELSE 'cancelled' END;
END;
$$;
COMMENT ON FUNCTION broker.broker_extend_task(bigint, uuid, integer) IS
    'The heartbeat of a running task: renews its lease; returns extended, cancelled (a cancel request: stop, then broker_fail_task) or lost.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_complete_task(p_job_id, p_lease_token, p_output)
--   Completes a running task: its attempt is recorded with p_output (its
--   JSON text, at most 2,000 characters) and the jobs waiting on it are
--   released, as a SQL job's completion does. Called in the transaction
--   where the worker wrote the task's effects, they commit together or not
--   at all. Returns true; false when the lease is no longer the token's:
--   the worker must then roll back (the task was recovered and may run
--   again, or another worker holds it).
-- Errors: those of _task_lease; 57014 a cancel request was made for this
--   attempt (roll back, then call broker_fail_task: the task ends cancelled).
-- Example:
--   BEGIN; INSERT INTO mail_log ...; SELECT broker.broker_complete_task(42, '9b2f...'::uuid, '{"sent": true}'); COMMIT;
--   Calls: _task_lease, _cancel_requested, _record_attempts, _complete_job
--   Tables: writes broker_jobs, broker_job_attempts
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_complete_task(p_job_id bigint, p_lease_token uuid, p_output jsonb DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_reason text;
BEGIN
    IF NOT broker._task_lease('broker_complete_task', p_job_id, p_lease_token) THEN
        RETURN false;
    END IF;
    v_reason := broker._cancel_requested(p_job_id);
    IF v_reason IS NOT NULL THEN
        RAISE EXCEPTION 'broker_complete_task: task % was cancelled while it ran: %', p_job_id, v_reason
            USING ERRCODE = 'query_canceled',
                  HINT = 'Roll back, then call broker_fail_task: the task ends cancelled.';
    END IF;
    PERFORM broker._record_attempts(ARRAY[p_job_id], 'completed', NULL, NULL,
                                    ARRAY[pg_catalog.chr(31) OPERATOR(pg_catalog.||) COALESCE(p_output::text, '')]);
    PERFORM broker._complete_job(p_job_id);
    RETURN true;
END;
$$;
COMMENT ON FUNCTION broker.broker_complete_task(bigint, uuid, jsonb) IS
    'Completes a running task (its output recorded, its dependents released) in the caller''s transaction, with the task''s own writes; false when the lease was lost (roll back).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_fail_task(p_job_id, p_lease_token, p_error, p_retry)
--   Ends a running task's attempt as failed with message p_error: with
--   p_retry (default) it runs again after the retry backoff while it has
--   attempts left, else it fails for good and its dependents are cancelled,
--   as for a SQL job (SQLSTATE 38000, an error in application code). An
--   attempt with a cancel request ends the task cancelled instead. Returns
--   true; false when the lease is no longer the token's.
-- Errors: those of _task_lease; 22004 NULL p_retry.
-- Example:
--   SELECT broker.broker_fail_task(42, '9b2f...'::uuid, 'SMTP 451: try again later');
--   Calls: _task_lease, _cancel_requested, _record_attempts, _end_cancelled, _fail_attempt, _fail_job
--   Tables: writes broker_jobs, broker_job_attempts
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_fail_task(p_job_id bigint, p_lease_token uuid, p_error text, p_retry boolean DEFAULT true)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_message text := COALESCE(NULLIF(pg_catalog.btrim(p_error), ''), 'the task failed');
    v_reason  text;
BEGIN
    IF p_retry IS NULL THEN
        RAISE EXCEPTION 'broker_fail_task: p_retry must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF NOT broker._task_lease('broker_fail_task', p_job_id, p_lease_token) THEN
        RETURN false;
    END IF;
    v_reason := broker._cancel_requested(p_job_id);
    IF v_reason IS NOT NULL THEN
        PERFORM broker._record_attempts(ARRAY[p_job_id], 'cancelled', ARRAY['57014'], ARRAY[v_message]);
        PERFORM broker._end_cancelled(p_job_id, v_reason);
    ELSIF p_retry THEN
        PERFORM broker._fail_attempt(p_job_id, '38000', v_message);
    ELSE
        PERFORM broker._record_attempts(ARRAY[p_job_id], 'failed', ARRAY['38000'], ARRAY[v_message]);
        PERFORM broker._fail_job(p_job_id, '38000', v_message);
    END IF;
    RETURN true;
END;
$$;
COMMENT ON FUNCTION broker.broker_fail_task(bigint, uuid, text, boolean) IS
    'Ends a running task''s attempt as failed: retried after the backoff while attempts are left (p_retry), else failed for good with its dependents cancelled; false when the lease was lost.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_release_task(p_job_id, p_lease_token)
--   A worker hands back a claimed task it will not run, or whose handler it
--   stopped at its shutdown deadline (its transaction rolled back, so
--   nothing of the attempt is left): the task returns to pending at once,
--   the attempt not counted, interruptions + 1, as the runner's hand-back of
--   SQL jobs (broker_interrupt_jobs). Returns true; false when the lease is
--   no longer the token's.
-- Errors: those of _task_lease.
-- Example:
--   SELECT broker.broker_release_task(42, '9b2f...'::uuid);
--   Calls: _task_lease, broker_interrupt_jobs
--   Tables: writes broker_jobs, broker_job_attempts
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_release_task(p_job_id bigint, p_lease_token uuid)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT broker._task_lease('broker_release_task', p_job_id, p_lease_token) THEN
        RETURN false;
    END IF;
    RETURN EXISTS (SELECT FROM broker.broker_interrupt_jobs(ARRAY[p_job_id], ARRAY[p_lease_token]));
END;
$$;
COMMENT ON FUNCTION broker.broker_release_task(bigint, uuid) IS
    'Hands back a claimed task (a worker''s shutdown): pending again at once, the attempt not counted; false when the lease was lost.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_complete_tasks(p_job_ids, p_lease_tokens, p_outputs)
--   Completes many running tasks at once, for a worker whose handlers wrote
--   nothing in their transactions (nothing to commit with each): one
--   statement and one commit for all, their attempts recorded with their
--   outputs and their dependents released as by broker_complete_task.
--   Returns each task's outcome: 'completed'; 'lost' (the lease is no longer
--   the token's: nothing done); 'cancelled' (a cancel request was made for
--   the attempt: it ends cancelled, not completed). Rows come in p_job_ids'
--   order.
-- Errors: those of _task_lease (a task not of the caller's tenant: P0002);
--   22004 NULL arrays or elements (outputs may be NULL); 22023 arrays of
--   different lengths or more than 1,000 tasks, or a task named twice.
-- Example:
--   SELECT * FROM broker.broker_complete_tasks(ARRAY[42, 43], ARRAY['9b2f...', '0c11...']::uuid[], ARRAY[NULL, '{"n": 1}']::jsonb[]);
--   Calls: _task_leases, _cancel_requests, _record_attempts, _end_cancelled, _complete_jobs
--   Tables: writes broker_jobs, broker_job_attempts
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_complete_tasks(p_job_ids bigint[], p_lease_tokens uuid[], p_outputs jsonb[] DEFAULT NULL)
RETURNS TABLE (job_id bigint, outcome text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_mine      bigint[];
    v_outputs   text[];
    v_cancelled bigint[];
    r           record;
BEGIN
    IF p_outputs IS NOT NULL AND pg_catalog.cardinality(p_outputs) OPERATOR(pg_catalog.<>) pg_catalog.cardinality(p_job_ids) THEN
        RAISE EXCEPTION 'broker_complete_tasks: p_outputs must have one element per job, or be NULL'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_mine := broker._task_leases('broker_complete_tasks', p_job_ids, p_lease_tokens);
    v_outputs := ARRAY(SELECT pg_catalog.chr(31) OPERATOR(pg_catalog.||) COALESCE(u.output::text, '')
                         FROM ROWS FROM (pg_catalog.unnest(p_job_ids), pg_catalog.unnest(p_outputs)) WITH ORDINALITY AS u(id, output, o)
                        WHERE u.id OPERATOR(pg_catalog.=) ANY (v_mine)
                        ORDER BY u.o);
    v_cancelled := '{}';
    FOR r IN SELECT c.job_id, c.reason FROM broker._cancel_requests(v_mine) AS c LOOP
        v_cancelled := v_cancelled OPERATOR(pg_catalog.||) r.job_id;
        PERFORM broker._record_attempts(ARRAY[r.job_id], 'cancelled', ARRAY['57014'], ARRAY['cancelled before its completion']);
        PERFORM broker._end_cancelled(r.job_id, r.reason);
    END LOOP;
    SELECT COALESCE(pg_catalog.array_agg(m.id ORDER BY m.o), '{}'), COALESCE(pg_catalog.array_agg(m.out ORDER BY m.o), '{}')
      INTO v_mine, v_outputs
      FROM ROWS FROM (pg_catalog.unnest(v_mine), pg_catalog.unnest(v_outputs)) WITH ORDINALITY AS m(id, out, o)
     WHERE m.id OPERATOR(pg_catalog.<>) ALL (v_cancelled);
    PERFORM broker._record_attempts(v_mine, 'completed', NULL, NULL, v_outputs);
    PERFORM broker._complete_jobs(v_mine);
    RETURN QUERY
    SELECT u.id, CASE WHEN u.id OPERATOR(pg_catalog.=) ANY (v_mine) THEN 'completed'
                      WHEN u.id OPERATOR(pg_catalog.=) ANY (v_cancelled) THEN 'cancelled'
                      ELSE 'lost' END
      FROM pg_catalog.unnest(p_job_ids) WITH ORDINALITY AS u(id, o)
     ORDER BY u.o;
END;
$$;
COMMENT ON FUNCTION broker.broker_complete_tasks(bigint[], uuid[], jsonb[]) IS
    'Completes many running tasks whose handlers wrote nothing, in one statement; returns each one''s outcome (completed, lost, or cancelled when a cancel request came first).';
