-- sql/security/policies/broker_queueinstance.sql: row-level security of broker.broker_queueinstance (database-wide: tenant default).
ALTER TABLE broker.broker_queueinstance ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_queueinstance FORCE ROW LEVEL SECURITY;
CREATE POLICY broker_queueinstance_tenant ON broker.broker_queueinstance FOR SELECT
    USING (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
           AND broker._tenant_allowed(tenant_id, CURRENT_USER));
COMMENT ON POLICY broker_queueinstance_tenant ON broker.broker_queueinstance IS
    'Instances are database-wide (tenant default); written only through the instance functions.';
