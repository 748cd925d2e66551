-- sql/security/policies/broker_task_queue.sql: row-level security of broker.broker_task_queue (a tenant sees the task names it uses; only the broker's functions write them).
ALTER TABLE broker.broker_task_queue ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_task_queue FORCE ROW LEVEL SECURITY;
-- (the names a tenant uses: broker_task_name_tenant, read under its own policy, so as the tenant)
CREATE POLICY broker_task_queue_select ON broker.broker_task_queue FOR SELECT
    USING (EXISTS (SELECT FROM broker.broker_task_name_tenant AS u
                    WHERE u.task_name OPERATOR(pg_catalog.=) broker_task_queue.task_name)
           OR broker._is_broker_admin(CURRENT_USER));
COMMENT ON POLICY broker_task_queue_select ON broker.broker_task_queue IS
    'A tenant reads the task names it uses (broker_task_name_tenant) and their queues; administrators all. Names are one namespace per database: only the broker''s functions add them.';
