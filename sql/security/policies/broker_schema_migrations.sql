-- sql/security/policies/broker_schema_migrations.sql: row-level security of broker.broker_schema_migrations (database-wide: tenant default).
ALTER TABLE broker.broker_schema_migrations ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_schema_migrations FORCE ROW LEVEL SECURITY;
-- The runner's login reads the schema version to check the install whatever tenant it acts for (under
-- strict tenancy none is mapped to it); the administrators too. (to_regrole: NULL, not an error, before
-- sql/roles.sql made the role)
CREATE POLICY broker_schema_migrations_tenant ON broker.broker_schema_migrations FOR SELECT
    USING ((tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
            AND broker._tenant_allowed(tenant_id, CURRENT_USER))
           OR pg_catalog.pg_has_role(CURRENT_USER, pg_catalog.to_regrole('broker_runtime'), 'USAGE')
           OR broker._is_broker_admin(CURRENT_USER));
COMMENT ON POLICY broker_schema_migrations_tenant ON broker.broker_schema_migrations IS
    'Migrations are database-wide (tenant default), read by broker_runtime members and administrators under any tenancy; written only by broker_admin.';
