-- Instances are the broker's own (tenant default): under strict tenancy the runner's login (a
-- broker_runtime member, mapped to no tenant) and an administrator still read them, for the
-- console and `pgsql-broker status`; an enqueuer never reads them.
BEGIN;
SELECT plan(6);

CREATE ROLE broker_test_runner NOLOGIN IN ROLE broker_runtime;
CREATE ROLE broker_test_admin NOLOGIN IN ROLE broker_admin;
CREATE ROLE broker_test_tenant_b NOLOGIN IN ROLE broker_enqueue;
SELECT broker.broker_register_instance('test', 'host', 1, 1, NULL);

SET LOCAL ROLE broker_test_runner;
SELECT is((SELECT count(*) FROM broker.broker_queueinstance), 1::bigint, 'the runner''s login reads the instances');
RESET ROLE;

SELECT broker.broker_set_strict_tenancy(true);
INSERT INTO broker.broker_tenant_roles (tenant_id, role_name) VALUES ('tenant_b', 'broker_test_tenant_b');

SET LOCAL ROLE broker_test_runner;
SELECT is((SELECT count(*) FROM broker.broker_queueinstance), 1::bigint,
          'under strict tenancy too, mapped to no tenant');
SELECT broker.broker_set_tenant('tenant_b');
SELECT is((SELECT count(*) FROM broker.broker_queueinstance), 1::bigint, 'whatever tenant its session names');
RESET ROLE;

SET LOCAL ROLE broker_test_admin;
SELECT is((SELECT count(*) FROM broker.broker_queueinstance), 1::bigint, 'an administrator mapped to no tenant reads them');
RESET ROLE;

SET LOCAL ROLE broker_test_tenant_b;
SELECT throws_ok($$SELECT count(*) FROM broker.broker_queueinstance$$, '42501', NULL,
                 'an enqueuer of another tenant may not read them');
SELECT broker.broker_set_tenant('default');
SELECT throws_ok($$SELECT count(*) FROM broker.broker_queueinstance$$, '42501', NULL, 'not even naming tenant default');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
