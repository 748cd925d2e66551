-- The schema version recorded by tracked migrations (broker_schema_migrations, tenant default) is the
-- database's, not a tenant's: the runner's login reads it to check the install, also under strict tenancy,
-- where no tenant is mapped to it (the runner refused to start on such a database). A tenant's enqueuer
-- still reads it only as a member of tenant default, and it is written only by the installer.
BEGIN;
SELECT plan(4);

CREATE ROLE broker_test_runner NOLOGIN IN ROLE broker_runtime;
CREATE ROLE broker_test_app NOLOGIN IN ROLE broker_enqueue;
INSERT INTO broker.broker_schema_migrations (version, install_path, checksum) VALUES ('9.9.9', 'migrations', 'x');
GRANT SELECT ON broker.broker_schema_migrations TO broker_test_app;
INSERT INTO broker.broker_tenant_roles VALUES ('acme', 'broker_test_app');
SELECT broker.broker_set_strict_tenancy(true);

SET LOCAL ROLE broker_test_runner;
SELECT is((SELECT count(*) FROM broker.broker_schema_migrations WHERE version = '9.9.9'), 1::bigint,
          'a runtime login mapped to no tenant reads the schema version');
SELECT throws_ok($$INSERT INTO broker.broker_schema_migrations (version, install_path, checksum) VALUES ('9.9.10', 'migrations', 'x')$$,
    '42501', NULL, 'and writes none');
RESET ROLE;
SET LOCAL ROLE broker_test_app;
SELECT broker.broker_set_tenant('acme');
SELECT is((SELECT count(*) FROM broker.broker_schema_migrations), 0::bigint, 'a tenant''s enqueuer reads none in its tenant');
SELECT broker.broker_set_tenant('default');
SELECT is((SELECT count(*) FROM broker.broker_schema_migrations), 0::bigint, 'nor in tenant default, which is not mapped to it');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
