-- sql/dependencies/release.sql: releasing dependents when jobs complete (pending_deps), deferred when large.
-- ---------------------------------------------------------------------------
-- Function: broker._lower_pending_deps(p_job_ids, p_amounts)
--   Lowers the pending_deps of the pending jobs p_job_ids (ascending) by
--   p_amounts (element by element), locking them in id order first (every
--   path that lowers counters locks in that order, so they cannot deadlock),
--   and notifies the queues that got a ready job. Jobs no longer pending
--   (cancelled meanwhile) are skipped. Returns how many became ready.
--   Calls: _notify_queues
--   Tables: writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._lower_pending_deps(p_job_ids bigint[], p_amounts integer[])
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
DECLARE
    v_queues integer[];
    v_ready  integer;
BEGIN
    PERFORM 1 FROM broker.broker_jobs AS d
     WHERE d.job_id OPERATOR(pg_catalog.=) ANY (p_job_ids)
       AND d.complete_status OPERATOR(pg_catalog.=) broker._state('pending')
     ORDER BY d.job_id
       FOR NO KEY UPDATE OF d;
    WITH released AS (
        UPDATE broker.broker_jobs AS d
           SET pending_deps = d.pending_deps OPERATOR(pg_catalog.-) c.n
          FROM ROWS FROM (pg_catalog.unnest(p_job_ids), pg_catalog.unnest(p_amounts)) AS c(id, n)
         WHERE d.job_id OPERATOR(pg_catalog.=) c.id
           AND d.complete_status OPERATOR(pg_catalog.=) broker._state('pending')
        RETURNING d.job_queue, d.pending_deps, d.run_after
    )
    SELECT pg_catalog.array_agg(DISTINCT r.job_queue)
               FILTER (WHERE r.run_after OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp()),
           pg_catalog.count(*)::integer
      INTO v_queues, v_ready
      FROM released AS r
     WHERE r.pending_deps OPERATOR(pg_catalog.=) 0;
    IF v_queues IS NOT NULL THEN
        PERFORM broker._notify_queues(v_queues);
    END IF;
    RETURN v_ready;
END;
$$;
COMMENT ON FUNCTION broker._lower_pending_deps(bigint[], integer[]) IS
    'Internal: lower the pending_deps of pending jobs (locked in id order) and notify queues with newly ready jobs.';

-- ---------------------------------------------------------------------------
-- Function: broker._release_dependents_of(p_tenant_id, p_job_ids, p_groups)
--   Called when the jobs p_job_ids (of groups p_groups, element by element)
--   of one tenant completed: every pending job waiting on them, by id or by
--   group, has pending_deps lowered by the number of such edges, counted per
--   completed job (two members of a group release a dependent of the group
--   twice). The first 500 of them (by id) are released here; the others
--   are listed in broker_deferred_release, which the runner's maintenance
--   applies (broker_apply_deferred_releases). Returns the number of jobs that became
--   ready here. Index probes only (enable_seqscan off, see job_triggers.sql),
--   so its cached plans stay good as the tables grow.
--   The list is final when it is taken: a job that starts to wait on one of
--   these groups later does not count the completed jobs (the dependency
--   keys, held here, order the two), and a listed job stays pending until
--   its release is applied (its pending_deps includes it), unless cancelled.
--   Calls: _lock_dependency_keys, _lower_pending_deps
--   Tables: reads broker_job_dependency, broker_jobs; writes broker_deferred_release
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._release_dependents_of(p_tenant_id text, p_job_ids bigint[], p_groups text[])
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
DECLARE
    c_now    CONSTANT integer := 500;   -- released in the completing transaction
    v_ids    bigint[];
    v_counts integer[];
    v_n      integer;
