-- sql/run/retry.sql: retrying failed and cancelled jobs by hand (broker_retry_job, the broker_job_actions trigger).
-- ---------------------------------------------------------------------------
-- Function: broker._retry_job(p_job_id, p_run_after, p_with_dependents)
--   A failed or cancelled job goes back to pending with fresh attempts
--   (attempts 0, claimable from p_run_after, default now), and with
--   p_with_dependents every job cancelled because of it (cancel_cause_job_id,
--   transitively: _cancel_dependents records the job that started it) comes
--   back too, each waiting again on what it depends on (pending_deps
--   recounted), so a DAG resumes where it broke. A job brought back that
--   also waits on another failed or cancelled job is cancelled again,
--   because of that one. Pending jobs waiting on the group of a job brought
--   back wait on it again. Returns how many jobs are pending again.
-- Errors: 55000 the job is not failed or cancelled, or it waits on a job
--   that failed or was cancelled (retry that one); 23505 another unfinished
--   job took its idempotency key meanwhile.
--   Calls: _lock_dependency_keys, _jobs_join_groups, _count_pending_deps, _cancel_dependents, _notify_queues
--   Tables: reads broker_job_dependency, writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._retry_job(p_job_id bigint, p_run_after timestamptz, p_with_dependents boolean)
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job    broker.broker_jobs;
    v_dep    record;
    v_ids    bigint[];
    v_groups text[];
    v_counts integer[];
    v_queues integer[];
    v_target record;
