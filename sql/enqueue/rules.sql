-- sql/enqueue/rules.sql: the rules a job's fields obey, for every enqueue path (one job, many, schedules).
-- ---------------------------------------------------------------------------
-- Type: broker._job_fields
--   A job as the enqueue functions take it: broker_add_job's parameters
--   without p_ (also the keys of broker_add_jobs' elements), before the
--   defaults that need the caller (run_as, job_group, run_after) are filled
--   in. broker._job_problem checks one; broker._add_jobs holds an array of
--   them, one per element. The table's CHECK constraints stay as the last
--   line of defence behind these rules.
-- ---------------------------------------------------------------------------
CREATE TYPE broker._job_fields AS (
    job_name           text,
    execute_str        text,
    job_queue          integer,
    job_priority       integer,
    job_language       text,
    run_as             text,
    schedule_id        bigint,
    depends_on_job_ids bigint[],
    idempotency_key    text,
    max_attempts       integer,
    job_group          text,
    depends_on_groups  text[],
    run_after          timestamptz,
    timeout            interval,
    search_path        text,
    autonomous         boolean,
    concurrency_key    text);
COMMENT ON TYPE broker._job_fields IS
    'Internal: a job''s fields as the enqueue functions take them (broker_add_job''s parameters without p_, broker_add_jobs'' keys).';

-- ---------------------------------------------------------------------------
-- Type: broker._job_edge
--   One dependency of an element of broker_add_jobs: the element (ord) and
--   the job id or the group it waits on (one of the two).
-- ---------------------------------------------------------------------------
CREATE TYPE broker._job_edge AS (
    ord       integer,
    job_id    bigint,
    job_group text);
COMMENT ON TYPE broker._job_edge IS
    'Internal: a dependency of an element of broker_add_jobs (its ord, and the job id or group it waits on).';

-- ---------------------------------------------------------------------------
-- Type: broker._added_job
--   What an element of broker_add_jobs resolved to: its job (is_new: made by
--   this call, else an unfinished job of its idempotency key), and the key.
-- ---------------------------------------------------------------------------
CREATE TYPE broker._added_job AS (
    ord             integer,
    job_id          bigint,
    is_new          boolean,
    idempotency_key text);
COMMENT ON TYPE broker._added_job IS
    'Internal: the job an element of broker_add_jobs resolved to (made now, or the unfinished job of its key).';

-- ---------------------------------------------------------------------------
-- Function: broker._blank_in(p_names)
--   Does p_names hold a NULL or a blank name? (A query, kept out of
--   _job_problem so that the planner can still inline that one.)
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._blank_in(p_names text[])
RETURNS boolean
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (SELECT 1 FROM pg_catalog.unnest(p_names) AS g WHERE g IS NULL OR pg_catalog.btrim(g) = '')
$$;
COMMENT ON FUNCTION broker._blank_in(text[]) IS
    'Internal: p_names holds a NULL or blank name (broker._job_problem).';

-- ---------------------------------------------------------------------------
-- Function: broker._job_problem(j)
--   The rules of a job's own fields, each once: the first one j breaks, as
--   ARRAY[sqlstate, field, what is wrong, hint or NULL] (field: the name in
--   broker._job_fields), else NULL. Raised by broker._job_field_error, which
--   puts the caller's name and the caller's name of the field in front.
--   What needs more than the fields (run_as rights: _check_run_as; the SQL
--   against how it runs: _check_autonomous; tenancy, schedule ids,
--   dependencies) is checked by the callers after this.
--   Without SET search_path on purpose, like broker._claimable: one SELECT
--   of one expression, so the planner inlines it into the calling statement
--   (broker_add_jobs checks a whole array in one query); every function and
--   operator is schema-qualified.
--   Calls: _blank_in
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._job_problem(j broker._job_fields)
RETURNS text[]
LANGUAGE sql STABLE
AS $$
    SELECT CASE
        WHEN j.job_name IS NULL THEN ARRAY['22004', 'job_name', 'must not be NULL', NULL]
        WHEN j.execute_str IS NULL THEN ARRAY['22004', 'execute_str', 'must not be NULL', NULL]
        WHEN j.job_queue IS NULL THEN ARRAY['22004', 'job_queue', 'must not be NULL', NULL]
        WHEN j.job_priority IS NULL THEN ARRAY['22004', 'job_priority', 'must not be NULL', NULL]
        WHEN j.job_language IS NULL THEN ARRAY['22004', 'job_language', 'must not be NULL', NULL]
        WHEN j.max_attempts IS NULL THEN ARRAY['22004', 'max_attempts', 'must not be NULL', NULL]
        WHEN pg_catalog.btrim(j.job_name) OPERATOR(pg_catalog.=) '' OR pg_catalog.length(j.job_name) OPERATOR(pg_catalog.>) 200
            THEN ARRAY['22023', 'job_name', 'must be 1 to 200 characters and not blank', NULL]
        WHEN pg_catalog.btrim(j.execute_str) OPERATOR(pg_catalog.=) ''
            THEN ARRAY['22023', 'execute_str', 'is empty; give the SQL the job should run', NULL]
        WHEN pg_catalog.lower(pg_catalog.btrim(j.job_language)) OPERATOR(pg_catalog.<>) ALL (ARRAY['sql', 'plpgsql', 'task'])
            THEN ARRAY['22023', 'job_language', pg_catalog.format('must be sql or plpgsql, got %L', j.job_language),
                       'Use ''sql'' or ''plpgsql''.']
        -- a task sits in its name's queue (negative: no runner serves it), which broker_add_task finds
        WHEN pg_catalog.lower(pg_catalog.btrim(j.job_language)) OPERATOR(pg_catalog.=) 'task'
             AND (j.job_queue OPERATOR(pg_catalog.>=) 0 OR COALESCE(j.autonomous, false))
            THEN ARRAY['22023', 'job_language', 'task: tasks are enqueued with broker_add_task', 'Call broker.broker_add_task(task, args, ...).']
        WHEN j.job_queue OPERATOR(pg_catalog.<) 1 AND pg_catalog.lower(pg_catalog.btrim(j.job_language)) OPERATOR(pg_catalog.<>) 'task'
            THEN ARRAY['22023', 'job_queue', pg_catalog.format('must be >= 1, got %s', j.job_queue), NULL]
        -- queues are 1..1000 (metric series, runner memory)
        WHEN j.job_queue OPERATOR(pg_catalog.>) 1000
            THEN ARRAY['22023', 'job_queue', pg_catalog.format('must be <= 1000, got %s', j.job_queue), NULL]
        WHEN j.max_attempts OPERATOR(pg_catalog.<) 1
            THEN ARRAY['22023', 'max_attempts', pg_catalog.format('must be >= 1, got %s', j.max_attempts), NULL]
        WHEN pg_catalog.btrim(COALESCE(j.job_group, j.job_name)) OPERATOR(pg_catalog.=) ''
             OR pg_catalog.length(COALESCE(j.job_group, j.job_name)) OPERATOR(pg_catalog.>) 200
            THEN ARRAY['22023', 'job_group', 'must be 1 to 200 characters and not blank', NULL]
        WHEN pg_catalog.btrim(j.idempotency_key) OPERATOR(pg_catalog.=) ''
            THEN ARRAY['22023', 'idempotency_key', 'must not be blank (NULL for none)', NULL]
        -- (the unique index holds ~2.7 kB)
        WHEN pg_catalog.length(j.idempotency_key) OPERATOR(pg_catalog.>) 512
            THEN ARRAY['22023', 'idempotency_key',
                       pg_catalog.format('must be at most 512 characters, got %s', pg_catalog.length(j.idempotency_key)), NULL]
        WHEN pg_catalog.starts_with(j.idempotency_key, 'broker_schedule:')
            THEN ARRAY['22023', 'idempotency_key', 'must not start with broker_schedule: (reserved for schedules)', NULL]
        WHEN pg_catalog.btrim(j.concurrency_key) OPERATOR(pg_catalog.=) ''
            THEN ARRAY['22023', 'concurrency_key', 'must not be blank (NULL for none)', NULL]
        WHEN pg_catalog.length(j.concurrency_key) OPERATOR(pg_catalog.>) 200
            THEN ARRAY['22023', 'concurrency_key',
                       pg_catalog.format('must be at most 200 characters, got %s', pg_catalog.length(j.concurrency_key)), NULL]
        WHEN j.timeout OPERATOR(pg_catalog.<=) interval '0'
            THEN ARRAY['22023', 'timeout', pg_catalog.format('must be positive, got %s', j.timeout), NULL]
        WHEN pg_catalog.array_ndims(j.depends_on_job_ids) OPERATOR(pg_catalog.>) 1
            THEN ARRAY['22023', 'depends_on_job_ids', 'must be a flat array of job ids', NULL]
        WHEN pg_catalog.array_position(j.depends_on_job_ids, NULL) IS NOT NULL
            THEN ARRAY['22004', 'depends_on_job_ids', 'must not contain NULL', NULL]
        WHEN pg_catalog.array_ndims(j.depends_on_groups) OPERATOR(pg_catalog.>) 1
            THEN ARRAY['22023', 'depends_on_groups', 'must be a flat array of group names', NULL]
        WHEN pg_catalog.cardinality(j.depends_on_groups) OPERATOR(pg_catalog.>) 100
            THEN ARRAY['22023', 'depends_on_groups',
                       pg_catalog.format('may name at most 100 groups, got %s', pg_catalog.cardinality(j.depends_on_groups)), NULL]
        WHEN j.depends_on_groups IS NOT NULL AND broker._blank_in(j.depends_on_groups)
            THEN ARRAY['22023', 'depends_on_groups', 'must not contain NULL or blank group names', NULL]
    END
$$;
COMMENT ON FUNCTION broker._job_problem(broker._job_fields) IS
    'Internal: the first rule of a job''s fields that j breaks, as ARRAY[sqlstate, field, message, hint], else NULL (every enqueue path).';

-- ---------------------------------------------------------------------------
-- Function: broker._job_field_error(p_fn, p_field, p_problem)
--   Raises p_problem (from broker._job_problem) as '<p_fn>: <p_field>
--   <message>' with its SQLSTATE and hint: p_fn is the calling function
--   (for broker_add_jobs with the element, 'broker_add_jobs: element 3'),
--   p_field the field as the caller names it (p_job_queue, job_queue).
--   Declared to return text so that a query can call it where a value is
--   expected; VOLATILE so that the planner never runs it ahead of the row.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._job_field_error(p_fn text, p_field text, p_problem text[])
RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_problem[4] IS NULL THEN
        RAISE EXCEPTION '%: % %', p_fn, p_field, p_problem[3] USING ERRCODE = p_problem[1];
    END IF;
    RAISE EXCEPTION '%: % %', p_fn, p_field, p_problem[3] USING ERRCODE = p_problem[1], HINT = p_problem[4];
END;
$$;
COMMENT ON FUNCTION broker._job_field_error(text, text, text[]) IS
    'Internal: raise a broken job field rule (broker._job_problem) as ''<function>: <field> <message>''.';
