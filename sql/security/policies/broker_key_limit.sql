-- sql/security/policies/broker_key_limit.sql: row-level security of broker.broker_key_limit (a tenant's own limits; limits across tenants (tenant_id NULL) are the administrators').
ALTER TABLE broker.broker_key_limit ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_key_limit FORCE ROW LEVEL SECURITY;
CREATE POLICY broker_key_limit_select ON broker.broker_key_limit FOR SELECT
    USING (tenant_id IS NULL
           OR (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
               AND broker._tenant_allowed(tenant_id, CURRENT_USER))
           OR broker._is_broker_admin(CURRENT_USER));
COMMENT ON POLICY broker_key_limit_select ON broker.broker_key_limit IS
    'Read the limits across tenants and those of the current tenant (administrators: all).';
CREATE POLICY broker_key_limit_write ON broker.broker_key_limit FOR ALL
    USING ((tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
            AND broker._tenant_allowed(tenant_id, CURRENT_USER))
           OR broker._is_broker_admin(CURRENT_USER))
    WITH CHECK ((tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
                 AND broker._tenant_allowed(tenant_id, CURRENT_USER)
                 AND set_by OPERATOR(pg_catalog.=) CURRENT_USER)
                OR broker._is_broker_admin(CURRENT_USER));
COMMENT ON POLICY broker_key_limit_write ON broker.broker_key_limit IS
    'A tenant sets and removes its own limits; administrators any, and the limits across tenants.';