BEGIN
    SELECT * INTO v_job FROM broker.broker_jobs AS j WHERE j.job_id OPERATOR(pg_catalog.=) p_job_id FOR NO KEY UPDATE;
    IF v_job.complete_status OPERATOR(pg_catalog.<>) ALL (ARRAY[broker._state('failed'), broker._state('cancelled')]) THEN
        RAISE EXCEPTION 'broker_retry_job: job % is %; only failed or cancelled jobs can be retried', p_job_id,
            CASE v_job.complete_status WHEN 0 THEN 'pending' WHEN 1 THEN 'running' ELSE 'completed' END
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    SELECT t.job_id, t.complete_status INTO v_dep
      FROM broker.broker_job_dependency AS e
      JOIN broker.broker_jobs AS t ON t.job_id OPERATOR(pg_catalog.=) e.depends_on_job_id
     WHERE e.job_id OPERATOR(pg_catalog.=) p_job_id AND t.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[broker._state('failed'), broker._state('cancelled')])
    UNION ALL
    SELECT t.job_id, t.complete_status
      FROM broker.broker_job_dependency AS e
      JOIN broker.broker_jobs AS t ON t.tenant_id OPERATOR(pg_catalog.=) e.tenant_id
                                  AND t.job_group OPERATOR(pg_catalog.=) e.depends_on_group
     WHERE e.job_id OPERATOR(pg_catalog.=) p_job_id AND t.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[broker._state('failed'), broker._state('cancelled')])
       AND t.job_id OPERATOR(pg_catalog.<>) p_job_id
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'broker_retry_job: job % waits on job %, which %', p_job_id, v_dep.job_id,
            CASE v_dep.complete_status WHEN 3 THEN 'failed' ELSE 'was cancelled' END
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = pg_catalog.format('Retry job %s (with its dependents) instead.', v_dep.job_id);
    END IF;

    v_ids := ARRAY[p_job_id] OPERATOR(pg_catalog.||) CASE WHEN p_with_dependents THEN ARRAY(
        SELECT d.job_id FROM broker.broker_jobs AS d
         WHERE d.cancel_cause_job_id OPERATOR(pg_catalog.=) p_job_id AND d.complete_status OPERATOR(pg_catalog.=) broker._state('cancelled')
         ORDER BY d.job_id) ELSE '{}'::bigint[] END;
    PERFORM FROM broker.broker_jobs AS j WHERE j.job_id OPERATOR(pg_catalog.=) ANY (v_ids) ORDER BY j.job_id FOR NO KEY UPDATE;
    SELECT pg_catalog.array_agg(g.job_group ORDER BY g.job_group), pg_catalog.array_agg(g.n ORDER BY g.job_group)
      INTO v_groups, v_counts
      FROM (SELECT j.job_group, pg_catalog.count(*)::integer AS n FROM broker.broker_jobs AS j
             WHERE j.job_id OPERATOR(pg_catalog.=) ANY (v_ids) GROUP BY j.job_group) AS g;
    -- as finishing or enqueueing a member of these groups would: their keys shared, then the
    -- pending jobs waiting on the groups count the members coming back (still cancelled here)
    PERFORM broker._lock_dependency_keys(v_job.tenant_id, v_groups, NULL, v_ids, NULL);
    PERFORM broker._jobs_join_groups(pg_catalog.array_fill(v_job.tenant_id, ARRAY[pg_catalog.cardinality(v_groups)]),
                                     v_groups, v_counts);
    BEGIN
        UPDATE broker.broker_jobs AS j
           SET complete_status = broker._state('pending'), attempts = 0, pending_deps = 0, finished_at = NULL,
               cancel_reason = NULL, cancel_cause_job_id = NULL,
               run_after = CASE WHEN j.job_id OPERATOR(pg_catalog.=) p_job_id
                                THEN COALESCE(p_run_after, pg_catalog.clock_timestamp()) ELSE j.run_after END
         WHERE j.job_id OPERATOR(pg_catalog.=) ANY (v_ids);
    EXCEPTION WHEN unique_violation THEN
        RAISE EXCEPTION 'broker_retry_job: another unfinished job has the idempotency key of job % or of a job cancelled because of it',
            p_job_id USING ERRCODE = 'unique_violation';
    END;
    UPDATE broker.broker_jobs AS j
       SET pending_deps = broker._count_pending_deps(j.tenant_id, j.job_id)
     WHERE j.job_id OPERATOR(pg_catalog.=) ANY (v_ids);
    -- what else they wait on that failed or was cancelled cancels them again
    FOR v_target IN
        SELECT DISTINCT x.job_id, x.job_group, x.job_name, x.complete_status
          FROM broker.broker_job_dependency AS e
          JOIN broker.broker_jobs AS x
            ON (x.job_id OPERATOR(pg_catalog.=) e.depends_on_job_id)
            OR (x.tenant_id OPERATOR(pg_catalog.=) e.tenant_id AND x.job_group OPERATOR(pg_catalog.=) e.depends_on_group)
         WHERE e.job_id OPERATOR(pg_catalog.=) ANY (v_ids)
           AND x.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[broker._state('failed'), broker._state('cancelled')])
         ORDER BY x.job_id
    LOOP
        PERFORM broker._cancel_dependents(v_job.tenant_id, v_target.job_id, v_target.job_group,
            pg_catalog.format('dependency job %s (%s) %s', v_target.job_id, v_target.job_name,
                              CASE v_target.complete_status WHEN 3 THEN 'failed' ELSE 'was cancelled' END));
    END LOOP;
    SELECT pg_catalog.array_agg(j.job_queue) INTO v_queues
      FROM broker.broker_jobs AS j
     WHERE j.job_id OPERATOR(pg_catalog.=) ANY (v_ids) AND j.complete_status OPERATOR(pg_catalog.=) broker._state('pending');
    PERFORM broker._notify_queues(v_queues);
    RETURN pg_catalog.cardinality(COALESCE(v_queues, '{}'));
END;
$$;
COMMENT ON FUNCTION broker._retry_job(bigint, timestamptz, boolean) IS
    'Internal: a failed or cancelled job (and the jobs cancelled because of it) back to pending with fresh attempts; returns how many.';

