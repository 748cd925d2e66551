-- sql/run/pause.sql: paused queues (broker_queue_pause): pausing and resuming, and what claims skip.

-- ---------------------------------------------------------------------------
-- Function: broker._paused_tenants(p_job_queue)
--   For the claim: the tenants whose jobs of queue p_job_queue are paused,
--   NULL when none is. An element NULL means the queue is paused for every
--   tenant. One lookup per claim; the claim filters on the array.
--   Calls: none
--   Tables: reads broker_queue_pause
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._paused_tenants(p_job_queue integer)
RETURNS text[]
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT pg_catalog.array_agg(p.tenant_id) FROM broker.broker_queue_pause AS p
             WHERE p.job_queue OPERATOR(pg_catalog.=) p_job_queue);
END;
$$;
COMMENT ON FUNCTION broker._paused_tenants(integer) IS
    'Internal: the tenants whose jobs of a queue are paused (an element NULL: every tenant), or NULL.';

-- ---------------------------------------------------------------------------
-- Function: broker._paused_for(p_paused, p_tenant_id)
--   Whether a tenant's jobs are paused, given the tenants paused in their
--   queue (p_paused, what broker._paused_tenants returns): the queue is
--   paused for every tenant, or for this one.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._paused_for(p_paused text[], p_tenant_id text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT p_paused IS NOT NULL
           AND (pg_catalog.array_position(p_paused, NULL) IS NOT NULL OR p_tenant_id OPERATOR(pg_catalog.=) ANY (p_paused))
$$;
COMMENT ON FUNCTION broker._paused_for(text[], text) IS
    'Internal: whether a tenant''s jobs are paused, given the tenants paused in their queue (_paused_tenants).';

-- ---------------------------------------------------------------------------
-- Function: broker._pause(p_fn, p_job_queue, p_paused)
--   Pauses (p_paused true) or resumes queue p_job_queue, a queue of SQL jobs
--   or a task name's (broker_pause_queue, broker_pause_task, named p_fn in
--   errors): a tenant pauses and resumes only its own jobs there (the
--   current tenant); an administrator (superuser or broker_admin) pauses it
--   for every tenant, and resuming as one lifts every pause of it. A resume
--   wakes the queue's runners or task workers. Returns whether anything
--   changed. SECURITY INVOKER: the table's policies decide what the caller
--   may write.
-- Errors: 42501 the caller may not act for the current tenant (strict
--   tenancy).
--   Calls: _is_broker_admin, broker_current_tenant, _tenant_allowed, _notify_queues
--   Tables: writes broker_queue_pause
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._pause(p_fn text, p_job_queue integer, p_paused boolean)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_admin  boolean := broker._is_broker_admin(CURRENT_USER);
    v_tenant text := broker.broker_current_tenant();
    v_n      integer;
BEGIN
    IF NOT v_admin AND NOT broker._tenant_allowed(v_tenant, CURRENT_USER) THEN
        RAISE EXCEPTION '%: role % may not act for tenant %', p_fn, pg_catalog.quote_ident(CURRENT_USER),
            pg_catalog.quote_literal(v_tenant) USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF p_paused THEN
        IF v_admin THEN
            INSERT INTO broker.broker_queue_pause (job_queue, tenant_id) VALUES (p_job_queue, NULL) ON CONFLICT DO NOTHING;
        ELSE
            INSERT INTO broker.broker_queue_pause (job_queue) VALUES (p_job_queue) ON CONFLICT DO NOTHING;
        END IF;
        GET DIAGNOSTICS v_n = ROW_COUNT;
    ELSE
        DELETE FROM broker.broker_queue_pause AS p
         WHERE p.job_queue OPERATOR(pg_catalog.=) p_job_queue
           AND (v_admin OR p.tenant_id OPERATOR(pg_catalog.=) v_tenant);
        GET DIAGNOSTICS v_n = ROW_COUNT;
        PERFORM broker._notify_queues(ARRAY[p_job_queue]);  -- its workers claim again at once
    END IF;
    RETURN v_n OPERATOR(pg_catalog.>) 0;
END;
$$;
COMMENT ON FUNCTION broker._pause(text, integer, boolean) IS
    'Internal: pauses or resumes a queue (of SQL jobs or a task name''s) for the current tenant, or for every tenant as an administrator; returns whether anything changed.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_pause_queue(p_job_queue, p_paused)
--   Pauses (p_paused true, the default) or resumes queue p_job_queue: claims
--   skip the jobs of a paused queue, running jobs finish, enqueueing goes on.
--   A tenant pauses and resumes only its own jobs in that queue (the current
--   tenant); an administrator (superuser or broker_admin) pauses it for
--   every tenant, and resuming as one lifts every pause of that queue.
--   Returns whether anything changed. Paused queues show in
--   broker_queue_stats (paused). Tasks: broker_pause_task.
-- Errors: 22004 NULL argument; 22023 queue outside 1..1000; 42501 the
--   caller may not act for the current tenant (strict tenancy).
-- Example:
--   SELECT broker.broker_pause_queue(3);          -- pause queue 3
--   SELECT broker.broker_pause_queue(3, false);   -- resume it
--   Calls: _pause
--   Tables: writes broker_queue_pause (through _pause)
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_pause_queue(p_job_queue integer, p_paused boolean DEFAULT true)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_job_queue IS NULL OR p_paused IS NULL THEN
        RAISE EXCEPTION 'broker_pause_queue: p_job_queue and p_paused must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_job_queue OPERATOR(pg_catalog.<) 1 OR p_job_queue OPERATOR(pg_catalog.>) 1000 THEN
        RAISE EXCEPTION 'broker_pause_queue: queues are 1 to 1000, got %', p_job_queue USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN broker._pause('broker_pause_queue', p_job_queue, p_paused);
END;
$$;
COMMENT ON FUNCTION broker.broker_pause_queue(integer, boolean) IS
    'Pauses or resumes a queue: claims skip it, running jobs finish; a tenant pauses its own jobs there, an administrator the queue for everyone. Returns whether anything changed.';
