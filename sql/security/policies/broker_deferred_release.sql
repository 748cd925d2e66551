-- sql/security/policies/broker_deferred_release.sql: row-level security of broker.broker_deferred_release (written and read only by the runtime functions).
ALTER TABLE broker.broker_deferred_release ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_deferred_release FORCE ROW LEVEL SECURITY;
CREATE POLICY broker_deferred_release_select ON broker.broker_deferred_release FOR SELECT
    USING (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
           AND broker._tenant_allowed(tenant_id, CURRENT_USER));
COMMENT ON POLICY broker_deferred_release_select ON broker.broker_deferred_release IS
    'Read the pending releases of the current tenant.';
