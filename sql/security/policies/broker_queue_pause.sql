-- sql/security/policies/broker_queue_pause.sql: row-level security of broker.broker_queue_pause (a tenant's own pauses; pauses for every tenant (tenant_id NULL) are the administrators').
ALTER TABLE broker.broker_queue_pause ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_queue_pause FORCE ROW LEVEL SECURITY;
CREATE POLICY broker_queue_pause_select ON broker.broker_queue_pause FOR SELECT
    USING (tenant_id IS NULL
           OR (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
               AND broker._tenant_allowed(tenant_id, CURRENT_USER))
           OR broker._is_broker_admin(CURRENT_USER));
COMMENT ON POLICY broker_queue_pause_select ON broker.broker_queue_pause IS
    'Read the pauses for every tenant and those of the current tenant (administrators: all).';
CREATE POLICY broker_queue_pause_insert ON broker.broker_queue_pause FOR INSERT
    WITH CHECK ((tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
                 AND broker._tenant_allowed(tenant_id, CURRENT_USER)
                 AND paused_by OPERATOR(pg_catalog.=) CURRENT_USER)
                OR broker._is_broker_admin(CURRENT_USER));
COMMENT ON POLICY broker_queue_pause_insert ON broker.broker_queue_pause IS
    'A tenant pauses its own jobs of a queue; administrators pause a queue for every tenant.';
CREATE POLICY broker_queue_pause_delete ON broker.broker_queue_pause FOR DELETE
    USING ((tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
            AND broker._tenant_allowed(tenant_id, CURRENT_USER))
           OR broker._is_broker_admin(CURRENT_USER));
COMMENT ON POLICY broker_queue_pause_delete ON broker.broker_queue_pause IS
    'A tenant resumes its own jobs of a queue; administrators any pause.';
