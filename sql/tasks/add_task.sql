-- sql/tasks/add_task.sql: enqueueing a task, a job run by application code (broker_add_task).
-- ---------------------------------------------------------------------------
-- Function: broker.broker_add_task(p_task, p_args, p_priority,
--     p_depends_on_job_ids, p_idempotency_key, p_max_attempts, p_job_group,
--     p_depends_on_groups, p_run_after, p_timeout, p_tenant_id,
--     p_concurrency_key)
--   Enqueues task p_task with arguments p_args (any JSON value) for the
--   caller's tenant and returns (job_id, is_new). A task is a row of
--   broker_jobs (job_language 'task', job_name the task name, execute_str
--   its arguments) under every rule of a job: dependencies by id and group
--   both ways with SQL jobs, idempotency keys, retries with backoff,
--   priorities, delays, timeouts, cancel, retry, tenancy, fair share and the
--   limits of its concurrency key. No runner runs it: a worker claims it by
--   name (broker_claim_tasks) and ends it (broker_complete_task,
--   broker_fail_task). Its queue is its name's (broker_task_queue), so a
--   name's backlog never slows the claims of another; priority orders a
--   tenant's tasks of one name. The other parameters are broker_add_job's,
--   with its defaults and errors. SECURITY INVOKER, as broker_add_job: the
--   row is written with the caller's rights, under the policies.
-- Errors: 22004 NULL task or arguments; 22023 a task name blank or over 200
--   characters; those of broker_add_job.
-- Example:
--   SELECT * FROM broker.broker_add_task('send_email', '{"to": "ada@example.com"}',
--                                     p_max_attempts => 5, p_depends_on_job_ids => ARRAY[41]);
--   Calls: _call_tenant, _task_queue, broker_add_job, _end_call_tenant
--   Tables: writes broker_jobs (through broker_add_job), broker_task_queue and broker_task_name_tenant
--     (through _task_queue)
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_add_task(
    p_task               text,
    p_args               jsonb       DEFAULT '{}',
    p_priority           integer     DEFAULT 0,
    p_depends_on_job_ids bigint[]    DEFAULT NULL,
    p_idempotency_key    text        DEFAULT NULL,
    p_max_attempts       integer     DEFAULT 1,
    p_job_group          text        DEFAULT NULL,
    p_depends_on_groups  text[]      DEFAULT NULL,
    p_run_after          timestamptz DEFAULT NULL,
    p_timeout            interval    DEFAULT NULL,
    p_tenant_id          text        DEFAULT NULL,
    p_concurrency_key    text        DEFAULT NULL)
