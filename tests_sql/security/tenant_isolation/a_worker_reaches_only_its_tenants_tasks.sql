-- Task workers (broker_worker) against another tenant, as an attacker would try: a worker of
-- tenant a cannot claim, complete, fail or renew tenant b's tasks, even with b's lease token;
-- under strict tenancy its login cannot act for b at all; it can do nothing but tasks; an
-- enqueuer cannot claim tasks, nor plant a task in another name's queue. Bad input gets its SQLSTATE.
-- (SET SESSION AUTHORIZATION: the task functions check the session's login, as a worker connects, or
-- the role it SET: a_worker_after_set_role_acts_only_for_that_roles_tenants.sql.)
BEGIN;
SELECT plan(29);

CREATE ROLE broker_test_worker_a NOLOGIN IN ROLE broker_worker;
CREATE ROLE broker_test_enq_a NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_enq_b NOLOGIN IN ROLE broker_enqueue;

SET LOCAL SESSION AUTHORIZATION broker_test_enq_b;
SELECT broker.broker_set_tenant('b');
CREATE TEMP TABLE b_task AS SELECT job_id AS id FROM broker.broker_add_task('render', '{"secret": "b"}');
GRANT SELECT ON b_task TO PUBLIC;
RESET SESSION AUTHORIZATION;
SET LOCAL SESSION AUTHORIZATION broker_test_enq_a;
SELECT broker.broker_set_tenant('a');
SELECT broker.broker_add_task('render', '{"mine": "a"}');
-- an enqueuer claims no tasks, and cannot plant one in another name's queue
SELECT throws_ok($$SELECT * FROM broker.broker_claim_tasks(ARRAY['render'])$$, '42501', NULL, 'an enqueuer cannot claim tasks');
SELECT broker.broker_add_task('other', '{}');
SELECT throws_ok(format($$INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_language, job_queue)
                          VALUES ('render', 'g', '{}', 'task', %s)$$,
                        (SELECT job_queue FROM broker.broker_task_queue WHERE task_name = 'other')),
                 '42501', NULL, 'a raw insert of a task into another name''s queue violates the policy');
SELECT throws_ok($$SELECT * FROM broker.broker_add_job('t', '{}', 1, p_job_language => 'task')$$, '22023',
                 'broker_add_job: p_job_language task: tasks are enqueued with broker_add_task', 'broker_add_job points at broker_add_task');
SELECT throws_ok(format($$SELECT * FROM broker.broker_add_job('render', '{}', %s, p_job_language => 'task')$$,
                        (SELECT job_queue FROM broker.broker_task_queue WHERE task_name = 'other')),
                 '42501', NULL, 'and cannot put a task into another name''s queue either');
SELECT throws_ok($$SELECT * FROM broker.broker_add_task(NULL)$$, '22004', NULL, 'a NULL task name: 22004');
SELECT throws_ok($$SELECT * FROM broker.broker_add_task('  ')$$, '22023', NULL, 'a blank task name: 22023');
SELECT throws_ok($$SELECT * FROM broker.broker_add_task(repeat('x', 201))$$, '22023', NULL, 'a task name over 200 characters: 22023');
SELECT throws_ok($$SELECT * FROM broker.broker_add_task('render', NULL)$$, '22004', NULL, 'NULL arguments: 22004');
RESET SESSION AUTHORIZATION;

SET LOCAL SESSION AUTHORIZATION broker_test_worker_a;
SELECT broker.broker_set_tenant('a');
CREATE TEMP TABLE got AS SELECT * FROM broker.broker_claim_tasks(ARRAY['render'], 10);
GRANT SELECT ON got TO PUBLIC;
SELECT is(ARRAY(SELECT args::text FROM got), ARRAY['{"mine": "a"}'], 'a''s worker claims a''s task, not b''s');
SELECT throws_ok(format('SELECT broker.broker_complete_task(%s, %L)', (SELECT id FROM b_task), gen_random_uuid()),
                 'P0002', format('broker_complete_task: task %s does not exist', (SELECT id FROM b_task)),
                 'b''s task does not exist for a''s worker');
RESET SESSION AUTHORIZATION;
-- b's task claimed by b's side; its token stolen
CREATE TEMP TABLE b_claim AS SELECT * FROM broker.broker_claim_tasks(ARRAY['render'], 10) WHERE false;
GRANT SELECT ON b_claim TO PUBLIC;
SELECT broker.broker_set_tenant('b');
INSERT INTO b_claim SELECT * FROM broker.broker_claim_tasks(ARRAY['render'], 10);
SELECT broker.broker_set_tenant('a');
SET LOCAL SESSION AUTHORIZATION broker_test_worker_a;
SELECT broker.broker_set_tenant('a');
SELECT throws_ok(format('SELECT broker.broker_complete_task(%s, %L)', (SELECT job_id FROM b_claim), (SELECT lease_token FROM b_claim)),
                 'P0002', NULL, 'a stolen token does not complete b''s task');
