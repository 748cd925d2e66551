-- sql/run/run.sql: running one claimed job (broker_run).
-- ---------------------------------------------------------------------------
-- Function: broker._run_begin(p_job_id, p_lease_token)
--   Locks a claimed job for execution (FOR NO KEY UPDATE, held until the
--   caller's transaction ends: this lock is what marks the job as executing,
--   and broker_recover_stale_jobs never takes a locked job) and returns it.
-- Errors: P0002 unknown job; 55000 job not running, or lease token mismatch.
--   Calls: broker_get
--   Tables: reads broker_jobs
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
    IF v_job.complete_status OPERATOR(pg_catalog.<>) broker._state('running') THEN
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
-- Function: broker._grant_hint(p_role, p_message)
--   For a permission error raised while a job ran as p_role: the GRANT that
--   would let it through (for tables and sequences: the privileges the role
--   lacks there), or NULL when the message names no object.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._grant_hint(p_role name, p_message text)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_m    text[] := pg_catalog.regexp_match(p_message, '^permission denied for (table|sequence|view|materialized view|schema|function|procedure) (.+)$');
    v_kind text := v_m[1];
    v_obj  text := v_m[2];
    v_privs text;
BEGIN
    IF v_m IS NULL THEN
        RETURN NULL;
    ELSIF v_kind OPERATOR(pg_catalog.=) 'schema' THEN
        RETURN pg_catalog.format('GRANT USAGE ON SCHEMA %I TO %I', v_obj, p_role);
    ELSIF v_kind OPERATOR(pg_catalog.=) ANY (ARRAY['function', 'procedure']) THEN
        RETURN pg_catalog.format('GRANT EXECUTE ON %s %s TO %I', pg_catalog.upper(v_kind), v_obj, p_role);
    END IF;
    -- the message names the relation without its schema: list what the role lacks on each match
    SELECT pg_catalog.string_agg(pg_catalog.format('GRANT %s ON %s %s TO %I',
               (SELECT pg_catalog.string_agg(x.p, ', ')
                  FROM pg_catalog.unnest(CASE WHEN c.relkind OPERATOR(pg_catalog.=) 'S' THEN ARRAY['USAGE', 'SELECT', 'UPDATE']
                                              ELSE ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE'] END) AS x(p)
                 WHERE NOT pg_catalog.has_table_privilege(p_role, c.oid, x.p)),
               CASE WHEN c.relkind OPERATOR(pg_catalog.=) 'S' THEN 'SEQUENCE' ELSE 'TABLE' END,
               c.oid::regclass, p_role), '; ')
      INTO v_privs
      FROM pg_catalog.pg_class AS c
     WHERE c.relname OPERATOR(pg_catalog.=) v_obj;
    RETURN v_privs;
END;
$$;
COMMENT ON FUNCTION broker._grant_hint(name, text) IS
    'Internal: for a "permission denied for <object>" error of a job, the GRANT the run_as role needs.';

-- ---------------------------------------------------------------------------
-- Function: broker._job_error(p_run_as, p_exec, p_sqlstate, p_message)
--   The message stored for a failed attempt of a job of role p_run_as whose
--   executor is p_exec: p_message (capped by _error_text), and for a
--   permission error (42501) the GRANT the role needs; for SQL that commits
--   or cannot run in a transaction (2D000, 25001) the opt-in that runs it
--   (autonomous jobs). With p_exec NULL (the role has no executor) the
--   message says how to create one.
--   Calls: _error_text, broker_create_executor, _grant_hint
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._job_error(p_run_as name, p_exec regprocedure, p_sqlstate text, p_message text)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_hint text;
BEGIN
    p_message := broker._error_text(p_message);  -- returned to the caller as stored
    IF p_exec IS NULL THEN
        RETURN pg_catalog.format('role %I has no job executor; run SELECT broker.broker_create_executor(%L) as that role or a superuser',
                                 p_run_as, p_run_as);
    ELSIF p_sqlstate OPERATOR(pg_catalog.=) ANY (ARRAY['2D000', '25001']) THEN
        -- (what the enqueue-time check could not see: a procedure's COMMIT, a statement in EXECUTE)
        RETURN p_message OPERATOR(pg_catalog.||) ' (a job runs inside a transaction: SQL that commits, or that cannot run in one, '
                                                 'runs as an autonomous job: p_autonomous => true, docs/jobs.md)';
    ELSIF p_sqlstate OPERATOR(pg_catalog.<>) '42501' THEN
        RETURN p_message;
    END IF;
    v_hint := CASE WHEN p_message OPERATOR(pg_catalog.~) '^permission denied for (function run_job|schema broker_exec_)'
                   THEN pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I', p_exec, CURRENT_USER)
                   ELSE broker._grant_hint(p_run_as, p_message) END;
    RETURN p_message OPERATOR(pg_catalog.||) pg_catalog.format(' (the job runs as role %I', p_run_as)
        OPERATOR(pg_catalog.||) COALESCE('; needed: ' OPERATOR(pg_catalog.||) v_hint, '') OPERATOR(pg_catalog.||) ')';
END;
$$;
COMMENT ON FUNCTION broker._job_error(name, regprocedure, text, text) IS
    'Internal: the stored message of a failed job attempt (for a permission error, with the GRANT its run_as role needs; for SQL that commits, the opt-in).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_run(p_job_id, p_lease_token)
--   Executes a claimed (running) job inside the caller's transaction:
--   * the job's SQL runs in a subtransaction, inside the SECURITY DEFINER
--     executor owned by its run_as role (see executors.sql), with its own
--     search_path (pg_temp last) and broker.tenant_id set to the job's
--     tenant; sql jobs via EXECUTE, plpgsql jobs as a DO block;
--   * the job can change session state (SET, LISTEN, temporary objects,
--     session advisory locks) that outlives its transaction: the run undoes
--     what acts on the connection before it returns (guarded settings,
--     session advisory locks, LISTEN, prepared statements: run_guard.sql),
--     but whoever runs jobs must still reset the session after each
--     transaction that ran jobs (DISCARD ALL; the runner does all of it but
--     DISCARD PLANS), and must not run jobs on the session holding the
--     instance lock;
--   * a job that leaves code for the caller's COMMIT (a WITH HOLD cursor, a
--     deferrable constraint trigger that runs code on a table it wrote: see
--     _commit_time_code) is refused: 42501, its effects rolled back;
--   * success: the job's effects and its completion (status 2) commit
--     together, and its dependents are released;
--   * failure (any error, including a statement_timeout cancel): the job's
--     effects roll back, SQLSTATE and message are kept (a permission error
--     gets the GRANT it needs appended), and the job is retried after a
--     backoff or, with no attempts left, failed with its dependents cancelled;
--   * not run when its enqueuer may no longer have it run (role dropped,
--     tenant or run_as right revoked since, see _authority_lost): failed at
--     once (3, whatever attempts are left) with 42501 and the reason, and its
--     dependents cancelled: losing a right is no passing fault, and a retry
--     would run it as soon as any role of that name had the right again;
--   * not run when a cancel request for it came before the call
--     (broker_cancel_job on a claimed job that waited): cancelled (4) with
--     the request's reason, 57014, its dependents cancelled.
--   Returns the outcome. Without p_lease_token any running job may be run.
--   Per-job timeout: SET LOCAL statement_timeout to job_timeout before the
--   call (the runner does this); a timeout inside the job fails the attempt.
-- Errors: P0002 unknown job; 55000 job not running or lease lost.
-- Example:
--   SELECT r.* FROM broker.broker_get(1, p_instance_id => 7) AS g,
--                 LATERAL broker.broker_run(g.job_id, g.lease_token) AS r;   -- then COMMIT
--   Calls: _run_begin, _authority_lost, _cancel_requested, _executor, _run_guarded, _run_jobs_compat, _executor_call, _refusal, _record_attempts, _complete_job, _fail_job, _job_error, _cancel_running, _fail_attempt
--   Tables: reads broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_run(p_job_id bigint, p_lease_token uuid DEFAULT NULL)
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
    v_caller  text := pg_catalog.current_setting('broker.tenant_id', true);
    v_job     broker.broker_jobs;
    v_exec    regprocedure;
    v_run     record;
    v_status  smallint;
    v_message text;
    v_denied  text;    -- why the job's enqueuer may no longer have it run (_authority_lost)
    v_guard   record;  -- _run_guarded's outcome
BEGIN
    v_job := broker._run_begin(p_job_id, p_lease_token);
    v_denied := broker._authority_lost(v_job.enqueued_by, v_job.tenant_id, v_job.run_as, 'enqueuer');
    v_exec := CASE WHEN v_denied IS NULL THEN broker._executor(v_job.run_as) END;
    IF v_denied IS NULL AND broker._cancel_requested(p_job_id) IS NOT NULL THEN
        -- not run: its cancel request came first; it ends cancelled below (_cancel_running)
        SELECT '57014'::text AS error_sqlstate,
               pg_catalog.format('broker_run: job %s was cancelled before it started', p_job_id) AS error_message,
               interval '0' AS duration INTO v_run;
    ELSIF v_denied IS NOT NULL THEN
        -- not run: its enqueuer may no longer have it run (it fails for good below)
        SELECT '42501'::text AS error_sqlstate, v_denied AS error_message, interval '0' AS duration INTO v_run;
    ELSIF v_exec IS NULL THEN
        SELECT '42501'::text AS error_sqlstate, NULL::text AS error_message, interval '0' AS duration INTO v_run;
    ELSE
        -- as broker_run_batch runs a batch with an executor that has only run_job (one job: one call
        -- of run_job, fewer steps than a batch), guarded as it is (run_guard.sql)
        v_guard := broker._run_guarded(
            pg_catalog.format('SELECT pg_catalog.array_agg(r.s), pg_catalog.array_agg(r.m), pg_catalog.array_agg(r.d) '
                              'FROM broker._run_jobs_compat(%L, $1, $2, $3, $4) AS r(s, m, d)',
                              broker._executor_call(v_exec)),
            ARRAY[v_job.execute_str], ARRAY[v_job.job_language], ARRAY[v_job.job_search_path], v_job.tenant_id);
        SELECT COALESCE(v_guard.states[1], CASE WHEN v_guard.refused IS NOT NULL THEN '42501' END) AS error_sqlstate,
               COALESCE(v_guard.messages[1], broker._refusal(v_guard.refused, v_job.run_as)) AS error_message,
               COALESCE(v_guard.durations[1], interval '0') AS duration
          INTO v_run;
        PERFORM pg_catalog.set_config('broker.tenant_id', COALESCE(v_caller, ''), true);
    END IF;
    IF v_run.error_sqlstate IS NULL THEN
        PERFORM broker._record_attempts(ARRAY[p_job_id], 'completed', NULL, NULL, ARRAY[v_run.error_message]);
        PERFORM broker._complete_job(p_job_id);
        v_status := broker._state('completed');
    ELSIF v_denied IS NOT NULL THEN
        v_message := v_denied;
        PERFORM broker._record_attempts(ARRAY[p_job_id], 'failed', ARRAY[v_run.error_sqlstate], ARRAY[v_message]);
        v_status := broker._fail_job(p_job_id, v_run.error_sqlstate, v_message);
    ELSE
        v_message := broker._job_error(v_job.run_as, v_exec, v_run.error_sqlstate, v_run.error_message);
        -- cancelled by its cancel request (57014 with a request: broker_cancel_job), else failed
        v_status := COALESCE(broker._cancel_running(p_job_id, v_run.error_sqlstate, v_message),
                             broker._fail_attempt(p_job_id, v_run.error_sqlstate, v_message));
    END IF;
    RETURN QUERY SELECT p_job_id, v_status, v_job.attempts, v_run.error_sqlstate, v_message, v_run.duration;
END;
$$;
COMMENT ON FUNCTION broker.broker_run(bigint, uuid) IS
    'Executes a claimed job as its run_as role; its effects and its completion commit in the caller''s transaction, a failure rolls its effects back and retries or fails it. Returns the outcome.';
