-- broker_pause_queue: claims skip a paused queue (running jobs finish, enqueueing goes on);
-- a tenant pauses only its own jobs there, an administrator the queue for every tenant;
-- broker_queue_stats shows it; bad input is refused with a SQLSTATE.
BEGIN;
SELECT plan(20);
\ir ../lib/run_next.psql

CREATE ROLE broker_test_alice NOLOGIN IN ROLE broker_enqueue;
GRANT broker_test_alice TO CURRENT_USER;
SELECT broker.broker_add_job('q1 default', 'SELECT 1', 1);
SELECT broker.broker_add_job('q2 default', 'SELECT 1', 2);
SELECT broker.broker_add_job('running', 'SELECT 1', 3);
CREATE TEMP TABLE running AS SELECT job_id, lease_token FROM broker.broker_get(3);
SELECT broker.broker_set_tenant('acme');
SELECT broker.broker_add_job('q1 acme', 'SELECT 1', 1);
SELECT broker.broker_set_tenant('default');

-- a tenant (alice, tenant acme) pauses its own jobs of queue 1
SET LOCAL ROLE broker_test_alice;
SELECT broker.broker_set_tenant('acme');
SELECT is(broker.broker_pause_queue(1), true, 'a tenant pauses queue 1 for itself');
SELECT is(broker.broker_pause_queue(1), false, 'pausing again changes nothing');
SELECT results_eq($$SELECT job_queue, tenant_id, paused_by FROM broker.broker_queue_pause$$,
                  $$VALUES (1, 'acme'::text, 'broker_test_alice'::name)$$, 'the pause is acme''s, by alice');
SELECT throws_ok($$INSERT INTO broker.broker_queue_pause (job_queue, tenant_id) VALUES (2, NULL)$$, '42501', NULL,
                 'a tenant cannot pause a queue for everyone by hand');
RESET ROLE;
SELECT is(pg_temp.run_next(1), 'q1 default', 'the other tenant''s job of queue 1 still runs');
SELECT is(pg_temp.run_next(1), NULL, 'acme''s job of queue 1 is not claimed');
SELECT results_eq($$SELECT job_queue, tenant_id, ready, paused FROM broker.broker_queue_stats() WHERE job_queue = 1$$,
                  $$VALUES (1, 'acme'::text, 1::bigint, true), (1, 'default', 0::bigint, false)$$,
                  'broker_queue_stats: paused for acme only');

-- an administrator (here: the superuser) pauses queue 2 for everyone
SELECT is(broker.broker_pause_queue(2), true, 'an administrator pauses queue 2');
SELECT is(pg_temp.run_next(2), NULL, 'nothing of queue 2 is claimed');
SELECT results_eq($$SELECT paused FROM broker.broker_queue_stats() WHERE job_queue = 2$$, $$VALUES (true)$$,
                  'broker_queue_stats: queue 2 paused');
SELECT broker.broker_pause_queue(3);
SELECT results_eq($$SELECT complete_status FROM broker.broker_run((SELECT job_id FROM running), (SELECT lease_token FROM running))$$,
                  $$VALUES (2::smallint)$$, 'a job claimed before its queue was paused finishes');

-- resume
SET LOCAL ROLE broker_test_alice;
SELECT broker.broker_set_tenant('acme');
SELECT is(broker.broker_pause_queue(2, false), false, 'a tenant cannot lift an administrator''s pause');
SELECT is(broker.broker_pause_queue(1, false), true, 'it resumes its own');
RESET ROLE;
SELECT broker.broker_set_tenant('acme');
SELECT is(pg_temp.run_next(1), 'q1 acme', 'acme''s job of queue 1 runs again');
SELECT broker.broker_set_tenant('default');
SELECT is(broker.broker_pause_queue(2, false), true, 'the administrator resumes queue 2');
SELECT is(pg_temp.run_next(2), 'q2 default', 'and it runs');

SELECT throws_ok('SELECT broker.broker_pause_queue(NULL)', '22004', NULL, 'NULL queue: 22004')
UNION ALL
SELECT throws_ok('SELECT broker.broker_pause_queue(1, NULL)', '22004', NULL, 'NULL p_paused: 22004')
UNION ALL
SELECT throws_ok('SELECT broker.broker_pause_queue(0)', '22023', 'broker_pause_queue: queues are 1 to 1000, got 0', 'queue 0: 22023')
UNION ALL
SELECT throws_ok('SELECT broker.broker_pause_queue(1001)', '22023', NULL, 'queue 1001: 22023');

SELECT * FROM finish();
ROLLBACK;
