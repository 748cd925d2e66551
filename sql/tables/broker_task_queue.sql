-- ---------------------------------------------------------------------------
-- Table: broker.broker_task_queue
--   Each task name's own claim queue. A task (broker_jobs.job_language
--   'task', sql/tasks/) is claimed by name (broker_claim_tasks), so each name
--   is a queue of the claim machinery: its jobs sit in broker_jobs under the
--   negative job_queue given here, which no runner serves (runners claim
--   queues 1 to 1000). So a name's backlog never slows the claims of another
--   name, and fair share between tenants, key limits, parking and the claim
--   hint hold for tasks as they do for SQL jobs. Rows are made on the first
--   enqueue of a name (broker._task_queue) and never change.
-- ---------------------------------------------------------------------------
CREATE TABLE broker.broker_task_queue (
    task_name  text        NOT NULL,
    job_queue  integer     NOT NULL GENERATED ALWAYS AS IDENTITY (MINVALUE -2147483648 MAXVALUE -1 START WITH -1 INCREMENT BY -1),
    created_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    CONSTRAINT broker_task_queue_pkey PRIMARY KEY (task_name),
    CONSTRAINT broker_task_queue_job_queue_key UNIQUE (job_queue),
    CONSTRAINT broker_task_queue_task_name_check
        CHECK (pg_catalog.btrim(task_name) OPERATOR(pg_catalog.<>) '' AND pg_catalog.length(task_name) OPERATOR(pg_catalog.<=) 200)
);
-- (no planner statistics of the names: a tenant sees only the names it uses, and a histogram of them
-- would show the others' to its EXPLAIN estimates, text comparison being leakproof)
ALTER TABLE broker.broker_task_queue ALTER COLUMN task_name SET STATISTICS 0;
COMMENT ON TABLE broker.broker_task_queue IS
    'Each task name''s claim queue: its tasks sit in broker_jobs under this negative job_queue, which no runner serves.';
COMMENT ON COLUMN broker.broker_task_queue.task_name IS 'The task name (1 to 200 characters).';
COMMENT ON COLUMN broker.broker_task_queue.job_queue IS 'Its queue in broker_jobs (negative: tasks only).';
COMMENT ON COLUMN broker.broker_task_queue.created_at IS 'When the name was first enqueued.';
