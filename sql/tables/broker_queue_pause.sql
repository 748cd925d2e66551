-- ---------------------------------------------------------------------------
-- Table: broker.broker_queue_pause
--   Paused queues: claims (broker_get) skip the jobs of a paused queue;
--   running jobs finish. A row with tenant_id NULL pauses the queue for every
--   tenant (administrators only); a row with a tenant pauses only that
--   tenant's jobs in it (broker_pause_queue).
-- ---------------------------------------------------------------------------
CREATE TABLE broker.broker_queue_pause (
    job_queue  integer     NOT NULL,
    tenant_id  text        DEFAULT broker.broker_current_tenant(),
    paused_by  name        NOT NULL DEFAULT CURRENT_USER,
    paused_at  timestamptz NOT NULL DEFAULT pg_catalog.now(),
    CONSTRAINT broker_queue_pause_key UNIQUE NULLS NOT DISTINCT (job_queue, tenant_id),
    -- (a queue of SQL jobs, or a task name's, which is negative: broker_task_queue)
    CONSTRAINT broker_queue_pause_job_queue_check
        CHECK (job_queue OPERATOR(pg_catalog.>=) 1 AND job_queue OPERATOR(pg_catalog.<=) 1000 OR job_queue OPERATOR(pg_catalog.<) 0)
);

COMMENT ON TABLE broker.broker_queue_pause IS
    'Paused queues: claims skip them (running jobs finish); tenant_id NULL pauses a queue for every tenant, a tenant only its own jobs.';
COMMENT ON COLUMN broker.broker_queue_pause.job_queue IS 'The paused queue: 1 to 1000, or a task name''s (negative: broker_pause_task).';
COMMENT ON COLUMN broker.broker_queue_pause.tenant_id IS 'The tenant whose jobs are paused there; NULL: every tenant''s.';
COMMENT ON COLUMN broker.broker_queue_pause.paused_by IS 'Role that paused it.';
COMMENT ON COLUMN broker.broker_queue_pause.paused_at IS 'When.';
