-- ---------------------------------------------------------------------------
-- Function: broker._lock_batch(p_job_ids, p_lease_tokens)
--   For broker_run_batch: locks the jobs p_job_ids with one statement, in
--   job_id order, in the caller's transaction (held until it ends: what marks
--   them as executing, see _run_begin), and returns, in the order given, each
--   id with its token and what broker_run_batch needs of the job (found NULL:
--   no such job). Generic plans: custom ones were made again at every call.
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._lock_batch(p_job_ids bigint[], p_lease_tokens uuid[])
RETURNS TABLE (id bigint, token uuid, found bigint, status smallint, lease_token uuid, run_as name, tenant_id text,
               job_timeout interval, attempts integer, execute_str text, job_language text, job_search_path text)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    PERFORM FROM broker.broker_jobs AS j
      WHERE j.job_id OPERATOR(pg_catalog.=) ANY (p_job_ids)
      ORDER BY j.job_id
        FOR NO KEY UPDATE;
    RETURN QUERY
        SELECT u.id, u.token, j.job_id, j.complete_status, j.lease_token, j.run_as, j.tenant_id,
               j.job_timeout, j.attempts, j.execute_str, j.job_language, j.job_search_path
          FROM ROWS FROM (pg_catalog.unnest(p_job_ids), pg_catalog.unnest(p_lease_tokens)) WITH ORDINALITY AS u(id, token, ord)
          LEFT JOIN broker.broker_jobs AS j ON j.job_id OPERATOR(pg_catalog.=) u.id
         ORDER BY u.ord;
END;
$$;
COMMENT ON FUNCTION broker._lock_batch(bigint[], uuid[]) IS
    'Internal: lock the jobs of a batch (job_id order) and return them in the order given (broker_run_batch).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_run_batch(p_job_ids, p_lease_tokens)
--   Runs several claimed jobs in the caller's transaction, one after the
--   other, each exactly as broker_run runs it: its SQL in a subtransaction of
--   its own inside its run_as role's executor, its effects and its completion
--   committing together with the caller's transaction, a failing job rolled
--   back alone and retried or failed. One round trip and one commit for many
--   short jobs.
--   Jobs of one transaction share the session, and a job can change session
--   state that outlives it (SET, temporary objects, SET CONSTRAINTS), so a
--   batch never mixes what must stay apart: it runs the jobs in order while
--   they have the run_as role and the tenant of the first one and no
--   timeout, and stops before the first job that differs (the caller resets
--   the session and passes the rest again). A job with a timeout only runs as
--   the first of a call, with statement_timeout set by the caller as for
--   broker_run. p_lease_tokens, when given, pairs with p_job_ids.
--   Returns one row per job it took up, in order: broker_run's outcome, or,
--   when the job could not be run (lease lost: 55000, unknown job: P0002),
--   complete_status NULL with that SQLSTATE and message. Jobs after the stop
--   get no row. A job's own errors never abort the batch; an error in the
--   bookkeeping (e.g. a deadlock) aborts the caller's transaction as it does
--   for broker_run, and lease recovery takes the jobs up again.
--   Keep batches at most 50 jobs: each job's subtransaction takes a
--   subtransaction id, and PostgreSQL caches 64 per transaction.
--   Cost: the jobs are locked with one statement (in job_id order, what marks
--   them as executing, see _run_begin), the executor of their role is looked
--   up once, each job is one subtransaction and one EXECUTE of the executor
--   call, and the jobs that succeeded are completed with one UPDATE.
-- Errors: 22004 p_job_ids NULL; 22023 p_lease_tokens of another length, or
--   more than 1000 jobs.
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_run_batch(p_job_ids bigint[], p_lease_tokens uuid[] DEFAULT NULL)
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
    v_caller text := pg_catalog.current_setting('broker.tenant_id', true);
    v_run_as name;    -- run_as and tenant of the first job run
    v_tenant text;
    v_exec   regprocedure;
    v_call   text;    -- the executor call, NULL when the role has none
    v_job    record;
    v_done   bigint[] := '{}';  -- succeeded, completed at the end
    v_state  text;
    v_message text;
    v_started timestamptz;
