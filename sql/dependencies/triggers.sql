-- sql/dependencies/triggers.sql: triggers that keep dependency bookkeeping exact on every INSERT.
-- ---------------------------------------------------------------------------
-- Triggers that keep dependency bookkeeping exact whoever writes the tables
-- (broker_add_job, or a role with INSERT privilege writing rows directly).
-- Their functions are SECURITY DEFINER: the bookkeeping touches rows the
-- writer may not update itself. The AFTER triggers run with enable_seqscan off:
-- their queries are index probes, and PL/pgSQL keeps the plan made at the first
-- call; made while the tables were small, a plan that scans them would be kept
-- for the whole of a long transaction (thousands of enqueues in one statement
-- then cost quadratic time). Identity and tenant of the writer are
-- checked by the row-level security policies, as the writer, before these run.
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- Function: broker._jobs_join_groups(p_tenants, p_groups, p_members)
--   For _jobs_after_insert, when some job waits on a group that got new
--   members: p_members[i] new unfinished jobs joined group p_groups[i] of
--   tenant p_tenants[i]; every pending job waiting on such a group waits on
--   them too (its pending_deps grows by the new members of its groups).
--   The caller holds the shared keys of these groups.
--   Calls: _lock_dependents
--   Tables: reads broker_job_dependency; writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._jobs_join_groups(p_tenants text[], p_groups text[], p_members integer[])
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT t.tenant_id, pg_catalog.array_agg(t.grp) AS groups
          FROM ROWS FROM (pg_catalog.unnest(p_tenants), pg_catalog.unnest(p_groups)) AS t(tenant_id, grp)
         GROUP BY t.tenant_id
         ORDER BY t.tenant_id
    LOOP
        PERFORM broker._lock_dependents(r.tenant_id, NULL, r.groups);
        UPDATE broker.broker_jobs AS d
           SET pending_deps = d.pending_deps OPERATOR(pg_catalog.+) c.n
          FROM (SELECT e.job_id, pg_catalog.sum(m.n)::integer AS n
                  FROM broker.broker_job_dependency AS e
                  JOIN ROWS FROM (pg_catalog.unnest(p_tenants), pg_catalog.unnest(p_groups), pg_catalog.unnest(p_members)) AS m(tenant_id, grp, n)
                    ON m.tenant_id OPERATOR(pg_catalog.=) e.tenant_id
                   AND m.grp OPERATOR(pg_catalog.=) e.depends_on_group
                 WHERE e.tenant_id OPERATOR(pg_catalog.=) r.tenant_id
                   AND e.depends_on_group IS NOT NULL
                   AND e.depends_on_group OPERATOR(pg_catalog.=) ANY (r.groups)
                 GROUP BY e.job_id) AS c
         WHERE d.job_id OPERATOR(pg_catalog.=) c.job_id
           AND d.complete_status OPERATOR(pg_catalog.=) broker._state('pending');
    END LOOP;
END;
$$;
COMMENT ON FUNCTION broker._jobs_join_groups(text[], text[], integer[]) IS
    'Internal: new unfinished members joined these groups; the pending jobs waiting on them wait on the new members too.';

-- ---------------------------------------------------------------------------
-- Trigger function: broker._jobs_after_insert()
--   Statement-level AFTER INSERT on broker_jobs, the one trigger an enqueue
--   pays for, kept to two queries in the common case:
--   * takes the shared key of every group that got unfinished members (a job
--     enqueued with a dependency on the group at the same time holds it
--     exclusively while it counts the members), in key order;
--   * one NOTIFY per queue that got a job claimable now (same query), unless
--     broker.defer_notify is on (see sql/core/notify.sql);
--   * then, with a fresh snapshot, looks whether any job waits on one of
--     these groups (an index probe per group) and, only then, counts the
--     new members into their pending_deps (broker._jobs_join_groups).
--   Calls: _dependency_lock_key, _notify_queue, _due_time, _jobs_join_groups
--   Tables: reads broker_job_dependency
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._jobs_after_insert()
RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
DECLARE
    v_groups record;
