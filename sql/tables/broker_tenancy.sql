-- sql/tables/broker_tenancy.sql: tables of tenant mappings and database-wide options.
-- ---------------------------------------------------------------------------
-- Table: broker.broker_tenant_roles
--   Strict tenancy: which roles may act for which tenant. Written only by
--   broker_admin (BYPASSRLS); a role sees the rows of roles it belongs to.
-- Table: broker.broker_config
--   Database-wide broker options (strict_tenancy, lease_seconds,
--   retry_base_seconds, retry_max_seconds), written by broker_admin. Kept in
--   a table, not in session settings, so that job SQL (which can SET any
--   setting of the session it runs in) cannot change them for other jobs.
-- ---------------------------------------------------------------------------
CREATE TABLE broker.broker_tenant_roles (
    tenant_id   text NOT NULL,
    role_name   name NOT NULL,
    CONSTRAINT broker_tenant_roles_pkey PRIMARY KEY (tenant_id, role_name),
    CONSTRAINT broker_tenant_roles_tenant_check
        CHECK (pg_catalog.btrim(tenant_id) OPERATOR(pg_catalog.<>) '' AND pg_catalog.length(tenant_id) OPERATOR(pg_catalog.<=) 200)
);
COMMENT ON TABLE broker.broker_tenant_roles IS
    'Strict tenancy mapping: members of role_name may act for tenant_id (only enforced while strict_tenancy is on).';
COMMENT ON COLUMN broker.broker_tenant_roles.tenant_id IS 'Tenant the role may act for.';
COMMENT ON COLUMN broker.broker_tenant_roles.role_name IS 'Role (and its members) allowed to act for the tenant.';

CREATE TABLE broker.broker_config (
    setting    text NOT NULL,
    tenant_id  text NOT NULL DEFAULT 'default',
    value      text NOT NULL,
    CONSTRAINT broker_config_pkey PRIMARY KEY (setting),
    CONSTRAINT broker_config_setting_check
        CHECK (setting OPERATOR(pg_catalog.=) ANY (ARRAY['strict_tenancy', 'lease_seconds', 'retry_base_seconds', 'retry_max_seconds',
                                                           'max_schedules_per_tenant'])),
    CONSTRAINT broker_config_value_check
        CHECK (CASE WHEN setting OPERATOR(pg_catalog.=) 'strict_tenancy' THEN value OPERATOR(pg_catalog.=) ANY (ARRAY['on', 'off'])
                    ELSE value OPERATOR(pg_catalog.~) '^[0-9]{1,9}$' END)
);
COMMENT ON TABLE broker.broker_config IS
    'Database-wide broker options, written by broker_admin: strict_tenancy (on/off), lease_seconds, retry_base_seconds, retry_max_seconds, max_schedules_per_tenant.';
COMMENT ON COLUMN broker.broker_config.setting IS 'Option name.';
COMMENT ON COLUMN broker.broker_config.tenant_id IS 'Always ''default'': options are database-wide.';
COMMENT ON COLUMN broker.broker_config.value IS 'Option value.';
