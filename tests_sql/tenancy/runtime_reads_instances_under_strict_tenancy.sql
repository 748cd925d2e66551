-- Instances are the broker's own (tenant default): under strict tenancy the runner's login (a
-- broker_runtime member, mapped to no tenant) and an administrator still read them, for the
-- console and `pgsql-broker status`; an enqueuer never reads them, nor does a role that only
-- shares broker_runtime's membership the other way or without its privileges.
BEGIN;
SELECT plan(8);

CREATE ROLE broker_test_runner NOLOGIN IN ROLE broker_runtime;
CREATE ROLE broker_test_admin NOLOGIN IN ROLE broker_admin;
CREATE ROLE broker_test_tenant_b NOLOGIN IN ROLE broker_enqueue;
-- roles that may SELECT the table, so that the policy alone decides: one broker_runtime is a member
-- of (how autonomous roles are arranged), one a NOINHERIT member of broker_runtime
CREATE ROLE broker_test_app NOLOGIN;
GRANT broker_test_app TO broker_runtime;
CREATE ROLE broker_test_noinherit NOLOGIN NOINHERIT IN ROLE broker_runtime;
GRANT USAGE ON SCHEMA broker TO broker_test_app, broker_test_noinherit;
GRANT SELECT ON broker.broker_queueinstance TO broker_test_app, broker_test_noinherit;
GRANT EXECUTE ON FUNCTION broker.broker_current_tenant(), broker._tenant_allowed(text, name), broker._is_broker_admin(name)
    TO broker_test_app, broker_test_noinherit;
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

SET LOCAL ROLE broker_test_app;
SELECT is((SELECT count(*) FROM broker.broker_queueinstance), 0::bigint,
          'a role broker_runtime is a member of reads none (it has not broker_runtime''s privileges)');
RESET ROLE;
SET LOCAL ROLE broker_test_noinherit;
SELECT is((SELECT count(*) FROM broker.broker_queueinstance), 0::bigint,
          'nor does a NOINHERIT member of broker_runtime (until it sets the role)');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