BEGIN
    -- One statement for the common work (each costs an executor start-up, the
    -- bulk of a one-job enqueue): the shared group keys of
    -- _lock_dependency_keys (broker._dependency_lock_key, in key order), then one NOTIFY per queue with a job
    -- claimable now (the Append runs its branches in order).
    PERFORM pg_catalog.pg_advisory_xact_lock_shared(k.key)
       FROM (SELECT DISTINCT broker._dependency_lock_key(n.tenant_id, n.job_group, NULL) AS key
               FROM new_jobs AS n
              WHERE n.complete_status OPERATOR(pg_catalog.<=) broker._state('running')
              ORDER BY 1) AS k
    UNION ALL
    SELECT broker._notify_queue(q.job_queue)
       FROM (SELECT DISTINCT n.job_queue FROM new_jobs AS n
              WHERE n.complete_status OPERATOR(pg_catalog.=) broker._state('pending')
                AND n.pending_deps OPERATOR(pg_catalog.=) 0
                AND n.run_after OPERATOR(pg_catalog.<=) broker._due_time()
                AND pg_catalog.current_setting('broker.defer_notify', true) IS DISTINCT FROM 'on') AS q;
    -- (a new statement: its snapshot sees every waiter committed before the keys were granted)
    IF EXISTS (SELECT 1 FROM (SELECT DISTINCT n.tenant_id, n.job_group FROM new_jobs AS n
                               WHERE n.complete_status OPERATOR(pg_catalog.<=) broker._state('running')) AS g
                WHERE EXISTS (SELECT 1 FROM broker.broker_job_dependency AS e
                               WHERE e.tenant_id OPERATOR(pg_catalog.=) g.tenant_id
                                 AND e.depends_on_group OPERATOR(pg_catalog.=) g.job_group)) THEN
        SELECT pg_catalog.array_agg(g.tenant_id) AS tenants, pg_catalog.array_agg(g.job_group) AS groups,
               pg_catalog.array_agg(g.n) AS members
          INTO v_groups
          FROM (SELECT n.tenant_id, n.job_group, pg_catalog.count(*)::integer AS n
                  FROM new_jobs AS n
                 WHERE n.complete_status OPERATOR(pg_catalog.<=) broker._state('running')
                 GROUP BY n.tenant_id, n.job_group) AS g
         WHERE EXISTS (SELECT 1 FROM broker.broker_job_dependency AS e
                        WHERE e.tenant_id OPERATOR(pg_catalog.=) g.tenant_id
                          AND e.depends_on_group OPERATOR(pg_catalog.=) g.job_group);
        PERFORM broker._jobs_join_groups(v_groups.tenants, v_groups.groups, v_groups.members);
    END IF;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION broker._jobs_after_insert() IS
    'Internal trigger: new jobs join their groups (pending jobs waiting on those groups wait on them too), and their queues are notified.';

CREATE TRIGGER broker_jobs_after_insert_trg
    AFTER INSERT ON broker.broker_jobs
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION broker._jobs_after_insert();
COMMENT ON TRIGGER broker_jobs_after_insert_trg ON broker.broker_jobs IS
    'Per INSERT statement: counts new group members into the pending_deps of the jobs waiting on their groups, and notifies the queues that got claimable jobs.';

-- ---------------------------------------------------------------------------
-- Trigger function: broker._dependency_before_insert()
--   Row-level BEFORE INSERT on broker_job_dependency, SECURITY INVOKER on
--   purpose: it validates the edge through the writer's own view of the jobs
--   (row-level security applies), so its errors reveal nothing the writer may
--   not see. It runs before the row's policy check and before the
--   foreign-key check, so these are the errors a caller gets.
-- Errors: 23503 unknown job or target job (or one the writer cannot see);
--   55000 the job is not pending, or the target failed/was cancelled;
--   23514 the job's own group.
--   Calls: none
--   Tables: reads broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._dependency_before_insert()
RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job    record;
    v_target record;
BEGIN
    SELECT j.job_id, j.job_name, j.job_group, j.tenant_id, j.complete_status INTO v_job
      FROM broker.broker_jobs AS j
     WHERE j.job_id OPERATOR(pg_catalog.=) NEW.job_id AND j.tenant_id OPERATOR(pg_catalog.=) NEW.tenant_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job % does not exist', NEW.job_id USING ERRCODE = 'foreign_key_violation';
    END IF;
    IF v_job.complete_status OPERATOR(pg_catalog.<>) broker._state('pending') THEN
        RAISE EXCEPTION 'job % is not pending; dependencies can only be added to pending jobs', v_job.job_id
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF NEW.depends_on_group OPERATOR(pg_catalog.=) v_job.job_group THEN
        RAISE EXCEPTION 'job % (%) cannot depend on its own group %', v_job.job_id,
            pg_catalog.quote_literal(v_job.job_name), pg_catalog.quote_literal(v_job.job_group)
            USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.depends_on_job_id IS NOT NULL THEN
        SELECT t.job_id, t.complete_status INTO v_target FROM broker.broker_jobs AS t
         WHERE t.job_id OPERATOR(pg_catalog.=) NEW.depends_on_job_id AND t.tenant_id OPERATOR(pg_catalog.=) NEW.tenant_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'dependency job % does not exist', NEW.depends_on_job_id
                USING ERRCODE = 'foreign_key_violation';
        END IF;
        IF v_target.complete_status OPERATOR(pg_catalog.>=) broker._state('failed') THEN
            RAISE EXCEPTION 'dependency job % % and can never complete', v_target.job_id,
                CASE v_target.complete_status WHEN 3 THEN 'failed' ELSE 'was cancelled' END
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'Enqueue the dependency again and depend on the new job id.';
        END IF;
    END IF;
    RETURN NEW;
