-- sql/security/policies/broker_task_name_tenant.sql: row-level security of broker.broker_task_name_tenant (a tenant reads the task names it uses; broker._task_queue records them as the enqueuing role).
ALTER TABLE broker.broker_task_name_tenant ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_task_name_tenant FORCE ROW LEVEL SECURITY;
CREATE POLICY broker_task_name_tenant_select ON broker.broker_task_name_tenant FOR SELECT
    USING ((tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
            AND broker._tenant_allowed(tenant_id, CURRENT_USER))
           OR broker._is_broker_admin(CURRENT_USER));
COMMENT ON POLICY broker_task_name_tenant_select ON broker.broker_task_name_tenant IS
    'A tenant reads the task names it uses; administrators all.';
CREATE POLICY broker_task_name_tenant_insert ON broker.broker_task_name_tenant FOR INSERT
    WITH CHECK ((tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
                 AND broker._tenant_allowed(tenant_id, CURRENT_USER))
                OR broker._is_broker_admin(CURRENT_USER));
COMMENT ON POLICY broker_task_name_tenant_insert ON broker.broker_task_name_tenant IS
    'A name is recorded as the current tenant''s by a role that may act for it (broker._task_queue, as the enqueuing role); administrators any tenant''s.';
