-- sql/run/recovery.sql: recovering jobs whose lease expired or whose server restarted (broker_recover_stale_jobs).
-- ---------------------------------------------------------------------------
-- Function: broker._restart_interruptions_max()
--   How many times a server restart may interrupt a job before a restart
--   counts its attempt after all. Without superuser a job cannot restart the
--   server, but a job that crashes it under restart_after_crash = off (an HA
--   manager then starts it again) would otherwise be retried for ever.
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._restart_interruptions_max()
RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT 5 $$;
COMMENT ON FUNCTION broker._restart_interruptions_max() IS
    'Internal: interruptions after which a server restart counts a job''s attempt (a job that brings the server down is not retried for ever).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_recover_stale_jobs(p_limit)
--   Recovers running jobs that nobody is executing (a job under execution
--   is row-locked by its run until its transaction ends, and locked rows are
--   skipped, however long they run) and that either
--   - were claimed before the server last started: every session of that
--     server ended with it, so the claim is dead whatever its lease says. A
--     restart is not the job's doing (a job cannot restart the server), so
--     the job returns to pending at once as broker_interrupt_jobs returns
--     it: attempt not counted, interruptions + 1, dependents kept (an
--     autonomous job, which holds no row lock while it runs, only once its
--     lease expired). After
--     _restart_interruptions_max() interruptions a restart counts the
--     attempt like an expired lease. A crash restart of the server (a
--     backend killed, say by the kernel's OOM killer) keeps the server's
--     start time: it may be the job's doing and counts as below;
--   - or whose lease expired. When the instance that claimed it is no
--     longer live (_live_instance: its session ended, so the runner was
--     killed or cut off until the server ended its session, and a standby
--     may have taken over), the job returns to pending at once, attempt not
--     counted, interruptions + 1, as above: a runner that is gone cannot
--     tell which of its claims it had started, and the database keeps no
--     mark of it, but a job that ends its own session while its runner
--     lives is counted by that runner (and by the rule below), and after
--     _restart_interruptions_max() interruptions this counts too, so a job
--     that takes its runner down is not retried for ever. Otherwise (the
--     claiming runner lives, or the job is autonomous, whose run has a
--     session of its own that may outlive its runner, or the claim named no
--     instance: tasks) the lost attempt counts (the session may have ended
--     by the job's own doing): pending again (after the retry backoff)
--     while attempts < max_attempts, else failed with its dependents
--     cancelled.
--   Returns (job_id, complete_status) per job.
-- Errors: 22023 p_limit < 1.
-- Example:
--   SELECT * FROM broker.broker_recover_stale_jobs();
--   Calls: _fail_attempt, broker_interrupt_jobs, _restart_interruptions_max, _live_instance
--   Tables: reads broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_recover_stale_jobs(p_limit integer DEFAULT 1000)
RETURNS TABLE (job_id bigint, complete_status smallint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r          record;
    v_started  timestamptz := pg_catalog.pg_postmaster_start_time();
    v_live     bigint := broker._live_instance();
    v_ids      bigint[] := '{}';
    v_tokens   uuid[] := '{}';
BEGIN
    IF p_limit IS NULL OR p_limit OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'broker_recover_stale_jobs: p_limit must be >= 1' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR r IN
        SELECT j.job_id, j.lease_expires_at, j.lease_instance_id, j.lease_token, j.interruptions,
               j.started_at OPERATOR(pg_catalog.<) v_started AS before_start,
               (j.started_at OPERATOR(pg_catalog.<) v_started OR g.claimer_gone)
               AND j.interruptions OPERATOR(pg_catalog.<) broker._restart_interruptions_max() AS restarted,
               g.claimer_gone
          FROM broker.broker_jobs AS j
         CROSS JOIN LATERAL (SELECT j.lease_instance_id IS NOT NULL AND j.lease_instance_id IS DISTINCT FROM v_live
                                    AND NOT j.autonomous AS claimer_gone) AS g
         WHERE j.complete_status OPERATOR(pg_catalog.=) broker._state('running')
           AND (j.lease_expires_at OPERATOR(pg_catalog.<) pg_catalog.clock_timestamp()
                -- (an autonomous job holds no row lock while it runs: it waits for its lease, so that a
                -- clock stepped back past the server's start cannot hand a running one to another worker)
                OR (j.started_at OPERATOR(pg_catalog.<) v_started AND NOT j.autonomous))
         ORDER BY j.lease_expires_at
         LIMIT p_limit
           FOR NO KEY UPDATE OF j SKIP LOCKED
    LOOP
        IF r.restarted THEN
            v_ids := v_ids OPERATOR(pg_catalog.||) r.job_id;
            v_tokens := v_tokens OPERATOR(pg_catalog.||) r.lease_token;
            CONTINUE;
        END IF;
        job_id := r.job_id;
        complete_status := broker._fail_attempt(r.job_id, NULL, CASE WHEN r.before_start
            THEN pg_catalog.format('the server restarted at %s while the job was claimed (instance %s), and it was '
                                   'interrupted %s times before: this time the attempt counts',
                                   v_started, COALESCE(r.lease_instance_id::text, 'unknown'), r.interruptions)
            WHEN r.claimer_gone
            THEN pg_catalog.format('lease expired at %s, no session was executing the job and its instance %s is gone; '
                                   'it was interrupted %s times before: this time the attempt counts',
                                   r.lease_expires_at, r.lease_instance_id, r.interruptions)
            ELSE pg_catalog.format('lease expired at %s and no session was executing the job (instance %s)',
                                   r.lease_expires_at, COALESCE(r.lease_instance_id::text, 'unknown')) END);
        RETURN NEXT;
    END LOOP;
    IF pg_catalog.cardinality(v_ids) OPERATOR(pg_catalog.>) 0 THEN
        -- (a statement of its own: a join in the interrupting statement would read the rows before it)
        SELECT pg_catalog.array_agg(i.job_id) INTO v_ids FROM broker.broker_interrupt_jobs(v_ids, v_tokens) AS i;
        RETURN QUERY SELECT j.job_id, j.complete_status FROM broker.broker_jobs AS j
                      WHERE j.job_id OPERATOR(pg_catalog.=) ANY (v_ids);
    END IF;
END;
$$;
COMMENT ON FUNCTION broker.broker_recover_stale_jobs(integer) IS
    'Returns to pending running jobs that no session is executing: without counting the attempt when they were claimed before the server last started, or when their lease expired and the instance that claimed them is gone (up to 5 interruptions); when their lease expired under a live claimer, counting the lost attempt (failed when attempts are spent); returns (job_id, new complete_status).';
