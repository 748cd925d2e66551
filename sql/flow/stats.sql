-- sql/flow/stats.sql: seeing flow control: each tenant's share of a queue, each key's limit and use, and why a job waits.
-- A tenant (broker_enqueue) reads these through row-level security: its own jobs, limits and weight,
-- and of the other tenants only the totals its share and the limits across tenants are measured
-- against (_queue_totals, _key_totals). The monitoring roles (broker_runtime, administrators) read
-- every tenant, as broker_queue_stats does. Each reads through the indexes that hold what it counts
-- (enable_seqscan off: with many finished jobs the planner would otherwise read the whole table for a
-- few thousand ready ones; tests_sql/flow/statistics_read_what_they_count_not_the_whole_table.sql).

-- ---------------------------------------------------------------------------
-- Function: broker._queue_totals(p_window)
--   Per queue, across every tenant: the jobs running now, the jobs served in
--   the last p_window (running, or claimed and finished since), and the sum
--   of the weights of the tenants with running jobs there. Totals only, no
--   tenant's own numbers: what a tenant's share is measured against.
--   Reads the running jobs (broker_jobs_lease_idx) and the jobs finished
--   within the window (broker_jobs_finished_idx).
--   Calls: _state
--   Tables: reads broker_jobs, broker_tenant_weight
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._queue_totals(p_window interval)
RETURNS TABLE (job_queue integer, running bigint, served bigint, running_weight bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
DECLARE
    v_since timestamptz := pg_catalog.statement_timestamp() OPERATOR(pg_catalog.-) p_window;
BEGIN
    RETURN QUERY
    WITH run AS (
        SELECT j.job_queue, j.tenant_id, pg_catalog.count(*) AS n
          FROM broker.broker_jobs AS j
         WHERE j.complete_status OPERATOR(pg_catalog.=) 1
         GROUP BY j.job_queue, j.tenant_id
    ), fin AS (
        SELECT j.job_queue, pg_catalog.count(*) AS n
          -- (a state at a time, as purge reads them: the planner drops the index predicate's own
          -- condition from the scan, so without the state's equality it would read the whole index
          -- for the finish times of the window)
          FROM pg_catalog.unnest(ARRAY[2, 3, 4]::smallint[]) AS st(state), broker.broker_jobs AS j
         WHERE j.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[2, 3, 4]::smallint[])
           AND j.complete_status OPERATOR(pg_catalog.=) st.state
           AND j.finished_at OPERATOR(pg_catalog.>=) v_since
           AND j.started_at IS NOT NULL
         GROUP BY j.job_queue
    ), q AS (
        SELECT r.job_queue, pg_catalog.sum(r.n) AS running,
               pg_catalog.sum(COALESCE(w.weight, 1)) AS running_weight
          FROM run AS r LEFT JOIN broker.broker_tenant_weight AS w ON w.tenant_id OPERATOR(pg_catalog.=) r.tenant_id
         GROUP BY r.job_queue
    )
    SELECT COALESCE(q.job_queue, f.job_queue), COALESCE(q.running, 0)::bigint,
           (COALESCE(q.running, 0) OPERATOR(pg_catalog.+) COALESCE(f.n, 0))::bigint, COALESCE(q.running_weight, 0)::bigint
      FROM q FULL JOIN fin AS f ON f.job_queue OPERATOR(pg_catalog.=) q.job_queue;
END;
$$;
COMMENT ON FUNCTION broker._queue_totals(interval) IS
    'Internal: per queue across tenants, the jobs running, served in a window and the running tenants'' weights (totals only).';

