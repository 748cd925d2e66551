-- sql/instances/runner_reads.sql: what a runner reads on its session connection (the poll), and what status shows.
-- ---------------------------------------------------------------------------
-- Function: broker.broker_ready_queues()
--   The queue numbers that have a job claimable now (pending, no unfinished
--   dependency, run_after reached), across every tenant, in order. What a
--   runner reads on its one session connection at each poll instead of a
--   claim per queue: it wakes a worker only where there is work, and it
--   reports queue numbers that no runner of its configuration serves.
--   Reads the claim index: one probe per queue number that has claimable
--   jobs (a loose index scan), then one bounded probe of that queue for a
--   job due now; and likewise the parked jobs: per queue, whether its
--   earliest job parked until a time is due (broker_jobs_later_idx), and
--   the queues of jobs whose key's next token is due (broker_key_limit):
--   the claim there unparks them. Runners' queues only (1 to 1000): a
--   task's queue (negative, broker_task_queue) is its workers', and the
--   walks start above it, so a runner never wakes for a task and no number
--   of task names adds to the poll.
-- Example:
--   SELECT broker.broker_ready_queues();   -- {1,3}
--   Calls: _claimable
--   Tables: reads broker_jobs, broker_key_limit
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_ready_queues()
RETURNS integer[]
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
BEGIN
    RETURN ARRAY(
        WITH RECURSIVE queues (q) AS (
            (SELECT j.job_queue FROM broker.broker_jobs AS j
              WHERE broker._claimable(j.complete_status, j.pending_deps, j.parked)
                AND j.job_queue OPERATOR(pg_catalog.>=) 1   -- (tasks' queues are negative: workers', not runners')
              ORDER BY j.job_queue LIMIT 1)
            UNION ALL
            SELECT (SELECT j.job_queue FROM broker.broker_jobs AS j
                     WHERE broker._claimable(j.complete_status, j.pending_deps, j.parked)
                       AND j.job_queue OPERATOR(pg_catalog.>) s.q
                     ORDER BY j.job_queue LIMIT 1)
              FROM queues AS s
             WHERE s.q IS NOT NULL
        ),
        -- queues with jobs parked until a time: the first of each (the earliest) says whether one is due
        later (q, due) AS (
            (SELECT j.job_queue, j.run_after OPERATOR(pg_catalog.<=) pg_catalog.statement_timestamp()
               FROM broker.broker_jobs AS j
              WHERE j.complete_status OPERATOR(pg_catalog.=) 0 AND j.parked OPERATOR(pg_catalog.=) 1
                AND j.job_queue OPERATOR(pg_catalog.>=) 1
              ORDER BY j.job_queue, j.run_after LIMIT 1)
            UNION ALL
            SELECT n.job_queue, n.due
              FROM later AS s,
                   LATERAL (SELECT j.job_queue, j.run_after OPERATOR(pg_catalog.<=) pg_catalog.statement_timestamp() AS due
                              FROM broker.broker_jobs AS j
                             WHERE j.complete_status OPERATOR(pg_catalog.=) 0 AND j.parked OPERATOR(pg_catalog.=) 1
                               AND j.job_queue OPERATOR(pg_catalog.>) s.q
                             ORDER BY j.job_queue, j.run_after LIMIT 1) AS n
        )
        SELECT r.q FROM (
            -- (a probe per queue, LATERAL with LIMIT 1, not EXISTS: with statistics that make the
            -- ready jobs a vanishing share of the table, as after a long history, EXISTS can be planned
            -- as a hash semi-join that reads every ready job at every poll)
            SELECT s.q FROM queues AS s,
                   LATERAL (SELECT FROM broker.broker_jobs AS j
                             WHERE j.job_queue OPERATOR(pg_catalog.=) s.q
                               AND broker._claimable(j.complete_status, j.pending_deps, j.parked)
                               AND j.run_after OPERATOR(pg_catalog.<=) pg_catalog.statement_timestamp()
                             LIMIT 1) AS due
             WHERE s.q IS NOT NULL
            UNION
            SELECT l.q FROM later AS l WHERE l.due
            UNION
            -- the queues of jobs whose key's next token is due
            SELECT p.job_queue
              FROM broker.broker_key_limit AS k,
                   LATERAL (SELECT j.job_queue FROM broker.broker_jobs AS j
                             WHERE j.concurrency_key OPERATOR(pg_catalog.=) k.concurrency_key
                               AND (k.tenant_id IS NULL OR j.tenant_id OPERATOR(pg_catalog.=) k.tenant_id)
                               AND j.complete_status OPERATOR(pg_catalog.=) 0 AND j.parked OPERATOR(pg_catalog.>=) 2
                               AND j.job_queue OPERATOR(pg_catalog.>=) 1
                             LIMIT 100) AS p
             WHERE k.wake_at OPERATOR(pg_catalog.<=) pg_catalog.statement_timestamp()) AS r
         WHERE r.q OPERATOR(pg_catalog.>=) 1
         ORDER BY r.q);
END;
$$;
COMMENT ON FUNCTION broker.broker_ready_queues() IS
    'The queue numbers with a job claimable now, across tenants (what a runner polls on its session connection).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_next_due()
--   When the next parked job becomes claimable by time alone, across every
--   tenant and queue: the earliest run_after of the jobs parked until a time
--   (one probe per queue number that has any, a loose scan of
--   broker_jobs_later_idx), or the earliest wake_at of a key whose jobs wait
--   for a token; NULL when none. The runner polls then, not only every
--   queue_timer_sec, so that a delayed job or a rate's next burst starts on
--   time. A task parked until a time (its queue negative) is not the
--   runner's and does not count.
-- Example:
--   SELECT broker.broker_next_due();   -- 2026-12-06 07:31:02.5+00, or NULL
--   Calls: none
--   Tables: reads broker_jobs, broker_key_limit
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_next_due()
RETURNS timestamptz
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
BEGIN
    RETURN LEAST(
        (WITH RECURSIVE later (q, at) AS (
             (SELECT j.job_queue, j.run_after FROM broker.broker_jobs AS j
               WHERE j.complete_status OPERATOR(pg_catalog.=) 0 AND j.parked OPERATOR(pg_catalog.=) 1
                 AND j.job_queue OPERATOR(pg_catalog.>=) 1
               ORDER BY j.job_queue, j.run_after LIMIT 1)
             UNION ALL
             SELECT n.job_queue, n.run_after
               FROM later AS s,
                    LATERAL (SELECT j.job_queue, j.run_after FROM broker.broker_jobs AS j
                              WHERE j.complete_status OPERATOR(pg_catalog.=) 0 AND j.parked OPERATOR(pg_catalog.=) 1
                                AND j.job_queue OPERATOR(pg_catalog.>) s.q
                              ORDER BY j.job_queue, j.run_after LIMIT 1) AS n)
         SELECT pg_catalog.min(l.at) FROM later AS l),
        (SELECT k.wake_at FROM broker.broker_key_limit AS k
          WHERE k.wake_at IS NOT NULL ORDER BY k.wake_at LIMIT 1));
END;
$$;
COMMENT ON FUNCTION broker.broker_next_due() IS
    'When the next parked job becomes claimable by time alone (a delay, a rate''s next tokens), across every tenant; NULL when none. The runner polls then.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_job_activity()
--   The claimed jobs (status 1) across every tenant, each with what it does
--   now: 'executing' while a session of a runner login (a member of
--   broker_runtime) runs it (run_jobs names the running job in
--   application_name, which pg_stat_activity shows at once), else 'waiting':
--   claimed by a worker and not started yet, or finished and waiting for the
--   commit of its transaction of jobs (its effects are not visible before).
--   For pgsql-broker status and the dashboard.
-- Example:
--   SELECT job_id, job_name, activity FROM broker.broker_job_activity() WHERE activity = 'waiting';
--   Calls: _state
--   Tables: reads broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_job_activity()
RETURNS TABLE (job_id bigint, job_queue integer, tenant_id text, job_name text, started_at timestamptz, activity text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT j.job_id, j.job_queue, j.tenant_id, j.job_name, j.started_at,
           CASE WHEN x.job_id IS NOT NULL THEN 'executing' ELSE 'waiting' END
      FROM broker.broker_jobs AS j
      LEFT JOIN (SELECT DISTINCT pg_catalog.substr(a.application_name, 18)::bigint AS job_id
                   FROM pg_catalog.pg_stat_activity AS a
                  WHERE a.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()
                    AND a.application_name OPERATOR(pg_catalog.~) '^pgsql_broker job [0-9]{1,18}$'
                    AND pg_catalog.pg_has_role(a.usesysid, 'broker_runtime', 'MEMBER')) AS x
        ON x.job_id OPERATOR(pg_catalog.=) j.job_id
     WHERE j.complete_status OPERATOR(pg_catalog.=) broker._state('running')
     ORDER BY j.job_id
$$;
COMMENT ON FUNCTION broker.broker_job_activity() IS
    'Claimed jobs across tenants and whether a runner session executes each now (executing) or it waits to start or for its transaction''s commit (waiting).';
