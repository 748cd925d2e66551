-- ---------------------------------------------------------------------------
-- Function: broker.broker_get(p_job_queue, p_instance_id, p_lease_seconds, p_batch_size)
--   Claims up to p_batch_size ready jobs of queue p_job_queue: pending, no
--   unfinished dependency (pending_deps = 0), run_after reached. Highest
--   priority first, then earliest run_after, then lowest job_id. Each claimed
--   job becomes running (1) with a lease of p_lease_seconds (default: setting
--   lease_seconds, else 60) and one more attempt. Rows locked by another
--   claimer are skipped. Returns one row per claimed job, none when idle.
--
--   The scan walks the claim index one priority level at a time (a loose
--   index scan), so its cost does not depend on how many jobs are finished,
--   blocked or scheduled for later.
-- Errors: 22023 queue < 1, lease < 1 second, batch size < 1.
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
    lease_expires_at timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_lease    integer := COALESCE(p_lease_seconds, broker._setting_int('lease_seconds', 60, 1));
    v_left     integer := p_batch_size;
    v_priority integer;
    v_now      timestamptz := pg_catalog.statement_timestamp();
    v_claimed  integer;
BEGIN
    IF p_job_queue IS NULL OR p_job_queue OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'broker_get: p_job_queue must be >= 1, got %', COALESCE(p_job_queue::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_lease OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'broker_get: p_lease_seconds must be >= 1, got %', v_lease
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_left IS NULL OR v_left OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'broker_get: p_batch_size must be >= 1, got %', COALESCE(p_batch_size::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- Highest priority that has a ready-or-future job in this queue.
    SELECT j.job_priority INTO v_priority
      FROM broker.broker_jobs AS j
     WHERE j.job_queue OPERATOR(pg_catalog.=) p_job_queue
       AND j.complete_status OPERATOR(pg_catalog.=) 0 AND j.pending_deps OPERATOR(pg_catalog.=) 0
     ORDER BY j.job_queue, j.job_priority DESC
     LIMIT 1;

    WHILE FOUND AND v_left OPERATOR(pg_catalog.>) 0 LOOP
        RETURN QUERY
        -- <claim-query> (tests_sql/06_claim_index.sql EXPLAINs the text between these markers)
        WITH picked AS (
            SELECT j.job_id
              FROM broker.broker_jobs AS j
             WHERE j.job_queue OPERATOR(pg_catalog.=) p_job_queue
               AND j.complete_status OPERATOR(pg_catalog.=) 0 AND j.pending_deps OPERATOR(pg_catalog.=) 0
               AND j.job_priority OPERATOR(pg_catalog.=) v_priority
               AND j.run_after OPERATOR(pg_catalog.<=) v_now
             ORDER BY j.job_queue, j.job_priority DESC, j.run_after, j.job_id
             LIMIT v_left
               FOR NO KEY UPDATE SKIP LOCKED
        )
        UPDATE broker.broker_jobs AS j
           SET complete_status = 1,
               attempts = j.attempts OPERATOR(pg_catalog.+) 1,
               started_at = v_now,
               lease_token = pg_catalog.gen_random_uuid(),
               lease_instance_id = p_instance_id,
               lease_expires_at = v_now OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => v_lease)
          FROM picked
         WHERE j.job_id OPERATOR(pg_catalog.=) picked.job_id
        RETURNING j.job_id, j.job_name, j.job_queue, j.job_priority, j.job_language, j.tenant_id,
                  j.attempts, j.max_attempts, j.job_timeout, j.lease_token, j.lease_expires_at
        -- </claim-query>
        ;
        GET DIAGNOSTICS v_claimed = ROW_COUNT;
        v_left := v_left OPERATOR(pg_catalog.-) v_claimed;
        EXIT WHEN v_left OPERATOR(pg_catalog.=) 0;

        -- Next lower priority level (one index probe).
        SELECT j.job_priority INTO v_priority
          FROM broker.broker_jobs AS j
         WHERE j.job_queue OPERATOR(pg_catalog.=) p_job_queue
           AND j.complete_status OPERATOR(pg_catalog.=) 0 AND j.pending_deps OPERATOR(pg_catalog.=) 0
           AND j.job_priority OPERATOR(pg_catalog.<) v_priority
         ORDER BY j.job_queue, j.job_priority DESC
         LIMIT 1;
    END LOOP;
END;
$$;
COMMENT ON FUNCTION broker.broker_get(integer, bigint, integer, integer) IS
    'Claims up to p_batch_size ready jobs of a queue (priority, then oldest) with a lease; returns them with their lease_token. Skips blocked, future and locked jobs.';
