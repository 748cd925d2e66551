-- sql/dependencies/cycle.sql: the dependency cycle check.
-- ---------------------------------------------------------------------------
-- The check is linear in the size of the graph it looks at: it reads each
-- job and each group once, and each edge between them once, whatever the
-- number of paths (a fan-in over a fan-out has as many paths as the product
-- of their widths). A cycle closed by new edges passes through a job that
-- got them and that something waits on (an origin); every job on it waits,
-- transitively, on that origin. So the jobs that wait on the origins, with
-- the origins, hold every such cycle: the walk collects them (up, from the
-- targets to their waiters: the jobs a batch enqueues have few or no
-- waiters, however long the chain below them), then a topological sort of
-- the graph between them finds whether one is left.
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- Function: broker._dependency_waiters(p_origins, p_max_reach)
--   For _dependency_cycle: the pending jobs p_origins, then every pending job
--   that waits on one of them, transitively, by id or by group (only pending
--   jobs wait), one row per job (job_id, tenant_id, its job_group) and one
--   per group of such a job (job_id NULL, tenant_id, job_group), each once:
--   a group is a node of its own, so its waiters are read once however many
--   of its members are reached. The origins come first. At most
--   2 * p_max_reach + 1 rows: past it, more than p_max_reach jobs were
--   reached (a group row follows one of its members). The walk follows
--   index probes only (the edges on a job id, or on a group with the
--   group's tenant, then the waiter by primary key), so it reads only the
--   tenant's own jobs and edges, whatever other tenants have (nested loops
--   only: a hash join would read every tenant's edges).
--   Calls: none
--   Tables: reads broker_jobs, broker_job_dependency
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._dependency_waiters(p_origins bigint[], p_max_reach integer)
RETURNS TABLE (job_id bigint, tenant_id text, job_group text)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $$
    WITH RECURSIVE walk (job_id, tenant_id, job_group) AS (
        SELECT o.job_id, o.tenant_id, o.job_group
          FROM broker.broker_jobs AS o
         WHERE o.job_id OPERATOR(pg_catalog.=) ANY (p_origins)
           AND o.complete_status OPERATOR(pg_catalog.=) broker._state('pending')
        UNION
        SELECT n.job_id, n.tenant_id, n.job_group
          FROM walk AS r
         CROSS JOIN LATERAL (
               -- the job's group
               SELECT NULL::bigint AS job_id, r.tenant_id, r.job_group
                WHERE r.job_id IS NOT NULL
               UNION ALL
               -- the pending jobs waiting on the job by id
               SELECT w.job_id, w.tenant_id, w.job_group
                 FROM broker.broker_job_dependency AS e
                 JOIN broker.broker_jobs AS w ON w.job_id OPERATOR(pg_catalog.=) e.job_id
                WHERE r.job_id IS NOT NULL
                  AND e.depends_on_job_id IS NOT NULL
                  AND e.depends_on_job_id OPERATOR(pg_catalog.=) r.job_id
                  AND w.complete_status OPERATOR(pg_catalog.=) broker._state('pending')
               UNION ALL
               -- the pending jobs waiting on the group
               SELECT w.job_id, w.tenant_id, w.job_group
                 FROM broker.broker_job_dependency AS e
                 JOIN broker.broker_jobs AS w ON w.job_id OPERATOR(pg_catalog.=) e.job_id
                WHERE r.job_id IS NULL
                  AND e.tenant_id OPERATOR(pg_catalog.=) r.tenant_id
                  AND e.depends_on_group IS NOT NULL
                  AND e.depends_on_group OPERATOR(pg_catalog.=) r.job_group
                  AND w.complete_status OPERATOR(pg_catalog.=) broker._state('pending')) AS n
    )
    -- (the recursion runs only as far as this LIMIT reads)
    SELECT w.job_id, w.tenant_id, w.job_group
      FROM walk AS w
     LIMIT 2 OPERATOR(pg_catalog.*) p_max_reach::bigint OPERATOR(pg_catalog.+) 1
$$;
COMMENT ON FUNCTION broker._dependency_waiters(bigint[], integer) IS
    'Internal: the given pending jobs, every pending job waiting on them transitively (by id or group), and their groups, each once; at most 2 * p_max_reach + 1 rows.';

-- ---------------------------------------------------------------------------
-- Function: broker._dependency_node_key(p_tenant_id, p_group)
--   For _dependency_cycle: the text key of group p_group of tenant p_tenant_id
--   as a node of the graph it sorts: 'g', the tenant's length, ':', the
--   tenant, then the group (unambiguous whatever the names hold; a job's key
--   is 'j' and its id).
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._dependency_node_key(p_tenant_id text, p_group text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    -- (SQL without SET search_path on purpose: the planner inlines it; everything is schema-qualified)
    SELECT 'g' OPERATOR(pg_catalog.||) pg_catalog.length(p_tenant_id)::pg_catalog.text OPERATOR(pg_catalog.||) ':'
           OPERATOR(pg_catalog.||) p_tenant_id OPERATOR(pg_catalog.||) p_group
$$;
COMMENT ON FUNCTION broker._dependency_node_key(text, text) IS
    'Internal: the node key of a tenant''s group in the cycle check''s graph.';

-- ---------------------------------------------------------------------------
-- Function: broker._dependency_cycle(p_origins, p_max_reach, p_max_edges)
--   For _dependency_after_insert: a pending job that waits, through pending
--   jobs, on one of the jobs p_origins again, by id or by its group, with
--   the origin it leads back to; no row when none does.
--   * the jobs waiting on the origins (broker._dependency_waiters); more
--     than p_max_reach (100,000 unless told) distinct jobs: 54000;
--   * the edges between them (index probes on job_id from each job); more
--     than p_max_edges (1,000,000 unless told): 54001;
--   * a topological sort (Kahn's: jobs and groups that wait on nothing left
--     are taken off, their waiters' counts go down), in arrays, linear in
--     jobs and edges; what is left holds a cycle, which a walk along the
--     edges left finds, then the origin on it and the job before it.
--   Bounded: at most 2 * p_max_reach + 1 nodes and p_max_edges edges.
-- Errors: 54000 more than p_max_reach jobs wait on the origins; 54001 more
--   than p_max_edges edges between them.
--   Calls: _dependency_waiters, _dependency_node_key
--   Tables: reads broker_jobs, broker_job_dependency
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._dependency_cycle(p_origins bigint[], p_max_reach integer DEFAULT 100000,
                                         p_max_edges integer DEFAULT 1000000)
RETURNS TABLE (job_id bigint, job_name text, origin_id bigint, origin_name text, origin_group text)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    v_job    bigint[];   -- node i: a job (its id), or a group (NULL)
    v_tenant text[];
    v_group  text[];
    v_n      integer;    -- nodes
    v_jobs   integer;    -- of which jobs
    v_seeds  integer;    -- of which origins (the first ones)
    v_src    integer[];  -- edge k: node v_src[k] waits on node v_dst[k], sorted by v_dst
    v_dst    integer[];
    v_first  integer[];  -- the edges into node i are v_first[i] .. v_first[i + 1] - 1
    v_left   integer[];  -- per node: how many of its edges lead to nodes not yet taken off
    v_queue  integer[];  -- the nodes taken off, in order
    v_head   integer := 1;
    v_tail   integer;
    v_x      integer;
    v_p      integer;
    v_next   integer[];  -- on a cycle's search: one edge per node left
    v_step   integer[];
    v_cycle  integer[];
    v_origin integer;
    v_waiter integer;
BEGIN
    SELECT pg_catalog.array_agg(w.job_id ORDER BY w.o), pg_catalog.array_agg(w.tenant_id ORDER BY w.o),
           pg_catalog.array_agg(w.job_group ORDER BY w.o), pg_catalog.count(*),
           pg_catalog.count(w.job_id)
      INTO v_job, v_tenant, v_group, v_n, v_jobs
      FROM broker._dependency_waiters(p_origins, p_max_reach) WITH ORDINALITY AS w(job_id, tenant_id, job_group, o);
    IF v_jobs OPERATOR(pg_catalog.>) p_max_reach THEN
        RAISE EXCEPTION 'dependency cycle check: more than % pending jobs wait, directly or through others, on the job(s) getting new dependencies (job %)',
            p_max_reach, p_origins[1]
            USING ERRCODE = 'program_limit_exceeded',
                  HINT = 'Split the work into smaller dependency graphs, or let part of the jobs waiting on these finish first.';
    END IF;
    IF v_n OPERATOR(pg_catalog.=) 0 THEN
        RETURN;
    END IF;
    v_seeds := (SELECT pg_catalog.count(*) FROM pg_catalog.unnest(v_job) WITH ORDINALITY AS u(id, o)
                 WHERE u.id OPERATOR(pg_catalog.=) ANY (p_origins));

    -- The edges between the nodes: a job waits on a job (id) or on a group; a group waits on
    -- its members. Each job's edges by index (on job_id); the nodes are matched by one text key
    -- ('j' and the id, or 'g', the tenant's length, the tenant and the group), in one hash join.
    WITH n AS MATERIALIZED (
        SELECT u.o::integer AS i, u.id,
               CASE WHEN u.id IS NOT NULL THEN 'j' OPERATOR(pg_catalog.||) u.id::text
                    ELSE broker._dependency_node_key(u.tenant_id, u.grp) END AS key,
               CASE WHEN u.id IS NOT NULL THEN broker._dependency_node_key(u.tenant_id, u.grp) END AS group_key
          FROM ROWS FROM (pg_catalog.unnest(v_job), pg_catalog.unnest(v_tenant), pg_catalog.unnest(v_group))
               WITH ORDINALITY AS u(id, tenant_id, grp, o)
    ), e AS (
        SELECT w.i AS src, t.i AS dst
          FROM n AS w
         CROSS JOIN LATERAL (
               SELECT CASE WHEN d.depends_on_job_id IS NOT NULL THEN 'j' OPERATOR(pg_catalog.||) d.depends_on_job_id::text
                           ELSE broker._dependency_node_key(d.tenant_id, d.depends_on_group) END AS key
                 FROM broker.broker_job_dependency AS d
                WHERE d.job_id OPERATOR(pg_catalog.=) w.id
               -- (OFFSET 0 keeps this a probe per job: pulled up into a join, it could be planned
               -- as one pass over every edge's index entry, a merge or hash join, when the
               -- statistics say the table is small, whatever it holds now)
               OFFSET 0) AS d
          JOIN n AS t ON t.key OPERATOR(pg_catalog.=) d.key
         WHERE w.id IS NOT NULL
        UNION ALL
        SELECT g.i, m.i
          FROM n AS g
          JOIN n AS m ON m.group_key OPERATOR(pg_catalog.=) g.key
         WHERE g.id IS NULL
    )
    SELECT pg_catalog.array_agg(l.src ORDER BY l.dst, l.src), pg_catalog.array_agg(l.dst ORDER BY l.dst, l.src)
      INTO v_src, v_dst
      FROM (SELECT * FROM e LIMIT p_max_edges::bigint OPERATOR(pg_catalog.+) 1) AS l;
    IF COALESCE(pg_catalog.cardinality(v_src), 0) OPERATOR(pg_catalog.>) p_max_edges THEN
        RAISE EXCEPTION 'dependency cycle check: more than % dependency edges between the jobs waiting on the job(s) getting new dependencies (job %)',
            p_max_edges, p_origins[1]
            USING ERRCODE = 'statement_too_complex',
                  HINT = 'Wait on groups rather than on many job ids, or split the work into smaller dependency graphs.';
    END IF;
    IF v_src IS NULL THEN
        RETURN;  -- no edge, no cycle
    END IF;

    -- per node: where its incoming edges start, and how many edges it has
    SELECT pg_catalog.array_agg(f.first ORDER BY f.i), pg_catalog.array_agg(f.outs ORDER BY f.i)
      INTO v_first, v_left
      FROM (SELECT g.i, COALESCE(c.outs, 0)::integer AS outs,
                   (1 OPERATOR(pg_catalog.+) COALESCE(pg_catalog.sum(c.ins) OVER (ORDER BY g.i ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0))::integer AS first
              FROM pg_catalog.generate_series(1, v_n OPERATOR(pg_catalog.+) 1) AS g(i)
              LEFT JOIN (SELECT x.i, pg_catalog.sum(x.ins) AS ins, pg_catalog.sum(x.outs) AS outs
                           FROM (SELECT d AS i, 1 AS ins, 0 AS outs FROM pg_catalog.unnest(v_dst) AS d
                                 UNION ALL
                                 SELECT s, 0, 1 FROM pg_catalog.unnest(v_src) AS s) AS x
                          GROUP BY x.i) AS c ON c.i OPERATOR(pg_catalog.=) g.i) AS f;

    -- Kahn's sort: take off what waits on nothing left
    v_queue := ARRAY(SELECT g.i FROM pg_catalog.generate_series(1, v_n) AS g(i)
                      WHERE v_left[g.i] OPERATOR(pg_catalog.=) 0 ORDER BY g.i);
    v_tail := pg_catalog.cardinality(v_queue);
    WHILE v_head OPERATOR(pg_catalog.<=) v_tail LOOP
        v_x := v_queue[v_head];
        v_head := v_head OPERATOR(pg_catalog.+) 1;
        FOR k IN v_first[v_x] .. v_first[v_x OPERATOR(pg_catalog.+) 1] OPERATOR(pg_catalog.-) 1 LOOP
            v_p := v_src[k];
            v_left[v_p] := v_left[v_p] OPERATOR(pg_catalog.-) 1;
            IF v_left[v_p] OPERATOR(pg_catalog.=) 0 THEN
                v_tail := v_tail OPERATOR(pg_catalog.+) 1;
                v_queue[v_tail] := v_p;
            END IF;
        END LOOP;
    END LOOP;
    IF v_tail OPERATOR(pg_catalog.=) v_n THEN
        RETURN;  -- everything taken off: no cycle
    END IF;

    -- A node left waits on a node left: follow such edges until one comes round again.
    v_next := ARRAY(SELECT COALESCE(x.dst, 0) FROM pg_catalog.generate_series(1, v_n) AS g(i)
                      LEFT JOIN (SELECT u.s, pg_catalog.min(u.d) AS dst
                                   FROM ROWS FROM (pg_catalog.unnest(v_src), pg_catalog.unnest(v_dst)) AS u(s, d)
                                  WHERE v_left[u.s] OPERATOR(pg_catalog.>) 0 AND v_left[u.d] OPERATOR(pg_catalog.>) 0
                                  GROUP BY u.s) AS x ON x.s OPERATOR(pg_catalog.=) g.i
                     ORDER BY g.i);
    v_step := pg_catalog.array_fill(0, ARRAY[v_n]);
    v_x := (SELECT pg_catalog.min(g.i) FROM pg_catalog.generate_series(1, v_n) AS g(i)
             WHERE v_left[g.i] OPERATOR(pg_catalog.>) 0);
    v_p := 0;
    WHILE v_step[v_x] OPERATOR(pg_catalog.=) 0 LOOP
        v_p := v_p OPERATOR(pg_catalog.+) 1;
        v_step[v_x] := v_p;
        v_x := v_next[v_x];
    END LOOP;
    -- the cycle from v_x round to it; every cycle passes through an origin (the graph had none before)
    v_cycle := ARRAY[v_x];
    v_p := v_next[v_x];
    WHILE v_p OPERATOR(pg_catalog.<>) v_x LOOP
        v_cycle := v_cycle OPERATOR(pg_catalog.||) v_p;
        v_p := v_next[v_p];
    END LOOP;
    SELECT c.o INTO v_p FROM pg_catalog.unnest(v_cycle) WITH ORDINALITY AS c(i, o)
     WHERE c.i OPERATOR(pg_catalog.<=) v_seeds ORDER BY c.o LIMIT 1;
    IF v_p IS NULL THEN
        v_p := 1;  -- (not expected; name the cycle from any of its jobs)
        WHILE v_job[v_cycle[v_p]] IS NULL LOOP
            v_p := v_p OPERATOR(pg_catalog.+) 1;
        END LOOP;
    END IF;
    v_origin := v_cycle[v_p];
    -- the job before it on the cycle (before its group, when the cycle enters through the group)
    v_p := ((v_p OPERATOR(pg_catalog.-) 2 OPERATOR(pg_catalog.+) pg_catalog.cardinality(v_cycle))
            OPERATOR(pg_catalog.%) pg_catalog.cardinality(v_cycle)) OPERATOR(pg_catalog.+) 1;
    v_waiter := v_cycle[v_p];
    IF v_job[v_waiter] IS NULL THEN
        v_p := ((v_p OPERATOR(pg_catalog.-) 2 OPERATOR(pg_catalog.+) pg_catalog.cardinality(v_cycle))
                OPERATOR(pg_catalog.%) pg_catalog.cardinality(v_cycle)) OPERATOR(pg_catalog.+) 1;
        v_waiter := v_cycle[v_p];
    END IF;
    RETURN QUERY
    SELECT w.job_id, w.job_name, o.job_id, o.job_name, o.job_group
      FROM broker.broker_jobs AS w, broker.broker_jobs AS o
     WHERE w.job_id OPERATOR(pg_catalog.=) v_job[v_waiter]
       AND o.job_id OPERATOR(pg_catalog.=) v_job[v_origin];
END;
$$;
COMMENT ON FUNCTION broker._dependency_cycle(bigint[], integer, integer) IS
    'Internal: a pending job that waits, transitively through pending jobs, on one of the given jobs (or their groups) again, with that job; 54000 past p_max_reach jobs, 54001 past p_max_edges edges.';
