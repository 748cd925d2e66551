-- sql/security/policies/broker_queueinstance.sql: row-level security of broker.broker_queueinstance (database-wide: tenant default).
ALTER TABLE broker.broker_queueinstance ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_queueinstance FORCE ROW LEVEL SECURITY;
-- The runner's login and the administrators read them whatever tenant they act for: instances
-- are the broker's, not a tenant's (under strict tenancy neither is mapped to tenant default).
-- (to_regrole: NULL, not an error, before sql/roles.sql made the role)
CREATE POLICY broker_queueinstance_tenant ON broker.broker_queueinstance FOR SELECT
    USING ((tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
            AND broker._tenant_allowed(tenant_id, CURRENT_USER))
           OR pg_catalog.pg_has_role(CURRENT_USER, pg_catalog.to_regrole('broker_runtime'), 'USAGE')
           OR broker._is_broker_admin(CURRENT_USER));
COMMENT ON POLICY broker_queueinstance_tenant ON broker.broker_queueinstance IS
    'Instances are database-wide (tenant default), read by broker_runtime members and administrators under any tenancy; written only through the instance functions.';
