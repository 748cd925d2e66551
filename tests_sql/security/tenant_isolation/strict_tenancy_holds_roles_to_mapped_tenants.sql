-- Strict tenancy: roles act only for tenants mapped to them by broker_admin.
BEGIN;
SELECT plan(11);

CREATE ROLE broker_test_alice NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_carol NOLOGIN IN ROLE broker_enqueue;
SET LOCAL ROLE broker_test_alice;
SELECT broker.broker_set_tenant('tenant_b');
SELECT broker.broker_add_job('b job', 'SELECT 1');   -- before strict mode: allowed
RESET ROLE;

SELECT is(broker.broker_set_strict_tenancy(true), true, 'strict tenancy on');
INSERT INTO broker.broker_tenant_roles (tenant_id, role_name) VALUES ('tenant_a', 'broker_test_alice');

SET LOCAL ROLE broker_test_alice;
SELECT broker.broker_set_tenant('tenant_a');
SELECT lives_ok($$SELECT broker.broker_add_job('a job', 'SELECT 1')$$, 'alice may act for her mapped tenant');
SELECT is((SELECT count(*) FROM broker.broker_jobs), 1::bigint, 'and sees its jobs');
SELECT broker.broker_set_tenant('tenant_b');
SELECT is((SELECT count(*) FROM broker.broker_jobs), 0::bigint, 'setting another tenant shows nothing');
SELECT throws_ok($$SELECT broker.broker_add_job('sneaky', 'SELECT 1')$$, '42501',
    'broker_add_job: role broker_test_alice may not act for tenant ''tenant_b''', 'nor lets her enqueue there');
SELECT throws_ok($$INSERT INTO broker.broker_jobs (job_name, job_group, execute_str) VALUES ('raw', 'raw', 'SELECT 1')$$,
    '42501', NULL, 'a raw insert into an unmapped tenant violates the policy');
SELECT is_empty($$UPDATE broker.broker_jobs SET cancel_reason = 'x' RETURNING job_id$$, 'nor can she cancel there');
SELECT is((SELECT count(*) FROM broker.broker_tenant_roles), 1::bigint, 'she sees her own mapping only');
SELECT throws_ok($$INSERT INTO broker.broker_tenant_roles VALUES ('tenant_b', 'broker_test_alice')$$, '42501', NULL,
    'and cannot map herself');
RESET ROLE;

SET LOCAL ROLE broker_test_carol;
SELECT broker.broker_set_tenant('tenant_a');
SELECT is((SELECT count(*) FROM broker.broker_jobs), 0::bigint, 'a role with no mapping sees nothing');
SELECT throws_ok($$SELECT broker.broker_add_job('carol', 'SELECT 1')$$, '42501', NULL, 'and cannot enqueue');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
