-- sql/run/run_batch.sql: running claimed jobs in one transaction (broker_run_batch).
-- ---------------------------------------------------------------------------
-- Function: broker._lock_batch(p_job_ids, p_lease_tokens)
--   For broker_run_batch: locks the jobs p_job_ids with one statement, in
--   job_id order, in the caller's transaction (held until it ends: what marks
--   them as executing, see _run_begin), and returns, in the order given, each
--   id with its token and what broker_run_batch needs of the job (found NULL:
--   no such job). Generic plans: custom ones were made again at every call.
--   Calls: none
--   Tables: reads broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._lock_batch(p_job_ids bigint[], p_lease_tokens uuid[])
RETURNS TABLE (id bigint, token uuid, found bigint, status smallint, lease_token uuid, run_as name, enqueued_by name,
               tenant_id text, job_timeout interval, attempts integer, execute_str text, job_language text, job_search_path text,
               run_alone boolean)
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
        SELECT u.id, u.token, j.job_id, j.complete_status, j.lease_token, j.run_as, j.enqueued_by, j.tenant_id,
               j.job_timeout, j.attempts, j.execute_str, j.job_language, j.job_search_path, j.run_alone
          FROM ROWS FROM (pg_catalog.unnest(p_job_ids), pg_catalog.unnest(p_lease_tokens)) WITH ORDINALITY AS u(id, token, ord)
          LEFT JOIN broker.broker_jobs AS j ON j.job_id OPERATOR(pg_catalog.=) u.id
         ORDER BY u.ord;
END;
$$;
COMMENT ON FUNCTION broker._lock_batch(bigint[], uuid[]) IS
    'Internal: lock the jobs of a batch (job_id order) and return them in the order given (broker_run_batch).';

-- ---------------------------------------------------------------------------
-- Type: broker._batch_row
--   One row of broker_run_batch's result while it is being built: a job it
--   took up, its outcome so far (status completed until the run says
--   otherwise) and its error.
-- ---------------------------------------------------------------------------
CREATE TYPE broker._batch_row AS (
    job_id          bigint,
    complete_status smallint,
    attempts        integer,
    error_sqlstate  text,
    error_message   text);
