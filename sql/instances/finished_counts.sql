-- sql/instances/finished_counts.sql: the per-minute counters of finished jobs behind broker_queue_stats.
-- ---------------------------------------------------------------------------
-- The finished-job counters behind broker_queue_stats() (table
-- broker.broker_finished_count): triggers on broker_jobs append a delta row
-- (+n or -n per key and statement, +1 for a row inserted finished) whenever the count of
-- finished jobs of a minute, queue, tenant and final state changes, whoever
-- writes the table (the finish functions, the purge, a direct write). Rows
-- are only ever appended by writers, so concurrent finishes never wait on
-- each other here.
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- Function: broker._finished_minute(p_finished_at)
--   The counters' minute of a finish time: date_bin, so the same whatever the
--   session's TimeZone (date_trunc would follow it). No SET clause, so that it
--   is inlined into the triggers and queries that call it (a SET clause stops
--   inlining); everything in it is qualified (sql/pgspot-no-search-path.txt).
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._finished_minute(p_finished_at timestamptz)
RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT pg_catalog.date_bin(interval '1 minute', p_finished_at, timestamptz '2000-01-01 00:00:00+00') $$;
COMMENT ON FUNCTION broker._finished_minute(timestamptz) IS
    'Internal: the minute (date_bin, independent of TimeZone) under which broker_finished_count counts a finish time.';

-- ---------------------------------------------------------------------------
-- Trigger function: broker._count_finished()
--   Row-level AFTER INSERT, fired only (the trigger's WHEN, checked without
--   a function call) for a job written already finished: +1 for its key. An
--   enqueue costs nothing here.
--   Calls: _finished_minute
--   Tables: writes broker_finished_count
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._count_finished()
RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO broker.broker_finished_count (finished_minute, job_queue, tenant_id, complete_status, jobs)
    VALUES (broker._finished_minute(NEW.finished_at), NEW.job_queue, NEW.tenant_id, NEW.complete_status, 1);
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION broker._count_finished() IS
    'Internal trigger: appends to broker_finished_count the +1 of a job inserted already finished.';

CREATE TRIGGER broker_jobs_count_finished_insert_trg
    AFTER INSERT ON broker.broker_jobs
    FOR EACH ROW WHEN (NEW.complete_status OPERATOR(pg_catalog.>=) 2 AND NEW.finished_at IS NOT NULL)
    EXECUTE FUNCTION broker._count_finished();
COMMENT ON TRIGGER broker_jobs_count_finished_insert_trg ON broker.broker_jobs IS
    'A job written already finished (a restore, a direct write) is counted in broker_finished_count.';