BEGIN
    PERFORM broker._lock_dependency_keys(p_tenant_id, p_groups, NULL, p_job_ids, NULL);
    -- the common case: nothing ever waited on these jobs or their groups (index probes)
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.unnest(p_job_ids) AS d(id)
                    CROSS JOIN LATERAL (SELECT 1 FROM broker.broker_job_dependency AS e
                                         WHERE e.depends_on_job_id OPERATOR(pg_catalog.=) d.id LIMIT 1) AS x)
       AND NOT EXISTS (SELECT 1 FROM pg_catalog.unnest(p_groups) AS g(name)
                        CROSS JOIN LATERAL (SELECT 1 FROM broker.broker_job_dependency AS e
                                             WHERE e.tenant_id OPERATOR(pg_catalog.=) p_tenant_id
                                               AND e.depends_on_group OPERATOR(pg_catalog.=) g.name LIMIT 1) AS x) THEN
        RETURN 0;
    END IF;

    WITH edges AS (
        SELECT e.job_id
          FROM pg_catalog.unnest(p_job_ids) AS d(id)
          JOIN broker.broker_job_dependency AS e ON e.depends_on_job_id OPERATOR(pg_catalog.=) d.id
        UNION ALL
        SELECT e.job_id
          FROM pg_catalog.unnest(p_groups) AS g(name)
          JOIN broker.broker_job_dependency AS e
            ON e.tenant_id OPERATOR(pg_catalog.=) p_tenant_id AND e.depends_on_group OPERATOR(pg_catalog.=) g.name
    ), counted AS (
        SELECT x.job_id, pg_catalog.count(*)::integer AS n FROM edges AS x GROUP BY x.job_id
    )
    -- Running jobs are left out: one that waits on these jobs started when none
    -- of them was unfinished-and-counted for it (were it to fail, its retry
    -- counts again). Finished ones are skipped when the release is applied.
    -- (The running jobs come from the small lease index, not a probe per job.)
    SELECT pg_catalog.array_agg(c.job_id ORDER BY c.job_id), pg_catalog.array_agg(c.n ORDER BY c.job_id)
      INTO v_ids, v_counts
      FROM counted AS c
     WHERE c.job_id OPERATOR(pg_catalog.<>) ALL (ARRAY(
               SELECT r.job_id FROM broker.broker_jobs AS r WHERE r.complete_status OPERATOR(pg_catalog.=) broker._state('running')));
    v_n := COALESCE(pg_catalog.cardinality(v_ids), 0);
    IF v_n OPERATOR(pg_catalog.=) 0 THEN
        RETURN 0;
    END IF;
    IF v_n OPERATOR(pg_catalog.>) c_now THEN
        -- (the runner's maintenance applies them: broker_apply_deferred_releases)
        INSERT INTO broker.broker_deferred_release (tenant_id, job_ids, amounts)
        VALUES (p_tenant_id, v_ids[c_now OPERATOR(pg_catalog.+) 1:], v_counts[c_now OPERATOR(pg_catalog.+) 1:]);
    END IF;
    RETURN broker._lower_pending_deps(v_ids[1:c_now], v_counts[1:c_now]);
END;
$$;
COMMENT ON FUNCTION broker._release_dependents_of(text, bigint[], text[]) IS
    'Internal: jobs of a tenant completed; lower pending_deps of the pending jobs waiting on them (by id or group), the first 500 now and the rest through broker_deferred_release.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_apply_deferred_releases(p_max_jobs)
--   Applies deferred dependency releases (broker_deferred_release), at most
--   p_max_jobs listed jobs in all: the rows oldest first, at most 500 jobs of
--   each row per pass, each row in a subtransaction of its own. It never
--   waits on a lock: a row another session is applying is skipped (SKIP
--   LOCKED), and so is a row whose listed jobs some session holds locked
--   (NOWAIT; say their tenant locked its own pending jobs): it stays listed
--   for a later call, and the other rows are applied meanwhile. The runner's
--   maintenance calls it (claims never do release work), again while it
--   returns more than 0. Returns how many listed jobs it applied.
-- Errors: 22023 p_max_jobs < 1.
-- Example:
--   SELECT broker.broker_apply_deferred_releases();   -- the runner's maintenance, every second
--   Calls: _lower_pending_deps
--   Tables: reads broker_jobs; writes broker_deferred_release
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_apply_deferred_releases(p_max_jobs integer DEFAULT 5000)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c_row   CONSTANT integer := 500;   -- jobs of one row per pass
    v_left  integer := p_max_jobs;
    v_done  integer := 0;
    v_ids   bigint[] := '{}';          -- rows visited in this pass
    v_any   boolean;
    r       record;
    v_n     integer;
BEGIN
    IF p_max_jobs IS NULL OR p_max_jobs OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'broker_apply_deferred_releases: p_max_jobs must be >= 1, got %', COALESCE(p_max_jobs::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    LOOP
        v_any := false;
        v_ids := '{}';
        LOOP
            EXIT WHEN v_left OPERATOR(pg_catalog.<=) 0;
            SELECT b.release_id, b.job_ids, b.amounts INTO r
              FROM broker.broker_deferred_release AS b
             WHERE b.release_id OPERATOR(pg_catalog.<>) ALL (v_ids)
             ORDER BY b.release_id
             LIMIT 1
               FOR UPDATE SKIP LOCKED;
            EXIT WHEN NOT FOUND;
            v_ids := v_ids OPERATOR(pg_catalog.||) r.release_id;
            v_n := LEAST(c_row, v_left, pg_catalog.cardinality(r.job_ids));
            BEGIN
                -- never wait for a listed job another session holds locked
                PERFORM 1 FROM broker.broker_jobs AS d
                 WHERE d.job_id OPERATOR(pg_catalog.=) ANY (r.job_ids[1:v_n])
                   AND d.complete_status OPERATOR(pg_catalog.=) broker._state('pending')
                 ORDER BY d.job_id
                   FOR NO KEY UPDATE OF d NOWAIT;
                IF v_n OPERATOR(pg_catalog.=) pg_catalog.cardinality(r.job_ids) THEN
                    DELETE FROM broker.broker_deferred_release AS b WHERE b.release_id OPERATOR(pg_catalog.=) r.release_id;
                ELSE
                    UPDATE broker.broker_deferred_release AS b
                       SET job_ids = r.job_ids[v_n OPERATOR(pg_catalog.+) 1:], amounts = r.amounts[v_n OPERATOR(pg_catalog.+) 1:]
                     WHERE b.release_id OPERATOR(pg_catalog.=) r.release_id;
                END IF;
                PERFORM broker._lower_pending_deps(r.job_ids[1:v_n], r.amounts[1:v_n]);
                v_done := v_done OPERATOR(pg_catalog.+) v_n;
                v_left := v_left OPERATOR(pg_catalog.-) v_n;
                v_any := true;
            EXCEPTION WHEN lock_not_available THEN
                NULL;   -- left listed; the next call tries it again
            END;
        END LOOP;
        EXIT WHEN NOT v_any OR v_left OPERATOR(pg_catalog.<=) 0;
    END LOOP;
    RETURN v_done;
END;
$$;
COMMENT ON FUNCTION broker.broker_apply_deferred_releases(integer) IS
    'Applies up to p_max_jobs deferred dependency releases (oldest rows first, 500 per row per pass), never waiting on a lock; returns how many it applied. The runner''s maintenance calls it.';

-- ---------------------------------------------------------------------------
-- Function: broker._release_dependents(p_tenant_id, p_job_id, p_job_group)
--   _release_dependents_of for one completed job.
--   Calls: _release_dependents_of
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._release_dependents(p_tenant_id text, p_job_id bigint, p_job_group text)
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN broker._release_dependents_of(p_tenant_id, ARRAY[p_job_id], ARRAY[p_job_group]);
END;
$$;
COMMENT ON FUNCTION broker._release_dependents(text, bigint, text) IS
    'Internal: a job completed; lower pending_deps of the pending jobs waiting on it (by id or group) and notify queues with newly ready jobs.';
