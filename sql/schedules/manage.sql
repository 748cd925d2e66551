-- sql/schedules/manage.sql: changing schedules: alter, enable/disable, remove.
-- ---------------------------------------------------------------------------
-- Like broker_add_schedule (sql/schedules/schedules.sql), all SECURITY INVOKER:
--   row-level security checks tenant, owner (created_by) and run_as as the
--   caller, and each change notifies pgsql_broker_schedule (_schedule_notify).
-- ---------------------------------------------------------------------------

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
--   p_job_group '' resets it to the schedule name; p_concurrency_key ''
--   clears it, so that its jobs have no key; p_autonomous makes its jobs
--   autonomous or not, checked as broker_add_schedule checks it) and
--   returns (schedule_id, next_fire_at). A change of expression or time zone plans
--   the next fire from now: fires missed meanwhile are dropped. p_tenant_id
--   names the tenant for this call only (as broker_add_job's).
-- Errors: those of broker._schedule_check and broker._schedule_row;
--   23505 p_new_name is taken.
-- Example:
--   SELECT * FROM broker.broker_alter_schedule('nightly-rollup', p_cron_expr => '30 3 * * *');
--   SELECT * FROM broker.broker_alter_schedule('crm-sync', p_concurrency_key => '');   -- its jobs without a key
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
    p_tenant_id     text     DEFAULT NULL,
    p_concurrency_key text   DEFAULT NULL)
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
    s.concurrency_key := CASE WHEN p_concurrency_key OPERATOR(pg_catalog.=) '' THEN NULL
                              ELSE COALESCE(p_concurrency_key, s.concurrency_key) END;
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
           job_search_path = s.job_search_path, autonomous = s.autonomous, concurrency_key = s.concurrency_key,
           next_fire_at = CASE WHEN s.enabled THEN v_next END, last_error = NULL
     WHERE t.schedule_id OPERATOR(pg_catalog.=) s.schedule_id
    RETURNING t.schedule_id, t.next_fire_at;
    PERFORM broker._schedule_notify();
    PERFORM broker._end_call_tenant(p_tenant_id, v_saved);
END;
$$;
COMMENT ON FUNCTION broker.broker_alter_schedule(text, text, text, text, integer, integer, text, text, integer, text, text, integer, text, interval, text, text, boolean, text, text) IS
    'Changes a schedule (NULL arguments keep a property; '''' resets its job group to its name, or clears its concurrency key); returns (schedule_id, next_fire_at).';

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
