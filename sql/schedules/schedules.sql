-- sql/schedules/schedules.sql: adding schedules (broker_add_schedule) and the rules every schedule write checks.
-- ---------------------------------------------------------------------------
-- Schedules: add (here), alter, enable/disable, remove (sql/schedules/manage.sql).
--   All SECURITY INVOKER: rows are written with the caller's rights, so the
--   row-level security policies check tenant, owner (created_by) and run_as
--   as the caller, exactly as for jobs. Each change sends NOTIFY
--   pgsql_broker_schedule '<database>' (on commit) so a runner re-reads its
--   next tick time at once.
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- Function: broker._schedule_job_name(s)
--   The name of schedule s's jobs: the schedule's name, or for a schedule of
--   tasks the task name of its queue (broker_task_queue), which a worker
--   claims them by (NULL when no name has that queue).
--   Calls: none
--   Tables: reads broker_task_queue
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._schedule_job_name(s broker.broker_schedule)
RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN s.job_language OPERATOR(pg_catalog.=) 'task'
                THEN (SELECT q.task_name FROM broker.broker_task_queue AS q WHERE q.job_queue OPERATOR(pg_catalog.=) s.job_queue)
                ELSE s.schedule_name END
$$;
COMMENT ON FUNCTION broker._schedule_job_name(broker.broker_schedule) IS
    'Internal: the name of a schedule''s jobs: the schedule''s, or for a schedule of tasks its task name.';

-- ---------------------------------------------------------------------------
-- Function: broker._schedule_check(p_fn, s)
--   Validates a schedule row (new or altered) as p_fn and returns its next
--   fire time after now. Resolves nothing; raises on the first bad value.
--   The jobs' fields obey broker_add_job's rules (broker._job_problem; the
--   message names this function's parameter: p_schedule_name for the jobs'
--   name, p_job_timeout for their timeout), their run_as is checked by
--   broker._check_run_as; the schedule's own fields here.
-- Errors: 22004 NULL where a value is required; 22023 invalid value, bad
--   cron expression (the message names the field), unknown time zone, or an
--   expression that never fires, a task schedule whose queue is no task
--   name's or whose arguments are not JSON; 42704 unknown run_as role; 42501 run_as
--   not allowed for the caller; those of broker._check_autonomous (0A000
--   SQL that can never run in a transaction without p_autonomous, and the
--   refusals of an autonomous schedule's SQL or role).
--   Calls: _job_problem, _job_field_error, _schedule_job_name, _check_run_as, _check_autonomous, broker_cron_next
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._schedule_check(p_fn text, s broker.broker_schedule)
RETURNS timestamptz
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_next    timestamptz;
    v_problem text[];
BEGIN
    IF s.cron_expr IS NULL OR s.time_zone IS NULL OR s.catch_up IS NULL OR s.catch_up_max IS NULL
       OR s.overlap IS NULL OR s.enabled IS NULL THEN
        RAISE EXCEPTION '%: % must not be NULL', p_fn,
            CASE WHEN s.cron_expr IS NULL THEN 'p_cron_expr' WHEN s.time_zone IS NULL THEN 'p_time_zone'
                 WHEN s.catch_up IS NULL THEN 'p_catch_up' WHEN s.catch_up_max IS NULL THEN 'p_catch_up_max'
                 WHEN s.overlap IS NULL THEN 'p_overlap' ELSE 'p_enabled' END
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    -- the rules of the jobs' fields, as for broker_add_job (named as this function's parameters)
    v_problem := broker._job_problem(ROW(s.schedule_name, s.execute_str, s.job_queue, s.job_priority, s.job_language,
        s.run_as, NULL, NULL, NULL, s.max_attempts, s.job_group, NULL, NULL, s.job_timeout, s.job_search_path,
        s.autonomous, s.concurrency_key)::broker._job_fields);
    IF v_problem IS NOT NULL THEN
        PERFORM broker._job_field_error(p_fn, CASE v_problem[2] WHEN 'job_name' THEN 'p_schedule_name'
                                                                 WHEN 'timeout' THEN 'p_job_timeout'
                                                                 ELSE 'p_' OPERATOR(pg_catalog.||) v_problem[2] END, v_problem);
    END IF;
    IF s.job_language OPERATOR(pg_catalog.=) 'task' AND broker._schedule_job_name(s) IS NULL THEN
        RAISE EXCEPTION '%: p_job_queue % is no task name''s queue', p_fn, s.job_queue
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Schedule tasks with broker_add_task_schedule.';
    END IF;
    IF s.job_language OPERATOR(pg_catalog.=) 'task' THEN
        BEGIN
            PERFORM s.execute_str::pg_catalog.jsonb;
        EXCEPTION WHEN invalid_text_representation THEN
            RAISE EXCEPTION '%: a task''s arguments must be JSON', p_fn USING ERRCODE = 'invalid_parameter_value';
        END;
    END IF;
    IF s.catch_up_max OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION '%: p_catch_up_max must be >= 1, got %', p_fn, s.catch_up_max
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF s.catch_up OPERATOR(pg_catalog.<>) ALL (ARRAY['none', 'one', 'all']) THEN
        RAISE EXCEPTION '%: p_catch_up must be none, one or all, got %', p_fn, pg_catalog.quote_literal(s.catch_up)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF s.overlap OPERATOR(pg_catalog.<>) ALL (ARRAY['skip', 'allow']) THEN
        RAISE EXCEPTION '%: p_overlap must be skip or allow, got %', p_fn, pg_catalog.quote_literal(s.overlap)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM broker._check_run_as(p_fn, s.run_as);
    PERFORM broker._check_autonomous(p_fn, s.execute_str, s.job_language, s.run_as, s.autonomous);
    v_next := broker.broker_cron_next(s.cron_expr, pg_catalog.now(), s.time_zone);
    IF v_next IS NULL THEN
        RAISE EXCEPTION '%: cron expression % never fires', p_fn, pg_catalog.quote_literal(s.cron_expr)
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Check day of month against month (say 30 2 = 30 February).';
    END IF;
    RETURN v_next;
