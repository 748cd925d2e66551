-- sql/tables/broker_autonomous_role.sql: the roles allowed autonomous jobs, and how.
-- ---------------------------------------------------------------------------
-- Table: broker.broker_autonomous_role
--   The roles whose jobs may run outside a transaction block (autonomous
--   jobs), and how: 'set_role' (the runner's login runs SET ROLE to the role
--   on a connection of its own, for the maintenance statements only; needs
--   GRANT <role> TO broker_runtime) or 'login' (the runner logs in as the
--   role with credentials the operator configured, for CALL too). Written
--   only by broker_admin (broker_allow_autonomous); a role sees the rows of
--   the roles it belongs to. See docs/security.md, "Autonomous jobs".
-- ---------------------------------------------------------------------------
CREATE TABLE broker.broker_autonomous_role (
    role_name   name        NOT NULL,
    via         text        NOT NULL,
    tenant_id   text        NOT NULL DEFAULT 'default',
    allowed_by  name        NOT NULL DEFAULT CURRENT_USER,
    allowed_at  timestamptz NOT NULL DEFAULT pg_catalog.now(),
    CONSTRAINT broker_autonomous_role_pkey PRIMARY KEY (role_name),
    CONSTRAINT broker_autonomous_role_via_check CHECK (via OPERATOR(pg_catalog.=) ANY (ARRAY['set_role', 'login']))
);
COMMENT ON TABLE broker.broker_autonomous_role IS
    'Roles whose jobs may run outside a transaction (autonomous jobs) and how: set_role (maintenance statements, the runner SET ROLEs) or login (the runner logs in as the role; CALL too). Written by broker_admin.';
COMMENT ON COLUMN broker.broker_autonomous_role.role_name IS 'The run_as role.';
COMMENT ON COLUMN broker.broker_autonomous_role.via IS 'set_role: the runner''s login SET ROLEs to it (needs GRANT role TO broker_runtime); login: the runner logs in as it (its credentials in the runner''s autonomous_logins).';
COMMENT ON COLUMN broker.broker_autonomous_role.tenant_id IS 'Always ''default'': the arrangement is per role, database-wide.';
COMMENT ON COLUMN broker.broker_autonomous_role.allowed_by IS 'Who allowed it.';
COMMENT ON COLUMN broker.broker_autonomous_role.allowed_at IS 'When.';

