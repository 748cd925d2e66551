-- sql/retention/purge.sql: purging finished jobs.
-- ---------------------------------------------------------------------------
-- Function: broker.broker_purge_jobs(p_older_than, p_batch_size, p_complete_status)
--   Retention: deletes at most p_batch_size finished jobs whose finished_at
--   is older than p_older_than, with their dependency edges,
--   oldest first: of final state p_complete_status (2 completed, 3 failed,
--   4 cancelled), or of any final state when it is NULL. Returns the number
--   deleted; call it until it returns 0 (each call is one short transaction
--   in autocommit mode). Its cost is linear in the jobs it deletes: the
--   candidates come from broker_jobs_finished_idx one state at a time, and
--   their edges from broker_job_dependency_job_id_idx. Jobs another
--   transaction holds are skipped, not waited for.
-- Errors: 22004 NULL age; 22023 negative age, batch size < 1, or a state
--   that is not final.
-- Calls: none
-- Tables: writes broker_jobs, broker_job_dependency (by cascade)
-- Example:
--   SELECT broker.broker_purge_jobs(interval '7 days');        -- every final state
--   SELECT broker.broker_purge_jobs(interval '30 days', 1000, 3::smallint);  -- failed jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_purge_jobs(p_older_than interval, p_batch_size integer DEFAULT 10000,
                                         p_complete_status smallint DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_n      integer := 0;
    v_one    integer;
    v_state  smallint;
    v_before timestamptz;
BEGIN
    IF p_older_than IS NULL THEN
        RAISE EXCEPTION 'broker_purge_jobs: p_older_than must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_older_than < interval '0' OR p_batch_size IS NULL OR p_batch_size < 1 THEN
        RAISE EXCEPTION 'broker_purge_jobs: p_older_than must be >= 0 and p_batch_size >= 1'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_complete_status IS NOT NULL AND p_complete_status <> ALL (ARRAY[2, 3, 4]::smallint[]) THEN
        RAISE EXCEPTION 'broker_purge_jobs: p_complete_status must be a final state (2, 3 or 4) or NULL, got %',
            p_complete_status USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_before := pg_catalog.clock_timestamp() - p_older_than;
    FOREACH v_state IN ARRAY CASE WHEN p_complete_status IS NULL THEN ARRAY[2, 3, 4]::smallint[]
                                  ELSE ARRAY[p_complete_status] END LOOP
        -- the state as a constant of the index predicate, so the planner reads the index in order
        WITH doomed AS (
            SELECT j.job_id FROM broker.broker_jobs AS j
             WHERE j.complete_status = ANY (ARRAY[2, 3, 4]::smallint[])
               AND j.complete_status = v_state
               AND j.finished_at < v_before
             ORDER BY j.complete_status, j.finished_at
             LIMIT p_batch_size - v_n
               FOR UPDATE SKIP LOCKED
        )
        DELETE FROM broker.broker_jobs AS j USING doomed WHERE j.job_id = doomed.job_id;
        GET DIAGNOSTICS v_one = ROW_COUNT;
        v_n := v_n + v_one;
        EXIT WHEN v_n >= p_batch_size;
    END LOOP;
    RETURN v_n;
END;
$$;
COMMENT ON FUNCTION broker.broker_purge_jobs(interval, integer, smallint) IS
    'Retention: deletes up to p_batch_size finished jobs (of one final state, or any) older than p_older_than, with their edges; returns how many. Call until 0.';
