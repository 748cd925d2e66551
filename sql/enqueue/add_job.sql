-- sql/enqueue/add_job.sql: enqueueing one job (broker_add_job, broker_add_job_simple).
-- ---------------------------------------------------------------------------
-- Function: broker.broker_add_job(p_job_name, p_execute_str, p_job_queue,
--     p_job_priority, p_job_language, p_run_as, p_schedule_id,
--     p_depends_on_job_ids, p_idempotency_key, p_max_attempts, p_job_group,
--     p_depends_on_groups, p_run_after, p_timeout, p_search_path, p_tenant_id, p_autonomous,
--     p_concurrency_key)
--   Enqueues a job for the caller's tenant and returns (job_id, is_new).
--   * p_tenant_id names the tenant for this call only (checked as by
--     broker_set_tenant, and the caller must be allowed to act for it, as for
--     broker.tenant_id); default: the transaction's tenant.
--   The first twelve parameters are the original broker's, in its order.
--   * p_job_group defaults to p_job_name; p_search_path (the search_path the
--     job's SQL runs with) defaults to the caller's, evaluated at the call.
--   * A job waits for every job in p_depends_on_job_ids and for every job of
--     each group in p_depends_on_groups that is unfinished (pending or
--     running) when it is enqueued or that joins the group later while it is
--     still pending.
--   * With p_idempotency_key, an unfinished job of the same tenant and key is
--     returned instead (is_new = false); once that job has finished the key
--     may be used again.
--   * p_autonomous: the job runs outside a transaction block, on a
--     connection of its own, at least once (VACUUM, ANALYZE, CREATE INDEX /
--     REINDEX / REFRESH MATERIALIZED VIEW CONCURRENTLY, or a CALL of a
--     procedure that commits): one such statement, for a role an
--     administrator allowed (broker_allow_autonomous). A regular job whose
--     text can never run inside a transaction is refused (0A000).
--   * p_concurrency_key: the key whose limits (broker_set_limit: jobs
--     running at once, starts per second) the job counts against; NULL
--     (default) for none. At most 200 characters, not blank.
--   * SECURITY INVOKER on purpose: the rows are written with the caller's
--     rights, so the row-level security policies check the caller's tenant,
--     identity (enqueued_by) and run_as as that caller; the triggers on the
--     tables do the bookkeeping that needs more rights (dependency counters,
--     cycle checks). The job runs as run_as through its executor, created
--     here when missing (see broker_create_executor).
-- Errors: those of broker._job_problem, as 'broker_add_job: p_<field> ...':
--   22004 NULL where a value is required; 22023 invalid value (also a queue
--   outside 1..1000, an idempotency key over 512 characters or starting with
--   'broker_schedule:', reserved for the tick, a blank concurrency key or
--   one over 200 characters);
--   42704 unknown run_as role; 42501 run_as not allowed, or the role may not
--   act for the tenant (strict tenancy); 23503 unknown
--   schedule or dependency job; 55000 dependency job already failed or
--   cancelled; 23514 self-dependency or dependency cycle; those of
--   broker._check_autonomous (0A000 SQL that can never run in a transaction
--   without p_autonomous; with it 22023/0A000 SQL it does not accept, 42501
--   a role without the arrangement).
-- Example:
--   SELECT * FROM broker.broker_add_job('refresh sales', 'REFRESH MATERIALIZED VIEW sales_daily',
--                                    p_job_priority => 5, p_max_attempts => 3, p_timeout => '10 minutes');
--   SELECT * FROM broker.broker_add_job('acme report', 'CALL acme.report()', p_tenant_id => 'acme');
--   SELECT * FROM broker.broker_add_job('reindex orders', 'REINDEX INDEX CONCURRENTLY orders_pkey', p_autonomous => true);
--   SELECT * FROM broker.broker_add_job('sync 42', 'CALL crm.sync(42)', p_concurrency_key => 'crm-api');
--   Calls: _set_tenant, broker_current_tenant, _job_problem, _job_field_error, _tenant_allowed, _check_run_as, _may_not_run_in_transaction, _check_autonomous, _lock_dependency_keys, broker_create_executor, _notify_queues, _due_time
--   Tables: reads broker_tenant_roles, broker_schedule; writes broker_jobs, broker_job_dependency
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_add_job(
    p_job_name            text,
    p_execute_str         text,
    p_job_queue           integer     DEFAULT 1,
    p_job_priority        integer     DEFAULT 0,
    p_job_language        text        DEFAULT 'sql',
    p_run_as              text        DEFAULT NULL,
    p_schedule_id         bigint      DEFAULT NULL,
    p_depends_on_job_ids  bigint[]    DEFAULT NULL,
    p_idempotency_key     text        DEFAULT NULL,
    p_max_attempts        integer     DEFAULT 1,
    p_job_group           text        DEFAULT NULL,
    p_depends_on_groups   text[]      DEFAULT NULL,
    p_run_after           timestamptz DEFAULT NULL,
    p_timeout             interval    DEFAULT NULL,
    p_search_path         text        DEFAULT pg_catalog.current_setting('search_path'),
    p_tenant_id           text        DEFAULT NULL,
    p_autonomous          boolean     DEFAULT false,
    p_concurrency_key     text        DEFAULT NULL)
RETURNS TABLE (job_id bigint, is_new boolean)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tenant   text := broker.broker_current_tenant();
    v_language text := pg_catalog.lower(pg_catalog.btrim(p_job_language));
    v_group    text := COALESCE(p_job_group, p_job_name);
    v_run_as   name;
    v_ids      bigint[];
    v_groups   text[];
    v_id       bigint;
    v_has_deps boolean;
    v_saved    text;
    v_problem  text[];
BEGIN
    IF p_tenant_id IS NOT NULL THEN  -- the named tenant, for this call only
        v_saved := pg_catalog.current_setting('broker.tenant_id', true);
        PERFORM broker._set_tenant('broker_add_job', p_tenant_id);
        RETURN QUERY SELECT a.job_id, a.is_new FROM broker.broker_add_job(p_job_name, p_execute_str, p_job_queue,
            p_job_priority, p_job_language, p_run_as, p_schedule_id, p_depends_on_job_ids, p_idempotency_key,
            p_max_attempts, p_job_group, p_depends_on_groups, p_run_after, p_timeout, p_search_path,
            p_autonomous => p_autonomous, p_concurrency_key => p_concurrency_key) AS a;
        PERFORM pg_catalog.set_config('broker.tenant_id', COALESCE(v_saved, ''), true);
        RETURN;
    END IF;
    ---- the fields' own rules (broker._job_problem, one expression) -----------
    v_problem := broker._job_problem(ROW(p_job_name, p_execute_str, p_job_queue, p_job_priority, p_job_language,
        p_run_as, p_schedule_id, p_depends_on_job_ids, p_idempotency_key, p_max_attempts, p_job_group,
        p_depends_on_groups, p_run_after, p_timeout, p_search_path, p_autonomous, p_concurrency_key)::broker._job_fields);
    IF v_problem IS NOT NULL THEN
        PERFORM broker._job_field_error('broker_add_job', 'p_' OPERATOR(pg_catalog.||) v_problem[2], v_problem);
    END IF;

    IF NOT broker._tenant_allowed(v_tenant, CURRENT_USER) THEN
        RAISE EXCEPTION 'broker_add_job: role % may not act for tenant %', pg_catalog.quote_ident(CURRENT_USER),
            pg_catalog.quote_literal(v_tenant)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Strict tenancy is on: broker_admin maps roles to tenants in broker.broker_tenant_roles.';
    END IF;

    ---- run_as: the enqueuer, or a role it is a member of ---------------------
    v_run_as := CASE WHEN p_run_as IS NULL THEN CURRENT_USER
                     ELSE broker._check_run_as('broker_add_job', p_run_as) END;
    -- (a regular job's text the quick filter of _never_in_transaction does not match is never refused:
    -- most calls skip the check's call)
    -- (a task's execute_str is its arguments, run by application code: no SQL to check, no executor)
    IF v_language OPERATOR(pg_catalog.<>) 'task'
       AND (COALESCE(p_autonomous, false) OR broker._may_not_run_in_transaction(p_execute_str)) THEN
        PERFORM broker._check_autonomous('broker_add_job', p_execute_str, v_language, v_run_as, p_autonomous);
    END IF;

    IF p_schedule_id IS NOT NULL THEN  -- (nested: the query runs only when there is an id)
        IF NOT EXISTS (SELECT 1 FROM broker.broker_schedule AS s
                        WHERE s.schedule_id OPERATOR(pg_catalog.=) p_schedule_id
                          AND s.tenant_id OPERATOR(pg_catalog.=) v_tenant) THEN
            RAISE EXCEPTION 'broker_add_job: schedule % does not exist', p_schedule_id
                USING ERRCODE = 'foreign_key_violation';
        END IF;
    END IF;

    ---- idempotency fast path ----------------------------------------------
    IF p_idempotency_key IS NOT NULL THEN
        SELECT j.job_id INTO v_id FROM broker.broker_jobs AS j
         WHERE j.tenant_id OPERATOR(pg_catalog.=) v_tenant
           AND j.idempotency_key OPERATOR(pg_catalog.=) p_idempotency_key
           AND j.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[0, 1]::smallint[]);
        IF FOUND THEN
            RETURN QUERY SELECT v_id, false;
            RETURN;
        END IF;
    END IF;

    IF pg_catalog.cardinality(p_depends_on_job_ids) OPERATOR(pg_catalog.>) 0 THEN
        v_ids := ARRAY(SELECT DISTINCT x FROM pg_catalog.unnest(p_depends_on_job_ids) AS x ORDER BY 1);
    END IF;
    IF pg_catalog.cardinality(p_depends_on_groups) OPERATOR(pg_catalog.>) 0 THEN
        v_groups := ARRAY(SELECT DISTINCT g FROM pg_catalog.unnest(p_depends_on_groups) AS g ORDER BY 1);
    END IF;

    IF v_group OPERATOR(pg_catalog.=) ANY (v_groups) THEN
        RAISE EXCEPTION 'broker_add_job: job % cannot depend on its own group %',
            pg_catalog.quote_literal(p_job_name), pg_catalog.quote_literal(v_group)
            USING ERRCODE = 'check_violation';
    END IF;

    v_has_deps := v_ids IS NOT NULL OR v_groups IS NOT NULL;  -- (each set only when not empty)
    IF v_has_deps THEN
        -- Take every dependency lock this enqueue needs now, in the global order
        -- (the triggers below take the same ones again, which is then free).
        -- Without dependencies the insert trigger takes the only one, its group's.
        PERFORM broker._lock_dependency_keys(v_tenant, ARRAY[v_group], v_groups, NULL, v_ids);
    END IF;

    -- The job will run inside its run_as role's executor: make sure it has one
    -- (a look-up by name here; broker_create_executor and the run check it fully).
    IF v_language OPERATOR(pg_catalog.<>) 'task' AND pg_catalog.to_regprocedure(pg_catalog.format('%I.run_job(text,text,text)',
           'broker_exec_' OPERATOR(pg_catalog.||) pg_catalog.to_regrole(pg_catalog.quote_ident(v_run_as))::pg_catalog.oid::pg_catalog.text)) IS NULL THEN
        PERFORM broker.broker_create_executor(v_run_as);
    END IF;

    ---- insert -------------------------------------------------------------
    IF p_idempotency_key IS NULL AND NOT v_has_deps THEN
        -- the common case: one plain INSERT (its trigger notifies the queue)
        INSERT INTO broker.broker_jobs AS j
               (job_name, job_group, execute_str, job_language, job_queue, job_priority,
                run_as, schedule_id, max_attempts, run_after, job_timeout, job_search_path, autonomous, concurrency_key)
        VALUES (p_job_name, v_group, p_execute_str, v_language, p_job_queue, p_job_priority,
                v_run_as, p_schedule_id, p_max_attempts,
                COALESCE(p_run_after, pg_catalog.now()), p_timeout, COALESCE(p_search_path, ''), COALESCE(p_autonomous, false),
                p_concurrency_key)
        RETURNING j.job_id INTO v_id;
        job_id := v_id;
        is_new := true;
        RETURN NEXT;
        RETURN;
    END IF;
    IF v_has_deps THEN
        PERFORM pg_catalog.set_config('broker.defer_notify', 'on', true);
    END IF;
    LOOP
        INSERT INTO broker.broker_jobs AS j
               (job_name, job_group, execute_str, job_language, job_queue, job_priority,
                run_as, schedule_id, idempotency_key, max_attempts, run_after, job_timeout, job_search_path, autonomous,
                concurrency_key)
        VALUES (p_job_name, v_group, p_execute_str, v_language, p_job_queue, p_job_priority,
                v_run_as, p_schedule_id, p_idempotency_key, p_max_attempts,
                COALESCE(p_run_after, pg_catalog.now()), p_timeout, COALESCE(p_search_path, ''), COALESCE(p_autonomous, false),
                p_concurrency_key)
        ON CONFLICT (tenant_id, idempotency_key)
           WHERE idempotency_key IS NOT NULL AND complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[0, 1]::smallint[])
        DO NOTHING
        RETURNING j.job_id INTO v_id;
        EXIT WHEN v_id IS NOT NULL;
        -- A concurrent transaction holds the key: return its job, unless it just finished.
        SELECT j.job_id INTO v_id FROM broker.broker_jobs AS j
         WHERE j.tenant_id OPERATOR(pg_catalog.=) v_tenant
           AND j.idempotency_key OPERATOR(pg_catalog.=) p_idempotency_key
           AND j.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[0, 1]::smallint[]);
        IF FOUND THEN
            PERFORM pg_catalog.set_config('broker.defer_notify', '', true);
            RETURN QUERY SELECT v_id, false;
            RETURN;
        END IF;
    END LOOP;

    IF v_has_deps THEN
        PERFORM pg_catalog.set_config('broker.defer_notify', '', true);
        -- One statement: each edge is validated by its row trigger, then all are
        -- locked, cycle-checked and counted by the statement trigger.
        INSERT INTO broker.broker_job_dependency (job_id, depends_on_job_id, depends_on_group)
        SELECT v_id, x, NULL FROM pg_catalog.unnest(v_ids) AS x
        UNION ALL
        SELECT v_id, NULL, g FROM pg_catalog.unnest(v_groups) AS g;
        -- wake a runner only if nothing it waits on is unfinished
        PERFORM broker._notify_queues(ARRAY[p_job_queue])
           FROM broker.broker_jobs AS j
          WHERE j.job_id OPERATOR(pg_catalog.=) v_id
            AND j.pending_deps OPERATOR(pg_catalog.=) 0
            AND j.run_after OPERATOR(pg_catalog.<=) broker._due_time();
    END IF;

    RETURN QUERY SELECT v_id, true;
