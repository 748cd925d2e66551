-- broker_pause_task: claims of a paused task name skip its tasks (running ones finish, enqueueing
-- goes on, other names are claimed); a tenant pauses only its own tasks of the name, an
-- administrator the name for every tenant; a resume wakes the name's workers; a name can be
-- paused before its first task; a worker cannot pause; bad input is refused with a SQLSTATE.
BEGIN;
SELECT plan(22);

CREATE ROLE broker_test_pause_alice NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_pause_worker NOLOGIN IN ROLE broker_worker;
GRANT broker_test_pause_alice, broker_test_pause_worker TO CURRENT_USER;
SELECT broker.broker_set_tenant('acme');
SELECT broker.broker_add_task('mail', '{"n": 1}');
SELECT broker.broker_add_task('mail', '{"n": 2}');
SELECT broker.broker_add_task('resize', '{"n": 3}');
CREATE TEMP TABLE running AS SELECT job_id, lease_token FROM broker.broker_claim_tasks(ARRAY['mail']);
SELECT broker.broker_set_tenant('other');
SELECT broker.broker_add_task('mail', '{"n": 4}');

-- alice (tenant acme) pauses acme's mail
SET LOCAL ROLE broker_test_pause_alice;
SELECT broker.broker_set_tenant('acme');
SELECT is(broker.broker_pause_task('mail'), true, 'a tenant pauses a task name for itself');
SELECT is(broker.broker_pause_task('mail'), false, 'pausing again changes nothing');
SELECT results_eq($$SELECT p.tenant_id, p.paused_by FROM broker.broker_queue_pause AS p
                     JOIN broker.broker_task_queue AS q USING (job_queue) WHERE q.task_name = 'mail'$$,
                  $$VALUES ('acme'::text, 'broker_test_pause_alice'::name)$$, 'on the name''s queue, acme''s, by alice');
SELECT lives_ok($$SELECT broker.broker_add_task('mail', '{"n": 5}')$$, 'enqueueing goes on');
RESET ROLE;
SELECT broker.broker_set_tenant('acme');
SELECT is_empty($$SELECT * FROM broker.broker_claim_tasks(ARRAY['mail'], 10)$$, 'acme''s mail tasks are not claimed');
SELECT is((SELECT array_agg(args ->> 'n') FROM broker.broker_claim_tasks(ARRAY['mail', 'resize'], 10)), ARRAY['3'],
          'another name of acme''s still is');
SELECT is(broker.broker_complete_task((SELECT job_id FROM running), (SELECT lease_token FROM running)), true,
          'a task claimed before the pause completes');
SELECT broker.broker_set_tenant('other');
SELECT is((SELECT array_agg(args ->> 'n') FROM broker.broker_claim_tasks(ARRAY['mail'], 10)), ARRAY['4'],
          'the other tenant''s mail still runs');
SELECT broker.broker_set_tenant('acme');
SELECT results_eq($$SELECT ready, paused FROM broker.broker_queue_stats()
                    WHERE job_queue = (SELECT job_queue FROM broker.broker_task_queue WHERE task_name = 'mail')
                      AND tenant_id = 'acme'$$,
                  $$VALUES (2::bigint, true)$$, 'broker_queue_stats: acme''s two mail tasks ready, paused');

-- a worker claims, it does not pause
SET LOCAL ROLE broker_test_pause_worker;
SELECT throws_ok($$SELECT broker.broker_pause_task('mail', false)$$, '42501', NULL, 'a worker cannot resume a name');
RESET ROLE;

-- an administrator (here: the superuser) pauses a name never enqueued, for everyone
SELECT is(broker.broker_pause_task('report'), true, 'an administrator pauses a name before its first task');
SELECT broker.broker_add_task('report', '{"n": 6}');
SELECT broker.broker_set_tenant('other');
SELECT broker.broker_add_task('report', '{"n": 7}');
SELECT is_empty($$SELECT * FROM broker.broker_claim_tasks(ARRAY['report'], 10)$$, 'no tenant''s report is claimed');

-- resume
SET LOCAL ROLE broker_test_pause_alice;
SELECT broker.broker_set_tenant('acme');
SELECT is(broker.broker_pause_task('report', false), false, 'a tenant cannot lift an administrator''s pause');
SELECT is(broker.broker_pause_task('mail', false), true, 'it resumes its own');
SELECT is(broker.broker_pause_task('never_seen', false), false, 'resuming a name never seen changes nothing');
RESET ROLE;
SELECT ok(NOT EXISTS (SELECT FROM broker.broker_task_queue WHERE task_name = 'never_seen'), 'and makes it no queue');
SELECT broker.broker_set_tenant('acme');
SELECT is((SELECT array_agg(args ->> 'n' ORDER BY args ->> 'n') FROM broker.broker_claim_tasks(ARRAY['mail'], 10)), ARRAY['2', '5'],
          'acme''s mail runs again');
SELECT is(broker.broker_pause_task('report', false), true, 'the administrator resumes report');
SELECT is((SELECT count(*) FROM broker.broker_claim_tasks(ARRAY['report'], 10)), 1::bigint, 'acme''s report runs');

SELECT throws_ok('SELECT broker.broker_pause_task(NULL)', '22004', NULL, 'NULL name: 22004')
UNION ALL
SELECT throws_ok($$SELECT broker.broker_pause_task('mail', NULL)$$, '22004', NULL, 'NULL p_paused: 22004')
UNION ALL
SELECT throws_ok($$SELECT broker.broker_pause_task(' ')$$, '22023', NULL, 'a blank name: 22023');

SELECT * FROM finish();
ROLLBACK;
