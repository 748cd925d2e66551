-- sql/security/policies/broker_task_queue.sql: row-level security of broker.broker_task_queue (task names are not tenant data; only the broker's functions write them).
ALTER TABLE broker.broker_task_queue ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_task_queue FORCE ROW LEVEL SECURITY;
CREATE POLICY broker_task_queue_select ON broker.broker_task_queue FOR SELECT
    USING (true);
COMMENT ON POLICY broker_task_queue_select ON broker.broker_task_queue IS
    'Task names and their queues are readable by every role granted SELECT (like queue numbers, they belong to no tenant); only the broker''s functions add them.';