BEGIN
    IF p_job_ids IS NULL THEN
        RAISE EXCEPTION 'broker_run_batch: p_job_ids must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_lease_tokens IS NOT NULL
       AND pg_catalog.cardinality(p_lease_tokens) OPERATOR(pg_catalog.<>) pg_catalog.cardinality(p_job_ids) THEN
        RAISE EXCEPTION 'broker_run_batch: % lease tokens for % jobs; pass one token per job, or NULL',
            pg_catalog.cardinality(p_lease_tokens), pg_catalog.cardinality(p_job_ids)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_catalog.cardinality(p_job_ids) OPERATOR(pg_catalog.>) 1000 THEN
        RAISE EXCEPTION 'broker_run_batch: at most 1000 jobs per call, got %', pg_catalog.cardinality(p_job_ids)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    FOR v_job IN SELECT * FROM broker._lock_batch(p_job_ids, p_lease_tokens) AS b
    LOOP
        job_id := v_job.id;
        complete_status := NULL;
        attempts := NULL;
        duration := NULL;
        IF v_job.found IS NULL THEN
            error_sqlstate := 'P0002';
            error_message := pg_catalog.format('broker_run: job %s does not exist', v_job.id);
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF v_job.status OPERATOR(pg_catalog.<>) 1
           OR (v_job.token IS NOT NULL AND v_job.lease_token OPERATOR(pg_catalog.<>) v_job.token) THEN
            error_sqlstate := '55000';
            error_message := pg_catalog.format('broker_run: job %s is no longer running under this lease', v_job.id);
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF v_run_as IS NULL THEN
            v_run_as := v_job.run_as;
            v_tenant := v_job.tenant_id;
            v_exec := broker._executor(v_run_as);  -- one lookup for the whole batch
            v_call := broker._executor_call(v_exec);
        ELSIF v_job.run_as OPERATOR(pg_catalog.<>) v_run_as OR v_job.tenant_id OPERATOR(pg_catalog.<>) v_tenant
              OR v_job.job_timeout IS NOT NULL THEN
            EXIT;  -- the caller resets the session and passes the rest again
        END IF;

        -- as broker_run (_run_claimed), with the completion of a success deferred to the end
        v_state := NULL;
        v_message := NULL;
        v_started := pg_catalog.clock_timestamp();
        IF v_call IS NULL THEN
            v_state := '42501';
        ELSE
            BEGIN
                PERFORM pg_catalog.set_config('broker.tenant_id', v_job.tenant_id, true);
                EXECUTE v_call USING v_job.execute_str, v_job.job_language, v_job.job_search_path;
            EXCEPTION WHEN OTHERS OR query_canceled OR assert_failure THEN
                GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_message = MESSAGE_TEXT;
            END;
        END IF;
        IF v_state IS NULL THEN
            v_done := v_done OPERATOR(pg_catalog.||) v_job.id;
            complete_status := 2;
        ELSE
            PERFORM pg_catalog.set_config('broker.tenant_id', COALESCE(v_caller, ''), true);
            v_message := broker._job_error(v_run_as, v_exec, v_state, v_message);
            complete_status := broker._fail_attempt(v_job.id, v_state, v_message);
        END IF;
        attempts := v_job.attempts;
        error_sqlstate := v_state;
        error_message := v_message;
        duration := pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) v_started;
        RETURN NEXT;
    END LOOP;
    PERFORM pg_catalog.set_config('broker.tenant_id', COALESCE(v_caller, ''), true);
    -- the jobs that succeeded are completed together, in this transaction (their effects and
    -- their completion still commit together), and their dependents released at once
    IF pg_catalog.cardinality(v_done) OPERATOR(pg_catalog.>) 0 THEN
        PERFORM broker._complete_jobs(v_done);
    END IF;
END;
$$;
COMMENT ON FUNCTION broker.broker_run_batch(bigint[], uuid[]) IS
    'Runs several claimed jobs of one run_as role and tenant in the caller''s transaction, each like broker_run (own subtransaction, effects and completion commit together); stops before the first job of another role or tenant, or with a timeout.';
