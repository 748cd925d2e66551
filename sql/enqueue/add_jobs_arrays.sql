-- sql/enqueue/add_jobs_arrays.sql: enqueueing many plain jobs from arrays (broker_add_jobs_arrays).
-- ---------------------------------------------------------------------------
-- Function: broker._jobs_of_arrays(p_job_names, p_execute_strs, p_job_queues,
--     p_job_priorities, p_job_groups, p_max_attempts, p_run_afters,
--     p_timeouts, p_job_languages, p_concurrency_keys, p_search_path)
--   The jobs of broker_add_jobs_arrays' arrays, one row per element of
--   p_job_names (ord = its position): job, the k-th element of each array
--   as broker._job_fields, a NULL array taking broker_add_job's default
--   (a NULL element stays NULL); problem, the first rule of
--   broker._job_problem it breaks, else NULL.
--   SQL without SET search_path on purpose: the planner inlines it into the
--   caller's queries; every function and operator is schema-qualified.
--   Calls: _job_problem
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._jobs_of_arrays(p_job_names text[], p_execute_strs text[], p_job_queues integer[],
    p_job_priorities integer[], p_job_groups text[], p_max_attempts integer[], p_run_afters timestamptz[],
    p_timeouts interval[], p_job_languages text[], p_concurrency_keys text[], p_search_path text)
RETURNS TABLE (ord bigint, job broker._job_fields, problem text[])
LANGUAGE sql STABLE
AS $$
    -- (the row built once per element, below the OFFSET, however many fields the inlined rules read)
    SELECT s.o, s.r, broker._job_problem(s.r)
      FROM (SELECT u.o, ROW(u.name, u.sql, CASE WHEN p_job_queues IS NULL THEN 1 ELSE u.queue END,
                            CASE WHEN p_job_priorities IS NULL THEN 0 ELSE u.priority END,
                            CASE WHEN p_job_languages IS NULL THEN 'sql' ELSE u.lang END, NULL, NULL, NULL, NULL,
                            CASE WHEN p_max_attempts IS NULL THEN 1 ELSE u.attempts END, u.grp, NULL, u.run_after, u.timeout,
                            p_search_path, false, u.ckey)::broker._job_fields AS r
              FROM ROWS FROM (pg_catalog.unnest(p_job_names), pg_catalog.unnest(p_execute_strs),
                              pg_catalog.unnest(p_job_queues), pg_catalog.unnest(p_job_priorities),
                              pg_catalog.unnest(p_job_groups), pg_catalog.unnest(p_max_attempts),
                              pg_catalog.unnest(p_run_afters), pg_catalog.unnest(p_timeouts),
                              pg_catalog.unnest(p_job_languages), pg_catalog.unnest(p_concurrency_keys))
                   WITH ORDINALITY AS u(name, sql, queue, priority, grp, attempts, run_after, timeout, lang, ckey, o)
            OFFSET 0) AS s
$$;
COMMENT ON FUNCTION broker._jobs_of_arrays(text[], text[], integer[], integer[], text[], integer[], timestamptz[], interval[], text[], text[], text) IS
    'Internal: broker_add_jobs_arrays'' elements as broker._job_fields with broker_add_job''s defaults, and the first rule each breaks.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_add_jobs_arrays(p_job_names, p_execute_strs,