END;
$$;
COMMENT ON FUNCTION broker.broker_add_job(text, text, integer, integer, text, text, bigint, bigint[], text, integer, text, text[], timestamptz, interval, text, text, boolean, text) IS
    'Enqueues a job (SQL or PL/pgSQL) for the current tenant with optional id/group dependencies, idempotency key, retries, delay, timeout and concurrency key, or as an autonomous job (outside a transaction); returns (job_id, is_new).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_add_job_simple(p_job_name, p_execute_str,
--     p_job_priority, p_depends_on_groups)
--   Shortcut for the common case: queue 1, SQL, one attempt, group = name.
-- Example:
--   SELECT * FROM broker.broker_add_job_simple('transform', 'CALL etl.transform()', 5, ARRAY['extract']);
--   Calls: broker_add_job
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_add_job_simple(
    p_job_name          text,
    p_execute_str       text,
    p_job_priority      integer DEFAULT 0,
    p_depends_on_groups text[]  DEFAULT NULL,
    p_search_path       text    DEFAULT pg_catalog.current_setting('search_path'))
RETURNS TABLE (job_id bigint, is_new boolean)
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT a.job_id, a.is_new
      FROM broker.broker_add_job(p_job_name, p_execute_str, 1, p_job_priority, 'sql', NULL, NULL, NULL,
                                 NULL, 1, NULL, p_depends_on_groups, NULL, NULL, p_search_path) AS a
$$;
COMMENT ON FUNCTION broker.broker_add_job_simple(text, text, integer, text[], text) IS
    'Shortcut for broker_add_job: name, SQL, priority and group dependencies; queue 1, one attempt. Returns (job_id, is_new).';
