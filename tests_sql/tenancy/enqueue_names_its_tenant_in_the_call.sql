-- p_tenant_id of broker_add_job, broker_add_jobs and broker_add_schedule: the tenant of that call only,
-- held to broker_set_tenant's rules, and under strict tenancy to the caller's mappings (an attacker mapped to
-- its own tenant cannot name another one).
BEGIN;
SELECT plan(21);

CREATE ROLE broker_test_alice NOLOGIN IN ROLE broker_enqueue;
SELECT is(broker.broker_set_strict_tenancy(true), true, 'strict tenancy on');
INSERT INTO broker.broker_tenant_roles (tenant_id, role_name) VALUES ('tenant_a', 'broker_test_alice');

SET LOCAL ROLE broker_test_alice;
-- in tenant a, from a transaction whose own tenant is default
CREATE TEMP TABLE a_job AS SELECT * FROM broker.broker_add_job('a job', 'SELECT 1', p_tenant_id => 'tenant_a');
SELECT is(broker.broker_current_tenant(), 'default', 'broker_add_job: the transaction''s tenant is as it was');
SELECT is((SELECT count(*) FROM broker.broker_jobs), 0::bigint, 'the job is not in default');
SELECT broker._set_tenant('test', 'tenant_a');
SELECT is((SELECT tenant_id || '/' || enqueued_by FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM a_job)),
          'tenant_a/broker_test_alice', 'it is in tenant a, enqueued by alice');
-- a tenant set for the transaction comes back after a call naming another (here: the same one, and default)
SELECT is((SELECT count(*) FROM broker.broker_add_jobs('[{"job_name": "b1", "execute_str": "SELECT 1"},
                                                         {"job_name": "b2", "execute_str": "SELECT 1"}]', 'tenant_a')),
          2::bigint, 'broker_add_jobs: two jobs in the named tenant');
SELECT is(broker.broker_current_tenant(), 'tenant_a', 'broker_add_jobs: the transaction''s tenant is as it was');
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE tenant_id = 'tenant_a'), 3::bigint, 'tenant a has the three jobs');
CREATE TEMP TABLE a_schedule AS
    SELECT * FROM broker.broker_add_schedule('a nightly', '0 3 * * *', 'SELECT 1', p_tenant_id => 'tenant_a');
SELECT is((SELECT tenant_id FROM broker.broker_schedule WHERE schedule_name = 'a nightly'), 'tenant_a',
          'broker_add_schedule: the schedule is in the named tenant');
SELECT broker._set_tenant('test', 'default');

-- a tenant alice is not mapped to: refused with broker_add_job's own tenancy SQLSTATE, nothing written
SELECT throws_ok($$SELECT broker.broker_add_job('sneaky', 'SELECT 1', p_tenant_id => 'tenant_b')$$, '42501',
    'broker_add_job: role broker_test_alice may not act for tenant ''tenant_b''', 'broker_add_job: an unmapped tenant is 42501');
SELECT throws_ok($$SELECT broker.broker_add_jobs('[{"job_name": "sneaky", "execute_str": "SELECT 1"}]', 'tenant_b')$$,
    '42501', NULL, 'broker_add_jobs: an unmapped tenant is 42501');
SELECT throws_ok($$SELECT broker.broker_add_schedule('sneaky', '0 3 * * *', 'SELECT 1', p_tenant_id => 'tenant_b')$$,
    '42501', NULL, 'broker_add_schedule: an unmapped tenant is 42501');
SELECT broker._set_tenant('test', 'tenant_b');
SELECT broker.broker_add_job('a again', 'SELECT 1', p_tenant_id => 'tenant_a');
SELECT throws_ok($$SELECT broker.broker_add_job('sneaky', 'SELECT 1')$$, '42501', NULL,
    'after a call naming her tenant, the transaction''s unmapped tenant b is refused as before');
SELECT broker._set_tenant('test', 'default');
-- the values broker_set_tenant refuses, with its SQLSTATEs
SELECT throws_ok($$SELECT broker.broker_add_job('x', 'SELECT 1', p_tenant_id => ' ')$$, '22023',
    'broker_add_job: tenant id must be 1 to 200 characters and not blank', 'broker_add_job: a blank tenant is 22023');
SELECT throws_ok(format('SELECT broker.broker_add_job(%L, %L, p_tenant_id => %L)', 'x', 'SELECT 1', repeat('t', 201)),
    '22023', NULL, 'a tenant id over 200 characters is 22023');
SELECT throws_ok($$SELECT broker.broker_add_jobs('[{"job_name": "x", "execute_str": "SELECT 1"}]', '')$$, '22023',
    'broker_add_jobs: tenant id must be 1 to 200 characters and not blank', 'broker_add_jobs: an empty tenant is 22023');
SELECT throws_ok($$SELECT broker.broker_add_schedule('x', '0 3 * * *', 'SELECT 1', p_tenant_id => ' ')$$, '22023',
    'broker_add_schedule: tenant id must be 1 to 200 characters and not blank', 'broker_add_schedule: a blank tenant is 22023');
SELECT throws_ok($$SELECT broker.broker_set_tenant(' ')$$, '22023',
    'broker_set_tenant: tenant id must be 1 to 200 characters and not blank', 'the same rule as broker_set_tenant');
-- a job cannot name its tenant as a key of broker_add_jobs' elements (one call, one tenant)
SELECT throws_ok($$SELECT broker.broker_add_jobs('[{"job_name": "x", "execute_str": "SELECT 1", "tenant_id": "tenant_b"}]', 'tenant_a')$$,
    '22023', NULL, 'broker_add_jobs: an element has no tenant_id key');
SELECT is((SELECT count(*) FROM broker.broker_jobs), 0::bigint, 'nothing reached default');
RESET ROLE;
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE job_name IN ('sneaky', 'x')), 0::bigint,
          'no refused call wrote anything, in any tenant');
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE tenant_id = 'tenant_b'), 0::bigint, 'tenant b has nothing');

SELECT * FROM finish();
ROLLBACK;