-- ---------------------------------------------------------------------------
-- Function: broker._key_totals(p_key)
--   For a concurrency key with a limit across tenants: its running and
--   pending jobs across every tenant (NULL, NULL for a key without one).
--   Totals only, through broker_jobs_key_running_idx and
--   broker_jobs_key_pending_idx.
--   Calls: none
--   Tables: reads broker_key_limit, broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._key_totals(p_key text, OUT running bigint, OUT waiting bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM broker.broker_key_limit AS l
                    WHERE l.concurrency_key OPERATOR(pg_catalog.=) p_key AND l.tenant_id IS NULL) THEN
        RETURN;
    END IF;
    running := (SELECT pg_catalog.count(*) FROM broker.broker_jobs AS j
                 WHERE j.concurrency_key OPERATOR(pg_catalog.=) p_key
                   AND j.complete_status OPERATOR(pg_catalog.=) 1 AND j.concurrency_key IS NOT NULL);
    waiting := (SELECT pg_catalog.count(*) FROM broker.broker_jobs AS j
                 WHERE j.concurrency_key OPERATOR(pg_catalog.=) p_key
                   AND j.complete_status OPERATOR(pg_catalog.=) 0 AND j.concurrency_key IS NOT NULL);
END;
$$;
COMMENT ON FUNCTION broker._key_totals(text) IS
    'Internal: the running and pending jobs across tenants of a key with a limit across tenants (NULLs otherwise).';

-- ---------------------------------------------------------------------------
-- Function: broker._tenant_stats_rows(p_window)
--   broker_tenant_stats over the jobs the caller reads (row-level security),
--   each tenant's share measured against its queue's totals (_queue_totals).
--   Ready: claimable now (_claimable, run_after reached) and not paused for
--   the tenant (_paused_for), through the claim index; running: claimed;
--   served: running, or claimed and finished within p_window.
--   Calls: _claimable, _paused_tenants, _paused_for, _queue_totals
--   Tables: reads broker_jobs, broker_tenant_weight, broker_queue_pause
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._tenant_stats_rows(p_window interval)
RETURNS TABLE (job_queue integer, tenant_id text, weight integer, ready bigint, running bigint, served bigint,
               share_served double precision)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
DECLARE
    v_now   timestamptz := pg_catalog.statement_timestamp();
    v_since timestamptz := pg_catalog.statement_timestamp() OPERATOR(pg_catalog.-) p_window;
BEGIN
    RETURN QUERY
    WITH s AS (
        SELECT j.job_queue, j.tenant_id, pg_catalog.count(*) AS ready, 0::bigint AS running, 0::bigint AS finished
          FROM broker.broker_jobs AS j
         WHERE broker._claimable(j.complete_status, j.pending_deps, j.parked)
           AND j.run_after OPERATOR(pg_catalog.<=) v_now
         GROUP BY j.job_queue, j.tenant_id
        UNION ALL
        SELECT j.job_queue, j.tenant_id, 0, pg_catalog.count(*), 0
          FROM broker.broker_jobs AS j
         WHERE j.complete_status OPERATOR(pg_catalog.=) 1
         GROUP BY j.job_queue, j.tenant_id
        UNION ALL
        SELECT j.job_queue, j.tenant_id, 0, 0, pg_catalog.count(*)
          -- (a state at a time: see _queue_totals)
          FROM pg_catalog.unnest(ARRAY[2, 3, 4]::smallint[]) AS st(state), broker.broker_jobs AS j
         WHERE j.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[2, 3, 4]::smallint[])
           AND j.complete_status OPERATOR(pg_catalog.=) st.state
           AND j.finished_at OPERATOR(pg_catalog.>=) v_since
           AND j.started_at IS NOT NULL
         GROUP BY j.job_queue, j.tenant_id
    ), t AS (
        SELECT s.job_queue, s.tenant_id, pg_catalog.sum(s.ready)::bigint AS ready, pg_catalog.sum(s.running)::bigint AS running,
               (pg_catalog.sum(s.running) OPERATOR(pg_catalog.+) pg_catalog.sum(s.finished))::bigint AS served
          FROM s
         GROUP BY s.job_queue, s.tenant_id
    )
    SELECT t.job_queue, t.tenant_id, COALESCE(w.weight, 1),
           CASE WHEN broker._paused_for(broker._paused_tenants(t.job_queue), t.tenant_id) THEN 0::bigint ELSE t.ready END,
           t.running, t.served,
           t.served::double precision OPERATOR(pg_catalog./) NULLIF(q.served, 0)::double precision
      FROM t
      LEFT JOIN broker.broker_tenant_weight AS w ON w.tenant_id OPERATOR(pg_catalog.=) t.tenant_id
      LEFT JOIN broker._queue_totals(p_window) AS q ON q.job_queue OPERATOR(pg_catalog.=) t.job_queue
     ORDER BY t.job_queue, t.tenant_id;
