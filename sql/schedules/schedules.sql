-- sql/schedules/schedules.sql: schedules: add, alter, enable/disable, remove.
-- ---------------------------------------------------------------------------
-- Schedules: add, alter, enable/disable, remove.
--   All SECURITY INVOKER: rows are written with the caller's rights, so the
--   row-level security policies check tenant, owner (created_by) and run_as
--   as the caller, exactly as for jobs. Each change sends NOTIFY
--   pgsql_broker_schedule '<database>' (on commit) so a runner re-reads its
--   next tick time at once.
-- ---------------------------------------------------------------------------

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
--   expression that never fires; 42704 unknown run_as role; 42501 run_as
--   not allowed for the caller; those of broker._check_autonomous (0A000
--   SQL that can never run in a transaction without p_autonomous, and the
--   refusals of an autonomous schedule's SQL or role).
--   Calls: _job_problem, _job_field_error, _check_run_as, _check_autonomous, broker_cron_next
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
        s.autonomous)::broker._job_fields);
    IF v_problem IS NOT NULL THEN
        PERFORM broker._job_field_error(p_fn, CASE v_problem[2] WHEN 'job_name' THEN 'p_schedule_name'
                                                                 WHEN 'timeout' THEN 'p_job_timeout'
                                                                 ELSE 'p_' OPERATOR(pg_catalog.||) v_problem[2] END, v_problem);
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
-- Function: broker.broker_add_schedule(p_schedule_name, p_cron_expr,
--     p_execute_str, p_time_zone, p_job_queue, p_job_priority,
--     p_job_language, p_run_as, p_max_attempts, p_job_group, p_catch_up,
--     p_catch_up_max, p_overlap, p_enabled, p_job_timeout, p_search_path,
--     p_tenant_id, p_autonomous)
--   Creates a schedule for the caller's tenant, owned by the caller, and
--   returns (schedule_id, next_fire_at). Jobs are named after the schedule
--   and run as p_run_as (default: the caller). p_tenant_id names the tenant
--   for this call only (as broker_add_job's).
--   With p_autonomous its jobs run outside a transaction block (VACUUM,
--   CREATE INDEX CONCURRENTLY, a CALL that commits, ...: see broker_add_job).
-- Errors: those of broker._schedule_check; 23505 a schedule of that name
--   exists in the tenant; 42501 the role may not act for the tenant.
-- Example:
--   SELECT * FROM broker.broker_add_schedule('nightly-rollup', '0 3 * * *', 'CALL reports.rollup()',
--                                         p_time_zone => 'Europe/Berlin', p_catch_up => 'none');
--   SELECT * FROM broker.broker_add_schedule('nightly-vacuum', '0 3 * * *', 'VACUUM ANALYZE orders', p_autonomous => true);
--   Calls: _schedule_check, _tenant_allowed, broker_current_tenant, _executor, broker_create_executor, _schedule_notify
--   Tables: writes broker_schedule
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
    p_autonomous    boolean  DEFAULT false)