-- ---------------------------------------------------------------------------
-- Trigger function: broker._job_action()
--   AFTER INSERT on broker_job_actions, once the policies accepted the row
--   as the caller's (own tenant, own name, a job it can see): performs it
--   with the broker's rights. cancel: the job must still be running; its
--   runner is told (NOTIFY pgsql_broker '<database>/cancel/<job id>', sent
--   at commit). retry: _retry_job; the number of jobs pending again goes to
--   broker.last_retry_count.
-- Errors: 55000 (cancel) the job is no longer running; _retry_job's.
--   Calls: _notify_cancel, _retry_job
--   Tables: reads broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._job_action()
RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_status smallint;
BEGIN
    IF NEW.action OPERATOR(pg_catalog.=) 'cancel' THEN
        SELECT j.complete_status INTO v_status FROM broker.broker_jobs AS j WHERE j.job_id OPERATOR(pg_catalog.=) NEW.job_id;
        IF v_status OPERATOR(pg_catalog.<>) broker._state('running') THEN
            RAISE EXCEPTION 'broker_cancel_job: job % is %; a cancel request applies to a running job', NEW.job_id,
                CASE v_status WHEN 0 THEN 'pending' WHEN 2 THEN 'completed' WHEN 3 THEN 'failed' ELSE 'cancelled' END
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'broker.broker_cancel_job() cancels pending and running jobs.';
        END IF;
        PERFORM broker._notify_cancel(NEW.job_id);
    ELSE
        PERFORM pg_catalog.set_config('broker.last_retry_count',
            broker._retry_job(NEW.job_id, NEW.run_after, NEW.with_dependents)::text, true);
    END IF;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION broker._job_action() IS
    'Internal trigger: performs an operator action (cancel request, retry) once the policies accepted it as the caller''s.';

CREATE TRIGGER broker_job_actions_trg
    AFTER INSERT ON broker.broker_job_actions
    FOR EACH ROW EXECUTE FUNCTION broker._job_action();
COMMENT ON TRIGGER broker_job_actions_trg ON broker.broker_job_actions IS
    'Inserting an action performs it: a cancel request tells the runner, a retry returns the job (and its dependents) to pending.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_retry_job(p_job_id, p_run_after, p_with_dependents)
--   Returns a failed or cancelled job of the caller's tenant to pending with
--   fresh attempts, claimable from p_run_after (NULL: now). With
--   p_with_dependents (default) the jobs that were cancelled because of it,
--   transitively, come back too, so a DAG resumes where it broke. Recorded
--   in broker_job_actions. Returns how many jobs are pending again.
-- Errors: 22004 NULL id or p_with_dependents; P0002 no such job in this
--   tenant; 55000 the job is pending, running or completed, or it waits on
--   a job that failed or was cancelled (the hint names it); 23505 another
--   unfinished job has its idempotency key.
-- Example:
--   SELECT broker.broker_retry_job(42);                               -- and the jobs it cancelled
--   SELECT broker.broker_retry_job(42, now() + interval '10 minutes', false);
--   Calls: broker_current_tenant
--   Tables: reads broker_jobs, writes broker_job_actions
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_retry_job(p_job_id bigint, p_run_after timestamptz DEFAULT NULL,
    p_with_dependents boolean DEFAULT true)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_job_id IS NULL OR p_with_dependents IS NULL THEN
        RAISE EXCEPTION 'broker_retry_job: p_job_id and p_with_dependents must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM FROM broker.broker_jobs AS j
     WHERE j.job_id OPERATOR(pg_catalog.=) p_job_id AND j.tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant();
    IF NOT FOUND THEN
        RAISE EXCEPTION 'broker_retry_job: job % does not exist', p_job_id USING ERRCODE = 'no_data_found';
    END IF;
    INSERT INTO broker.broker_job_actions (job_id, action, run_after, with_dependents)
    VALUES (p_job_id, 'retry', p_run_after, p_with_dependents);
    RETURN pg_catalog.current_setting('broker.last_retry_count')::integer;
END;
$$;
COMMENT ON FUNCTION broker.broker_retry_job(bigint, timestamptz, boolean) IS
    'Returns a failed or cancelled job (and, by default, the jobs cancelled because of it) to pending with fresh attempts; returns how many.';
