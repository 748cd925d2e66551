-- sql/security/policies/broker_autonomous_role.sql: row-level security of broker.broker_autonomous_role, keyed on the role (as broker_tenant_roles).
ALTER TABLE broker.broker_autonomous_role ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_autonomous_role FORCE ROW LEVEL SECURITY;
-- (to_regrole: an arrangement left behind by a dropped role is hidden, not an error)
CREATE POLICY broker_autonomous_role_own ON broker.broker_autonomous_role FOR SELECT
    USING (pg_catalog.pg_has_role(CURRENT_USER, pg_catalog.to_regrole(pg_catalog.quote_ident(role_name)), 'MEMBER'));
COMMENT ON POLICY broker_autonomous_role_own ON broker.broker_autonomous_role IS 'A role sees the arrangements of the roles it belongs to.';