END;
$$;
COMMENT ON FUNCTION broker._schedule_check(text, broker.broker_schedule) IS
    'Internal: validates a schedule row for broker_add_schedule / broker_alter_schedule and returns its next fire time.';

-- ---------------------------------------------------------------------------
-- Function: broker._schedule_notify()
--   NOTIFY pgsql_broker_schedule '<database>' (sent on commit).
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._schedule_notify()
RETURNS void
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT pg_catalog.pg_notify('pgsql_broker_schedule', pg_catalog.current_database())
$$;
COMMENT ON FUNCTION broker._schedule_notify() IS
    'Internal: NOTIFY pgsql_broker_schedule, ''<database>'' so runners re-plan their next tick (sent on commit).';

-- ---------------------------------------------------------------------------
-- Function: broker._add_schedule(p_fn, s, p_search_path)
--   The body of broker_add_schedule and broker_add_task_schedule (named
--   p_fn in errors): checks schedule row s (broker._schedule_check) and the
--   caller's right to act for the current tenant, refuses a name the tenant
--   has, makes the run_as role's executor (not for a task), inserts the
--   schedule (p_search_path its jobs' search_path) and tells the runners.
-- Errors: those of broker._schedule_check; 23505 a schedule of that name
--   exists in the tenant; 42501 the role may not act for the tenant.
--   Calls: _schedule_check, _tenant_allowed, broker_current_tenant, _executor, broker_create_executor, _schedule_notify
--   Tables: writes broker_schedule
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._add_schedule(p_fn text, s broker.broker_schedule, p_search_path text)
RETURNS TABLE (schedule_id bigint, next_fire_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_next  timestamptz;
BEGIN
    v_next := broker._schedule_check(p_fn, s);
    IF NOT broker._tenant_allowed(broker.broker_current_tenant(), CURRENT_USER) THEN
        RAISE EXCEPTION '%: role % may not act for tenant %', p_fn, pg_catalog.quote_ident(CURRENT_USER),
            pg_catalog.quote_literal(broker.broker_current_tenant())
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF EXISTS (SELECT 1 FROM broker.broker_schedule AS x
                WHERE x.tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
                  AND x.schedule_name OPERATOR(pg_catalog.=) s.schedule_name) THEN
        RAISE EXCEPTION '%: schedule % exists already', p_fn, pg_catalog.quote_literal(s.schedule_name)
            USING ERRCODE = 'unique_violation', HINT = 'Change it with broker_alter_schedule.';
    END IF;
    -- its jobs run inside the run_as role's executor: create it now, with the caller's rights (a task
    -- runs in application code, without one)
    IF s.job_language OPERATOR(pg_catalog.<>) 'task' AND broker._executor(s.run_as) IS NULL THEN
        PERFORM broker.broker_create_executor(s.run_as);
    END IF;
    RETURN QUERY
    INSERT INTO broker.broker_schedule AS t
           (schedule_name, cron_expr, time_zone, execute_str, job_language, job_queue, job_priority, run_as,
            max_attempts, job_group, enabled, next_fire_at, job_timeout, job_search_path, catch_up, catch_up_max,
            overlap, autonomous, concurrency_key)
    VALUES (s.schedule_name, s.cron_expr, s.time_zone, s.execute_str, s.job_language, s.job_queue, s.job_priority,
            s.run_as, s.max_attempts, s.job_group, s.enabled, CASE WHEN s.enabled THEN v_next END, s.job_timeout,
            COALESCE(p_search_path, ''), s.catch_up, s.catch_up_max, s.overlap, s.autonomous, s.concurrency_key)
    RETURNING t.schedule_id, t.next_fire_at;
    PERFORM broker._schedule_notify();
END;
$$;
COMMENT ON FUNCTION broker._add_schedule(text, broker.broker_schedule, text) IS
    'Internal: the body of broker_add_schedule and broker_add_task_schedule: checks and inserts a schedule row, and tells the runners.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_add_schedule(p_schedule_name, p_cron_expr,
--     p_execute_str, p_time_zone, p_job_queue, p_job_priority,
--     p_job_language, p_run_as, p_max_attempts, p_job_group, p_catch_up,
--     p_catch_up_max, p_overlap, p_enabled, p_job_timeout, p_search_path,
--     p_tenant_id, p_autonomous, p_concurrency_key)
--   Creates a schedule for the caller's tenant, owned by the caller, and
--   returns (schedule_id, next_fire_at). Jobs are named after the schedule
--   and run as p_run_as (default: the caller). p_tenant_id names the tenant
--   for this call only (as broker_add_job's).
--   With p_autonomous its jobs run outside a transaction block (VACUUM,
--   CREATE INDEX CONCURRENTLY, a CALL that commits, ...: see broker_add_job).
--   p_concurrency_key is the concurrency key of its jobs (as broker_add_job's;
--   NULL: none).
-- Errors: those of broker._schedule_check; 23505 a schedule of that name
--   exists in the tenant; 42501 the role may not act for the tenant.
-- Example:
--   SELECT * FROM broker.broker_add_schedule('nightly-rollup', '0 3 * * *', 'CALL reports.rollup()',
--                                         p_time_zone => 'Europe/Berlin', p_catch_up => 'none');
--   SELECT * FROM broker.broker_add_schedule('nightly-vacuum', '0 3 * * *', 'VACUUM ANALYZE orders', p_autonomous => true);
--   SELECT * FROM broker.broker_add_schedule('crm-sync', '*/5 * * * *', 'CALL crm.sync_all()', p_concurrency_key => 'crm-api');
--   Calls: _set_tenant, _add_schedule
--   Tables: writes broker_schedule (through _add_schedule)
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_add_schedule(
    p_schedule_name text,
    p_cron_expr     text,
    p_execute_str   text,
    p_time_zone     text     DEFAULT 'UTC',
    p_job_queue     integer  DEFAULT 1,
    p_job_priority  integer  DEFAULT 0,
    p_job_language  text     DEFAULT 'sql',
    p_run_as        text     DEFAULT NULL,
    p_max_attempts  integer  DEFAULT 1,
    p_job_group     text     DEFAULT NULL,
    p_catch_up      text     DEFAULT 'one',
    p_catch_up_max  integer  DEFAULT 100,
    p_overlap       text     DEFAULT 'skip',
    p_enabled       boolean  DEFAULT true,
    p_job_timeout   interval DEFAULT NULL,
    p_search_path   text     DEFAULT pg_catalog.current_setting('search_path'),
    p_tenant_id     text     DEFAULT NULL,
    p_autonomous    boolean  DEFAULT false,
    p_concurrency_key text   DEFAULT NULL)
RETURNS TABLE (schedule_id bigint, next_fire_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s       broker.broker_schedule;
    v_saved text;
BEGIN
    IF p_tenant_id IS NOT NULL THEN  -- the named tenant, for this call only
        v_saved := pg_catalog.current_setting('broker.tenant_id', true);
        PERFORM broker._set_tenant('broker_add_schedule', p_tenant_id);
        RETURN QUERY SELECT a.schedule_id, a.next_fire_at FROM broker.broker_add_schedule(p_schedule_name, p_cron_expr,
            p_execute_str, p_time_zone, p_job_queue, p_job_priority, p_job_language, p_run_as, p_max_attempts,
            p_job_group, p_catch_up, p_catch_up_max, p_overlap, p_enabled, p_job_timeout, p_search_path,
            p_autonomous => p_autonomous, p_concurrency_key => p_concurrency_key) AS a;
        PERFORM pg_catalog.set_config('broker.tenant_id', COALESCE(v_saved, ''), true);
        RETURN;
    END IF;
    s.schedule_name := p_schedule_name;
    s.cron_expr := pg_catalog.btrim(p_cron_expr);
    s.execute_str := p_execute_str;
    s.time_zone := pg_catalog.btrim(p_time_zone);
    s.job_queue := p_job_queue;
    s.job_priority := p_job_priority;
    s.job_language := pg_catalog.lower(pg_catalog.btrim(p_job_language));
    s.run_as := COALESCE(p_run_as, CURRENT_USER);
    s.max_attempts := p_max_attempts;
    s.job_group := p_job_group;
    s.catch_up := pg_catalog.lower(pg_catalog.btrim(p_catch_up));
    s.catch_up_max := p_catch_up_max;
    s.overlap := pg_catalog.lower(pg_catalog.btrim(p_overlap));
    s.enabled := p_enabled;
    s.job_timeout := p_job_timeout;
    s.autonomous := p_autonomous;
    s.concurrency_key := p_concurrency_key;
    RETURN QUERY SELECT a.schedule_id, a.next_fire_at FROM broker._add_schedule('broker_add_schedule', s, p_search_path) AS a;
END;
$$;
COMMENT ON FUNCTION broker.broker_add_schedule(text, text, text, text, integer, integer, text, text, integer, text, text, integer, text, boolean, interval, text, text, boolean, text) IS
    'Creates a cron schedule (expression, IANA time zone, job template, catch-up and overlap policy, autonomous or not, concurrency key) for the current tenant; returns (schedule_id, next_fire_at).';