END;
$$;
COMMENT ON FUNCTION broker._dependency_before_insert() IS
    'Internal trigger: validate a new dependency edge with the writer''s own visibility (before the policy and FK checks).';

CREATE TRIGGER broker_job_dependency_before_insert_trg
    BEFORE INSERT ON broker.broker_job_dependency
    FOR EACH ROW EXECUTE FUNCTION broker._dependency_before_insert();
COMMENT ON TRIGGER broker_job_dependency_before_insert_trg ON broker.broker_job_dependency IS
    'Validates each new dependency edge as the writer sees the jobs.';

-- ---------------------------------------------------------------------------
-- Trigger function: broker._dependency_after_insert()
--   Statement-level AFTER INSERT on broker_job_dependency (so only edges that
--   passed the row-level security policy get here), set-based so that bulk
--   enqueues stay linear:
--   * refuses a job waiting on more than 100 groups;
--   * takes the dependency locks of all new edges in one ordered call;
--   * rejects id edges whose target failed or was cancelled meanwhile;
--   * rejects cycles: from the jobs that got edges and that some pending job
--     already waits on (by id or by its group: the only way a new edge can
--     close a cycle), once for the whole statement, collects the pending
--     jobs of their tenant that wait on them, transitively, and sorts that
--     graph topologically (broker._dependency_cycle: linear in its jobs and
--     edges, at most 100,000 jobs and 1,000,000 edges);
--   * adds to each job's pending_deps its new edges' unfinished targets
--     (each target group's unfinished members are counted once per group).
-- Errors: 22023 more than 100 groups; 55000 a target failed meanwhile;
--   23514 a dependency cycle; 54000 more than 100,000 jobs wait on the jobs
--   getting edges, 54001 more than 1,000,000 edges between them.
--   Calls: _dependency_lock_key, _lock_dependency_keys, _dependency_cycle
--   Tables: reads broker_job_dependency; writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._dependency_after_insert()
RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
DECLARE
    v_keys    record;
    v_cycle   record;
    v_origins bigint[];
BEGIN
    IF NOT EXISTS (SELECT 1 FROM new_edges) THEN
        RETURN NULL;
    END IF;
    -- At most 100 groups per job (each is a lock its enqueue takes and a count
    -- the completions of its tenant keep exact), however its edges are written.
    SELECT x.job_id, x.n INTO v_cycle
      FROM (SELECT ne.job_id,
                   (SELECT pg_catalog.count(*) FROM broker.broker_job_dependency AS e
                     WHERE e.job_id OPERATOR(pg_catalog.=) ne.job_id AND e.depends_on_group IS NOT NULL) AS n
              FROM (SELECT DISTINCT e.job_id FROM new_edges AS e WHERE e.depends_on_group IS NOT NULL) AS ne) AS x
     WHERE x.n OPERATOR(pg_catalog.>) 100
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'job % may wait on at most 100 groups, got %', v_cycle.job_id, v_cycle.n
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- (tenants in the order of their keys, so that a statement for several tenants
    -- takes its keys in the one global order too)
    FOR v_keys IN
        SELECT e.tenant_id, pg_catalog.array_agg(DISTINCT j.job_group) AS own_groups,
               pg_catalog.array_agg(DISTINCT e.depends_on_group) FILTER (WHERE e.depends_on_group IS NOT NULL) AS groups,
               pg_catalog.array_agg(DISTINCT e.depends_on_job_id) FILTER (WHERE e.depends_on_job_id IS NOT NULL) AS ids
          FROM new_edges AS e
          JOIN broker.broker_jobs AS j ON j.job_id OPERATOR(pg_catalog.=) e.job_id
         GROUP BY e.tenant_id
         ORDER BY broker._dependency_lock_key(e.tenant_id, '', NULL), e.tenant_id
    LOOP
        PERFORM broker._lock_dependency_keys(v_keys.tenant_id, v_keys.own_groups, v_keys.groups, NULL, v_keys.ids);
    END LOOP;

    SELECT e.depends_on_job_id INTO v_cycle
      FROM new_edges AS e
      JOIN broker.broker_jobs AS t ON t.job_id OPERATOR(pg_catalog.=) e.depends_on_job_id
     WHERE t.complete_status OPERATOR(pg_catalog.>=) broker._state('failed')
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'dependency job % ended while the dependency was being added and can never complete',
            v_cycle.depends_on_job_id
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;

    -- Cycle check, from the jobs something already waits on (usually none: no walk).
    -- (an edge on the job or its group, from a pending job or not: a superset that only makes
    -- the walk run a little more often, checked with two index probes per job)
    v_origins := ARRAY(
        SELECT j.job_id
          FROM (SELECT DISTINCT e.job_id FROM new_edges AS e) AS ne
          JOIN broker.broker_jobs AS j ON j.job_id OPERATOR(pg_catalog.=) ne.job_id
         WHERE EXISTS (SELECT 1 FROM broker.broker_job_dependency AS e
                        WHERE e.depends_on_job_id OPERATOR(pg_catalog.=) j.job_id
                       UNION ALL
                       SELECT 1 FROM broker.broker_job_dependency AS e
                        WHERE e.tenant_id OPERATOR(pg_catalog.=) j.tenant_id
                          AND e.depends_on_group OPERATOR(pg_catalog.=) j.job_group));
    IF pg_catalog.cardinality(v_origins) OPERATOR(pg_catalog.>) 0 THEN
        SELECT * INTO v_cycle FROM broker._dependency_cycle(v_origins) LIMIT 1;   -- (bounded: see there)
        IF FOUND THEN
            RAISE EXCEPTION 'dependency cycle: job % (%) already waits on job % (%) or its group %',
                v_cycle.job_id, pg_catalog.quote_literal(v_cycle.job_name), v_cycle.origin_id,
                pg_catalog.quote_literal(v_cycle.origin_name), pg_catalog.quote_literal(v_cycle.origin_group)
                USING ERRCODE = 'check_violation';
        END IF;
    END IF;

    -- Count: each target group's unfinished members once, each id target once.
    WITH grp AS (
        SELECT g.tenant_id, g.grp,
               (SELECT pg_catalog.count(*)::integer FROM broker.broker_jobs AS m
                 WHERE m.tenant_id OPERATOR(pg_catalog.=) g.tenant_id
                   AND m.job_group OPERATOR(pg_catalog.=) g.grp
                   AND m.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[0, 1]::smallint[])) AS n
          FROM (SELECT DISTINCT e.tenant_id, e.depends_on_group AS grp FROM new_edges AS e
                 WHERE e.depends_on_group IS NOT NULL) AS g
    ), cnt AS (
        SELECT e.job_id,
               pg_catalog.sum(CASE WHEN e.depends_on_group IS NOT NULL THEN g.n
                                   WHEN t.complete_status OPERATOR(pg_catalog.<=) broker._state('running') THEN 1 ELSE 0 END)::integer AS n
          FROM new_edges AS e
          LEFT JOIN grp AS g
            ON g.tenant_id OPERATOR(pg_catalog.=) e.tenant_id AND g.grp OPERATOR(pg_catalog.=) e.depends_on_group
          LEFT JOIN broker.broker_jobs AS t ON t.job_id OPERATOR(pg_catalog.=) e.depends_on_job_id
         GROUP BY e.job_id
    )
    UPDATE broker.broker_jobs AS j
       SET pending_deps = j.pending_deps OPERATOR(pg_catalog.+) c.n
      FROM cnt AS c
     WHERE j.job_id OPERATOR(pg_catalog.=) c.job_id
       AND c.n OPERATOR(pg_catalog.>) 0;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION broker._dependency_after_insert() IS
    'Internal trigger: after an INSERT statement of edges, lock, reject cycles, and count the new edges'' unfinished targets into pending_deps.';

CREATE TRIGGER broker_job_dependency_after_insert_trg
    AFTER INSERT ON broker.broker_job_dependency
    REFERENCING NEW TABLE AS new_edges
    FOR EACH STATEMENT EXECUTE FUNCTION broker._dependency_after_insert();
COMMENT ON TRIGGER broker_job_dependency_after_insert_trg ON broker.broker_job_dependency IS
    'Rejects cycles and maintains pending_deps for each INSERT statement of dependency edges (after their policy checks).';