COMMENT ON TYPE broker._batch_row IS 'Internal: a row of broker_run_batch''s result while it is built (job, status, attempts, error).';

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
--   complete_status NULL with that SQLSTATE and message; a completed job's
--   rows_affected (its last statement's row count, as broker_job_attempts
--   keeps it; NULL otherwise). Jobs after the stop get no row. A job whose enqueuer may no longer have it run (see
--   _authority_lost: role dropped, tenant or run_as right revoked) is not
--   run: it fails at once with 42501 and the reason, as in broker_run. Nor
--   is a job with a cancel request made before the call (broker_cancel_job
--   on a claimed job that waited): it ends cancelled, 57014, as a job whose
--   run its request cancelled. A job's own errors never abort the batch;
--   an error in the bookkeeping (e.g. a deadlock) aborts the caller's
--   transaction as it does for broker_run, and lease recovery takes the
--   jobs up again.
--   p_budget (a batch budget, say 200 ms): the caller runs the call under
--   statement_timeout = p_budget, set before this statement (a timeout set
--   inside a running statement is not armed), so that no job waits for the
--   commit of its transaction much beyond it. Then: no job starts once half
--   of the budget passed (broker.batch_deadline, read by run_jobs; the jobs
--   not started get no row); the job still running when the timeout fires
--   gets 57014 in its subtransaction (run_jobs names query_canceled: WHEN
--   OTHERS does not catch it), is rolled back alone, marked run_alone and
--   returned still claimed, attempt not counted, with error_sqlstate PB002:
--   the caller runs it in a transaction of its own; the others commit. A
--   job marked run_alone, or with a timeout shorter than p_budget, is never
--   run under a budget: its row says PB002 at once. A job with a longer
--   timeout may run under a budget (the budget ends it first). Should the
--   timeout fire outside every job (between two, or in the bookkeeping), no
--   job fails and none loses an attempt: the jobs of the executor's call get
--   no row (the caller passes them again), the bookkeeping is done again.
--   A job that catches the cancel itself only delays the jobs of its own
--   batch (one run_as role and tenant), up to the first job after it.
--   Keep batches at most 50 jobs: each job's subtransaction takes a
--   subtransaction id, and PostgreSQL caches 64 per transaction (the batches
--   broker_claim_batches numbers are).
--   Cost: the jobs are locked with one statement (in job_id order, what marks
--   them as executing, see _run_begin), run with one call of their role's
--   executor (run_jobs: each job still in a subtransaction of its own there),
--   and the jobs that succeeded are completed with one UPDATE. Failed jobs
--   are retried or failed after all of them ran, in order.
--   That call runs in a subtransaction (_run_guarded): the session state the
--   jobs left is undone, and when they left code for the caller's COMMIT
--   (see _commit_time_code) all of them are rolled back and run again one
--   per call, so that only the jobs that did are refused (42501).
-- Errors: 22004 p_job_ids NULL; 22023 p_lease_tokens of another length,
--   more than 1000 jobs, a job id given twice (it would run twice), or
--   p_budget not above 0 or not the statement_timeout in effect.
-- Example:
--   SELECT * FROM broker.broker_run_batch(ARRAY[41, 42], ARRAY['6f1c...'::uuid, '9a0b...'::uuid]);
--   BEGIN; SET LOCAL statement_timeout = '200ms';
--   SELECT * FROM broker.broker_run_batch(ARRAY[41, 42], ARRAY['6f1c...'::uuid, '9a0b...'::uuid], '200ms'); COMMIT;
--   Calls: _cancel_requests, _lock_batch, _authority_lost, _executor, _executor_jobs, _run_jobs_compat, _executor_call, _run_guarded, _refusal, broker_create_executor, _job_error, _fail_job, _fail_attempt, _complete_jobs, _record_attempts, _cancel_requested, _cancel_running
--   Tables: writes broker_jobs (run_alone)
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_run_batch(p_job_ids bigint[], p_lease_tokens uuid[] DEFAULT NULL,
    p_budget interval DEFAULT NULL)
