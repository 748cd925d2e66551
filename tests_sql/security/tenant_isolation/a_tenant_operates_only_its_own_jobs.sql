-- Tenancy of the operator functions, strict tenancy on: a broker_enqueue member mapped to its
-- own tenant cannot cancel, retry or pause another tenant's jobs, nor read their attempts,
-- actions or pauses, whether through the functions or by writing the tables.
BEGIN;
SELECT plan(17);
\ir ../../lib/run_next.psql

CREATE ROLE broker_test_mallory NOLOGIN IN ROLE broker_enqueue;

-- the victim (tenant acme): a failed job, a running one, an attempt, a cancel request, a pause
SELECT broker.broker_set_tenant('acme');
SELECT broker.broker_add_job('acme fails', 'SELECT 1/0', 1);
SELECT pg_temp.run_next(1);
SELECT broker.broker_add_job('acme running', 'SELECT 1', 2);
SELECT broker.broker_get(2);
SELECT broker.broker_cancel_job((SELECT job_id FROM broker.broker_jobs WHERE job_name = 'acme running'), 'acme''s own');
SELECT broker.broker_pause_queue(3);  -- as an administrator: queue 3 for everyone
INSERT INTO broker.broker_queue_pause (job_queue, tenant_id) VALUES (4, 'acme');
CREATE TEMP TABLE victim AS SELECT job_name, job_id FROM broker.broker_jobs;
GRANT SELECT ON victim TO broker_test_mallory;
SELECT broker.broker_set_tenant('default');
SELECT broker.broker_set_strict_tenancy(true);
INSERT INTO broker.broker_tenant_roles (tenant_id, role_name) VALUES ('evil', 'broker_test_mallory');

SET LOCAL ROLE broker_test_mallory;
SELECT broker.broker_set_tenant('evil');
SELECT throws_ok(format('SELECT broker.broker_cancel_job(%s)', (SELECT job_id FROM victim WHERE job_name = 'acme running')),
                 'P0002', NULL, 'cannot cancel another tenant''s running job: it does not exist for her');
SELECT throws_ok(format('SELECT broker.broker_retry_job(%s)', (SELECT job_id FROM victim WHERE job_name = 'acme fails')),
                 'P0002', NULL, 'cannot retry another tenant''s failed job');
SELECT throws_ok(format($$INSERT INTO broker.broker_job_actions (job_id, action) VALUES (%s, 'cancel')$$,
                        (SELECT job_id FROM victim WHERE job_name = 'acme running')),
                 '42501', NULL, 'a cancel request written directly for it violates the policy');
SELECT throws_ok(format($$INSERT INTO broker.broker_job_actions (job_id, action) VALUES (%s, 'retry')$$,
                        (SELECT job_id FROM victim WHERE job_name = 'acme fails')),
                 '42501', NULL, 'so does a retry written directly');
SELECT is_empty('SELECT * FROM broker.broker_job_attempts', 'she reads no attempt of another tenant');
SELECT is_empty('SELECT * FROM broker.broker_job_actions', 'nor its actions');
SELECT results_eq('SELECT job_queue, tenant_id FROM broker.broker_queue_pause', $$VALUES (3, NULL::text)$$,
                  'she sees the pause for everyone, not acme''s own');
SELECT is_empty('DELETE FROM broker.broker_queue_pause RETURNING job_queue', 'and cannot lift either');
SELECT throws_ok($$INSERT INTO broker.broker_queue_pause (job_queue, tenant_id) VALUES (5, NULL)$$, '42501', NULL,
                 'nor pause a queue for everyone');
SELECT is(broker.broker_pause_queue(5), true, 'she pauses queue 5 for herself');
SELECT is(broker.broker_pause_queue(3, false), false, 'resuming the pause for everyone changes nothing');
-- acting as acme is refused outright
SELECT broker.broker_set_tenant('acme');
SELECT throws_ok('SELECT broker.broker_pause_queue(4, false)', '42501',
                 'broker_pause_queue: role broker_test_mallory may not act for tenant ''acme''', 'she cannot act for acme: 42501');
SELECT throws_ok(format('SELECT broker.broker_retry_job(%s)', (SELECT job_id FROM victim WHERE job_name = 'acme fails')),
                 'P0002', NULL, 'nor retry as acme');
SELECT is_empty('SELECT * FROM broker.broker_job_attempts', 'nor read its attempts as acme');
SELECT throws_ok('SELECT * FROM broker.broker_cancel_requests(ARRAY[1::bigint])', '42501', NULL,
                 'the runner''s cancel check is not hers');
RESET ROLE;

SELECT results_eq($$SELECT job_queue, tenant_id FROM broker.broker_queue_pause ORDER BY 1$$,
                  $$VALUES (3, NULL::text), (4, 'acme'), (5, 'evil')$$, 'every pause is as it was, plus hers');
SELECT results_eq($$SELECT complete_status FROM broker.broker_jobs WHERE job_name IN ('acme fails', 'acme running') ORDER BY job_id$$,
                  $$VALUES (3::smallint), (1::smallint)$$, 'acme''s jobs are untouched');

SELECT * FROM finish();
ROLLBACK;
