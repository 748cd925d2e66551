-- sql/run/interrupt.sql: ending runs at runner shutdown (broker_interrupt_jobs).
-- ---------------------------------------------------------------------------
-- Function: broker.broker_interrupt_jobs(p_job_ids, p_lease_tokens)
--   Records that the runner ended the runs of these jobs (its shutdown
--   deadline passed: it terminated the session executing them, so their
--   transaction rolled back and nothing of them is left). Each job that is
--   still running under the lease token given with it returns to pending at
--   once: the attempt of its claim is not counted, interruptions counts one
--   more, and its dependents stay as they are (an interrupted job is not a
--   failed one). Only the claimer knows the token, so no one else can
--   interrupt a job. A job still row-locked by the session executing it is
--   waited for (end that session first; the caller's lock_timeout bounds the
--   wait): a run that committed meanwhile keeps its outcome, since a
--   finished job has no lease. Jobs under another lease, finished or unknown
--   are left as they are. Returns the ids interrupted. The crash path is not
--   this: a run lost without its runner ending it counts its attempt (lease
--   recovery, broker_recover_stale_jobs).
-- Errors: 22004 an argument is NULL; 22023 arrays of different lengths, or
--   more than 1000 jobs; 55P03 lock_timeout passed while a session was still
--   executing one of them.
-- Example:
--   SELECT broker.broker_interrupt_jobs(ARRAY[45], ARRAY['7c3d...'::uuid]);   -- after pg_terminate_backend(pid, 5000)
--   Calls: _check_lease_args, _record_attempts, _count_pending_deps, _cancel_handed_back, _notify_queues
--   Tables: writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_interrupt_jobs(p_job_ids bigint[], p_lease_tokens uuid[])
RETURNS TABLE (job_id bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_queues integer[];
    v_mine   bigint[];
BEGIN
    PERFORM broker._check_lease_args('broker_interrupt_jobs', p_job_ids, p_lease_tokens);
    -- lock first (job_id order, waiting for an executing session to end), then read the state the
    -- lock lets through: a run that committed while we waited has no lease any more
    PERFORM FROM broker.broker_jobs AS j
      WHERE j.job_id OPERATOR(pg_catalog.=) ANY (p_job_ids)
      ORDER BY j.job_id
        FOR NO KEY UPDATE;
    SELECT pg_catalog.array_agg(j.job_id ORDER BY j.job_id) INTO v_mine
      FROM broker.broker_jobs AS j
      JOIN ROWS FROM (pg_catalog.unnest(p_job_ids), pg_catalog.unnest(p_lease_tokens)) AS u(id, token)
        ON j.job_id OPERATOR(pg_catalog.=) u.id
     WHERE j.complete_status OPERATOR(pg_catalog.=) broker._state('running')
       AND j.lease_token OPERATOR(pg_catalog.=) u.token;
    PERFORM broker._record_attempts(v_mine, 'interrupted');  -- the attempt history keeps the run
    WITH interrupted AS (
        UPDATE broker.broker_jobs AS j
           SET complete_status = broker._state('pending'),
               attempts = j.attempts OPERATOR(pg_catalog.-) 1,
               interruptions = j.interruptions OPERATOR(pg_catalog.+) 1,
               pending_deps = broker._count_pending_deps(j.tenant_id, j.job_id),
               lease_token = NULL, lease_expires_at = NULL, lease_instance_id = NULL
         WHERE j.job_id OPERATOR(pg_catalog.=) ANY (v_mine)
        RETURNING j.job_id, j.job_queue
    )
    SELECT pg_catalog.array_agg(r.job_id ORDER BY r.job_id), pg_catalog.array_agg(r.job_queue)
      INTO p_job_ids, v_queues FROM interrupted AS r;
    -- a run ended while a cancel request for it was on its way is not run again: cancelled
    PERFORM broker._cancel_handed_back(p_job_ids);
    PERFORM broker._notify_queues(v_queues);
    RETURN QUERY SELECT u.id FROM pg_catalog.unnest(p_job_ids) AS u(id);
END;
$$;
COMMENT ON FUNCTION broker.broker_interrupt_jobs(bigint[], uuid[]) IS
    'Returns jobs whose run their runner ended (shutdown deadline) to pending without counting the attempt and without touching their dependents, counting the interruption (only under the lease token of their claim; waits for a session still executing them); returns the ids interrupted.';