RETURNS TABLE (job_id bigint, is_new boolean)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- (the tenant the call names first: the name is recorded as that tenant's, _task_queue)
    v_saved text := broker._call_tenant('broker_add_task', p_tenant_id);
    v_queue integer := broker._task_queue('broker_add_task', p_task, true);
BEGIN
    IF p_args IS NULL THEN
        RAISE EXCEPTION 'broker_add_task: p_args must not be NULL' USING ERRCODE = 'null_value_not_allowed',
            HINT = 'Give ''{}'' for a task without arguments.';
    END IF;
    RETURN QUERY
    SELECT a.job_id, a.is_new
      FROM broker.broker_add_job(p_task, p_args::text, v_queue, p_priority, 'task',
                                 p_depends_on_job_ids => p_depends_on_job_ids,
                                 p_idempotency_key => p_idempotency_key,
                                 p_max_attempts => p_max_attempts,
                                 p_job_group => p_job_group,
                                 p_depends_on_groups => p_depends_on_groups,
                                 p_run_after => p_run_after,
                                 p_timeout => p_timeout,
                                 p_search_path => '',
                                 p_tenant_id => p_tenant_id,
                                 p_concurrency_key => p_concurrency_key) AS a;
    PERFORM broker._end_call_tenant(p_tenant_id, v_saved);
END;
$$;
COMMENT ON FUNCTION broker.broker_add_task(text, jsonb, integer, bigint[], text, integer, text, text[], timestamptz, interval, text, text) IS
    'Enqueues a task (a job run by application code, claimed by name with broker_claim_tasks) with JSON arguments and broker_add_job''s options; returns (job_id, is_new).';

-- ---------------------------------------------------------------------------
-- Function: broker._tasks_as_jobs(p_jobs)
--   For broker_add_jobs: p_jobs (a JSON array) with every task element, an
--   object with the key task (its name) and args (its arguments, any JSON
--   value, default {}), written as the job fields broker_add_task gives a
--   task: job_name the name, execute_str the arguments, job_language task,
--   job_queue the name's queue (made on its first enqueue). Its other keys
--   (priority, dependencies, idempotency key, ...) are broker_add_jobs' own.
--   The other elements are returned as they are, in their order.
-- Errors: 22023 a task element whose task is not a JSON string, or that
--   names job_name, execute_str, job_language, job_queue, run_as,
--   search_path or autonomous (a task has no SQL and no executor); 22004 /
--   22023 a NULL, blank or over-long name (_check_task_name), each naming
--   the element.
--   Calls: _check_task_name, _task_queue
--   Tables: reads and writes broker_task_queue, broker_task_name_tenant (through _task_queue)
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._tasks_as_jobs(p_jobs jsonb)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c_not_for_tasks CONSTANT text[] := ARRAY['job_name', 'execute_str', 'job_language', 'job_queue', 'run_as',
                                             'search_path', 'autonomous'];
    r       record;
    v_name  text;
    v_queue integer;
    a_names  text[] := '{}';     -- the names met so far ...
    a_queues integer[] := '{}';  -- ... and their queues (a batch names a few, each looked up once)
    a_out   jsonb[] := '{}';
BEGIN
    FOR r IN SELECT e.v, e.o FROM pg_catalog.jsonb_array_elements(p_jobs) WITH ORDINALITY AS e(v, o) ORDER BY e.o LOOP
        IF pg_catalog.jsonb_typeof(r.v) OPERATOR(pg_catalog.<>) 'object' OR NOT r.v OPERATOR(pg_catalog.?) 'task' THEN
            a_out := a_out OPERATOR(pg_catalog.||) r.v;
            CONTINUE;
        END IF;
        IF pg_catalog.jsonb_typeof(r.v OPERATOR(pg_catalog.->) 'task') OPERATOR(pg_catalog.<>) 'string' THEN
            RAISE EXCEPTION 'broker_add_jobs: element %: task must be a JSON string (the task name), got a JSON %',
                r.o, pg_catalog.jsonb_typeof(r.v OPERATOR(pg_catalog.->) 'task') USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF r.v OPERATOR(pg_catalog.?|) c_not_for_tasks THEN
            RAISE EXCEPTION 'broker_add_jobs: element %: a task (key task) takes no %', r.o,
                pg_catalog.array_to_string(ARRAY(SELECT k FROM pg_catalog.unnest(c_not_for_tasks) AS k
                                                  WHERE r.v OPERATOR(pg_catalog.?) k), ', ')
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Its name is task and its arguments args; it has no SQL, queue number or executor.';
        END IF;
        v_name := r.v OPERATOR(pg_catalog.->>) 'task';
        PERFORM broker._check_task_name('broker_add_jobs', pg_catalog.format('element %s: task', r.o), v_name);
        v_queue := a_queues[pg_catalog.array_position(a_names, v_name)];
        IF v_queue IS NULL THEN
            v_queue := broker._task_queue('broker_add_jobs', v_name, true);
            a_names := a_names OPERATOR(pg_catalog.||) v_name;
            a_queues := a_queues OPERATOR(pg_catalog.||) v_queue;
        END IF;
        a_out := a_out OPERATOR(pg_catalog.||)
                 ((r.v OPERATOR(pg_catalog.-) 'task' OPERATOR(pg_catalog.-) 'args')
                  OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object(
                      'job_name', v_name,
                      'execute_str', COALESCE(r.v OPERATOR(pg_catalog.->) 'args', '{}'::jsonb)::text,
                      'job_language', 'task',
                      'job_queue', v_queue));
    END LOOP;
    RETURN pg_catalog.to_jsonb(a_out);
END;
$$;
COMMENT ON FUNCTION broker._tasks_as_jobs(jsonb) IS
    'Internal: broker_add_jobs'' task elements ({"task": name, "args": value, ...}) written as the job fields of a task.';