RETURNS TABLE (schedule_id bigint, next_fire_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s       broker.broker_schedule;
    v_next  timestamptz;
    v_saved text;
BEGIN
    IF p_tenant_id IS NOT NULL THEN  -- the named tenant, for this call only
        v_saved := pg_catalog.current_setting('broker.tenant_id', true);
        PERFORM broker._set_tenant('broker_add_schedule', p_tenant_id);
        RETURN QUERY SELECT a.schedule_id, a.next_fire_at FROM broker.broker_add_schedule(p_schedule_name, p_cron_expr,
            p_execute_str, p_time_zone, p_job_queue, p_job_priority, p_job_language, p_run_as, p_max_attempts,
            p_job_group, p_catch_up, p_catch_up_max, p_overlap, p_enabled, p_job_timeout, p_search_path,
            p_autonomous => p_autonomous) AS a;
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
    v_next := broker._schedule_check('broker_add_schedule', s);
    IF NOT broker._tenant_allowed(broker.broker_current_tenant(), CURRENT_USER) THEN
        RAISE EXCEPTION 'broker_add_schedule: role % may not act for tenant %', pg_catalog.quote_ident(CURRENT_USER),
            pg_catalog.quote_literal(broker.broker_current_tenant())
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF EXISTS (SELECT 1 FROM broker.broker_schedule AS x
                WHERE x.tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
                  AND x.schedule_name OPERATOR(pg_catalog.=) p_schedule_name) THEN
        RAISE EXCEPTION 'broker_add_schedule: schedule % exists already', pg_catalog.quote_literal(p_schedule_name)
            USING ERRCODE = 'unique_violation', HINT = 'Change it with broker_alter_schedule.';
    END IF;
    -- its jobs run inside the run_as role's executor: create it now, with the caller's rights
    IF broker._executor(s.run_as) IS NULL THEN
        PERFORM broker.broker_create_executor(s.run_as);
    END IF;
    RETURN QUERY
    INSERT INTO broker.broker_schedule AS t
           (schedule_name, cron_expr, time_zone, execute_str, job_language, job_queue, job_priority, run_as,
            max_attempts, job_group, enabled, next_fire_at, job_timeout, job_search_path, catch_up, catch_up_max,
            overlap, autonomous)
    VALUES (s.schedule_name, s.cron_expr, s.time_zone, s.execute_str, s.job_language, s.job_queue, s.job_priority,
            s.run_as, s.max_attempts, s.job_group, s.enabled, CASE WHEN s.enabled THEN v_next END, s.job_timeout,
            COALESCE(p_search_path, ''), s.catch_up, s.catch_up_max, s.overlap, s.autonomous)
    RETURNING t.schedule_id, t.next_fire_at;
    PERFORM broker._schedule_notify();
END;
$$;
COMMENT ON FUNCTION broker.broker_add_schedule(text, text, text, text, integer, integer, text, text, integer, text, text, integer, text, boolean, interval, text, text, boolean) IS
    'Creates a cron schedule (expression, IANA time zone, job template, catch-up and overlap policy, autonomous or not) for the current tenant; returns (schedule_id, next_fire_at).';

-- ---------------------------------------------------------------------------
-- Function: broker._schedule_row(p_fn, p_schedule_name)
--   The caller's tenant's schedule p_schedule_name, locked FOR UPDATE (as the
--   caller: row-level security applies).
-- Errors: 22004 NULL name; 42704 no such schedule (or not visible).
--   Calls: broker_current_tenant, _may_run_as
--   Tables: reads broker_schedule
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._schedule_row(p_fn text, p_schedule_name text)
RETURNS broker.broker_schedule
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s broker.broker_schedule;
BEGIN
    IF p_schedule_name IS NULL THEN
        RAISE EXCEPTION '%: p_schedule_name must not be NULL', p_fn USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT * INTO s FROM broker.broker_schedule AS x
     WHERE x.tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
       AND x.schedule_name OPERATOR(pg_catalog.=) p_schedule_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: schedule % does not exist in tenant %', p_fn, pg_catalog.quote_literal(p_schedule_name),
            pg_catalog.quote_literal(broker.broker_current_tenant())
            USING ERRCODE = 'undefined_object';
    END IF;
    IF NOT broker._may_run_as(s.created_by, CURRENT_USER) THEN
        RAISE EXCEPTION '%: schedule % belongs to %', p_fn, pg_catalog.quote_literal(p_schedule_name),
            pg_catalog.quote_ident(s.created_by)
            USING ERRCODE = 'insufficient_privilege', HINT = 'Only its owner (or a member of that role) may change it.';
    END IF;
    -- lock it (FOR UPDATE sees only rows the caller may update) and read it again
    SELECT * INTO s FROM broker.broker_schedule AS x
     WHERE x.schedule_id OPERATOR(pg_catalog.=) s.schedule_id
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: schedule % was removed meanwhile', p_fn, pg_catalog.quote_literal(p_schedule_name)
            USING ERRCODE = 'undefined_object';
    END IF;
    RETURN s;
END;
$$;
COMMENT ON FUNCTION broker._schedule_row(text, text) IS
    'Internal: the current tenant''s schedule of that name, locked, if the caller owns it (42704 / 42501 otherwise).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_alter_schedule(p_schedule_name, ...)
--   Changes the given properties of a schedule (NULL leaves one as it is;
--   p_job_group '' resets it to the schedule name; p_autonomous makes its
--   jobs autonomous or not, checked as broker_add_schedule checks it) and
--   returns (schedule_id, next_fire_at). A change of expression or time zone plans
--   the next fire from now: fires missed meanwhile are dropped. p_tenant_id
--   names the tenant for this call only (as broker_add_job's).
-- Errors: those of broker._schedule_check and broker._schedule_row;
--   23505 p_new_name is taken.
-- Example:
--   SELECT * FROM broker.broker_alter_schedule('nightly-rollup', p_cron_expr => '30 3 * * *');
--   Calls: _schedule_row, _schedule_check, _executor, broker_create_executor, _schedule_notify
--   Tables: writes broker_schedule
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_alter_schedule(
    p_schedule_name text,
    p_cron_expr     text     DEFAULT NULL,
    p_execute_str   text     DEFAULT NULL,
    p_time_zone     text     DEFAULT NULL,
    p_job_queue     integer  DEFAULT NULL,
    p_job_priority  integer  DEFAULT NULL,
    p_job_language  text     DEFAULT NULL,
    p_run_as        text     DEFAULT NULL,
    p_max_attempts  integer  DEFAULT NULL,
    p_job_group     text     DEFAULT NULL,
    p_catch_up      text     DEFAULT NULL,
    p_catch_up_max  integer  DEFAULT NULL,
    p_overlap       text     DEFAULT NULL,
    p_job_timeout   interval DEFAULT NULL,
    p_search_path   text     DEFAULT NULL,
    p_new_name      text     DEFAULT NULL,
    p_autonomous    boolean  DEFAULT NULL,
    p_tenant_id     text     DEFAULT NULL)
RETURNS TABLE (schedule_id bigint, next_fire_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_saved text := broker._call_tenant('broker_alter_schedule', p_tenant_id);
    s      broker.broker_schedule := broker._schedule_row('broker_alter_schedule', p_schedule_name);
    v_old  broker.broker_schedule := s;
    v_next timestamptz;
BEGIN
    s.schedule_name := COALESCE(p_new_name, s.schedule_name);
    s.cron_expr := COALESCE(pg_catalog.btrim(p_cron_expr), s.cron_expr);
    s.execute_str := COALESCE(p_execute_str, s.execute_str);
    s.time_zone := COALESCE(pg_catalog.btrim(p_time_zone), s.time_zone);
    s.job_queue := COALESCE(p_job_queue, s.job_queue);
    s.job_priority := COALESCE(p_job_priority, s.job_priority);
    s.job_language := COALESCE(pg_catalog.lower(pg_catalog.btrim(p_job_language)), s.job_language);
    s.run_as := COALESCE(p_run_as, s.run_as);
    s.max_attempts := COALESCE(p_max_attempts, s.max_attempts);
    s.job_group := CASE WHEN p_job_group OPERATOR(pg_catalog.=) '' THEN NULL ELSE COALESCE(p_job_group, s.job_group) END;
    s.catch_up := COALESCE(pg_catalog.lower(pg_catalog.btrim(p_catch_up)), s.catch_up);
    s.catch_up_max := COALESCE(p_catch_up_max, s.catch_up_max);
    s.overlap := COALESCE(pg_catalog.lower(pg_catalog.btrim(p_overlap)), s.overlap);
    s.job_timeout := COALESCE(p_job_timeout, s.job_timeout);
    s.job_search_path := COALESCE(p_search_path, s.job_search_path);
    s.autonomous := COALESCE(p_autonomous, s.autonomous);
    v_next := broker._schedule_check('broker_alter_schedule', s);
    IF s.schedule_name OPERATOR(pg_catalog.<>) v_old.schedule_name AND EXISTS (
        SELECT 1 FROM broker.broker_schedule AS x
         WHERE x.tenant_id OPERATOR(pg_catalog.=) s.tenant_id AND x.schedule_name OPERATOR(pg_catalog.=) s.schedule_name) THEN
        RAISE EXCEPTION 'broker_alter_schedule: schedule % exists already', pg_catalog.quote_literal(s.schedule_name)
            USING ERRCODE = 'unique_violation';
    END IF;
    IF broker._executor(s.run_as) IS NULL THEN
        PERFORM broker.broker_create_executor(s.run_as);
    END IF;
    -- keep the planned fire unless the timing changed (or it was never planned)
    IF s.cron_expr OPERATOR(pg_catalog.=) v_old.cron_expr AND s.time_zone OPERATOR(pg_catalog.=) v_old.time_zone
       AND s.next_fire_at IS NOT NULL THEN
        v_next := s.next_fire_at;
    END IF;
    RETURN QUERY
    UPDATE broker.broker_schedule AS t
       SET schedule_name = s.schedule_name, cron_expr = s.cron_expr, execute_str = s.execute_str,
           time_zone = s.time_zone, job_queue = s.job_queue, job_priority = s.job_priority,
           job_language = s.job_language, run_as = s.run_as, max_attempts = s.max_attempts, job_group = s.job_group,
           catch_up = s.catch_up, catch_up_max = s.catch_up_max, overlap = s.overlap, job_timeout = s.job_timeout,
           job_search_path = s.job_search_path, autonomous = s.autonomous, next_fire_at = CASE WHEN s.enabled THEN v_next END, last_error = NULL
     WHERE t.schedule_id OPERATOR(pg_catalog.=) s.schedule_id
    RETURNING t.schedule_id, t.next_fire_at;
    PERFORM broker._schedule_notify();
    PERFORM broker._end_call_tenant(p_tenant_id, v_saved);
END;
$$;
COMMENT ON FUNCTION broker.broker_alter_schedule(text, text, text, text, integer, integer, text, text, integer, text, text, integer, text, interval, text, text, boolean, text) IS
    'Changes a schedule (NULL arguments keep a property); returns (schedule_id, next_fire_at).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_enable_schedule(p_schedule_name, p_enabled, p_tenant_id)
--   Enables (default) or disables a schedule; returns its next fire time
--   (NULL when disabled). Enabling plans the next fire from now: nothing is
--   caught up for the time it was disabled. p_tenant_id names the tenant for
--   this call only (as broker_add_job's).
-- Errors: those of broker._schedule_row; 22004 NULL p_enabled.
-- Example:
--   SELECT broker.broker_enable_schedule('nightly-rollup', false);   -- pause it
--   SELECT broker.broker_enable_schedule('nightly-rollup');          -- re-checked, planned again
--   Calls: _schedule_row, _schedule_check, _schedule_notify
--   Tables: writes broker_schedule
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_enable_schedule(p_schedule_name text, p_enabled boolean DEFAULT true,
                                              p_tenant_id text DEFAULT NULL)
RETURNS timestamptz
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_saved text := broker._call_tenant('broker_enable_schedule', p_tenant_id);
    s      broker.broker_schedule := broker._schedule_row('broker_enable_schedule', p_schedule_name);
    v_next timestamptz;
BEGIN
    IF p_enabled IS NULL THEN
        RAISE EXCEPTION 'broker_enable_schedule: p_enabled must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_enabled AND s.enabled AND s.next_fire_at IS NOT NULL THEN
        v_next := s.next_fire_at;      -- already enabled: keep the planned fire
    ELSIF p_enabled THEN
        s.enabled := true;
        v_next := broker._schedule_check('broker_enable_schedule', s);
    END IF;
    UPDATE broker.broker_schedule AS t
       SET enabled = p_enabled, next_fire_at = v_next, last_error = NULL
     WHERE t.schedule_id OPERATOR(pg_catalog.=) s.schedule_id;
    PERFORM broker._schedule_notify();
    PERFORM broker._end_call_tenant(p_tenant_id, v_saved);
    RETURN v_next;
END;
$$;
COMMENT ON FUNCTION broker.broker_enable_schedule(text, boolean, text) IS
    'Enables or disables a schedule; returns the next fire time (NULL when disabled).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_remove_schedule(p_schedule_name, p_missing_ok, p_tenant_id)
--   Deletes a schedule. Its jobs stay (their schedule_id becomes NULL).
--   Returns true when removed, false when missing and p_missing_ok.
--   p_tenant_id names the tenant for this call only (as broker_add_job's).
-- Errors: those of broker._schedule_row (unless p_missing_ok).
-- Example:
--   SELECT broker.broker_remove_schedule('nightly-rollup', p_missing_ok => true);
--   Calls: broker_current_tenant, _schedule_row, _schedule_notify
--   Tables: writes broker_schedule
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_remove_schedule(p_schedule_name text, p_missing_ok boolean DEFAULT false,
                                              p_tenant_id text DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_saved text := broker._call_tenant('broker_remove_schedule', p_tenant_id);
    s broker.broker_schedule;
    v_removed boolean := false;
BEGIN
    IF NOT (p_missing_ok AND NOT EXISTS (SELECT 1 FROM broker.broker_schedule AS x
                                          WHERE x.tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
                                            AND x.schedule_name OPERATOR(pg_catalog.=) p_schedule_name)) THEN
        s := broker._schedule_row('broker_remove_schedule', p_schedule_name);
        DELETE FROM broker.broker_schedule AS t WHERE t.schedule_id OPERATOR(pg_catalog.=) s.schedule_id;
        PERFORM broker._schedule_notify();
        v_removed := true;
    END IF;
    PERFORM broker._end_call_tenant(p_tenant_id, v_saved);
    RETURN v_removed;
END;
$$;
COMMENT ON FUNCTION broker.broker_remove_schedule(text, boolean, text) IS
    'Removes a schedule (its jobs stay, unlinked); false if it did not exist and p_missing_ok.';
