-- broker_run_schedule_now: one job of the schedule now, with the columns a fire gives it, in the asker's
-- name; the next fire and the last fire stay; a paused schedule runs and stays paused; the overlap rule of
-- the schedule holds both ways (a run now waits for an unfinished job, the next fire waits for a run now);
-- the errors. Fires are driven through broker._schedule_tick_at at a fixed instant, so no outcome depends on
-- the date. (The NOTIFY and the command line: tests_py/acceptance/test_schedules_command_line.py.)
BEGIN;
SELECT plan(23);
SET LOCAL TimeZone = 'UTC';

CREATE ROLE broker_test_alice NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_reporter NOLOGIN;
GRANT broker_test_reporter TO broker_test_alice;
CREATE ROLE broker_test_deputy NOLOGIN IN ROLE broker_enqueue, broker_test_alice;   -- a member of the owner
CREATE ROLE broker_test_bob NOLOGIN IN ROLE broker_enqueue;                         -- not one

CREATE FUNCTION pg_temp.f0() RETURNS timestamptz LANGUAGE sql IMMUTABLE AS $$ SELECT '2027-06-15 10:00:00+00'::timestamptz $$;
CREATE FUNCTION pg_temp.sched(p_name text) RETURNS broker.broker_schedule LANGUAGE sql AS
$$ SELECT * FROM broker.broker_schedule WHERE schedule_name = p_name $$;
-- every column of a job that a fire sets from its schedule
CREATE FUNCTION pg_temp.template(p_job_id bigint) RETURNS text LANGUAGE sql AS $$
    SELECT ROW(tenant_id, job_name, job_group, execute_str, job_language, job_queue, job_priority, run_as, schedule_id,
               max_attempts, job_timeout, job_search_path, autonomous, concurrency_key, attempts)::text
      FROM broker.broker_jobs WHERE job_id = p_job_id $$;

SET LOCAL ROLE broker_test_alice;
SELECT broker.broker_add_schedule('rollup', '0 3 * * *', 'SELECT 1', p_time_zone => 'Europe/Berlin',
    p_run_as => 'broker_test_reporter', p_job_queue => 3, p_job_priority => 4, p_max_attempts => 2,
    p_job_group => 'g', p_job_timeout => '5 minutes', p_search_path => 'public', p_concurrency_key => 'crm');
RESET ROLE;
-- a fire, for comparison: the tick at a fixed instant
UPDATE broker.broker_schedule SET next_fire_at = pg_temp.f0() WHERE schedule_name = 'rollup';
SELECT is((SELECT jobs_enqueued FROM broker._schedule_tick_at(pg_temp.f0() + interval '10 seconds')), 1, 'a fire, for comparison');
CREATE TEMP TABLE fired AS SELECT job_id FROM broker.broker_jobs;
GRANT SELECT ON fired TO PUBLIC;
UPDATE broker.broker_jobs SET complete_status = 2, finished_at = pg_temp.f0() + interval '20 seconds';
CREATE TEMP TABLE plan_before AS SELECT next_fire_at, last_fire_at, enabled FROM broker.broker_schedule;
GRANT SELECT ON plan_before TO PUBLIC;

-- a member of the owner runs it now
SET LOCAL ROLE broker_test_deputy;
CREATE TEMP TABLE ran AS SELECT * FROM broker.broker_run_schedule_now('rollup');
SELECT is((SELECT is_new FROM ran), true, 'run now: a new job');
SELECT is(pg_temp.template((SELECT job_id FROM ran)), pg_temp.template((SELECT job_id FROM fired)),
          'its tenant, name, group, SQL, language, queue, priority, run_as, schedule, attempts, timeout, search_path, '
          'autonomous and concurrency key are a fire''s');
SELECT is((SELECT enqueued_by FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM ran)), 'broker_test_deputy'::name,
          'it is enqueued in the name of whoever asked (a fire''s is the owner''s)');
SELECT is((SELECT idempotency_key FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM ran)), NULL,
          'it has no idempotency key (broker_schedule:* keys belong to fire times)');
SELECT ok((SELECT run_after <= now() AND complete_status = 0 FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM ran)),
          'it is pending, claimable now');
