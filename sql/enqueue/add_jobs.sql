-- sql/enqueue/add_jobs.sql: enqueueing many jobs in one call (broker_add_jobs).
-- ---------------------------------------------------------------------------
-- Function: broker._add_jobs(p_jobs, p_search_path, p_tenant_id)
--   The body of broker_add_jobs (see there); p_search_path is the caller's
--   search_path, the default of each job's search_path; p_tenant_id the
--   tenant of every job of the call (NULL: the transaction's). Set-based: a fixed
--   number of statements whatever the number of jobs, one INSERT of jobs and
--   one of edges (their statement-level triggers run once each), and one
--   NOTIFY per queue. SECURITY INVOKER like broker_add_job: the rows are
--   written with the caller's rights and checked by the row-level security
--   policies as the caller; the triggers do the bookkeeping.
--   Input order: the jobs are inserted in element order and their identity
--   ids increase in the order the INSERT takes its rows, so the k-th new job
--   without an idempotency key belongs to the k-th such element.
--   Calls: _set_tenant, broker_current_tenant, _tasks_as_jobs, _may_not_run_in_transaction, _tenant_allowed, _add_plain_jobs, _parse_jobs, _job_problem, _job_field_error, _check_run_as, _check_autonomous, _lock_dependency_keys, _executor, broker_create_executor, _notify_queues, _claimable, _due_time
--   Tables: reads broker_tenant_roles, broker_schedule; writes broker_jobs, broker_job_dependency
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._add_jobs(p_jobs jsonb, p_search_path text, p_tenant_id text)
RETURNS TABLE (ord integer, job_id bigint, is_new boolean)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c_keys  CONSTANT text[] := ARRAY['job_name', 'execute_str', 'job_queue', 'job_priority', 'job_language',
        'run_as', 'schedule_id', 'depends_on_job_ids', 'idempotency_key', 'max_attempts', 'job_group',
        'depends_on_groups', 'run_after', 'timeout', 'search_path', 'autonomous', 'concurrency_key'];
    c_types CONSTANT text[] := ARRAY['string', 'string', 'number', 'number', 'string', 'string', 'number', 'array',
        'string', 'number', 'string', 'array', 'string', 'string', 'string', 'boolean', 'string'];
    v_tenant text := broker.broker_current_tenant();
    v_bad    record;
    a_jobs   broker._job_fields[];  -- the elements (index = ord)
    a_todo   boolean[];             -- still to insert (index = ord)
    a_key    text[];                -- a_jobs' idempotency keys (index = ord), read often below
    a_edges  broker._job_edge[];    -- one per dependency, by ord
    v_err_ord integer; v_err text[];  -- the first element that breaks a field rule, and that rule
    a_done   broker._added_job[];   -- the elements resolved so far
    v_round  broker._added_job[];   -- resolved by this round of the insert
    v_ords   integer[];             -- the elements without a key this round inserts, in order
    v_new    bigint[];              -- the ids it made for them, in order
    v_keyed  broker._added_job[];   -- the jobs it made with a key (ord not known yet)
    v_deps   boolean;
    v_misshapen boolean;
    v_special   boolean;  -- an element uses a key the plain path does not take
    v_saved  text;
BEGIN
    IF p_tenant_id IS NOT NULL THEN  -- the named tenant, for this call only
        v_saved := pg_catalog.current_setting('broker.tenant_id', true);
        PERFORM broker._set_tenant('broker_add_jobs', p_tenant_id);
        RETURN QUERY SELECT a.ord, a.job_id, a.is_new FROM broker._add_jobs(p_jobs, p_search_path, NULL) AS a;
        PERFORM pg_catalog.set_config('broker.tenant_id', COALESCE(v_saved, ''), true);
        RETURN;
    END IF;
    IF p_jobs IS NULL THEN
        RAISE EXCEPTION 'broker_add_jobs: p_jobs must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF pg_catalog.jsonb_typeof(p_jobs) OPERATOR(pg_catalog.<>) 'array' THEN
        RAISE EXCEPTION 'broker_add_jobs: p_jobs must be a JSON array of job objects, got a JSON %',
            pg_catalog.jsonb_typeof(p_jobs)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'For example [{"job_name": "a", "execute_str": "SELECT 1"}].';
    END IF;
    -- tasks ({"task": name, "args": value}): the job fields broker_add_task gives them
    IF p_jobs OPERATOR(pg_catalog.@?) '$[*] ? (@.type() == "object" && exists(@.task))' THEN
        p_jobs := broker._tasks_as_jobs(p_jobs);
    END IF;

    ---- shape: objects, known keys, values of the right JSON type -------------
    -- A quick pass first (no row per key: about a quarter of the cost); only
    -- when it finds something does the query below say what and where.
    -- (a missing key: jsonb_typeof(NULL) is NULL, which is no hit). The same
    -- pass says whether any element uses a key the plain path cannot take.
    SELECT COALESCE(pg_catalog.bool_or(CASE WHEN pg_catalog.jsonb_typeof(e.v) OPERATOR(pg_catalog.<>) 'object' THEN true
                           ELSE (e.v OPERATOR(pg_catalog.-) c_keys) OPERATOR(pg_catalog.<>) '{}'::jsonb
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'job_name') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'string'])
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'execute_str') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'string'])
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'job_queue') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'number'])
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'job_priority') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'number'])
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'job_language') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'string'])
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'run_as') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'string'])
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'schedule_id') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'number'])
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'depends_on_job_ids') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'array'])
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'idempotency_key') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'string'])
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'max_attempts') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'number'])
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'job_group') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'string'])
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'depends_on_groups') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'array'])
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'run_after') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'string'])
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'timeout') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'string'])
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'search_path') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'string'])
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'autonomous') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'boolean'])
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'concurrency_key') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'string']) END), false),
           -- (autonomous jobs, and texts that may never run in a transaction, are checked on the general path)
           COALESCE(pg_catalog.bool_or(e.v OPERATOR(pg_catalog.?|) ARRAY['run_as', 'schedule_id', 'idempotency_key',
                                                                    'depends_on_job_ids', 'depends_on_groups', 'autonomous']
                                       OR broker._may_not_run_in_transaction(e.v OPERATOR(pg_catalog.->>) 'execute_str')), false)
      INTO v_misshapen, v_special
      FROM pg_catalog.jsonb_array_elements(p_jobs) AS e(v);
    IF v_misshapen THEN
        SELECT e.o, pg_catalog.jsonb_typeof(e.v) AS kind, k.key, pg_catalog.jsonb_typeof(k.value) AS got,
               c_types[pg_catalog.array_position(c_keys, k.key)] AS want
          INTO v_bad
          FROM pg_catalog.jsonb_array_elements(p_jobs) WITH ORDINALITY AS e(v, o)
          LEFT JOIN LATERAL pg_catalog.jsonb_each(CASE WHEN pg_catalog.jsonb_typeof(e.v) OPERATOR(pg_catalog.=) 'object'
                                                       THEN e.v END) AS k ON true
         WHERE pg_catalog.jsonb_typeof(e.v) OPERATOR(pg_catalog.<>) 'object'
            OR k.key OPERATOR(pg_catalog.<>) ALL (c_keys)
            OR pg_catalog.jsonb_typeof(k.value) OPERATOR(pg_catalog.<>) ALL
                   (ARRAY['null', c_types[pg_catalog.array_position(c_keys, k.key)]])
         ORDER BY e.o
         LIMIT 1;
        IF FOUND THEN
            IF v_bad.kind OPERATOR(pg_catalog.<>) 'object' THEN
                RAISE EXCEPTION 'broker_add_jobs: element % is a JSON %, not an object', v_bad.o, v_bad.kind
                    USING ERRCODE = 'invalid_parameter_value';
            ELSIF v_bad.want IS NULL THEN
                RAISE EXCEPTION 'broker_add_jobs: element %: unknown key %', v_bad.o, pg_catalog.quote_literal(v_bad.key)
                    USING ERRCODE = 'invalid_parameter_value',
                          HINT = 'The keys are broker_add_job''s parameter names without p_: '
                                 OPERATOR(pg_catalog.||) pg_catalog.array_to_string(c_keys, ', ')
                                 OPERATOR(pg_catalog.||) '; a task''s: task and args, and those that apply to it.';
            END IF;
            RAISE EXCEPTION 'broker_add_jobs: element %: % must be a JSON % or null, got a JSON %',
                v_bad.o, v_bad.key, v_bad.want, v_bad.got
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;

    ---- the common case: no element with run_as, a schedule, an idempotency key
    ---- or dependencies, from a caller allowed to act for its tenant ----------
    -- One INSERT straight from the elements (broker._add_plain_jobs). A value
    -- that does not convert there is left to the general path below, which
    -- names its element; nothing was written.
    IF NOT v_special AND broker._tenant_allowed(v_tenant, CURRENT_USER) THEN
        BEGIN
            RETURN QUERY SELECT a.ord, a.job_id, a.is_new FROM broker._add_plain_jobs(p_jobs, p_search_path) AS a;
            RETURN;
        EXCEPTION WHEN data_exception THEN
            IF pg_catalog.starts_with(SQLERRM, 'broker_add_jobs: ') THEN
                RAISE;  -- an element's problem, already named
            END IF;
        END;
    END IF;

    ---- parse and check the arguments of every element -----------------------
    BEGIN
        -- one sort; the aggregates take the rows in that order
        WITH p AS MATERIALIZED (SELECT * FROM broker._parse_jobs(p_jobs, p_search_path) AS x ORDER BY x.ord)
        SELECT pg_catalog.array_agg(p.job), pg_catalog.array_agg((p.job).idempotency_key),
               pg_catalog.min(p.ord) FILTER (WHERE p.problem IS NOT NULL),
               (SELECT pg_catalog.array_agg(e.edge ORDER BY (e.edge).ord, (e.edge).job_id, (e.edge).job_group)
                  FROM (SELECT ROW(q.ord, x, NULL)::broker._job_edge AS edge
                          FROM p AS q, pg_catalog.unnest((q.job).depends_on_job_ids) AS x
                        UNION ALL
                        SELECT ROW(q.ord, NULL, x)::broker._job_edge
                          FROM p AS q, pg_catalog.unnest((q.job).depends_on_groups) AS x) AS e)
          INTO a_jobs, a_key, v_err_ord, a_edges
          FROM p;
    EXCEPTION WHEN data_exception THEN
        -- a value that does not convert: find its element
        FOR i IN 1 .. pg_catalog.jsonb_array_length(p_jobs) LOOP
            BEGIN
                PERFORM 1 FROM broker._parse_jobs(pg_catalog.jsonb_build_array(p_jobs OPERATOR(pg_catalog.->) (i OPERATOR(pg_catalog.-) 1)), '');
            EXCEPTION WHEN data_exception THEN
                RAISE EXCEPTION 'broker_add_jobs: element %: %', i, SQLERRM USING ERRCODE = 'invalid_parameter_value';
            END;
        END LOOP;
        RAISE;
    END;
    IF a_jobs IS NULL THEN
        RETURN;  -- an empty array
    END IF;
    IF v_err_ord IS NOT NULL THEN
        v_err := broker._job_problem(a_jobs[v_err_ord]);
        PERFORM broker._job_field_error(pg_catalog.format('broker_add_jobs: element %s', v_err_ord), v_err[2], v_err);
    END IF;

    IF NOT broker._tenant_allowed(v_tenant, CURRENT_USER) THEN
        RAISE EXCEPTION 'broker_add_jobs: role % may not act for tenant %', pg_catalog.quote_ident(CURRENT_USER),
            pg_catalog.quote_literal(v_tenant)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Strict tenancy is on: broker_admin maps roles to tenants in broker.broker_tenant_roles.';
    END IF;

    ---- run_as: the enqueuer, or a role it is a member of (per distinct role) --
    PERFORM broker._check_run_as(pg_catalog.format('broker_add_jobs: element %s', u.o), u.r)
       FROM (SELECT pg_catalog.min(x.o) AS o, x.r
               FROM (SELECT u.run_as AS r, u.ordinality AS o FROM pg_catalog.unnest(a_jobs) WITH ORDINALITY AS u) AS x
              WHERE x.r IS NOT NULL
              GROUP BY x.r
              ORDER BY 1) AS u;
    -- what can never run in a transaction, and autonomous jobs' SQL and roles
    PERFORM broker._check_autonomous(pg_catalog.format('broker_add_jobs: element %s', u.ordinality), u.execute_str,
                                     pg_catalog.lower(pg_catalog.btrim(u.job_language)), COALESCE(u.run_as::name, CURRENT_USER),
                                     COALESCE(u.autonomous, false))
       FROM pg_catalog.unnest(a_jobs) WITH ORDINALITY AS u
      WHERE u.autonomous OR broker._may_not_run_in_transaction(u.execute_str)
      ORDER BY u.ordinality;

    SELECT u.ordinality AS o, u.schedule_id AS s INTO v_bad
      FROM pg_catalog.unnest(a_jobs) WITH ORDINALITY AS u
     WHERE u.schedule_id IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM broker.broker_schedule AS s
                        WHERE s.schedule_id OPERATOR(pg_catalog.=) u.schedule_id AND s.tenant_id OPERATOR(pg_catalog.=) v_tenant)
     ORDER BY u.ordinality LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'broker_add_jobs: element %: schedule % does not exist', v_bad.o, v_bad.s
            USING ERRCODE = 'foreign_key_violation';
    END IF;

    ---- idempotency: keys with an unfinished job return it; a key repeated in
    ---- the array makes one job (its first element), the others return it ----
    SELECT COALESCE(pg_catalog.array_agg(ROW(u.o, j.job_id, false, u.k)::broker._added_job), '{}')
      INTO a_done
      FROM pg_catalog.unnest(a_key) WITH ORDINALITY AS u(k, o)
      JOIN broker.broker_jobs AS j
        ON j.tenant_id OPERATOR(pg_catalog.=) v_tenant
       AND j.idempotency_key OPERATOR(pg_catalog.=) u.k
       AND j.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[0, 1]::smallint[]);
    a_todo := ARRAY(
        SELECT u.k IS NULL OR (u.first AND r.ord IS NULL)
          FROM (SELECT v.k, v.o, pg_catalog.row_number() OVER (PARTITION BY v.k ORDER BY v.o) OPERATOR(pg_catalog.=) 1 AS first
                  FROM pg_catalog.unnest(a_key) WITH ORDINALITY AS v(k, o)) AS u
          LEFT JOIN pg_catalog.unnest(a_done) AS r ON r.ord OPERATOR(pg_catalog.=) u.o
         ORDER BY u.o);

    ---- dependencies of the jobs to insert ------------------------------------
    SELECT g.ord AS o, u.name, g.job_group AS grp INTO v_bad
      FROM pg_catalog.unnest(a_edges) AS g
      JOIN (SELECT x.job_name AS name, x.job_group AS grp, x.ordinality AS o
              FROM pg_catalog.unnest(a_jobs) WITH ORDINALITY AS x) AS u ON u.o OPERATOR(pg_catalog.=) g.ord
     WHERE a_todo[g.ord] AND g.job_group OPERATOR(pg_catalog.=) COALESCE(u.grp, u.name)
     ORDER BY g.ord LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'broker_add_jobs: element %: job % cannot depend on its own group %', v_bad.o,
            pg_catalog.quote_literal(v_bad.name), pg_catalog.quote_literal(v_bad.grp)
            USING ERRCODE = 'check_violation';
    END IF;
    -- as the caller sees them (row-level security applies), like the edge trigger
    SELECT d.ord AS o, d.job_id AS id, t.complete_status INTO v_bad
      FROM pg_catalog.unnest(a_edges) AS d
      LEFT JOIN broker.broker_jobs AS t
        ON t.job_id OPERATOR(pg_catalog.=) d.job_id AND t.tenant_id OPERATOR(pg_catalog.=) v_tenant
     WHERE d.job_id IS NOT NULL AND a_todo[d.ord]
       AND (t.job_id IS NULL OR t.complete_status OPERATOR(pg_catalog.>=) broker._state('failed'))
     ORDER BY d.ord, d.job_id LIMIT 1;
    IF FOUND THEN
        IF v_bad.complete_status IS NULL THEN
            RAISE EXCEPTION 'broker_add_jobs: element %: dependency job % does not exist', v_bad.o, v_bad.id
                USING ERRCODE = 'foreign_key_violation';
        END IF;
        RAISE EXCEPTION 'broker_add_jobs: element %: dependency job % % and can never complete', v_bad.o, v_bad.id,
            CASE v_bad.complete_status WHEN 3 THEN 'failed' ELSE 'was cancelled' END
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Enqueue the dependency again and depend on the new job id.';
    END IF;
    v_deps := EXISTS (SELECT 1 FROM pg_catalog.unnest(a_edges) AS d WHERE a_todo[d.ord]);

    -- every dependency lock of the batch in one ordered call (the triggers take them again for free)
    PERFORM broker._lock_dependency_keys(v_tenant,
        ARRAY(SELECT DISTINCT COALESCE(u.job_group, u.job_name) FROM pg_catalog.unnest(a_jobs) WITH ORDINALITY AS u
               WHERE a_todo[u.ordinality]),
        ARRAY(SELECT DISTINCT g.job_group FROM pg_catalog.unnest(a_edges) AS g WHERE g.job_group IS NOT NULL AND a_todo[g.ord]),
        NULL,
        ARRAY(SELECT DISTINCT d.job_id FROM pg_catalog.unnest(a_edges) AS d WHERE d.job_id IS NOT NULL AND a_todo[d.ord]));

    -- the jobs run inside their run_as roles' executors: make sure they exist
    FOR v_bad IN
        SELECT DISTINCT COALESCE(u.run_as::name, CURRENT_USER) AS r FROM pg_catalog.unnest(a_jobs) WITH ORDINALITY AS u
         WHERE a_todo[u.ordinality]
    LOOP
        IF broker._executor(v_bad.r) IS NULL THEN
            PERFORM broker.broker_create_executor(v_bad.r);
        END IF;
    END LOOP;

    ---- insert ----------------------------------------------------------------
    IF v_deps THEN
        PERFORM pg_catalog.set_config('broker.defer_notify', 'on', true);
    END IF;
    WHILE true OPERATOR(pg_catalog.=) ANY (a_todo) LOOP
        WITH ins AS (
            INSERT INTO broker.broker_jobs AS j
                   (job_name, job_group, execute_str, job_language, job_queue, job_priority,
                    run_as, schedule_id, idempotency_key, max_attempts, run_after, job_timeout, job_search_path, autonomous,
                    concurrency_key)
            SELECT u.job_name, COALESCE(u.job_group, u.job_name), u.execute_str, pg_catalog.lower(pg_catalog.btrim(u.job_language)),
                   u.job_queue, u.job_priority, COALESCE(u.run_as::name, CURRENT_USER), u.schedule_id, u.idempotency_key,
                   u.max_attempts, COALESCE(u.run_after, pg_catalog.now()), u.timeout, COALESCE(u.search_path, ''),
                   COALESCE(u.autonomous, false), u.concurrency_key
              FROM pg_catalog.unnest(a_jobs) WITH ORDINALITY AS u
             WHERE a_todo[u.ordinality]
             ORDER BY u.ordinality
            ON CONFLICT (tenant_id, idempotency_key)
               WHERE idempotency_key IS NOT NULL AND complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[0, 1]::smallint[])
            DO NOTHING
            RETURNING j.job_id, j.idempotency_key
        )
        SELECT COALESCE(pg_catalog.array_agg(i.job_id ORDER BY i.job_id) FILTER (WHERE i.idempotency_key IS NULL), '{}'),
               pg_catalog.array_agg(ROW(NULL, i.job_id, true, i.idempotency_key)::broker._added_job)
                   FILTER (WHERE i.idempotency_key IS NOT NULL)
          INTO v_new, v_keyed
          FROM ins AS i;
        -- without a key: the k-th new id is the k-th such element
        v_ords := ARRAY(SELECT u.o FROM ROWS FROM (pg_catalog.unnest(a_key), pg_catalog.unnest(a_todo)) WITH ORDINALITY AS u(k, todo, o)
                         WHERE u.todo AND u.k IS NULL ORDER BY u.o);
        IF pg_catalog.cardinality(v_ords) OPERATOR(pg_catalog.<>) pg_catalog.cardinality(v_new) THEN
            RAISE EXCEPTION 'broker_add_jobs: inserted % jobs without a key for % elements', pg_catalog.cardinality(v_new),
                pg_catalog.cardinality(v_ords) USING ERRCODE = 'internal_error';
        END IF;
        a_done := a_done OPERATOR(pg_catalog.||) ARRAY(
            SELECT ROW(n.o, n.id, true, NULL)::broker._added_job
              FROM ROWS FROM (pg_catalog.unnest(v_ords), pg_catalog.unnest(v_new)) AS n(o, id) ORDER BY n.o);
        -- with a key: inserted, or held by a concurrent transaction (return its job); a key whose
        -- job finished in between is tried again
        v_round := ARRAY(
            SELECT ROW(u.o, COALESCE(n.job_id, x.job_id), n.job_id IS NOT NULL, u.k)::broker._added_job
              FROM ROWS FROM (pg_catalog.unnest(a_key), pg_catalog.unnest(a_todo)) WITH ORDINALITY AS u(k, todo, o)
              LEFT JOIN pg_catalog.unnest(v_keyed) AS n ON n.idempotency_key OPERATOR(pg_catalog.=) u.k
              LEFT JOIN broker.broker_jobs AS x
                ON n.job_id IS NULL AND x.tenant_id OPERATOR(pg_catalog.=) v_tenant AND x.idempotency_key OPERATOR(pg_catalog.=) u.k
               AND x.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[0, 1]::smallint[])
             WHERE u.todo AND u.k IS NOT NULL AND COALESCE(n.job_id, x.job_id) IS NOT NULL);
        a_done := a_done OPERATOR(pg_catalog.||) v_round;
        a_todo := ARRAY(SELECT u.todo AND u.k IS NOT NULL AND t.ord IS NULL
                          FROM ROWS FROM (pg_catalog.unnest(a_key), pg_catalog.unnest(a_todo)) WITH ORDINALITY AS u(k, todo, o)
                          LEFT JOIN pg_catalog.unnest(v_round) AS t ON t.ord OPERATOR(pg_catalog.=) u.o
                         ORDER BY u.o);
    END LOOP;

    IF v_deps THEN
        PERFORM pg_catalog.set_config('broker.defer_notify', '', true);
        -- one statement: validated per edge, then locked, cycle-checked and counted by the triggers
        INSERT INTO broker.broker_job_dependency (job_id, depends_on_job_id, depends_on_group)
        SELECT DISTINCT m.job_id, d.job_id, d.job_group
          FROM pg_catalog.unnest(a_done) AS m
          JOIN pg_catalog.unnest(a_edges) AS d ON d.ord OPERATOR(pg_catalog.=) m.ord
         WHERE m.is_new;
        -- wake runners for the new jobs that wait on nothing unfinished
        PERFORM broker._notify_queues(ARRAY(
            SELECT DISTINCT j.job_queue FROM broker.broker_jobs AS j
             WHERE j.job_id OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT m.job_id FROM pg_catalog.unnest(a_done) AS m))
               AND broker._claimable(j.complete_status, j.pending_deps, j.parked)
               AND j.run_after OPERATOR(pg_catalog.<=) broker._due_time()));
    END IF;

    RETURN QUERY
    SELECT u.o::integer, COALESCE(m.job_id, k.job_id), COALESCE(m.is_new, false)
      FROM pg_catalog.unnest(a_key) WITH ORDINALITY AS u(k, o)
      LEFT JOIN pg_catalog.unnest(a_done) AS m ON m.ord OPERATOR(pg_catalog.=) u.o
      LEFT JOIN (SELECT DISTINCT a.k, rm.job_id
                   FROM pg_catalog.unnest(a_done) AS rm
                   JOIN pg_catalog.unnest(a_key) WITH ORDINALITY AS a(k, o) ON a.o OPERATOR(pg_catalog.=) rm.ord
                  WHERE a.k IS NOT NULL) AS k
        ON m.ord IS NULL AND k.k OPERATOR(pg_catalog.=) u.k
     ORDER BY u.o;
