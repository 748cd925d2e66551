-- sql/security/policies/broker_tenant_weight.sql: row-level security of broker.broker_tenant_weight (a tenant reads its own weight; administrators set them).
ALTER TABLE broker.broker_tenant_weight ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_tenant_weight FORCE ROW LEVEL SECURITY;
CREATE POLICY broker_tenant_weight_select ON broker.broker_tenant_weight FOR SELECT
    USING ((tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
            AND broker._tenant_allowed(tenant_id, CURRENT_USER))
           OR broker._is_broker_admin(CURRENT_USER));
COMMENT ON POLICY broker_tenant_weight_select ON broker.broker_tenant_weight IS
    'A tenant reads its own weight; administrators all.';
CREATE POLICY broker_tenant_weight_admin ON broker.broker_tenant_weight FOR ALL
    USING (broker._is_broker_admin(CURRENT_USER))
    WITH CHECK (broker._is_broker_admin(CURRENT_USER));
COMMENT ON POLICY broker_tenant_weight_admin ON broker.broker_tenant_weight IS
    'Only administrators set weights.';
