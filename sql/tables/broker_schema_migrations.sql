-- sql/tables/broker_schema_migrations.sql: table of schema versions applied by `pgsql-broker install`.
-- ---------------------------------------------------------------------------
-- Table: broker.broker_schema_migrations
--   One row per schema version applied by `pgsql-broker install` (migrations
--   path). CREATE EXTENSION installs leave it empty: pg_extension tracks them.
-- ---------------------------------------------------------------------------
CREATE TABLE broker.broker_schema_migrations (
    version       text        NOT NULL,
    tenant_id     text        NOT NULL DEFAULT 'default',
    applied_at    timestamptz NOT NULL DEFAULT pg_catalog.now(),
    install_path  text        NOT NULL DEFAULT 'migrations',
    checksum      text,
    CONSTRAINT broker_schema_migrations_pkey PRIMARY KEY (version),
    CONSTRAINT broker_schema_migrations_version_check
        CHECK (version OPERATOR(pg_catalog.~) '^[0-9]+\.[0-9]+\.[0-9]+$'),
    CONSTRAINT broker_schema_migrations_install_path_check
        CHECK (install_path OPERATOR(pg_catalog.=) ANY (ARRAY['extension', 'migrations']))
);

COMMENT ON TABLE broker.broker_schema_migrations IS
    'Schema versions applied as tracked migrations (pgsql-broker install); empty for CREATE EXTENSION installs.';
COMMENT ON COLUMN broker.broker_schema_migrations.version IS 'Applied schema version (X.Y.Z).';
COMMENT ON COLUMN broker.broker_schema_migrations.tenant_id IS 'Always ''default'': migrations are database-wide.';
COMMENT ON COLUMN broker.broker_schema_migrations.applied_at IS 'When the version was applied.';
COMMENT ON COLUMN broker.broker_schema_migrations.install_path IS 'How it was applied: extension or migrations.';
COMMENT ON COLUMN broker.broker_schema_migrations.checksum IS 'Checksum of the applied script, when known.';