END;
$$;
COMMENT ON FUNCTION broker._add_jobs(jsonb, text, text) IS
    'Internal: the body of broker_add_jobs, with the caller''s search_path as the jobs'' default.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_add_jobs(p_jobs, p_tenant_id)
--   Set-based bulk enqueue. p_jobs is a JSON array of objects whose keys are
--   broker_add_job's parameter names without the p_ prefix (job_name,
--   execute_str, job_queue, job_priority, job_language, run_as, schedule_id,
--   depends_on_job_ids, idempotency_key, max_attempts, job_group,
--   depends_on_groups, run_after, timeout, search_path, autonomous,
--   concurrency_key); a missing key takes broker_add_job's default
--   (search_path: the caller's). An element with the key task is a task
--   (broker_add_task): its name in task, its arguments in args (any JSON
--   value, default {}), and the keys that apply to a task
--   (broker._tasks_as_jobs). Returns one row per
--   element, in input order: (ord = 1-based position, job_id, is_new).
--   Same validation, idempotency, dependency, tenancy and row-level security
--   rules as broker_add_job, which the whole array passes or fails together:
--   * an idempotency key with an unfinished job returns that job
--     (is_new = false); a key repeated in the array makes one job, at its
--     first element, which the later ones return;
--   * group dependencies count every unfinished member, including the jobs of
--     the same array; cycles within the array or with existing jobs are 23514;
--   * one NOTIFY per queue that got a claimable job.
--   Written without SET search_path on purpose, so that the caller's
--   search_path is read here; everything is schema-qualified.
--   p_tenant_id names the tenant of every job of the call, for this call only
--   (as broker_add_job's); one call is one tenant, so an element has no
--   tenant key.
-- Errors: as broker_add_job, the message naming the element ("element 3:
--   ..."); 22004 p_jobs NULL; 22023 p_jobs not an array of objects, an unknown
--   key, a value of the wrong JSON type or one that does not convert.
-- Example:
--   SELECT * FROM broker.broker_add_jobs($$[
--       {"job_name": "extract", "execute_str": "CALL etl.extract()", "job_group": "extract"},
--       {"job_name": "load", "execute_str": "CALL etl.load()", "depends_on_groups": ["extract"]}
--   ]$$);
--   SELECT * FROM broker.broker_add_jobs($$[
--       {"task": "send_email", "args": {"to": "ada@example.com"}, "max_attempts": 5},
--       {"task": "send_email", "args": {"to": "bob@example.com"}, "max_attempts": 5}
--   ]$$);
--   Calls: _add_jobs
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_add_jobs(p_jobs jsonb, p_tenant_id text DEFAULT NULL)
RETURNS TABLE (ord integer, job_id bigint, is_new boolean)
LANGUAGE sql VOLATILE SECURITY INVOKER
AS $$
    SELECT a.ord, a.job_id, a.is_new
      FROM broker._add_jobs(p_jobs, pg_catalog.current_setting('search_path'), p_tenant_id) AS a
$$;
COMMENT ON FUNCTION broker.broker_add_jobs(jsonb, text) IS
    'Enqueues many jobs (and tasks: {"task": name, "args": value}) in one call from a JSON array of broker_add_job arguments (keys without p_); returns (ord, job_id, is_new) in input order.';
