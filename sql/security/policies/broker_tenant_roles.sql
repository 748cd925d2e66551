-- sql/security/policies/broker_tenant_roles.sql: row-level security of broker.broker_tenant_roles, keyed on the role (it defines who may act for a tenant).
ALTER TABLE broker.broker_tenant_roles ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_tenant_roles FORCE ROW LEVEL SECURITY;
-- (to_regrole: a mapping left behind by a dropped role is hidden, not an error)
CREATE POLICY broker_tenant_roles_own ON broker.broker_tenant_roles FOR SELECT
    USING (pg_catalog.pg_has_role(CURRENT_USER, pg_catalog.to_regrole(pg_catalog.quote_ident(role_name)), 'MEMBER'));
COMMENT ON POLICY broker_tenant_roles_own ON broker.broker_tenant_roles IS 'A role sees the tenant mappings of the roles it belongs to.';