END;
$$;
COMMENT ON FUNCTION broker._tenant_stats_rows(interval) IS
    'Internal: broker_tenant_stats over the jobs the caller reads (row-level security).';

-- ---------------------------------------------------------------------------
-- Function: broker._key_stats_rows()
--   broker_key_stats over the limits and jobs the caller reads (row-level
--   security): a row per limit, with its key's running and pending jobs (of
--   its tenant; across tenants for a limit across tenants, _key_totals), and
--   a row per key and tenant with running or pending jobs and no limit.
--   Through broker_jobs_key_running_idx and broker_jobs_key_pending_idx.
--   Calls: _key_totals
--   Tables: reads broker_key_limit, broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._key_stats_rows()
RETURNS TABLE (concurrency_key text, tenant_id text, running bigint, max_running integer, per_second double precision,
               burst integer, waiting bigint)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
BEGIN
    RETURN QUERY
    WITH c AS (
        SELECT j.concurrency_key, j.tenant_id, pg_catalog.sum(j.running)::bigint AS running, pg_catalog.sum(j.waiting)::bigint AS waiting
          FROM (SELECT r.concurrency_key, r.tenant_id, pg_catalog.count(*) AS running, 0::bigint AS waiting
                  FROM broker.broker_jobs AS r
                 WHERE r.complete_status OPERATOR(pg_catalog.=) 1 AND r.concurrency_key IS NOT NULL
                 GROUP BY r.concurrency_key, r.tenant_id
                UNION ALL
                SELECT p.concurrency_key, p.tenant_id, 0, pg_catalog.count(*)
                  FROM broker.broker_jobs AS p
                 WHERE p.complete_status OPERATOR(pg_catalog.=) 0 AND p.concurrency_key IS NOT NULL
                 GROUP BY p.concurrency_key, p.tenant_id) AS j
         GROUP BY j.concurrency_key, j.tenant_id
    )
    SELECT l.concurrency_key, l.tenant_id,
           COALESCE(CASE WHEN l.tenant_id IS NULL THEN (broker._key_totals(l.concurrency_key)).running ELSE c.running END, 0),
           l.max_running, l.per_second, l.burst,
           COALESCE(CASE WHEN l.tenant_id IS NULL THEN (broker._key_totals(l.concurrency_key)).waiting ELSE c.waiting END, 0)
      FROM broker.broker_key_limit AS l
      LEFT JOIN c ON c.concurrency_key OPERATOR(pg_catalog.=) l.concurrency_key
                 AND c.tenant_id OPERATOR(pg_catalog.=) l.tenant_id
    UNION ALL
    SELECT c.concurrency_key, c.tenant_id, c.running, NULL::integer, NULL::double precision, NULL::integer, c.waiting
      FROM c
     WHERE NOT EXISTS (SELECT FROM broker.broker_key_limit AS l
                        WHERE l.concurrency_key OPERATOR(pg_catalog.=) c.concurrency_key
                          AND (l.tenant_id IS NULL OR l.tenant_id OPERATOR(pg_catalog.=) c.tenant_id))
     ORDER BY 1, 2 NULLS FIRST;
END;
$$;
COMMENT ON FUNCTION broker._key_stats_rows() IS
    'Internal: broker_key_stats over the limits and jobs the caller reads (row-level security).';

