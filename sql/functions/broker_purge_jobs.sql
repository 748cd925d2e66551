-- ---------------------------------------------------------------------------
-- Function: broker.broker_purge_jobs(p_older_than, p_batch_size)
--   Retention: deletes at most p_batch_size finished jobs (completed, failed
--   or cancelled) whose finished_at is older than p_older_than, with their
--   dependency edges. Returns the number deleted; call it until it returns 0
--   (each call is one short transaction in autocommit mode).
-- Errors: 22004 NULL age; 22023 negative age or batch size < 1.
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_purge_jobs(p_older_than interval, p_batch_size integer DEFAULT 10000)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_n integer;
BEGIN
    IF p_older_than IS NULL THEN
        RAISE EXCEPTION 'broker_purge_jobs: p_older_than must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_older_than OPERATOR(pg_catalog.<) interval '0' OR p_batch_size IS NULL OR p_batch_size OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'broker_purge_jobs: p_older_than must be >= 0 and p_batch_size >= 1'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    WITH doomed AS (
        SELECT j.job_id FROM broker.broker_jobs AS j
         WHERE j.complete_status OPERATOR(pg_catalog.>=) 2
           AND j.finished_at OPERATOR(pg_catalog.<) (pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) p_older_than)
         ORDER BY j.finished_at
         LIMIT p_batch_size
           FOR UPDATE SKIP LOCKED
    )
    DELETE FROM broker.broker_jobs AS j USING doomed WHERE j.job_id OPERATOR(pg_catalog.=) doomed.job_id;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN v_n;
END;
$$;
COMMENT ON FUNCTION broker.broker_purge_jobs(interval, integer) IS
    'Retention: deletes up to p_batch_size finished jobs older than p_older_than (and their edges); returns how many. Call until 0.';
