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
    v_run_as name;    -- run_as and tenant of the first job run
    v_tenant text;
    v_job    broker.broker_jobs;
    v_exec   regprocedure;
    v_out    record;
    v_done   bigint[] := '{}';  -- succeeded, completed at the end
    v_id     bigint;
    v_token  uuid;
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

    FOR i IN 1 .. COALESCE(pg_catalog.array_length(p_job_ids, 1), 0) LOOP
        v_id := p_job_ids[i];
        v_token := p_lease_tokens[i];
        -- lock and check it here, in the caller's transaction: a job that cannot run gets a row, not an error
        SELECT * INTO v_job
          FROM broker.broker_jobs AS j
         WHERE j.job_id OPERATOR(pg_catalog.=) v_id
           FOR NO KEY UPDATE;
        IF NOT FOUND THEN
            RETURN QUERY SELECT v_id, NULL::smallint, NULL::integer, 'P0002'::text,
                                pg_catalog.format('broker_run: job %s does not exist', v_id), NULL::interval;
            CONTINUE;
        END IF;
        IF v_job.complete_status OPERATOR(pg_catalog.<>) 1
           OR (v_token IS NOT NULL AND v_job.lease_token OPERATOR(pg_catalog.<>) v_token) THEN
            RETURN QUERY SELECT v_id, NULL::smallint, NULL::integer, '55000'::text,
                                pg_catalog.format('broker_run: job %s is no longer running under this lease', v_id),
                                NULL::interval;
            CONTINUE;
        END IF;
        IF v_run_as IS NULL THEN
            v_run_as := v_job.run_as;
            v_tenant := v_job.tenant_id;
            v_exec := broker._executor(v_run_as);  -- one lookup for the whole batch
        ELSIF v_job.run_as OPERATOR(pg_catalog.<>) v_run_as OR v_job.tenant_id OPERATOR(pg_catalog.<>) v_tenant
              OR v_job.job_timeout IS NOT NULL THEN
            EXIT;  -- the caller resets the session and passes the rest again
        END IF;
        SELECT * INTO v_out FROM broker._run_claimed(v_job, v_exec, true) AS r;
        IF v_out.complete_status OPERATOR(pg_catalog.=) 2 THEN
            v_done := v_done OPERATOR(pg_catalog.||) v_id;
        END IF;
        RETURN QUERY SELECT v_id, v_out.complete_status, v_job.attempts, v_out.error_sqlstate, v_out.error_message,
                            v_out.duration;
    END LOOP;
    -- the jobs that succeeded are completed together, in this transaction (their effects and
    -- their completion still commit together), and their dependents released at once
    IF pg_catalog.cardinality(v_done) OPERATOR(pg_catalog.>) 0 THEN
        PERFORM broker._complete_jobs(v_done);
    END IF;
END;
$$;
COMMENT ON FUNCTION broker.broker_run_batch(bigint[], uuid[]) IS
    'Runs several claimed jobs of one run_as role and tenant in the caller''s transaction, each like broker_run (own subtransaction, effects and completion commit together); stops before the first job of another role or tenant, or with a timeout.';
