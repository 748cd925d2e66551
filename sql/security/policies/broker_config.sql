-- sql/security/policies/broker_config.sql: row-level security of broker.broker_config (database-wide: tenant default).
ALTER TABLE broker.broker_config ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_config FORCE ROW LEVEL SECURITY;
CREATE POLICY broker_config_tenant ON broker.broker_config FOR SELECT
    USING (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
           AND broker._tenant_allowed(tenant_id, CURRENT_USER));
COMMENT ON POLICY broker_config_tenant ON broker.broker_config IS 'Options are database-wide (tenant default); written only by broker_admin.';