SELECT is((SELECT ROW(next_fire_at, last_fire_at, enabled)::text FROM broker.broker_schedule),
          (SELECT ROW(next_fire_at, last_fire_at, enabled)::text FROM plan_before),
          'the next fire and the last (cron) fire stay where they were');
SELECT is((pg_temp.sched('rollup')).last_job_id, (SELECT job_id FROM ran), 'the job becomes the schedule''s last job');

-- overlap = skip: the job is unfinished, so another run now returns it and enqueues nothing
SELECT is((SELECT ROW(job_id, is_new)::text FROM broker.broker_run_schedule_now('rollup')),
          ROW((SELECT job_id FROM ran), false)::text, 'overlap skip: the unfinished job, is_new false');
SELECT is((SELECT count(*) FROM broker.broker_jobs), 2::bigint, '... and no new job');
RESET ROLE;
-- ... and the next fire waits for the run now's job as for a fired one
UPDATE broker.broker_schedule SET next_fire_at = pg_temp.f0() + interval '1 day' WHERE schedule_name = 'rollup';
SELECT is((SELECT jobs_enqueued FROM broker._schedule_tick_at(pg_temp.f0() + interval '1 day 10 seconds')), 0,
          'a due fire is skipped while the run now''s job is pending (overlap skip)');
-- overlap = allow: a second job even while the first is pending
UPDATE broker.broker_schedule SET overlap = 'allow' WHERE schedule_name = 'rollup';
SET LOCAL ROLE broker_test_alice;
SELECT is((SELECT is_new FROM broker.broker_run_schedule_now('rollup')), true, 'overlap allow: a second job beside the pending one');
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE complete_status = 0), 2::bigint, 'two pending jobs');

-- paused: it runs now and stays paused, with no next fire
SELECT broker.broker_enable_schedule('rollup', false);
SELECT is((SELECT is_new FROM broker.broker_run_schedule_now('rollup')), true, 'a paused schedule runs now');
SELECT is((SELECT ROW(enabled, next_fire_at)::text FROM broker.broker_schedule), ROW(false, NULL::timestamptz)::text,
          '... and stays paused, with no next fire');

-- p_tenant_id: that tenant's schedule of the name, for this call only
SELECT broker.broker_add_schedule('rollup', '0 4 * * *', 'SELECT 2', p_tenant_id => 'tenant_a');
CREATE TEMP TABLE ran_a AS SELECT * FROM broker.broker_run_schedule_now('rollup', 'tenant_a');
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM ran_a)), 0::bigint,
          'p_tenant_id: the job is the named tenant''s (not one of the default tenant)');
SELECT is(broker.broker_current_tenant(), 'default', 'and the transaction''s tenant is as it was');
SELECT broker._set_tenant('test', 'tenant_a');
SELECT is((SELECT execute_str FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM ran_a)), 'SELECT 2',
          'tenant a''s schedule ran, in tenant a');
SELECT broker._set_tenant('test', 'default');

-- errors
SELECT throws_ok($$SELECT * FROM broker.broker_run_schedule_now(NULL)$$, '22004',
    'broker_run_schedule_now: p_schedule_name must not be NULL', 'a NULL name is 22004');
SELECT throws_ok($$SELECT * FROM broker.broker_run_schedule_now('no-such')$$, '42704',
    'broker_run_schedule_now: schedule ''no-such'' does not exist in tenant ''default''', 'a missing schedule is 42704');
RESET ROLE;
SET LOCAL ROLE broker_test_bob;
SELECT throws_ok($$SELECT * FROM broker.broker_run_schedule_now('rollup')$$, '42501',
    'broker_run_schedule_now: schedule ''rollup'' belongs to broker_test_alice', 'someone else''s schedule is 42501');
RESET ROLE;
-- the owner lost the run_as role since: refused at once, naming it
REVOKE broker_test_reporter FROM broker_test_alice;
SET LOCAL ROLE broker_test_alice;
SELECT throws_ok($$SELECT * FROM broker.broker_run_schedule_now('rollup')$$, '42501',
    'broker_run_schedule_now: role broker_test_alice may not enqueue jobs that run as broker_test_reporter',
    'a run_as the asker may no longer use is 42501');
RESET ROLE;
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE tenant_id = 'default'), 4::bigint,
          'the refused calls enqueued nothing');

SELECT * FROM finish();
ROLLBACK;