RETURNS TABLE (
    job_id          bigint,
    complete_status smallint,
    attempts        integer,
    error_sqlstate  text,
    error_message   text,
    duration        interval,
    rows_affected   bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_caller  text := pg_catalog.current_setting('broker.tenant_id', true);
    v_run_as  name;    -- run_as and tenant of the first job run
    v_tenant  text;
    v_enqueuer name;   -- the enqueuer last checked (_authority_lost), and why it may not
    v_denied  text;
    v_failed  boolean := false;  -- some job taken up failed or was not run
    x_pos     integer[] := '{}'; -- the positions of the jobs not run for their enqueuer
    v_job     record;
    o         broker._batch_row[] := '{}';  -- the rows returned, in order
    -- the jobs run, in order: their positions in o, and what the executor's run_jobs takes
    -- (three arrays: its signature)
    r_pos     integer[] := '{}';
    r_sqls    text[] := '{}';
    r_langs   text[] := '{}';
    r_paths   text[] := '{}';
    v_exec    regprocedure;
    v_states  text[];
    v_msgs    text[];
    v_durs    interval[];
    v_done    bigint[];
    v_done_msgs text[];
    v_call    text;    -- the statement that runs jobs through the executor
    v_guard   record;  -- _run_guarded's outcome
    v_ran     integer := 0; -- how many of r_pos the executor ran (fewer under a budget)
    v_cut     integer; -- the position (in o) of the job the budget's timeout ended, if any
    v_keep    integer; -- rows returned: those before the first job not started
    v_try     integer;
    v_status  smallint; -- the outcome being recorded for a failed job (o changes once it is)
    v_cancelled bigint[]; -- the jobs with a cancel request made before this call: not run
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
    IF p_budget IS NOT NULL AND (p_budget OPERATOR(pg_catalog.<=) interval '0'
       OR pg_catalog.current_setting('statement_timeout')::interval OPERATOR(pg_catalog.<>) p_budget) THEN
        RAISE EXCEPTION 'broker_run_batch: p_budget % needs statement_timeout = % set before this statement, not %',
            p_budget, p_budget, pg_catalog.current_setting('statement_timeout')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_catalog.cardinality(p_job_ids) OPERATOR(pg_catalog.>) 1
       AND EXISTS (SELECT FROM pg_catalog.unnest(p_job_ids) AS u(id)
                    GROUP BY u.id HAVING pg_catalog.count(*) OPERATOR(pg_catalog.>) 1) THEN
        RAISE EXCEPTION 'broker_run_batch: job % is given more than once',
            (SELECT COALESCE(u.id::text, 'NULL') FROM pg_catalog.unnest(p_job_ids) AS u(id)
              GROUP BY u.id HAVING pg_catalog.count(*) OPERATOR(pg_catalog.>) 1 ORDER BY u.id LIMIT 1)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    v_cancelled := ARRAY(SELECT r.job_id FROM broker._cancel_requests(p_job_ids) AS r);
    -- which jobs run: in order, up to the first of another role or tenant, or with a timeout
    FOR v_job IN SELECT * FROM broker._lock_batch(p_job_ids, p_lease_tokens) AS b
    LOOP
        IF v_job.found IS NULL OR v_job.status OPERATOR(pg_catalog.<>) broker._state('running')
           OR (v_job.token IS NOT NULL AND v_job.lease_token OPERATOR(pg_catalog.<>) v_job.token) THEN
            o := o OPERATOR(pg_catalog.||) ROW(v_job.id, NULL::smallint, NULL::integer,
                CASE WHEN v_job.found IS NULL THEN 'P0002' ELSE '55000' END,
                CASE WHEN v_job.found IS NULL
                THEN pg_catalog.format('broker_run: job %s does not exist', COALESCE(v_job.id::text, 'NULL'))
                ELSE pg_catalog.format('broker_run: job %s is no longer running under this lease', v_job.id) END
                )::broker._batch_row;
            CONTINUE;
        END IF;
        IF v_job.id OPERATOR(pg_catalog.=) ANY (v_cancelled) THEN
            -- not run: its cancel request came first; it ends cancelled below (_cancel_running)
            o := o OPERATOR(pg_catalog.||) ROW(v_job.id, broker._state('completed')::smallint, v_job.attempts, '57014',
                pg_catalog.format('broker_run_batch: job %s was cancelled before it started', v_job.id))::broker._batch_row;
            v_failed := true;
            CONTINUE;
        END IF;
        IF p_budget IS NOT NULL AND (v_job.run_alone OR v_job.job_timeout OPERATOR(pg_catalog.<) p_budget) THEN
            -- never under a budget: it runs in a transaction of its own (a budget would not hold its timeout)
            o := o OPERATOR(pg_catalog.||) ROW(v_job.id, NULL::smallint, v_job.attempts, 'PB002',
                pg_catalog.format('broker_run_batch: job %s runs alone (%s)', v_job.id,
                    CASE WHEN v_job.run_alone THEN 'it ran past a batch''s budget before'
                         ELSE 'its timeout is shorter than the budget' END))::broker._batch_row;
            EXIT;
        END IF;
        IF v_run_as IS NULL THEN
            v_run_as := v_job.run_as;
            v_tenant := v_job.tenant_id;
        ELSIF v_job.run_as OPERATOR(pg_catalog.<>) v_run_as OR v_job.tenant_id OPERATOR(pg_catalog.<>) v_tenant
              OR (v_job.job_timeout IS NOT NULL AND p_budget IS NULL) THEN
            EXIT;  -- the caller resets the session and passes the rest again
        END IF;
        -- its enqueuer's rights, again now (once per enqueuer: a batch has one role and tenant)
        IF v_enqueuer IS DISTINCT FROM v_job.enqueued_by THEN
            v_enqueuer := v_job.enqueued_by;
            v_denied := broker._authority_lost(v_enqueuer, v_tenant, v_run_as, 'enqueuer');
        END IF;
        o := o OPERATOR(pg_catalog.||) ROW(v_job.id, broker._state('completed')::smallint, v_job.attempts,
                                           CASE WHEN v_denied IS NOT NULL THEN '42501' END, v_denied)::broker._batch_row;
        IF v_denied IS NOT NULL THEN  -- not run; it fails below
            x_pos := x_pos OPERATOR(pg_catalog.||) pg_catalog.cardinality(o);
            v_failed := true;
            CONTINUE;
        END IF;
        r_pos := r_pos OPERATOR(pg_catalog.||) pg_catalog.cardinality(o);
        r_sqls := r_sqls OPERATOR(pg_catalog.||) v_job.execute_str;
        r_langs := r_langs OPERATOR(pg_catalog.||) v_job.job_language;
        r_paths := r_paths OPERATOR(pg_catalog.||) v_job.job_search_path;
    END LOOP;

    IF pg_catalog.cardinality(r_pos) OPERATOR(pg_catalog.>) 0 THEN
        -- run them, as broker_run would, in one call of the role's executor (each job in a
        -- subtransaction of its own there); an executor without run_jobs runs them one call each
        v_exec := broker._executor(v_run_as);
        IF v_exec IS NULL THEN
            v_states := pg_catalog.array_fill('42501'::text, ARRAY[pg_catalog.cardinality(r_pos)]);
            v_durs := pg_catalog.array_fill('0'::interval, ARRAY[pg_catalog.cardinality(r_pos)]);
        ELSE
            v_call := pg_catalog.format(
                'SELECT pg_catalog.array_agg(r.s ORDER BY r.o), pg_catalog.array_agg(r.m ORDER BY r.o), '
                'pg_catalog.array_agg(r.d ORDER BY r.o) FROM %s AS r(s, m, d, o)',
                COALESCE(broker._executor_jobs(v_exec) OPERATOR(pg_catalog.||) '($1, $2, $3, $4) WITH ORDINALITY',
                         pg_catalog.format('broker._run_jobs_compat(%L, $1, $2, $3, $4) WITH ORDINALITY',
                                           broker._executor_call(v_exec))));
            -- the ids, for application_name while each runs; under a budget, when to start no more jobs
            -- (from the message's start: before the timeout, which starts with this statement, can fire)
            PERFORM pg_catalog.set_config('broker.batch_job_ids',
                ARRAY(SELECT (o[p]).job_id FROM pg_catalog.unnest(r_pos) AS p)::text, true);
            IF p_budget IS NOT NULL THEN
                PERFORM pg_catalog.set_config('broker.batch_deadline',
                    pg_catalog.date_part('epoch', pg_catalog.statement_timestamp() OPERATOR(pg_catalog.+) (p_budget OPERATOR(pg_catalog./) 2))::text,
                    true);
            END IF;
            -- in a subtransaction, the session put back, and rolled back when they left code for COMMIT
            -- (guard.sql); then each job alone, to refuse only the ones that did
            v_guard := broker._run_guarded(v_call, r_sqls, r_langs, r_paths, v_tenant);
            v_states := v_guard.states;
            v_msgs := v_guard.messages;
            v_durs := v_guard.durations;
            IF v_guard.refused IS NOT NULL THEN
                v_states := '{}';
                v_msgs := '{}';
                v_durs := '{}';
                FOR i IN 1 .. pg_catalog.cardinality(r_pos) LOOP
                    IF pg_catalog.cardinality(r_pos) OPERATOR(pg_catalog.>) 1 THEN
                        v_guard := broker._run_guarded(v_call, ARRAY[r_sqls[i]], ARRAY[r_langs[i]], ARRAY[r_paths[i]],
                                                       v_tenant);
                    END IF;
                    EXIT WHEN v_guard.refused IS NULL AND v_guard.states IS NULL;  -- the budget's timeout: not run
                    IF v_guard.refused IS NOT NULL THEN
                        v_states := v_states OPERATOR(pg_catalog.||) '42501'::text;
                        v_msgs := v_msgs OPERATOR(pg_catalog.||) broker._refusal(v_guard.refused, v_run_as);
                        v_durs := v_durs OPERATOR(pg_catalog.||) interval '0';
                    ELSE
                        v_states := v_states OPERATOR(pg_catalog.||) v_guard.states[1];
                        v_msgs := v_msgs OPERATOR(pg_catalog.||) v_guard.messages[1];
                        v_durs := v_durs OPERATOR(pg_catalog.||) v_guard.durations[1];
                    END IF;
                END LOOP;
            END IF;
            PERFORM pg_catalog.set_config('broker.batch_job_ids', '', true);
            PERFORM pg_catalog.set_config('broker.batch_deadline', '', true);
            v_ran := COALESCE(pg_catalog.array_length(v_states, 1), 0);  -- (fewer under a budget: the rest not started)
            IF v_ran OPERATOR(pg_catalog.>) pg_catalog.cardinality(r_pos)
               OR (v_ran OPERATOR(pg_catalog.<) pg_catalog.cardinality(r_pos) AND p_budget IS NULL) THEN
                RAISE EXCEPTION 'broker_run_batch: the executor of role % returned % outcomes for % jobs',
                    pg_catalog.quote_ident(v_run_as), COALESCE(pg_catalog.array_length(v_states, 1), 0),
                    pg_catalog.cardinality(r_pos)
                    USING ERRCODE = 'data_exception',
                          HINT = pg_catalog.format('Recreate it: SELECT broker.broker_create_executor(%L)', v_run_as);
            END IF;
        END IF;
        v_ran := COALESCE(pg_catalog.array_length(v_states, 1), 0);
        PERFORM pg_catalog.set_config('broker.tenant_id', COALESCE(v_caller, ''), true);
        -- under a budget, the last job run ended with 57014 once the budget passed: the budget's timeout
        -- ended it (a job cannot arm one of its own inside this statement); it was rolled back alone
        -- (unless a cancel request for it came in: then the cancel ended it, and it ends cancelled)
        IF p_budget IS NOT NULL AND v_ran OPERATOR(pg_catalog.>) 0 AND v_states[v_ran] OPERATOR(pg_catalog.=) '57014'
           AND pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>=) (pg_catalog.statement_timestamp() OPERATOR(pg_catalog.+) p_budget)
           AND broker._cancel_requested((o[r_pos[v_ran]]).job_id) IS NULL THEN
            v_cut := r_pos[v_ran];
            o[v_cut].complete_status := NULL;
            o[v_cut].error_sqlstate := 'PB002';
            o[v_cut].error_message := pg_catalog.format('broker_run_batch: job %s ran past the batch budget (%s): rolled '
                                                        'back, attempt not counted, it runs alone from now on',
                                                        (o[v_cut]).job_id, p_budget);
        END IF;
        FOR i IN 1 .. v_ran LOOP
            CONTINUE WHEN v_states[i] IS NULL OR r_pos[i] OPERATOR(pg_catalog.=) v_cut;
            v_failed := true;
            o[r_pos[i]].error_sqlstate := v_states[i];
            o[r_pos[i]].error_message := broker._job_error(v_run_as, v_exec, v_states[i], v_msgs[i]);
        END LOOP;
    END IF;
    -- the rows up to the first job not started (under a budget); the caller passes the rest again
    v_keep := CASE WHEN v_ran OPERATOR(pg_catalog.<) pg_catalog.cardinality(r_pos)
                   THEN r_pos[v_ran OPERATOR(pg_catalog.+) 1] OPERATOR(pg_catalog.-) 1 ELSE pg_catalog.cardinality(o) END;
    o := o[1:v_keep];
    -- the jobs that succeeded, completed together (their effects and their completion still commit
    -- together, their dependents released at once), with what the executor reported of each run
    v_done := ARRAY(SELECT (o[p.pos]).job_id
                      FROM ROWS FROM (pg_catalog.unnest(r_pos[1:v_ran]), pg_catalog.unnest(v_states)) AS p(pos, state)
                     WHERE p.state IS NULL AND p.pos IS DISTINCT FROM v_cut);
    v_done_msgs := ARRAY(SELECT p.msg
                           FROM ROWS FROM (pg_catalog.unnest(r_pos[1:v_ran]), pg_catalog.unnest(v_states),
                                           pg_catalog.unnest(v_msgs)) AS p(pos, state, msg)
                          WHERE p.state IS NULL AND p.pos IS DISTINCT FROM v_cut);
    -- the bookkeeping, done again should the budget's timeout fire in it (it fires once)
    FOR v_try IN 1 .. 2 LOOP
        BEGIN
            -- the failed ones, retried or failed, and those not run for their enqueuer, failed; in
            -- order (rare; skipped, loop and all, when none)
            IF v_failed THEN
                FOR i IN 1 .. pg_catalog.cardinality(o) LOOP
                    CONTINUE WHEN (o[i]).complete_status IS NULL OR (o[i]).error_sqlstate IS NULL;
                    IF i OPERATOR(pg_catalog.=) ANY (x_pos) THEN
                        PERFORM broker._record_attempts(ARRAY[(o[i]).job_id], 'failed', ARRAY[(o[i]).error_sqlstate],
                                                        ARRAY[(o[i]).error_message]);
                        o[i].complete_status := broker._fail_job((o[i]).job_id, (o[i]).error_sqlstate, (o[i]).error_message);
                        CONTINUE;
                    END IF;
                    -- cancelled by its cancel request (57014 with a request: broker_cancel_job), else failed;
                    -- o[i] changes only once both are done, so that a second try records the job again
                    v_status := broker._cancel_running((o[i]).job_id, (o[i]).error_sqlstate, (o[i]).error_message);
                    IF v_status IS NULL THEN
                        v_status := broker._fail_attempt((o[i]).job_id, (o[i]).error_sqlstate, (o[i]).error_message);
                    END IF;
                    o[i].complete_status := v_status;
                END LOOP;
            END IF;
            IF v_cut IS NOT NULL THEN
                UPDATE broker.broker_jobs AS j SET run_alone = true WHERE j.job_id OPERATOR(pg_catalog.=) (o[v_cut]).job_id;
            END IF;
            IF pg_catalog.cardinality(v_done) OPERATOR(pg_catalog.>) 0 THEN
                PERFORM broker._record_attempts(v_done, 'completed', NULL, NULL, v_done_msgs);
                PERFORM broker._complete_jobs(v_done);
            END IF;
            EXIT;
        EXCEPTION WHEN query_canceled THEN
            IF p_budget IS NULL OR v_try OPERATOR(pg_catalog.=) 2 THEN
                RAISE;
            END IF;
        END;
    END LOOP;

    RETURN QUERY
        SELECT b.id, b.status, b.att, b.state, b.msg,
               COALESCE(r.dur, CASE WHEN b.status IS NOT NULL THEN interval '0' END),
               -- a completed job's rows, as the executor reported them ('<rows>' chr(31) '<output>')
               CASE WHEN b.status OPERATOR(pg_catalog.=) 2 AND r.state IS NULL
                         AND pg_catalog.split_part(r.msg, pg_catalog.chr(31), 1) OPERATOR(pg_catalog.~) '^[0-9]{1,18}$'
                    THEN pg_catalog.split_part(r.msg, pg_catalog.chr(31), 1)::bigint END
          FROM pg_catalog.unnest(o) WITH ORDINALITY AS b(id, status, att, state, msg, n)
          LEFT JOIN ROWS FROM (pg_catalog.unnest(r_pos), pg_catalog.unnest(v_durs), pg_catalog.unnest(v_states),
                               pg_catalog.unnest(v_msgs)) AS r(pos, dur, state, msg)
            ON r.pos OPERATOR(pg_catalog.=) b.n
         ORDER BY b.n;
END;
$$;
COMMENT ON FUNCTION broker.broker_run_batch(bigint[], uuid[], interval) IS
    'Runs several claimed jobs of one run_as role and tenant in the caller''s transaction, each like broker_run (own subtransaction, effects and completion commit together); stops before the first job of another role or tenant, or with a timeout; under a budget (p_budget = statement_timeout) no job waits for the commit much beyond it: a job still running when it ends is rolled back, marked run_alone and returned claimed (PB002).';