SELECT throws_ok(format('SELECT broker.broker_fail_task(%s, %L, %L)', (SELECT job_id FROM b_claim), (SELECT lease_token FROM b_claim), 'x'),
                 'P0002', NULL, 'nor fail it');
SELECT throws_ok(format('SELECT broker.broker_extend_task(%s, %L)', (SELECT job_id FROM b_claim), (SELECT lease_token FROM b_claim)),
                 'P0002', NULL, 'nor renew it');
SELECT throws_ok(format('SELECT broker.broker_release_task(%s, %L)', (SELECT job_id FROM b_claim), (SELECT lease_token FROM b_claim)),
                 'P0002', NULL, 'nor hand it back');
SELECT throws_ok(format('SELECT * FROM broker.broker_complete_tasks(ARRAY[%s], ARRAY[%L]::uuid[])', (SELECT job_id FROM b_claim), (SELECT lease_token FROM b_claim)),
                 'P0002', NULL, 'nor complete it in a batch');
-- a worker does tasks and nothing else
SELECT throws_ok($$SELECT count(*) FROM broker.broker_jobs$$, '42501', NULL, 'a worker reads no table');
SELECT throws_ok($$SELECT * FROM broker.broker_add_job('x', 'SELECT 1')$$, '42501', NULL, 'enqueues no SQL job');
SELECT throws_ok($$SELECT * FROM broker.broker_get(1, NULL, 60, 1)$$, '42501', NULL, 'claims no SQL job');
SELECT throws_ok($$SELECT * FROM broker._claim(-1, NULL, 60, 10, NULL, 'b')$$, '42501', NULL, 'nor calls the claim underneath');
-- bad input
SELECT throws_ok($$SELECT * FROM broker.broker_claim_tasks(NULL)$$, '22004', NULL, 'NULL names: 22004');
SELECT throws_ok($$SELECT * FROM broker.broker_claim_tasks('{}')$$, '22023', NULL, 'no name: 22023');
SELECT throws_ok($$SELECT * FROM broker.broker_claim_tasks(ARRAY['render', NULL])$$, '22004', NULL, 'a NULL name: 22004');
SELECT throws_ok($$SELECT * FROM broker.broker_claim_tasks(ARRAY['render'], 0)$$, '22023', NULL, 'a limit of 0: 22023');
SELECT throws_ok($$SELECT * FROM broker.broker_claim_tasks(ARRAY['render'], 1, 3601)$$, '22023', NULL, 'a lease over an hour: 22023');
SELECT throws_ok($$SELECT broker.broker_complete_task(NULL, NULL)$$, '22004', NULL, 'NULL id and token: 22004');
SELECT throws_ok(format('SELECT broker.broker_fail_task(%s, %L, %L, NULL)', (SELECT job_id FROM got), (SELECT lease_token FROM got), 'x'),
                 '22004', NULL, 'a NULL p_retry: 22004');
RESET SESSION AUTHORIZATION;

-- strict tenancy: the worker's login acts only for its mapped tenant
SELECT broker.broker_set_strict_tenancy(true);
INSERT INTO broker.broker_tenant_roles (tenant_id, role_name) VALUES ('a', 'broker_test_worker_a');
SET LOCAL SESSION AUTHORIZATION broker_test_worker_a;
SELECT broker.broker_set_tenant('a');
SELECT is(broker.broker_complete_task((SELECT job_id FROM got), (SELECT lease_token FROM got), '{"ok": 1}'), true,
          'its mapped tenant: the worker completes its task');
SELECT broker.broker_set_tenant('b');
SELECT throws_ok($$SELECT * FROM broker.broker_claim_tasks(ARRAY['render'])$$, '42501',
                 'broker_claim_tasks: role broker_test_worker_a may not act for tenant ''b''', 'another tenant: 42501');
SELECT throws_ok(format('SELECT broker.broker_extend_task(%s, %L)', (SELECT job_id FROM b_claim), (SELECT lease_token FROM b_claim)),
                 '42501', NULL, 'even with b''s own token');
RESET SESSION AUTHORIZATION;

SELECT * FROM finish();
ROLLBACK;
