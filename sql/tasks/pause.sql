-- sql/tasks/pause.sql: pausing and resuming a task name (broker_pause_task).
-- ---------------------------------------------------------------------------
-- Function: broker.broker_pause_task(p_task, p_paused)
--   Pauses (p_paused true, the default) or resumes task p_task: claims of
--   the name (broker_claim_tasks) skip its ready tasks, running tasks
--   finish, enqueueing goes on. A pause is on the name's queue
--   (broker_task_queue, made here when the name was never enqueued, so a
--   name can be paused before its first task; a tenant's pause makes it a
--   name the tenant uses, broker_task_name_tenant), with the rules of
--   broker_pause_queue: a tenant pauses and resumes only its own tasks; an
--   administrator (superuser or broker_admin) pauses the name for every
--   tenant, and resuming as one lifts every pause of it. A resume wakes the
--   name's workers. Returns whether anything changed. Paused names show in
--   broker_queue_stats (paused) under their queue.
-- Errors: 22004 NULL argument; 22023 a blank name or one over 200
--   characters; 42501 the caller may not act for the current tenant
--   (strict tenancy).
-- Example:
--   SELECT broker.broker_pause_task('send_email');          -- pause it
--   SELECT broker.broker_pause_task('send_email', false);   -- resume it
--   Calls: _check_task_name, _task_queue, _is_broker_admin, _pause
--   Tables: reads broker_task_queue; writes broker_queue_pause (through _pause),
--     broker_task_name_tenant (through _task_queue)
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_pause_task(p_task text, p_paused boolean DEFAULT true)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_queue integer;
BEGIN
    IF p_paused IS NULL THEN
        RAISE EXCEPTION 'broker_pause_task: p_paused must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_paused THEN
        -- (a tenant's pause is its use of the name; an administrator's, for every tenant, is no tenant's)
        v_queue := broker._task_queue('broker_pause_task', p_task, NOT broker._is_broker_admin(CURRENT_USER));
    ELSE
        PERFORM broker._check_task_name('broker_pause_task', 'p_task', p_task);
        SELECT q.job_queue INTO v_queue FROM broker.broker_task_queue AS q WHERE q.task_name OPERATOR(pg_catalog.=) p_task;
        IF NOT FOUND THEN  -- a name never enqueued nor paused has no pause to lift
            RETURN false;
        END IF;
    END IF;
    RETURN broker._pause('broker_pause_task', v_queue, p_paused);
END;
$$;
COMMENT ON FUNCTION broker.broker_pause_task(text, boolean) IS
    'Pauses or resumes a task name: claims skip its tasks, running tasks finish; a tenant pauses its own tasks, an administrator the name for everyone. Returns whether anything changed.';