-- ---------------------------------------------------------------------------
-- Function: broker._tenant_stats_every_tenant(p_window), broker._key_stats_every_tenant()
--   The same rows across every tenant, for the monitoring roles
--   (broker_runtime, administrators): what broker_tenant_stats and
--   broker_key_stats return to them.
--   Calls: _tenant_stats_rows, _key_stats_rows
--   Tables: reads broker_jobs, broker_key_limit, broker_tenant_weight, broker_queue_pause
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._tenant_stats_every_tenant(p_window interval)
RETURNS TABLE (job_queue integer, tenant_id text, weight integer, ready bigint, running bigint, served bigint,
               share_served double precision)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT * FROM broker._tenant_stats_rows(p_window)
$$;
COMMENT ON FUNCTION broker._tenant_stats_every_tenant(interval) IS
    'Internal: broker_tenant_stats across every tenant, for the monitoring roles.';

CREATE FUNCTION broker._key_stats_every_tenant()
RETURNS TABLE (concurrency_key text, tenant_id text, running bigint, max_running integer, per_second double precision,
               burst integer, waiting bigint)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT * FROM broker._key_stats_rows()
$$;
COMMENT ON FUNCTION broker._key_stats_every_tenant() IS
    'Internal: broker_key_stats across every tenant, for the monitoring roles.';

-- ---------------------------------------------------------------------------
-- Function: broker._sees_every_tenant()
--   Whether the caller reads every tenant's statistics: an administrator
--   (broker_admin, superuser) or a monitoring role (a member of
--   broker_runtime); else it reads its own tenant's, by row-level security.
--   Called by the SECURITY INVOKER functions below, so CURRENT_USER is the
--   caller (a job's SQL runs as its run_as role, never as the runner).
--   Calls: _is_broker_admin
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._sees_every_tenant()
RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_runtime oid := pg_catalog.to_regrole('broker_runtime');
BEGIN
    RETURN broker._is_broker_admin(CURRENT_USER)
        OR (v_runtime IS NOT NULL AND pg_catalog.pg_has_role(CURRENT_USER, v_runtime, 'USAGE'));
END;
$$;
COMMENT ON FUNCTION broker._sees_every_tenant() IS
    'Internal: whether the caller reads every tenant''s statistics (administrators, broker_runtime members).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_tenant_stats(p_window)
--   Each tenant's part of each queue: its weight (broker_set_tenant_weight,
--   default 1), its jobs ready (claimable now and not paused for it),
--   running, and served (running, or claimed and finished in the last
--   p_window), and share_served: its served over the queue's served across
--   every tenant (NULL when the queue served none), to set beside its weight.
--   One row per queue and tenant with ready, running or served jobs. A
--   tenant sees its own rows; administrators and broker_runtime every
--   tenant's. Index-backed: the claim index, running and finished jobs.
-- Errors: 22023 p_window NULL or negative.
-- Example:
--   SELECT * FROM broker.broker_tenant_stats('5 minutes') WHERE job_queue = 1;
--   Calls: _sees_every_tenant, _tenant_stats_every_tenant, _tenant_stats_rows
--   Tables: reads broker_jobs, broker_tenant_weight, broker_queue_pause
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_tenant_stats(p_window interval DEFAULT '1 minute')
RETURNS TABLE (job_queue integer, tenant_id text, weight integer, ready bigint, running bigint, served bigint,
               share_served double precision)
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_window IS NULL OR p_window OPERATOR(pg_catalog.<) interval '0' THEN
        RAISE EXCEPTION 'broker_tenant_stats: p_window must be an interval of 0 or more (say ''1 minute''), got %',
            COALESCE(p_window::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF broker._sees_every_tenant() THEN
        RETURN QUERY SELECT * FROM broker._tenant_stats_every_tenant(p_window);
    ELSE
        RETURN QUERY SELECT * FROM broker._tenant_stats_rows(p_window);
    END IF;
END;
$$;
COMMENT ON FUNCTION broker.broker_tenant_stats(interval) IS
    'Per queue and tenant: weight, ready, running and served jobs in a window, and the share of the queue''s served jobs (a tenant: its own rows; monitoring: all).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_key_stats()
--   Each concurrency key's limits and use: one row per limit (tenant_id
--   NULL: the limit across tenants) with its cap, rate and burst, its jobs
--   running and pending (waiting; across tenants for a limit across
--   tenants), and one row per key and tenant with running or pending jobs
--   and no limit (cap and rate NULL). A tenant sees its own limits and jobs
--   and the limits across tenants; administrators and broker_runtime all.
-- Example:
--   SELECT * FROM broker.broker_key_stats() WHERE running >= max_running;
--   Calls: _sees_every_tenant, _key_stats_every_tenant, _key_stats_rows
--   Tables: reads broker_key_limit, broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_key_stats()
RETURNS TABLE (concurrency_key text, tenant_id text, running bigint, max_running integer, per_second double precision,
               burst integer, waiting bigint)
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF broker._sees_every_tenant() THEN
        RETURN QUERY SELECT * FROM broker._key_stats_every_tenant();
    ELSE
        RETURN QUERY SELECT * FROM broker._key_stats_rows();
    END IF;
