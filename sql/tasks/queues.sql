-- sql/tasks/queues.sql: each task name's claim queue (broker_task_queue).
-- ---------------------------------------------------------------------------
-- Function: broker._task_queue_is(p_task, p_job_queue)
--   Whether p_job_queue is task p_task's queue: the insert policy of
--   broker_jobs holds every task row to it, so that a claim of a name
--   (broker_claim_tasks) only ever returns tasks of that name.
--   Calls: none
--   Tables: reads broker_task_queue
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._task_queue_is(p_task text, p_job_queue integer)
RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (SELECT FROM broker.broker_task_queue AS q
                    WHERE q.task_name OPERATOR(pg_catalog.=) p_task
                      AND q.job_queue OPERATOR(pg_catalog.=) p_job_queue)
$$;
COMMENT ON FUNCTION broker._task_queue_is(text, integer) IS
    'Policy helper: whether a queue is the task name''s own (broker_task_queue).';

-- ---------------------------------------------------------------------------
-- Function: broker._task_queue_of(p_fn, p_task)
--   Task p_task's queue, made on its first enqueue, whichever tenant uses
--   the name (a definer's: a tenant sees only the names it uses). Checks the
--   name: 22004 NULL, 22023 blank or over 200 characters (as p_fn's
--   p_task).
--   Calls: _check_task_name
--   Tables: reads and writes broker_task_queue
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._task_queue_of(p_fn text, p_task text)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_queue integer;
BEGIN
    PERFORM broker._check_task_name(p_fn, 'p_task', p_task);
    SELECT q.job_queue INTO v_queue FROM broker.broker_task_queue AS q WHERE q.task_name OPERATOR(pg_catalog.=) p_task;
    IF FOUND THEN
        RETURN v_queue;
    END IF;
    INSERT INTO broker.broker_task_queue AS q (task_name) VALUES (p_task)
    ON CONFLICT (task_name) DO NOTHING
    RETURNING q.job_queue INTO v_queue;
    IF v_queue IS NULL THEN  -- a concurrent first enqueue of the name made it
        SELECT q.job_queue INTO v_queue FROM broker.broker_task_queue AS q WHERE q.task_name OPERATOR(pg_catalog.=) p_task;
    END IF;
    RETURN v_queue;
END;
$$;
COMMENT ON FUNCTION broker._task_queue_of(text, text) IS
    'Internal: a task name''s queue (negative), made on its first enqueue; checks the name.';

-- ---------------------------------------------------------------------------
-- Function: broker._task_queue(p_fn, p_task, p_use)
--   Task p_task's queue (_task_queue_of), and with p_use the name recorded
--   as used by the current tenant (broker_task_name_tenant: a tenant sees
--   the names it uses only), so callers set the call's tenant first (an
--   administrator's pause for every tenant is no tenant's use). SECURITY
--   INVOKER: the use is written with the caller's rights, under the insert
--   policy of broker_task_name_tenant, by the role the enqueue's policies
--   check (CURRENT_USER: inside a job, its run_as; inside a SECURITY
--   DEFINER function, its owner), and only for a role that may act for the
--   tenant (_tenant_allowed) or an administrator. A call whose enqueue then
--   fails (a bad option) rolls its record back with it.
--   Calls: _task_queue_of, broker_current_tenant, _tenant_allowed, _is_broker_admin
--   Tables: writes broker_task_name_tenant; broker_task_queue (through _task_queue_of)
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._task_queue(p_fn text, p_task text, p_use boolean)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_queue  integer := broker._task_queue_of(p_fn, p_task);
    v_tenant text;
BEGIN
    IF NOT p_use THEN
        RETURN v_queue;
    END IF;
    v_tenant := broker.broker_current_tenant();
    -- (a probe of the key first: after the tenant's first use of the name, an enqueue writes and checks
    -- nothing more here)
    IF EXISTS (SELECT FROM broker.broker_task_name_tenant AS u
                WHERE u.tenant_id OPERATOR(pg_catalog.=) v_tenant AND u.task_name OPERATOR(pg_catalog.=) p_task) THEN
        RETURN v_queue;
    END IF;
    -- a use only by a role that may act for the tenant, as its enqueue's policies require (this
    -- function is callable directly, and must not record names as another tenant's)
    IF broker._tenant_allowed(v_tenant, CURRENT_USER) OR broker._is_broker_admin(CURRENT_USER) THEN
        INSERT INTO broker.broker_task_name_tenant AS u (tenant_id, task_name) VALUES (v_tenant, p_task)
        ON CONFLICT (tenant_id, task_name) DO NOTHING;
    END IF;
    RETURN v_queue;
END;
$$;
COMMENT ON FUNCTION broker._task_queue(text, text, boolean) IS
    'Internal: a task name''s queue (negative), made on its first enqueue, and (p_use) the name recorded as the current tenant''s, as the caller; checks the name.';

-- ---------------------------------------------------------------------------
-- Function: broker._check_task_name(p_fn, p_param, p_task)
--   Raises 22004 for a NULL task name, 22023 for a blank one or one over 200
--   characters, naming p_fn and its parameter p_param.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._check_task_name(p_fn text, p_param text, p_task text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_task IS NULL THEN
        RAISE EXCEPTION '%: % must not be NULL', p_fn, p_param USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF pg_catalog.btrim(p_task) OPERATOR(pg_catalog.=) '' OR pg_catalog.length(p_task) OPERATOR(pg_catalog.>) 200 THEN
        RAISE EXCEPTION '%: % must be 1 to 200 characters and not blank', p_fn, p_param
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END;
$$;
COMMENT ON FUNCTION broker._check_task_name(text, text, text) IS
    'Internal: checks a task name (22004 NULL, 22023 blank or over 200 characters).';