--     p_job_queues, p_job_priorities, p_job_groups, p_max_attempts,
--     p_run_afters, p_timeouts, p_job_languages, p_search_path, p_tenant_id,
--     p_concurrency_keys)
--   Bulk enqueue of jobs without run_as, schedule, idempotency key,
--   dependencies or autonomy, one array per field: job k has the k-th
--   element of each array. An array left NULL gives every job
--   broker_add_job's default for that field (queue 1, priority 0, group =
--   name, 1 attempt, now, no timeout, sql, no concurrency key); a NULL
--   element is a NULL field (refused where broker_add_job refuses NULL).
--   p_search_path (one for every job) defaults to the caller's. Returns one
--   row per job, in array order: (ord = 1-based position, job_id, is_new =
--   true).
--   What broker_add_jobs does for such elements, without JSON in between:
--   the same rules (broker._job_problem, the element named as in
--   broker_add_jobs: 'broker_add_jobs_arrays: element 3: job_queue ...'),
--   tenancy and row-level security, the refusal of texts that can never
--   run in a transaction, one INSERT in array order (its statement trigger
--   notifies each queue that got a claimable job once), all or nothing.
--   SECURITY INVOKER like broker_add_jobs.
-- Errors: as broker_add_jobs; 22004 p_job_names NULL; 22023 an array that
--   is not flat or not as long as p_job_names.
-- Example:
--   SELECT * FROM broker.broker_add_jobs_arrays(ARRAY['a', 'b'], ARRAY['CALL etl.a()', 'CALL etl.b()'],
--                                               p_job_queues => ARRAY[1, 2]);
--   SELECT * FROM broker.broker_add_jobs_arrays(ARRAY['sync 1', 'sync 2'], ARRAY['CALL crm.sync(1)', 'CALL crm.sync(2)'],
--                                               p_concurrency_keys => ARRAY['crm-api', 'crm-api']);
--   Calls: _set_tenant, broker_current_tenant, _transaction_keywords, _may_not_run_in_transaction, _tenant_allowed, _jobs_of_arrays, _job_field_error, _check_autonomous, _executor, broker_create_executor
--   Tables: reads broker_tenant_roles; writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_add_jobs_arrays(
    p_job_names      text[],
    p_execute_strs   text[],
    p_job_queues     integer[]     DEFAULT NULL,
    p_job_priorities integer[]     DEFAULT NULL,
    p_job_groups     text[]        DEFAULT NULL,
    p_max_attempts   integer[]     DEFAULT NULL,
    p_run_afters     timestamptz[] DEFAULT NULL,
    p_timeouts       interval[]    DEFAULT NULL,
    p_job_languages  text[]        DEFAULT NULL,
    p_search_path    text          DEFAULT pg_catalog.current_setting('search_path'),
    p_tenant_id      text          DEFAULT NULL,
    p_concurrency_keys text[]      DEFAULT NULL)
RETURNS TABLE (ord integer, job_id bigint, is_new boolean)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c_fn    CONSTANT text := 'broker_add_jobs_arrays';
    v_n     integer := pg_catalog.cardinality(p_job_names);
    v_saved text;
    v_bad   record;
    v_ids   bigint[];