END;
$$;
COMMENT ON FUNCTION broker.broker_key_stats() IS
    'Per concurrency key (and tenant, NULL: across tenants): running jobs, cap, rate, burst and pending jobs.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_job_waiting(p_job_id)
--   Why pending job p_job_id is not running, as an operator reads it; NULL
--   when it is running or finished, or the caller does not see it (row-level
--   security). In this order, the first that holds:
--   * 'waiting: dependencies (N left)': N jobs or groups it waits on;
--   * 'waiting: queue paused': its queue is paused for its tenant;
--   * 'waiting: due at <run_after>': dated later (parked later, or not yet due);
--   * 'waiting: limit <key> (R of C running)': its key at its cap (parked
--     cap): C the cap in force (the smaller of its tenant's and the limit
--     across tenants), R the jobs running under it;
--   * 'waiting: limit <key> (rate N per second)': its key out of tokens
--     (parked rate), N the rate in force (the smaller);
--   * 'waiting: tenant share': ready, other tenants' jobs of its queue run,
--     and its tenant runs at least its weighted share of the queue's
--     running jobs (weight over the weights of the tenants running there and
--     its own): the claims serve the others first;
--   * else 'waiting: a free worker'.
-- Example:
--   SELECT broker.broker_job_waiting(42);   -- 'waiting: limit stripe (2 of 2 running)'
--   Calls: _parked, _state, _paused_tenants, _paused_for, _key_totals, _queue_totals
--   Tables: reads broker_jobs, broker_key_limit, broker_tenant_weight, broker_queue_pause
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_job_waiting(p_job_id bigint)
RETURNS text
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
DECLARE
    v_job     record;
    v_limit   record;
    v_running bigint;
    v_weight  bigint;
    v_queue   record;
