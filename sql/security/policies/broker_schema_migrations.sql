-- sql/security/policies/broker_schema_migrations.sql: row-level security of broker.broker_schema_migrations (database-wide: tenant default).
ALTER TABLE broker.broker_schema_migrations ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_schema_migrations FORCE ROW LEVEL SECURITY;
CREATE POLICY broker_schema_migrations_tenant ON broker.broker_schema_migrations FOR SELECT
    USING (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
           AND broker._tenant_allowed(tenant_id, CURRENT_USER));
COMMENT ON POLICY broker_schema_migrations_tenant ON broker.broker_schema_migrations IS
    'Migrations are database-wide (tenant default); written only by broker_admin.';
