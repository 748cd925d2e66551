-- sql/tasks/schedule.sql: schedules that fire tasks (broker_add_task_schedule).
-- ---------------------------------------------------------------------------
-- Function: broker.broker_add_task_schedule(p_schedule_name, p_cron_expr,
--     p_task, p_args, p_time_zone, p_priority, p_max_attempts, p_job_group,
--     p_catch_up, p_catch_up_max, p_overlap, p_enabled, p_timeout,
--     p_tenant_id, p_concurrency_key)
--   Creates a schedule that enqueues task p_task with arguments p_args at
--   each fire time of p_cron_expr in p_time_zone, for the caller's tenant,
--   and returns (schedule_id, next_fire_at). It is a schedule like any
--   other (broker_schedule, job_language 'task'): broker_alter_schedule,
--   broker_enable_schedule, broker_remove_schedule, broker_run_schedule_now
--   and the tick treat it as they treat a schedule of SQL jobs (catch-up,
--   overlap, the owner's rights at each fire). Its tasks are named p_task,
--   claimed by name (broker_claim_tasks) like those of broker_add_task. The
--   other parameters are broker_add_schedule's, with its defaults and
--   errors.
-- Errors: 22004 NULL task or arguments; 22023 a task name blank or over 200
--   characters; those of broker_add_schedule.
-- Example:
--   SELECT * FROM broker.broker_add_task_schedule('daily-digest', '0 7 * * *', 'send_digest', '{"kind": "daily"}',
--                                              p_time_zone => 'Europe/Paris', p_max_attempts => 3);
--   Calls: _call_tenant, _task_queue, _add_schedule, _end_call_tenant
--   Tables: writes broker_schedule (through _add_schedule), broker_task_queue and broker_task_name_tenant (through _task_queue)
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_add_task_schedule(
    p_schedule_name   text,
    p_cron_expr       text,
    p_task            text,
    p_args            jsonb    DEFAULT '{}',
    p_time_zone       text     DEFAULT 'UTC',
    p_priority        integer  DEFAULT 0,
    p_max_attempts    integer  DEFAULT 1,
    p_job_group       text     DEFAULT NULL,
    p_catch_up        text     DEFAULT 'one',
    p_catch_up_max    integer  DEFAULT 100,
    p_overlap         text     DEFAULT 'skip',
    p_enabled         boolean  DEFAULT true,
    p_timeout         interval DEFAULT NULL,
    p_tenant_id       text     DEFAULT NULL,
    p_concurrency_key text     DEFAULT NULL)
RETURNS TABLE (schedule_id bigint, next_fire_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_saved text := broker._call_tenant('broker_add_task_schedule', p_tenant_id);
    s       broker.broker_schedule;
BEGIN
    IF p_args IS NULL THEN
        RAISE EXCEPTION 'broker_add_task_schedule: p_args must not be NULL' USING ERRCODE = 'null_value_not_allowed',
            HINT = 'Give ''{}'' for a task without arguments.';
    END IF;
    s.schedule_name := p_schedule_name;
    s.cron_expr := pg_catalog.btrim(p_cron_expr);
    s.execute_str := p_args::text;
    s.time_zone := pg_catalog.btrim(p_time_zone);
    s.job_queue := broker._task_queue('broker_add_task_schedule', p_task, true);
    s.job_priority := p_priority;
    s.job_language := 'task';
    s.run_as := CURRENT_USER;
    s.max_attempts := p_max_attempts;
    s.job_group := p_job_group;
    s.catch_up := pg_catalog.lower(pg_catalog.btrim(p_catch_up));
    s.catch_up_max := p_catch_up_max;
    s.overlap := pg_catalog.lower(pg_catalog.btrim(p_overlap));
    s.enabled := p_enabled;
    s.job_timeout := p_timeout;
    s.autonomous := false;
    s.concurrency_key := p_concurrency_key;
    RETURN QUERY SELECT a.schedule_id, a.next_fire_at FROM broker._add_schedule('broker_add_task_schedule', s, '') AS a;
    PERFORM broker._end_call_tenant(p_tenant_id, v_saved);
END;
$$;
COMMENT ON FUNCTION broker.broker_add_task_schedule(text, text, text, jsonb, text, integer, integer, text, text, integer, text, boolean, interval, text, text) IS
    'Creates a cron schedule that enqueues a task (name, JSON arguments, broker_add_schedule''s timing and policies) for the current tenant; returns (schedule_id, next_fire_at).';
