-- ---------------------------------------------------------------------------
-- Table: broker.broker_task_name_tenant
--   Which tenants use which task names: a row for each tenant that enqueued,
--   scheduled or paused tasks of a name (broker._task_queue writes it, with
--   the name's queue). Task names are one namespace per database (a name has
--   one queue, whichever tenants use it), but a tenant sees only the names
--   it uses itself: broker_task_queue's policy reads this table, whose own
--   policy shows a tenant its rows. So a name says nothing of another
--   tenant's work. Rows are never changed; retention leaves them (a name
--   stays the tenant's after its tasks are purged).
-- ---------------------------------------------------------------------------
CREATE TABLE broker.broker_task_name_tenant (
    tenant_id  text        NOT NULL,
    task_name  text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    CONSTRAINT broker_task_name_tenant_pkey PRIMARY KEY (tenant_id, task_name),
    CONSTRAINT broker_task_name_tenant_task_name_fkey FOREIGN KEY (task_name)
        REFERENCES broker.broker_task_queue (task_name)
);
-- (no planner statistics of the names: a tenant sees only the names it uses, and a histogram of them
-- would show the others' to its EXPLAIN estimates, text comparison being leakproof)
ALTER TABLE broker.broker_task_name_tenant ALTER COLUMN task_name SET STATISTICS 0;
-- (the foreign key's own index: its checks, and the name's tenants for an administrator)
CREATE INDEX broker_task_name_tenant_task_name_idx ON broker.broker_task_name_tenant (task_name);
COMMENT ON TABLE broker.broker_task_name_tenant IS
    'The task names each tenant uses (enqueued, scheduled or paused): a tenant sees only these in broker_task_queue.';
COMMENT ON COLUMN broker.broker_task_name_tenant.tenant_id IS 'The tenant.';
COMMENT ON COLUMN broker.broker_task_name_tenant.task_name IS 'A task name it uses (broker_task_queue).';
COMMENT ON COLUMN broker.broker_task_name_tenant.created_at IS 'When the tenant first used the name.';
