-- sql/schedules/run_now.sql: running a schedule's job now, by hand (broker_run_schedule_now).
-- ---------------------------------------------------------------------------
-- Function: broker.broker_run_schedule_now(p_schedule_name, p_tenant_id)
--   Enqueues one job of the schedule now, as a fire would (pg_cron #226,
--   "run this job now"): the job columns of broker._schedule_fire (name,
--   group, SQL, language, queue, priority, run_as, max_attempts, timeout,
--   search_path, autonomous, concurrency key, schedule_id; tenant = the
--   schedule's), claimable at once, with the NOTIFY of any new job. The
--   schedule's plan is left alone: next_fire_at and last_fire_at (the last
--   cron fire) do not move, and a disabled (paused) schedule runs now and
--   stays paused. Returns (job_id, is_new):
--   * the new job, is_new = true; it becomes the schedule's last_job_id, so
--     with overlap = skip the next fire waits for it as for a fired job;
--   * with overlap = skip and the previous job of the schedule
--     (last_job_id) still pending or running: that job, is_new = false,
--     and nothing is enqueued (the fire's overlap rule).
--   Who asked is the job's enqueued_by (the caller): the job is checked at
--   enqueue and again at run time (_authority_lost) against the caller's
--   rights, where a fire's are its owner's. It has no idempotency key (the
--   keys broker_schedule:* belong to fire times; a run now has none):
--   concurrent calls queue on the schedule's row lock, so overlap = skip
--   still enqueues one job.
--   As broker_enable_schedule: SECURITY INVOKER, so row-level security finds
--   the schedule in the current tenant (or p_tenant_id's, for this call
--   only) and only its owner or a member of that role may run it; under
--   strict tenancy another tenant's schedule is not there (42704).
-- Errors: those of broker._schedule_row (22004 NULL name, 42704 no such
--   schedule in the tenant, 42501 not its owner) and of broker._call_tenant;
--   those of broker._check_run_as (42704 the run_as role is gone, 42501 the
--   caller may not run jobs as it) and broker._check_autonomous.
-- Example:
--   SELECT * FROM broker.broker_run_schedule_now('nightly-rollup');   -- (job_id, is_new)
--   Calls: _call_tenant, _schedule_row, _check_run_as, _check_autonomous, _schedule_job_name, _end_call_tenant
--   Tables: reads broker_jobs, writes broker_jobs, broker_schedule
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_run_schedule_now(p_schedule_name text, p_tenant_id text DEFAULT NULL)
RETURNS TABLE (job_id bigint, is_new boolean)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_saved text := broker._call_tenant('broker_run_schedule_now', p_tenant_id);
    s      broker.broker_schedule := broker._schedule_row('broker_run_schedule_now', p_schedule_name);
    v_id   bigint;
BEGIN
    -- the fire's overlap rule (the tick's, sql/schedules/tick.sql)
    SELECT j.job_id INTO v_id FROM broker.broker_jobs AS j
     WHERE s.overlap OPERATOR(pg_catalog.=) 'skip' AND j.job_id OPERATOR(pg_catalog.=) s.last_job_id
       AND j.tenant_id OPERATOR(pg_catalog.=) s.tenant_id AND j.complete_status OPERATOR(pg_catalog.<=) 1;
    IF FOUND THEN
        PERFORM broker._end_call_tenant(p_tenant_id, v_saved);
        RETURN QUERY SELECT v_id, false;
        RETURN;
    END IF;
    -- the policies would refuse these too; checked first for messages that name this function
    PERFORM broker._check_run_as('broker_run_schedule_now', s.run_as);
    PERFORM broker._check_autonomous('broker_run_schedule_now', s.execute_str, s.job_language, s.run_as, s.autonomous);
    -- the columns of a fire (broker._schedule_fire) that an enqueuer may write; tenant_id and enqueued_by
    -- take their defaults, the current tenant (the schedule's) and the caller
    INSERT INTO broker.broker_jobs AS j
           (job_name, job_group, execute_str, job_language, job_queue, job_priority, run_as, schedule_id,
            max_attempts, run_after, job_timeout, job_search_path, autonomous, concurrency_key)
    VALUES (broker._schedule_job_name(s), COALESCE(s.job_group, s.schedule_name), s.execute_str, s.job_language, s.job_queue,
            s.job_priority, s.run_as, s.schedule_id, s.max_attempts, pg_catalog.now(), s.job_timeout,
            s.job_search_path, s.autonomous, s.concurrency_key)
    RETURNING j.job_id INTO v_id;
    UPDATE broker.broker_schedule AS t SET last_job_id = v_id
     WHERE t.schedule_id OPERATOR(pg_catalog.=) s.schedule_id;
    PERFORM broker._end_call_tenant(p_tenant_id, v_saved);
    RETURN QUERY SELECT v_id, true;
END;
$$;
COMMENT ON FUNCTION broker.broker_run_schedule_now(text, text) IS
    'Enqueues one job of a schedule now, as a fire would, without moving its next fire (a paused schedule stays paused); returns (job_id, is_new): is_new false when overlap = skip and its previous job is still unfinished.';