BEGIN
    IF p_tenant_id IS NOT NULL THEN  -- the named tenant, for this call only
        v_saved := pg_catalog.current_setting('broker.tenant_id', true);
        PERFORM broker._set_tenant(c_fn, p_tenant_id);
        RETURN QUERY SELECT a.ord, a.job_id, a.is_new FROM broker.broker_add_jobs_arrays(p_job_names, p_execute_strs,
            p_job_queues, p_job_priorities, p_job_groups, p_max_attempts, p_run_afters, p_timeouts, p_job_languages,
            p_search_path, p_concurrency_keys => p_concurrency_keys) AS a;
        PERFORM pg_catalog.set_config('broker.tenant_id', COALESCE(v_saved, ''), true);
        RETURN;
    END IF;
    IF p_job_names IS NULL THEN
        RAISE EXCEPTION '%: p_job_names must not be NULL', c_fn USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT a.name, a.n INTO v_bad
      FROM (VALUES (1, 'p_job_names', pg_catalog.array_ndims(p_job_names), v_n),
                   (2, 'p_execute_strs', pg_catalog.array_ndims(p_execute_strs), pg_catalog.cardinality(p_execute_strs)),
                   (3, 'p_job_queues', pg_catalog.array_ndims(p_job_queues), pg_catalog.cardinality(p_job_queues)),
                   (4, 'p_job_priorities', pg_catalog.array_ndims(p_job_priorities), pg_catalog.cardinality(p_job_priorities)),
                   (5, 'p_job_groups', pg_catalog.array_ndims(p_job_groups), pg_catalog.cardinality(p_job_groups)),
                   (6, 'p_max_attempts', pg_catalog.array_ndims(p_max_attempts), pg_catalog.cardinality(p_max_attempts)),
                   (7, 'p_run_afters', pg_catalog.array_ndims(p_run_afters), pg_catalog.cardinality(p_run_afters)),
                   (8, 'p_timeouts', pg_catalog.array_ndims(p_timeouts), pg_catalog.cardinality(p_timeouts)),
                   (9, 'p_job_languages', pg_catalog.array_ndims(p_job_languages), pg_catalog.cardinality(p_job_languages)),
                   (10, 'p_concurrency_keys', pg_catalog.array_ndims(p_concurrency_keys), pg_catalog.cardinality(p_concurrency_keys)))
           AS a(k, name, dims, n)
     WHERE a.dims OPERATOR(pg_catalog.>) 1 OR a.n OPERATOR(pg_catalog.<>) v_n
     ORDER BY a.k LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION '%: % must be a flat array of % elements, one per job name (NULL: the default for every job), got %',
            c_fn, v_bad.name, v_n, v_bad.n
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_n OPERATOR(pg_catalog.=) 0 THEN
        RETURN;
    END IF;

    -- A caller not allowed to act for its tenant, or a text that may never run in a transaction: the
    -- fields' rules first, then these (broker_add_jobs' order); else the INSERT checks the rules as it goes.
    IF NOT broker._tenant_allowed(broker.broker_current_tenant(), CURRENT_USER)
       -- (the texts joined by spaces match the filter's word test whenever one of them does: one match for the
       -- batch, then one per text only when it matches)
       OR (pg_catalog.array_to_string(p_execute_strs, ' ') OPERATOR(pg_catalog.~*) broker._transaction_keywords()
           AND EXISTS (SELECT 1 FROM pg_catalog.unnest(p_execute_strs) AS s WHERE broker._may_not_run_in_transaction(s))) THEN
        SELECT x.ord AS o, x.problem INTO v_bad
          FROM broker._jobs_of_arrays(p_job_names, p_execute_strs, p_job_queues, p_job_priorities, p_job_groups,
                                      p_max_attempts, p_run_afters, p_timeouts, p_job_languages, p_concurrency_keys,
                                      p_search_path) AS x
         WHERE x.problem IS NOT NULL
         ORDER BY x.ord LIMIT 1;
        IF FOUND THEN
            PERFORM broker._job_field_error(pg_catalog.format('%s: element %s', c_fn, v_bad.o), v_bad.problem[2], v_bad.problem);
        END IF;
        IF NOT broker._tenant_allowed(broker.broker_current_tenant(), CURRENT_USER) THEN
            RAISE EXCEPTION '%: role % may not act for tenant %', c_fn, pg_catalog.quote_ident(CURRENT_USER),
                pg_catalog.quote_literal(broker.broker_current_tenant())
                USING ERRCODE = 'insufficient_privilege',
                      HINT = 'Strict tenancy is on: broker_admin maps roles to tenants in broker.broker_tenant_roles.';
        END IF;
        PERFORM broker._check_autonomous(pg_catalog.format('%s: element %s', c_fn, u.o), u.sql,
                                         pg_catalog.lower(pg_catalog.btrim(COALESCE(p_job_languages[u.o], 'sql'))), CURRENT_USER, false)
           FROM pg_catalog.unnest(p_execute_strs) WITH ORDINALITY AS u(sql, o)
          WHERE broker._may_not_run_in_transaction(u.sql)
          ORDER BY u.o;
    END IF;

    -- One INSERT in array order; an element that breaks a rule raises it when the INSERT reaches it.
    WITH ins AS (
        INSERT INTO broker.broker_jobs AS j
               (job_name, job_group, execute_str, job_language, job_queue, job_priority,
                run_as, max_attempts, run_after, job_timeout, job_search_path, concurrency_key)
        SELECT (x.job).job_name, COALESCE((x.job).job_group, (x.job).job_name), (x.job).execute_str,
               CASE WHEN x.problem IS NULL THEN pg_catalog.lower(pg_catalog.btrim((x.job).job_language))
                    ELSE broker._job_field_error(pg_catalog.format('%s: element %s', c_fn, x.ord), x.problem[2], x.problem) END,
               (x.job).job_queue, (x.job).job_priority, CURRENT_USER, (x.job).max_attempts,
               COALESCE((x.job).run_after, pg_catalog.now()), (x.job).timeout, COALESCE(p_search_path, ''),
               (x.job).concurrency_key
          FROM broker._jobs_of_arrays(p_job_names, p_execute_strs, p_job_queues, p_job_priorities, p_job_groups,
                                      p_max_attempts, p_run_afters, p_timeouts, p_job_languages, p_concurrency_keys,
                                      p_search_path) AS x
         ORDER BY x.ord
        RETURNING j.job_id
    )
    SELECT pg_catalog.array_agg(i.job_id ORDER BY i.job_id) INTO v_ids FROM ins AS i;
    -- the jobs run inside the caller's executor: make sure it exists
    IF broker._executor(CURRENT_USER) IS NULL THEN
        PERFORM broker.broker_create_executor(CURRENT_USER);
    END IF;
    -- identity ids increase in the order the INSERT took the rows: array order
    RETURN QUERY SELECT u.o::integer, u.id, true FROM pg_catalog.unnest(v_ids) WITH ORDINALITY AS u(id, o);
END;
$$;
COMMENT ON FUNCTION broker.broker_add_jobs_arrays(text[], text[], integer[], integer[], text[], integer[], timestamptz[], interval[], text[], text, text, text[]) IS
    'Enqueues many plain jobs (no run_as, schedule, idempotency key, dependencies) from one array per field, as broker_add_jobs would; returns (ord, job_id, is_new) in array order.';
