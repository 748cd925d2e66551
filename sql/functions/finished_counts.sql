-- ---------------------------------------------------------------------------
-- The finished-job counters behind broker_queue_stats() (table
-- broker.broker_finished_count): statement-level triggers on broker_jobs
-- append, per statement, one delta row per minute, queue, tenant and final
-- state whose count of jobs changed, whoever writes the table (the finish
-- functions, the purge, a direct write); a key whose jobs only moved within it
-- (say an update of a finished job's other columns) appends nothing. Rows are
-- only ever appended by writers, so concurrent finishes never wait on each
-- other here.
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- Function: broker._finished_minute(p_finished_at)
--   The counters' minute of a finish time: date_bin, so the same whatever the
--   session's TimeZone (date_trunc would follow it).
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._finished_minute(p_finished_at timestamptz)
RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT pg_catalog.date_bin(interval '1 minute', p_finished_at, timestamptz '2000-01-01 00:00:00+00') $$;
COMMENT ON FUNCTION broker._finished_minute(timestamptz) IS
    'Internal: the minute (date_bin, independent of TimeZone) under which broker_finished_count counts a finish time.';

-- ---------------------------------------------------------------------------
-- Trigger function: broker._count_finished()
--   AFTER INSERT, UPDATE and DELETE (per statement, with transition tables
--   new_jobs and old_jobs): -1 for every old row in a final state, +1 for
--   every new one, summed per key; keys that sum to 0 append nothing.
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._count_finished()
RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP OPERATOR(pg_catalog.=) 'INSERT' THEN
        INSERT INTO broker.broker_finished_count (finished_minute, job_queue, tenant_id, complete_status, jobs)
        SELECT broker._finished_minute(n.finished_at), n.job_queue, n.tenant_id, n.complete_status, pg_catalog.count(*)
          FROM new_jobs AS n
         WHERE n.complete_status OPERATOR(pg_catalog.>=) 2 AND n.finished_at IS NOT NULL
         GROUP BY 1, 2, 3, 4;
    ELSIF TG_OP OPERATOR(pg_catalog.=) 'DELETE' THEN
        INSERT INTO broker.broker_finished_count (finished_minute, job_queue, tenant_id, complete_status, jobs)
        SELECT broker._finished_minute(o.finished_at), o.job_queue, o.tenant_id, o.complete_status,
               OPERATOR(pg_catalog.-) pg_catalog.count(*)
          FROM old_jobs AS o
         WHERE o.complete_status OPERATOR(pg_catalog.>=) 2 AND o.finished_at IS NOT NULL
         GROUP BY 1, 2, 3, 4;
    ELSE
        INSERT INTO broker.broker_finished_count (finished_minute, job_queue, tenant_id, complete_status, jobs)
        SELECT d.minute, d.job_queue, d.tenant_id, d.complete_status, pg_catalog.sum(d.n)
          FROM (SELECT broker._finished_minute(o.finished_at) AS minute, o.job_queue, o.tenant_id, o.complete_status,
                       -1 AS n
                  FROM old_jobs AS o
                 WHERE o.complete_status OPERATOR(pg_catalog.>=) 2 AND o.finished_at IS NOT NULL
                UNION ALL
                SELECT broker._finished_minute(n.finished_at), n.job_queue, n.tenant_id, n.complete_status, 1
                  FROM new_jobs AS n
                 WHERE n.complete_status OPERATOR(pg_catalog.>=) 2 AND n.finished_at IS NOT NULL) AS d
         GROUP BY 1, 2, 3, 4
        HAVING pg_catalog.sum(d.n) OPERATOR(pg_catalog.<>) 0;
    END IF;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION broker._count_finished() IS
    'Internal trigger: appends to broker_finished_count how a statement changed the finished jobs per minute, queue, tenant and state.';

CREATE TRIGGER broker_jobs_count_finished_insert_trg
    AFTER INSERT ON broker.broker_jobs
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION broker._count_finished();
COMMENT ON TRIGGER broker_jobs_count_finished_insert_trg ON broker.broker_jobs IS
    'Per INSERT statement: counts jobs written already finished (a restore, a direct write) in broker_finished_count.';
CREATE TRIGGER broker_jobs_count_finished_update_trg
    AFTER UPDATE ON broker.broker_jobs
    REFERENCING OLD TABLE AS old_jobs NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION broker._count_finished();
COMMENT ON TRIGGER broker_jobs_count_finished_update_trg ON broker.broker_jobs IS
    'Per UPDATE statement: counts jobs that reached (or left) a final state, or whose finish time moved, in broker_finished_count.';
CREATE TRIGGER broker_jobs_count_finished_delete_trg
    AFTER DELETE ON broker.broker_jobs
    REFERENCING OLD TABLE AS old_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION broker._count_finished();
COMMENT ON TRIGGER broker_jobs_count_finished_delete_trg ON broker.broker_jobs IS
    'Per DELETE statement (the purge, a cascade): uncounts the finished jobs deleted from broker_finished_count.';

-- ---------------------------------------------------------------------------
-- Trigger function: broker._count_finished_truncate()
--   AFTER TRUNCATE of broker_jobs: no job is left, so no count either.
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._count_finished_truncate()
RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM broker.broker_finished_count;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION broker._count_finished_truncate() IS
    'Internal trigger: empties broker_finished_count when broker_jobs is truncated.';
CREATE TRIGGER broker_jobs_count_finished_truncate_trg
    AFTER TRUNCATE ON broker.broker_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION broker._count_finished_truncate();
COMMENT ON TRIGGER broker_jobs_count_finished_truncate_trg ON broker.broker_jobs IS
    'TRUNCATE of broker_jobs empties broker_finished_count.';

-- ---------------------------------------------------------------------------
-- Function: broker._merge_finished_counts()
--   Folds the deltas of broker_finished_count into one row per key and drops
--   the minutes older than any window broker_queue_stats reads (an hour and a
--   minute), so the table holds about one row per minute, queue, tenant and
--   state plus the deltas since the last merge. One merge at a time (a
--   transaction-level advisory lock; a second caller returns at once);
--   deltas committed meanwhile stay for the next merge. Does nothing where
--   it cannot write (a hot standby, a read-only transaction). Returns the
--   rows it removed.
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._merge_finished_counts()
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_old    bigint;
    v_merged bigint;
BEGIN
    IF pg_catalog.pg_is_in_recovery() OR pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'on'
       OR NOT pg_catalog.pg_try_advisory_xact_lock(1651665664, 1) THEN
        RETURN 0;
    END IF;
    DELETE FROM broker.broker_finished_count AS c
     WHERE c.finished_minute OPERATOR(pg_catalog.<)
           broker._finished_minute(pg_catalog.statement_timestamp() OPERATOR(pg_catalog.-) interval '1 hour 1 minute');
    GET DIAGNOSTICS v_old = ROW_COUNT;
    WITH gone AS (
        DELETE FROM broker.broker_finished_count AS c
         WHERE (c.finished_minute, c.job_queue, c.tenant_id, c.complete_status) IN
               (SELECT k.finished_minute, k.job_queue, k.tenant_id, k.complete_status
                  FROM broker.broker_finished_count AS k
                 GROUP BY 1, 2, 3, 4 HAVING pg_catalog.count(*) OPERATOR(pg_catalog.>) 1 OR pg_catalog.sum(k.jobs) OPERATOR(pg_catalog.=) 0)
        RETURNING c.finished_minute, c.job_queue, c.tenant_id, c.complete_status, c.jobs
    ), summed AS (
        INSERT INTO broker.broker_finished_count (finished_minute, job_queue, tenant_id, complete_status, jobs)
        SELECT g.finished_minute, g.job_queue, g.tenant_id, g.complete_status, pg_catalog.sum(g.jobs)
          FROM gone AS g
         GROUP BY 1, 2, 3, 4 HAVING pg_catalog.sum(g.jobs) OPERATOR(pg_catalog.<>) 0
        RETURNING 1
    )
    SELECT (SELECT pg_catalog.count(*) FROM gone) OPERATOR(pg_catalog.-) (SELECT pg_catalog.count(*) FROM summed)
      INTO v_merged;
    RETURN v_old OPERATOR(pg_catalog.+) v_merged;
END;
$$;
COMMENT ON FUNCTION broker._merge_finished_counts() IS
    'Internal: folds the deltas of broker_finished_count into one row per key and drops minutes no window reads; returns the rows removed.';
