-- broker_add_task_schedule: a schedule that enqueues a task (its name, JSON arguments and options) at each fire,
-- through the same tick, overlap rule and run-now as a schedule of SQL jobs; its tasks are claimed by name. A
-- schedule of tasks needs a task name's queue and JSON arguments however it is written; bad input is refused with
-- a SQLSTATE. The tick is driven at a fixed instant (broker._schedule_tick_at): no outcome depends on the date.
BEGIN;
SELECT plan(16);
SET LOCAL TimeZone = 'UTC';

CREATE ROLE broker_test_task_sched NOLOGIN IN ROLE broker_enqueue;
GRANT broker_test_task_sched TO CURRENT_USER;
CREATE FUNCTION pg_temp.t0() RETURNS timestamptz LANGUAGE sql IMMUTABLE AS $$ SELECT '2027-06-15 10:00:30+00'::timestamptz $$;

SET LOCAL ROLE broker_test_task_sched;
SELECT broker.broker_set_tenant('acme');
SELECT ok((SELECT next_fire_at IS NOT NULL FROM broker.broker_add_task_schedule(
              'digest', '* * * * *', 'send_digest', '{"kind": "daily"}', p_priority => 3, p_max_attempts => 2,
              p_timeout => interval '1 minute', p_concurrency_key => 'mail')),
          'an enqueuer schedules a task');
RESET ROLE;
SELECT results_eq($$SELECT s.tenant_id, s.job_language, s.execute_str::jsonb, q.task_name, s.created_by
                      FROM broker.broker_schedule AS s JOIN broker.broker_task_queue AS q USING (job_queue)$$,
                  $$VALUES ('acme'::text, 'task'::text, '{"kind": "daily"}'::jsonb, 'send_digest'::text, 'broker_test_task_sched'::name)$$,
                  'a schedule of the tenant, in the task name''s queue, with its arguments');
SELECT is(broker._executor('broker_test_task_sched'), NULL, 'no executor is made for a schedule of tasks');

UPDATE broker.broker_schedule SET next_fire_at = '2027-06-15 10:00:00+00' WHERE schedule_name = 'digest';
SELECT is((SELECT jobs_enqueued FROM broker._schedule_tick_at(pg_temp.t0())), 1, 'a due fire enqueues one task');
SELECT results_eq($$SELECT job_name, job_group, job_language, execute_str::jsonb, job_priority, max_attempts, job_timeout,
                           concurrency_key, tenant_id, enqueued_by, schedule_id IS NOT NULL
                      FROM broker.broker_jobs$$,
                  $$VALUES ('send_digest'::text, 'digest'::text, 'task'::text, '{"kind": "daily"}'::jsonb, 3, 2,
                            interval '1 minute', 'mail'::text, 'acme'::text, 'broker_test_task_sched'::name, true)$$,
                  'a task named after its task (its group the schedule''s), with the schedule''s options, in the owner''s name');
SELECT is((SELECT jobs_enqueued FROM broker._schedule_tick_at(pg_temp.t0())), 0, 'ticking again enqueues nothing');

SELECT broker.broker_set_tenant('acme');
SELECT is((SELECT (task, args)::text FROM broker.broker_claim_tasks(ARRAY['send_digest'])),
          '(send_digest,"{""kind"": ""daily""}")', 'a worker claims it by name');
SELECT is((SELECT is_new FROM broker.broker_run_schedule_now('digest')), false,
          'run now: overlap skip while its task is unfinished');
UPDATE broker.broker_jobs SET complete_status = 2, finished_at = now(), lease_token = NULL, lease_expires_at = NULL;
SET LOCAL ROLE broker_test_task_sched;
SELECT is((SELECT is_new FROM broker.broker_run_schedule_now('digest')), true, 'then run now enqueues another');
RESET ROLE;
SELECT is((SELECT count(*) FROM broker.broker_claim_tasks(ARRAY['send_digest'])), 1::bigint, 'which is claimed by name too');
SELECT broker.broker_set_tenant('default');

SET LOCAL ROLE broker_test_task_sched;
SELECT throws_ok($$SELECT * FROM broker.broker_add_task_schedule('s1', '* * * * *', NULL)$$, '22004', NULL, 'no task name: 22004');
SELECT throws_ok($$SELECT * FROM broker.broker_add_task_schedule('s2', '* * * * *', 't', NULL)$$, '22004',
                 'broker_add_task_schedule: p_args must not be NULL', 'no arguments: 22004');
SELECT throws_ok($$SELECT * FROM broker.broker_add_task_schedule('s3', 'every day', 't')$$, '22023', NULL,
                 'a bad cron expression: 22023, as for any schedule');
SELECT throws_ok($$SELECT * FROM broker.broker_add_task_schedule('digest', '* * * * *', 't', p_tenant_id => 'acme')$$,
                 '23505', 'broker_add_task_schedule: schedule ''digest'' exists already', 'a name the tenant has: 23505');
SELECT throws_ok($$SELECT * FROM broker.broker_add_schedule('s4', '* * * * *', '{}', p_job_queue => -999, p_job_language => 'task')$$,
                 '22023', 'broker_add_schedule: p_job_queue -999 is no task name''s queue', 'a task queue that is none: 22023');
SELECT throws_ok($$INSERT INTO broker.broker_schedule (schedule_name, cron_expr, execute_str, job_language, job_queue)
                   VALUES ('s5', '* * * * *', 'not json', 'task', -1)$$,
                 '22P02', NULL, 'a raw INSERT of a task schedule with arguments that are not JSON fails the table CHECK''s cast');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
