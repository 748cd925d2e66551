-- Row-level security between tenants, for roles without BYPASSRLS.
BEGIN;
SELECT plan(21);

CREATE ROLE broker_test_alice NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_bob NOLOGIN IN ROLE broker_enqueue;

SET LOCAL ROLE broker_test_alice;
SELECT broker.broker_set_tenant('tenant_a');
CREATE TEMP TABLE a_job AS SELECT job_id FROM broker.broker_add_job('a1', 'SELECT 1', p_job_group => 'shared',
                                                                    p_idempotency_key => 'k');
SELECT broker.broker_add_job('a2', 'SELECT 1');
SELECT broker.broker_set_tenant('default');
CREATE TEMP TABLE d_job AS SELECT job_id FROM broker.broker_add_job('in default', 'SELECT 1');
RESET ROLE;
GRANT SELECT ON a_job, d_job TO broker_test_bob, broker_test_alice;

SET LOCAL ROLE broker_test_bob;
SELECT broker.broker_set_tenant('tenant_b');
SELECT is((SELECT count(*) FROM broker.broker_jobs), 0::bigint, 'B sees none of A''s jobs');
SELECT is((SELECT count(*) FROM broker.broker_job_dependency), 0::bigint, 'B sees none of A''s edges');
SELECT throws_ok(format('SELECT broker.broker_cancel_job(%s)', (SELECT job_id FROM a_job)), 'P0002', NULL,
    'B cannot cancel A''s job (it does not exist for B)');
SELECT is_empty(format('UPDATE broker.broker_jobs SET cancel_reason = ''x'' WHERE job_id = %s RETURNING job_id',
                       (SELECT job_id FROM a_job)), 'B cannot update A''s job');
SELECT throws_ok(format('DELETE FROM broker.broker_jobs WHERE job_id = %s', (SELECT job_id FROM a_job)), '42501', NULL,
    'B cannot delete jobs at all');
SELECT throws_ok(format('SELECT broker.broker_add_job(''b1'', ''SELECT 1'', p_depends_on_job_ids => ARRAY[%s]::bigint[])',
                        (SELECT job_id FROM a_job)), '23503', NULL, 'B cannot depend on A''s job');
CREATE TEMP TABLE b_job AS SELECT job_id FROM broker.broker_add_job_simple('b2', 'SELECT 1', 0, ARRAY['shared']);
SELECT is((SELECT pending_deps FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM b_job)), 0,
          'A''s group does not block B (B cannot be blocked by A)');
CREATE TEMP TABLE b_key AS SELECT * FROM broker.broker_add_job('b3', 'SELECT 1', p_idempotency_key => 'k');
SELECT is((SELECT is_new FROM b_key), true, 'the same idempotency key in B makes a new job (no collision)');
SELECT is((SELECT count(*) FROM broker.broker_jobs), 2::bigint, 'B sees its own two jobs');

-- direct writes that bypass the functions are checked too
SELECT throws_ok($$INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, tenant_id) VALUES ('x', 'x', 'SELECT 1', 'tenant_a')$$,
    '42501', NULL, 'B cannot write tenant_id');
SELECT throws_ok($$INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, enqueued_by) VALUES ('x', 'x', 'SELECT 1', 'broker_test_alice')$$,
    '42501', NULL, 'B cannot forge enqueued_by');
SELECT throws_ok($$INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, run_as) VALUES ('x', 'x', 'SELECT 1', 'broker_test_alice')$$,
    '42501', NULL, 'a raw insert with a run_as B may not use violates the policy');
SELECT throws_ok(format('UPDATE broker.broker_jobs SET complete_status = 2 WHERE job_id = %s', (SELECT job_id FROM b_job)),
    '42501', NULL, 'B cannot mark its own job completed');
SELECT throws_ok(format('UPDATE broker.broker_jobs SET pending_deps = 0 WHERE job_id = %s', (SELECT job_id FROM b_job)),
    '42501', NULL, 'B cannot touch dependency counters');
SELECT throws_ok(format('INSERT INTO broker.broker_job_dependency (job_id, depends_on_group) VALUES (%s, ''zzz'')',
                        (SELECT job_id FROM a_job)), '23503', NULL, 'B cannot add edges to A''s job (it does not exist for B)');
SELECT lives_ok($$INSERT INTO broker.broker_jobs (job_name, job_group, execute_str) VALUES ('raw', 'raw', 'SELECT 1')$$,
    'a column-limited raw insert is an ordinary enqueue');
SELECT is((SELECT tenant_id || '/' || enqueued_by || '/' || run_as || '/' || complete_status FROM broker.broker_jobs WHERE job_name = 'raw'),
    'tenant_b/broker_test_bob/broker_test_bob/0', 'and gets the caller''s tenant and identity');

-- no tenant set: tenant default only
SELECT broker.broker_set_tenant('default');
SELECT is((SELECT array_agg(job_name) FROM broker.broker_jobs), ARRAY['in default'], 'with no tenant a client works in default only');
RESET ROLE;

-- the runtime claims across tenants through the SECURITY DEFINER functions
SET LOCAL ROLE broker_runtime;
SELECT is((SELECT count(*) FROM broker.broker_jobs), 1::bigint, 'broker_runtime reads only its tenant directly');
SELECT is((SELECT count(DISTINCT tenant_id) FROM broker.broker_get(1, NULL, 60, 100)), 3::bigint,
          'but claims the jobs of every tenant');
RESET ROLE;
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE complete_status = 1), 6::bigint, 'all six jobs claimed');

SELECT * FROM finish();
ROLLBACK;