BEGIN
    SELECT j.job_queue, j.tenant_id, j.complete_status, j.pending_deps, j.parked, j.run_after, j.concurrency_key
      INTO v_job FROM broker.broker_jobs AS j WHERE j.job_id OPERATOR(pg_catalog.=) p_job_id;
    IF NOT FOUND OR v_job.complete_status OPERATOR(pg_catalog.<>) broker._state('pending') THEN
        RETURN NULL;
    END IF;
    IF v_job.pending_deps OPERATOR(pg_catalog.>) 0 THEN
        RETURN pg_catalog.format('waiting: dependencies (%s left)', v_job.pending_deps);
    END IF;
    IF broker._paused_for(broker._paused_tenants(v_job.job_queue), v_job.tenant_id) THEN
        RETURN 'waiting: queue paused';
    END IF;
    IF v_job.parked OPERATOR(pg_catalog.=) broker._parked('later')
       OR v_job.run_after OPERATOR(pg_catalog.>) pg_catalog.statement_timestamp() THEN
        RETURN pg_catalog.format('waiting: due at %s', v_job.run_after);
    END IF;
    IF v_job.parked OPERATOR(pg_catalog.>=) broker._parked('cap') THEN
        -- the limits in force on its key: its tenant's and the one across tenants (the smaller binds)
        SELECT pg_catalog.min(l.max_running) AS cap,
               pg_catalog.min(l.max_running) FILTER (WHERE l.tenant_id IS NULL) AS cap_all,
               pg_catalog.min(l.per_second) AS rate
          INTO v_limit
          FROM broker.broker_key_limit AS l
         WHERE l.concurrency_key OPERATOR(pg_catalog.=) v_job.concurrency_key
           AND (l.tenant_id IS NULL OR l.tenant_id OPERATOR(pg_catalog.=) v_job.tenant_id);
        IF v_job.parked OPERATOR(pg_catalog.=) broker._parked('rate') AND v_limit.rate IS NOT NULL THEN
            RETURN pg_catalog.format('waiting: limit %s (rate %s per second)', v_job.concurrency_key, v_limit.rate);
        END IF;
        IF v_job.parked OPERATOR(pg_catalog.=) broker._parked('cap') AND v_limit.cap IS NOT NULL THEN
            v_running := CASE WHEN v_limit.cap OPERATOR(pg_catalog.=) v_limit.cap_all
                              THEN (broker._key_totals(v_job.concurrency_key)).running
                              ELSE (SELECT pg_catalog.count(*) FROM broker.broker_jobs AS j
                                     WHERE j.concurrency_key OPERATOR(pg_catalog.=) v_job.concurrency_key
                                       AND j.tenant_id OPERATOR(pg_catalog.=) v_job.tenant_id
                                       AND j.complete_status OPERATOR(pg_catalog.=) 1 AND j.concurrency_key IS NOT NULL) END;
            RETURN pg_catalog.format('waiting: limit %s (%s of %s running)', v_job.concurrency_key, v_running, v_limit.cap);
        END IF;
        RETURN pg_catalog.format('waiting: limit %s', v_job.concurrency_key);
    END IF;
    -- ready: is its tenant at or over its weighted share of the queue's running jobs, others running?
    SELECT q.running, q.running_weight INTO v_queue
      FROM broker._queue_totals(interval '0') AS q WHERE q.job_queue OPERATOR(pg_catalog.=) v_job.job_queue;
    SELECT pg_catalog.count(*) INTO v_running FROM broker.broker_jobs AS j
     WHERE j.complete_status OPERATOR(pg_catalog.=) 1
       AND j.job_queue OPERATOR(pg_catalog.=) v_job.job_queue AND j.tenant_id OPERATOR(pg_catalog.=) v_job.tenant_id;
    v_weight := COALESCE((SELECT w.weight FROM broker.broker_tenant_weight AS w
                           WHERE w.tenant_id OPERATOR(pg_catalog.=) v_job.tenant_id), 1);
    IF v_running OPERATOR(pg_catalog.>) 0 AND COALESCE(v_queue.running, 0) OPERATOR(pg_catalog.>) v_running
       AND v_running::numeric OPERATOR(pg_catalog.>=)
           ((v_queue.running OPERATOR(pg_catalog.*) v_weight)::numeric OPERATOR(pg_catalog./) v_queue.running_weight) THEN
        RETURN 'waiting: tenant share';
    END IF;
    RETURN 'waiting: a free worker';
END;
$$;
COMMENT ON FUNCTION broker.broker_job_waiting(bigint) IS
    'Why a pending job waits (dependencies, queue paused, due later, a key''s cap or rate, its tenant''s share, a free worker); NULL when it is not pending or not seen.';