-- ---------------------------------------------------------------------------
-- Trigger function: broker._count_finished_updated()
--   Statement-level AFTER UPDATE (transition tables old_jobs, new_jobs): per
--   key, the finished rows after the statement less those before it, one
--   row per key whose count changed. A finish of a batch of jobs appends one
--   row per minute, queue, tenant and state, not one per job; a statement
--   that leaves every count as it was (a claim, a lease renewal, a rewrite
--   of a finished job's other columns) appends nothing.
--   Calls: _finished_minute, _state
--   Tables: writes broker_finished_count
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._count_finished_updated()
RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO broker.broker_finished_count (finished_minute, job_queue, tenant_id, complete_status, jobs)
    SELECT broker._finished_minute(d.finished_at), d.job_queue, d.tenant_id, d.complete_status, pg_catalog.sum(d.n)
      FROM (SELECT n.finished_at, n.job_queue, n.tenant_id, n.complete_status, 1 AS n
              FROM new_jobs AS n
             WHERE n.complete_status OPERATOR(pg_catalog.>=) broker._state('completed') AND n.finished_at IS NOT NULL
            UNION ALL
            SELECT o.finished_at, o.job_queue, o.tenant_id, o.complete_status, -1
              FROM old_jobs AS o
             WHERE o.complete_status OPERATOR(pg_catalog.>=) broker._state('completed') AND o.finished_at IS NOT NULL
           ) AS d
     GROUP BY 1, 2, 3, 4
    HAVING pg_catalog.sum(d.n) OPERATOR(pg_catalog.<>) 0;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION broker._count_finished_updated() IS
    'Internal trigger: appends to broker_finished_count, per key, the change an UPDATE made to the count of finished jobs.';

CREATE TRIGGER broker_jobs_count_finished_update_trg
    AFTER UPDATE ON broker.broker_jobs
    REFERENCING OLD TABLE AS old_jobs NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION broker._count_finished_updated();
COMMENT ON TRIGGER broker_jobs_count_finished_update_trg ON broker.broker_jobs IS
    'Per UPDATE statement: the jobs that reached, left or moved within a final state (finish time, queue, tenant) are counted again in broker_finished_count, one row per key.';

-- ---------------------------------------------------------------------------
-- Trigger function: broker._count_finished_deleted()
--   Statement-level AFTER DELETE (transition table old_jobs): -n per key for
--   the finished jobs deleted, one row per key (a purge batch appends a few).
--   Calls: _finished_minute, _state
--   Tables: writes broker_finished_count
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._count_finished_deleted()
RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO broker.broker_finished_count (finished_minute, job_queue, tenant_id, complete_status, jobs)
    SELECT broker._finished_minute(o.finished_at), o.job_queue, o.tenant_id, o.complete_status,
           OPERATOR(pg_catalog.-) pg_catalog.count(*)
      FROM old_jobs AS o
     WHERE o.complete_status OPERATOR(pg_catalog.>=) broker._state('completed') AND o.finished_at IS NOT NULL
     GROUP BY 1, 2, 3, 4;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION broker._count_finished_deleted() IS
    'Internal trigger: uncounts from broker_finished_count the finished jobs a DELETE removed.';
CREATE TRIGGER broker_jobs_count_finished_delete_trg
    AFTER DELETE ON broker.broker_jobs
    REFERENCING OLD TABLE AS old_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION broker._count_finished_deleted();
COMMENT ON TRIGGER broker_jobs_count_finished_delete_trg ON broker.broker_jobs IS
    'Per DELETE statement (the purge, a cascade): uncounts the finished jobs deleted from broker_finished_count.';

-- ---------------------------------------------------------------------------
-- Trigger function: broker._count_finished_truncate()
--   AFTER TRUNCATE of broker_jobs: no job is left, so no count either.
--   Calls: none
--   Tables: writes broker_finished_count
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
-- Function: broker._finished_kept()
--   How far back broker_finished_count keeps its minutes: the longest window
--   read from it (broker_queue_stats' hour, broker_finished_per_minute's
--   three hours), and a minute more for the one under way.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._finished_kept()
RETURNS interval LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT interval '3 hours 1 minute' $$;
COMMENT ON FUNCTION broker._finished_kept() IS
    'Internal: how far back broker_finished_count keeps its minutes (the longest window read from it, and a minute).';

-- ---------------------------------------------------------------------------
-- Function: broker._merge_finished_counts()
--   Folds the deltas of broker_finished_count into the one merged row of
--   their key (read through broker_finished_count_delta_idx: with no delta
--   the merge costs an index probe) and drops the minutes older than any
--   window broker_queue_stats reads (an hour and a minute), so the table holds
--   one row per minute, queue, tenant and state plus the deltas since the
--   last merge. One merge at a time (a
--   transaction-level advisory lock; a second caller returns at once);
--   deltas committed meanwhile stay for the next merge. Does nothing where
--   it cannot write (a hot standby, a read-only transaction). Returns the
--   old rows dropped plus the deltas folded.
--   Calls: _finished_merge_lock_key, _finished_minute
--   Tables: writes broker_finished_count
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._merge_finished_counts()
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_old    bigint;
    v_deltas bigint;
    v_zero   timestamptz[];
BEGIN
    IF pg_catalog.pg_is_in_recovery() OR pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'on'
       OR NOT (SELECT pg_catalog.pg_try_advisory_xact_lock(k.classid, k.objid) FROM broker._finished_merge_lock_key() AS k) THEN
        RETURN 0;
    END IF;
    WITH gone AS (
        DELETE FROM broker.broker_finished_count AS c WHERE NOT c.merged
        RETURNING c.finished_minute, c.job_queue, c.tenant_id, c.complete_status, c.jobs
    ), folded AS (
        INSERT INTO broker.broker_finished_count AS m (finished_minute, job_queue, tenant_id, complete_status, jobs, merged)
        SELECT g.finished_minute, g.job_queue, g.tenant_id, g.complete_status, pg_catalog.sum(g.jobs)::bigint, true
          FROM gone AS g
         GROUP BY 1, 2, 3, 4
        ON CONFLICT (finished_minute, job_queue, tenant_id, complete_status) WHERE merged
        DO UPDATE SET jobs = m.jobs OPERATOR(pg_catalog.+) excluded.jobs
        RETURNING m.finished_minute, m.jobs
    )
    SELECT (SELECT pg_catalog.count(*) FROM gone),
           (SELECT pg_catalog.array_agg(DISTINCT f.finished_minute) FROM folded AS f WHERE f.jobs OPERATOR(pg_catalog.=) 0)
      INTO v_deltas, v_zero;
    -- keys whose jobs are all gone (purged, or moved to another key)
    DELETE FROM broker.broker_finished_count AS c
     WHERE c.merged AND c.jobs OPERATOR(pg_catalog.=) 0 AND c.finished_minute OPERATOR(pg_catalog.=) ANY (v_zero);
    -- (merged rows only, through their index: the deltas are all folded by now)
    DELETE FROM broker.broker_finished_count AS c
     WHERE c.merged AND c.finished_minute OPERATOR(pg_catalog.<)
           broker._finished_minute(pg_catalog.statement_timestamp() OPERATOR(pg_catalog.-) broker._finished_kept());
    GET DIAGNOSTICS v_old = ROW_COUNT;
    RETURN v_old OPERATOR(pg_catalog.+) v_deltas;
END;
$$;
COMMENT ON FUNCTION broker._merge_finished_counts() IS
    'Internal: folds the deltas of broker_finished_count into one row per key and drops minutes no window reads; returns the rows removed.';

-- ---------------------------------------------------------------------------
-- Function: broker._finished_counts_since(p_since)
--   The finished counts of the minutes from p_since on, as they stand:
--   merged rows and the deltas the next merge folds in, apart (each through
--   its partial index, however many dead deltas a burst of finishes left),
--   one row each; readers sum them. Read with the caller's rights, so a
--   tenant's login reads its own rows (policy broker_finished_count_select).
--   Calls: none
--   Tables: reads broker_finished_count
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._finished_counts_since(p_since timestamptz)
RETURNS TABLE (finished_minute timestamptz, job_queue integer, tenant_id text, complete_status smallint, jobs bigint)
LANGUAGE sql STABLE
-- (no SET clause, so that it is inlined into the queries that read it; everything in it is qualified:
-- sql/pgspot-no-search-path.txt)
AS $$
    SELECT c.finished_minute, c.job_queue, c.tenant_id, c.complete_status, c.jobs
      FROM broker.broker_finished_count AS c
     WHERE c.merged AND c.finished_minute OPERATOR(pg_catalog.>=) p_since
    UNION ALL
    SELECT c.finished_minute, c.job_queue, c.tenant_id, c.complete_status, c.jobs
      FROM broker.broker_finished_count AS c
     WHERE NOT c.merged AND c.finished_minute OPERATOR(pg_catalog.>=) p_since
$$;
COMMENT ON FUNCTION broker._finished_counts_since(timestamptz) IS
    'Internal: the finished counts (merged rows and deltas, unsummed) of the minutes from a time on, read with the caller''s rights.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_finished_per_minute(p_window)
--   Jobs finished per minute over the last p_window (1 minute to 3 hours,
--   default 3 hours), per queue, tenant and final state (2 completed, 3
--   failed, 4 cancelled), every tenant's: what the console's charts draw.
--   Read from broker_finished_count (a few rows a minute, whatever the
--   number of jobs), deltas not merged yet included; minutes with no finish
--   are left out.
-- Errors: 22023 a window outside 1 minute to 3 hours.
-- Example:
--   SELECT * FROM broker.broker_finished_per_minute('1 hour');
--   Calls: _finished_minute, _finished_counts_since
--   Tables: reads broker_finished_count
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_finished_per_minute(p_window interval DEFAULT '3 hours')
RETURNS TABLE (finished_minute timestamptz, job_queue integer, tenant_id text, complete_status smallint, jobs bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_window IS NULL OR p_window OPERATOR(pg_catalog.<) interval '1 minute' OR p_window OPERATOR(pg_catalog.>) interval '3 hours' THEN
        RAISE EXCEPTION 'broker_finished_per_minute: p_window must be 1 minute to 3 hours, got %', COALESCE(p_window::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    SELECT c.finished_minute, c.job_queue, c.tenant_id, c.complete_status, pg_catalog.sum(c.jobs)::bigint
      FROM broker._finished_counts_since(broker._finished_minute(pg_catalog.statement_timestamp() OPERATOR(pg_catalog.-) p_window)) AS c
     GROUP BY 1, 2, 3, 4
    HAVING pg_catalog.sum(c.jobs) OPERATOR(pg_catalog.<>) 0
     ORDER BY 1, 2, 3, 4;
END;
$$;
COMMENT ON FUNCTION broker.broker_finished_per_minute(interval) IS
    'Jobs finished per minute over the last p_window (up to 3 hours), per queue, tenant and final state, every tenant''s (the console''s charts).';
