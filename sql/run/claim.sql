-- sql/run/claim.sql: claiming jobs (broker_get).
-- ---------------------------------------------------------------------------
-- Function: broker.broker_get(p_job_queue, p_instance_id, p_lease_seconds, p_batch_size)
--   Claims up to p_batch_size ready jobs of queue p_job_queue: pending, no
--   unfinished dependency (pending_deps = 0), run_after reached. Highest
--   priority first, then earliest run_after, then lowest job_id. Each claimed
--   job becomes running (1) with a lease of p_lease_seconds (default: setting
--   lease_seconds, else 60) and one more attempt. Rows locked by another
--   claimer are skipped. Returns one row per claimed job, none when idle;
--   an autonomous job (autonomous = true) is run with
--   broker_autonomous_begin/_end outside a transaction, not broker_run.
--   It does no other work (deferred dependency releases are the runner's
--   maintenance, broker_apply_deferred_releases): a claim's cost is its own
--   queue's, whatever any tenant left to release.
--
--   The claim index holds only pending, unblocked jobs. The probe walks it
--   one priority level at a time (a loose index scan) and checks each level
--   with a range scan bounded by run_after, so the cost does not depend on
--   how many jobs are finished, blocked or scheduled for later. Its plans are
--   generic (plan_cache_mode): a custom plan would be planned again at every
--   call, at about the cost of a claim of one job, and the generic plan is the
--   same index scan (tests_sql/run/claim_is_index_backed.sql).
--   A claim names the active instance (broker_register_instance) when there
--   is one, and its lease is at most an hour: whoever claims jobs it will
--   not run (a stray or hostile session of the runner's login) holds them
--   visibly and for a bounded time.
-- Errors: 22023 queue < 1, lease < 1 second or > 3600 seconds, batch size
--   < 1; 55000 p_instance_id is not the active instance, or NULL while one
--   is active.
-- Example:
--   SELECT job_id, lease_token FROM broker.broker_get(1, p_instance_id => 7, p_lease_seconds => 60, p_batch_size => 10);
--   Calls: _setting_int, _active_instance, _claimable
--   Tables: writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_get(
    p_job_queue     integer DEFAULT 1,
    p_instance_id   bigint  DEFAULT NULL,
    p_lease_seconds integer DEFAULT NULL,
    p_batch_size    integer DEFAULT 1)
RETURNS TABLE (
    job_id           bigint,
    job_name         text,
    job_queue        integer,
    job_priority     integer,
    job_language     text,
    tenant_id        text,
    attempts         integer,
    max_attempts     integer,
    job_timeout      interval,
    lease_token      uuid,
    lease_expires_at timestamptz,
    autonomous       boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_lease    integer := COALESCE(p_lease_seconds, broker._setting_int('lease_seconds', 60, 1));
    v_left     integer := p_batch_size;
    v_priority integer;
    v_bound    bigint := 2147483648;  -- above every integer priority
    v_now      timestamptz := pg_catalog.statement_timestamp();
    v_claimed  integer;
BEGIN
    IF p_job_queue IS NULL OR p_job_queue OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'broker_get: p_job_queue must be >= 1, got %', COALESCE(p_job_queue::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_lease OPERATOR(pg_catalog.<) 1 OR v_lease OPERATOR(pg_catalog.>) 3600 THEN
        RAISE EXCEPTION 'broker_get: the lease must be 1 to 3600 seconds, got %', v_lease
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A lease only bounds how long a crashed claimer holds its jobs; a job that runs longer keeps it.';
    END IF;
    IF p_instance_id IS DISTINCT FROM broker._active_instance() THEN
        RAISE EXCEPTION 'broker_get: %', CASE WHEN p_instance_id IS NULL
                THEN 'claims name the active instance ' OPERATOR(pg_catalog.||) broker._active_instance()
                ELSE pg_catalog.format('instance %s is not the active instance', p_instance_id) END
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Claim as the runner does: with the id broker_register_instance returned.';
    END IF;
    IF v_left IS NULL OR v_left OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'broker_get: p_batch_size must be >= 1, got %', COALESCE(p_batch_size::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    LOOP
        -- <priority-probe> Highest priority level below v_bound that has a job ready
        -- now: a loose index scan over the claim index, one probe per level, each
        -- level checked with a bounded range scan on run_after.
        WITH RECURSIVE levels (p) AS (
            (SELECT j.job_priority FROM broker.broker_jobs AS j
              WHERE j.job_queue OPERATOR(pg_catalog.=) p_job_queue
                AND broker._claimable(j.complete_status, j.pending_deps)
                AND j.job_priority OPERATOR(pg_catalog.<) v_bound
              ORDER BY j.job_queue, j.job_priority DESC
              LIMIT 1)
            UNION ALL
            SELECT (SELECT j.job_priority FROM broker.broker_jobs AS j
                     WHERE j.job_queue OPERATOR(pg_catalog.=) p_job_queue
                       AND broker._claimable(j.complete_status, j.pending_deps)
                       AND j.job_priority OPERATOR(pg_catalog.<) l.p
                     ORDER BY j.job_queue, j.job_priority DESC
                     LIMIT 1)
              FROM levels AS l
             WHERE l.p IS NOT NULL
        )
        SELECT l.p INTO v_priority
          FROM levels AS l
         WHERE l.p IS NOT NULL
           AND EXISTS (SELECT 1 FROM broker.broker_jobs AS j
                        WHERE j.job_queue OPERATOR(pg_catalog.=) p_job_queue
                          AND broker._claimable(j.complete_status, j.pending_deps)
                          AND j.job_priority OPERATOR(pg_catalog.=) l.p
                          AND j.run_after OPERATOR(pg_catalog.<=) v_now)
         LIMIT 1
        -- </priority-probe>
        ;
        EXIT WHEN v_priority IS NULL;

        RETURN QUERY
        -- <claim-query> (tests_sql/run/claim_is_index_backed.sql EXPLAINs the text between these markers)
        -- (the ids as an array, not a join: a join's generic plan can be a hash join over the table)
        WITH claimed AS (
            UPDATE broker.broker_jobs AS j
               SET complete_status = broker._state('running'),
                   attempts = j.attempts OPERATOR(pg_catalog.+) 1,
                   started_at = v_now,
                   lease_token = pg_catalog.gen_random_uuid(),
                   lease_instance_id = p_instance_id,
                   lease_expires_at = v_now OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => v_lease)
             WHERE j.job_id OPERATOR(pg_catalog.=) ANY (ARRAY(
                   SELECT r.job_id
                     FROM broker.broker_jobs AS r
                    WHERE r.job_queue OPERATOR(pg_catalog.=) p_job_queue
                      AND broker._claimable(r.complete_status, r.pending_deps)
                      AND r.job_priority OPERATOR(pg_catalog.=) v_priority
                      AND r.run_after OPERATOR(pg_catalog.<=) v_now
                    ORDER BY r.job_queue, r.job_priority DESC, r.run_after, r.job_id
                    LIMIT v_left
                      FOR NO KEY UPDATE SKIP LOCKED))
            RETURNING j.job_id, j.job_name, j.job_queue, j.job_priority, j.job_language, j.tenant_id,
                      j.attempts, j.max_attempts, j.job_timeout, j.lease_token, j.lease_expires_at, j.run_after, j.autonomous
        )
        SELECT c.job_id, c.job_name, c.job_queue, c.job_priority, c.job_language, c.tenant_id,
               c.attempts, c.max_attempts, c.job_timeout, c.lease_token, c.lease_expires_at, c.autonomous
          FROM claimed AS c
         ORDER BY c.run_after, c.job_id
        -- </claim-query>
        ;
        GET DIAGNOSTICS v_claimed = ROW_COUNT;
        v_left := v_left OPERATOR(pg_catalog.-) v_claimed;
        EXIT WHEN v_left OPERATOR(pg_catalog.=) 0;
        -- This level is drained (or its remaining rows are locked by other
        -- claimers): continue below it.
        v_bound := v_priority;
    END LOOP;
END;
$$;
COMMENT ON FUNCTION broker.broker_get(integer, bigint, integer, integer) IS
    'Claims up to p_batch_size ready jobs of a queue (priority, then oldest) with a lease; returns them with their lease_token. Skips blocked, future and locked jobs.';
