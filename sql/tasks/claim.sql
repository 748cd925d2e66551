-- sql/tasks/claim.sql: claiming tasks by name (broker_claim_tasks).
-- ---------------------------------------------------------------------------
-- Function: broker._task_actor()
--   The role a task function acts for under strict tenancy: the role the
--   session set (SET ROLE), else its login (SESSION_USER). The task
--   functions are SECURITY DEFINER, so CURRENT_USER inside them is their
--   owner; a policy would check the caller's current role, and so does
--   this, as far as a definer can see it: a session that narrows itself
--   with SET ROLE to one tenant's worker role acts for that tenant only, as
--   it would through any other broker function.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._task_actor()
RETURNS name
LANGUAGE sql STABLE
-- (no SET clause, so that it is inlined into the task functions that call it at every claim and
-- completion; everything in it is qualified: sql/pgspot-no-search-path.txt)
AS $$
    -- ('role' shows the SET ROLE of the session, 'none' without one; a SECURITY DEFINER
    -- function's owner does not change it)
    SELECT CASE WHEN pg_catalog.current_setting('role') OPERATOR(pg_catalog.=) 'none' THEN SESSION_USER
                ELSE pg_catalog.current_setting('role')::pg_catalog.name END
$$;
COMMENT ON FUNCTION broker._task_actor() IS
    'Internal: the role a task function acts for under strict tenancy (the session''s SET ROLE, else its login).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_claim_tasks(p_tasks, p_limit, p_lease_seconds)
--   Claims up to p_limit ready tasks named in p_tasks for the caller's
--   tenant (broker.tenant_id; under strict tenancy the worker's role, its
--   SET ROLE else its login (_task_actor), must be mapped to it, as an
--   enqueuer's is). Each becomes running with one
--   more attempt and a lease of p_lease_seconds (default: setting
--   lease_seconds, else 60), which the worker renews (broker_extend_task)
--   while it runs; a lease that runs out while nobody renews it is
--   recovered as a SQL job's is (the runner's maintenance). Each name is a
--   queue of its own (broker_task_queue), claimed with the claim of SQL
--   jobs (broker._claim: priority then age, parked and blocked tasks left
--   out, key limits applied, locked rows skipped); names share a claim
--   starting from a name that moves from claim to claim. Returns one row per
--   claimed task: its id, name, arguments, tenant, attempt number, attempts
--   allowed, lease token and expiry, its timeout (NULL: none), which the
--   worker applies, and its enqueuer's trace context (traceparent, NULL:
--   none; the parent of the worker's span of the attempt). Unknown names claim nothing.
--   A task is handed out only while its enqueuer may still have it run, as
--   a SQL job is run only then (_authority_lost: the enqueuer still exists,
--   still acts for the tenant under strict tenancy, still may use run_as):
--   otherwise the claim fails it for good (3, whatever attempts are left)
--   with 42501 and the reason, cancels its dependents and does not return
--   it (its room in this claim is not filled again: the next claim's is).
-- Errors: 22004 NULL p_tasks or a NULL name; 22023 no name or more than 100,
--   a blank name or one over 200 characters, p_limit outside 1..1000, a
--   lease outside 1..3600 seconds; 42501 the worker's role may not act for the
--   tenant (strict tenancy).
-- Example:
--   SELECT * FROM broker.broker_claim_tasks(ARRAY['send_email', 'resize_image'], 10);
--   Calls: _check_task_name, _setting_int, _task_actor, _tenant_allowed, _claim, _check_lease_seconds,
--     _authority_lost, _record_attempts, _fail_job
--   Tables: reads broker_task_queue; writes broker_jobs (through _claim, _fail_job),
--     broker_job_attempts (through _record_attempts)
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_claim_tasks(
    p_tasks         text[],
    p_limit         integer DEFAULT 1,
    p_lease_seconds integer DEFAULT NULL)
RETURNS TABLE (
    job_id           bigint,
    task             text,
    args             jsonb,
    tenant_id        text,
    attempt          integer,
    max_attempts     integer,
    lease_token      uuid,
    lease_expires_at timestamptz,
    timeout          interval,
    traceparent      text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- (its statements' plans do not depend on the names or the limit asked: planned once, not at each call)
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_tenant text := broker.broker_current_tenant();
    v_lease  integer := COALESCE(p_lease_seconds, broker._setting_int('lease_seconds', 60, 1));
    v_left   integer := p_limit;
    v_actor  name := broker._task_actor();
    v_name   text;
    v_queues integer[];
    v_turn   bigint := 0;
    v_got    integer;
    n        integer;
    i        integer;
    r        record;
    v_who    text;     -- the enqueuer and run_as last checked (a claim's tasks mostly share them) ...
    v_denied text;     -- ... and why that enqueuer may no longer have them run (_authority_lost), NULL: it may
BEGIN
    IF p_tasks IS NULL THEN
        RAISE EXCEPTION 'broker_claim_tasks: p_tasks must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF COALESCE(pg_catalog.cardinality(p_tasks), 0) OPERATOR(pg_catalog.<) 1
       OR pg_catalog.cardinality(p_tasks) OPERATOR(pg_catalog.>) 100 OR pg_catalog.array_ndims(p_tasks) OPERATOR(pg_catalog.>) 1 THEN
        RAISE EXCEPTION 'broker_claim_tasks: p_tasks must name 1 to 100 tasks, got %', COALESCE(pg_catalog.cardinality(p_tasks), 0)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOREACH v_name IN ARRAY p_tasks LOOP
        PERFORM broker._check_task_name('broker_claim_tasks', 'a task name in p_tasks', v_name);
    END LOOP;
    IF p_limit IS NULL OR p_limit OPERATOR(pg_catalog.<) 1 OR p_limit OPERATOR(pg_catalog.>) 1000 THEN
        RAISE EXCEPTION 'broker_claim_tasks: p_limit must be 1 to 1000, got %', COALESCE(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM broker._check_lease_seconds('broker_claim_tasks', v_lease,
        'Renew it while the task runs (broker_extend_task): it only bounds how long a crashed worker holds its tasks.');
    IF NOT broker._tenant_allowed(v_tenant, v_actor) THEN
        RAISE EXCEPTION 'broker_claim_tasks: role % may not act for tenant %', pg_catalog.quote_ident(v_actor),
            pg_catalog.quote_literal(v_tenant)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Strict tenancy is on: broker_admin maps roles to tenants in broker.broker_tenant_roles.';
    END IF;

    v_queues := ARRAY(SELECT q.job_queue FROM broker.broker_task_queue AS q
                       WHERE q.task_name OPERATOR(pg_catalog.=) ANY (p_tasks) ORDER BY q.job_queue DESC);
    n := pg_catalog.cardinality(v_queues);
    IF n OPERATOR(pg_catalog.>) 1 THEN
        -- where this claim starts among the names: moves from claim to claim, so that no name's
        -- backlog always fills the claim first
        v_turn := COALESCE(NULLIF(pg_catalog.current_setting('broker.task_turn', true), '')::bigint, 0) OPERATOR(pg_catalog.+) 1;
        PERFORM pg_catalog.set_config('broker.task_turn', v_turn::text, true);
        v_turn := (pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot())::text::bigint OPERATOR(pg_catalog.+) v_turn)
                  OPERATOR(pg_catalog.%) n;
    END IF;
    FOR i IN 0 .. n OPERATOR(pg_catalog.-) 1 LOOP
        v_got := 0;
        -- (the claimed rows as the claim's UPDATE returns them, in its order: no second read)
        FOR r IN
            SELECT c.job_id, c.job_name, c.execute_str, c.tenant_id, c.attempts, c.max_attempts,
                   c.lease_token, c.lease_expires_at, c.job_timeout, c.traceparent, c.enqueued_by, c.run_as
              FROM broker._claim(v_queues[1 OPERATOR(pg_catalog.+) ((v_turn OPERATOR(pg_catalog.+) i) OPERATOR(pg_catalog.%) n)],
                                 NULL, v_lease, v_left, NULL, v_tenant) AS c
        LOOP
            v_got := v_got OPERATOR(pg_catalog.+) 1;
            IF v_who IS DISTINCT FROM pg_catalog.format('%I %I', r.enqueued_by, r.run_as) THEN
                v_who := pg_catalog.format('%I %I', r.enqueued_by, r.run_as);
                v_denied := broker._authority_lost(r.enqueued_by, v_tenant, r.run_as, 'enqueuer');
            END IF;
            IF v_denied IS NOT NULL THEN
                -- losing a right is no passing fault: failed for good, as broker_run fails a SQL job
                PERFORM broker._record_attempts(ARRAY[r.job_id], 'failed', ARRAY['42501'], ARRAY[v_denied]);
                PERFORM broker._fail_job(r.job_id, '42501', v_denied);
                CONTINUE;
            END IF;
            job_id := r.job_id;
            task := r.job_name;
            args := r.execute_str::jsonb;
            tenant_id := r.tenant_id;
            attempt := r.attempts;
            max_attempts := r.max_attempts;
            lease_token := r.lease_token;
            lease_expires_at := r.lease_expires_at;
            timeout := r.job_timeout;
            traceparent := r.traceparent;
            RETURN NEXT;
        END LOOP;
        v_left := v_left OPERATOR(pg_catalog.-) v_got;
        EXIT WHEN v_left OPERATOR(pg_catalog.<=) 0;
    END LOOP;
END;
$$;
COMMENT ON FUNCTION broker.broker_claim_tasks(text[], integer, integer) IS
    'Claims up to p_limit ready tasks of the named kinds for the caller''s tenant, each with a lease; returns (job_id, task, args, tenant_id, attempt, max_attempts, lease_token, lease_expires_at, timeout, traceparent).';
