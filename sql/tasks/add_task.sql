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
--   Calls: _task_queue, broker_add_job
--   Tables: writes broker_jobs (through broker_add_job), broker_task_queue (through _task_queue)
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
    v_queue integer := broker._task_queue('broker_add_task', p_task);
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
END;
$$;
COMMENT ON FUNCTION broker.broker_add_task(text, jsonb, integer, bigint[], text, integer, text, text[], timestamptz, interval, text, text) IS
    'Enqueues a task (a job run by application code, claimed by name with broker_claim_tasks) with JSON arguments and broker_add_job''s options; returns (job_id, is_new).';
