-- broker_schedule_tick: due fires enqueue once, catch-up none/one/all with a cap, overlap skip/allow,
-- owners that lose their rights, tenants, and who may tick. (Two concurrent ticks: tests_py/test_schedules.py.)
BEGIN;
SELECT plan(41);
SET LOCAL TimeZone = 'UTC';

CREATE ROLE broker_test_alice NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_reporter NOLOGIN;
GRANT broker_test_reporter TO broker_test_alice;

SET LOCAL ROLE broker_test_alice;
SELECT broker.broker_add_schedule('every-minute', '* * * * *', 'SELECT 1', p_run_as => 'broker_test_reporter',
                                  p_job_queue => 3, p_job_priority => 4, p_max_attempts => 2, p_job_group => 'g');
RESET ROLE;
CREATE FUNCTION pg_temp.sched(p_name text) RETURNS broker.broker_schedule LANGUAGE sql AS
$$ SELECT * FROM broker.broker_schedule WHERE schedule_name = p_name $$;
CREATE FUNCTION pg_temp.tick() RETURNS integer LANGUAGE sql AS $$ SELECT jobs_enqueued FROM broker.broker_schedule_tick() $$;

-- nothing due yet
SELECT is(pg_temp.tick(), 0, 'nothing is due before the first fire time');
-- on time
UPDATE broker.broker_schedule SET next_fire_at = date_trunc('minute', now()) WHERE schedule_name = 'every-minute';
SELECT is(pg_temp.tick(), 1, 'a due fire enqueues one job');
SELECT is(pg_temp.tick(), 0, 'ticking again enqueues nothing');
SELECT is((SELECT ROW(job_name, job_group, job_queue, job_priority, run_as, enqueued_by, max_attempts, tenant_id,
                      idempotency_key, complete_status)::text FROM broker.broker_jobs),
          ROW('every-minute', 'g', 3, 4, 'broker_test_reporter', 'broker_test_alice', 2, 'default',
              format('broker_schedule:%s:%s', (pg_temp.sched('every-minute')).schedule_id,
                     date_part('epoch', date_trunc('minute', now()))), 0)::text,
          'the job: the schedule''s template, run as run_as, enqueued in the owner''s name, keyed by schedule and fire time');
SELECT is((SELECT schedule_id FROM broker.broker_jobs), (pg_temp.sched('every-minute')).schedule_id,
          'the job links to its schedule');
SELECT is((pg_temp.sched('every-minute')).next_fire_at, date_trunc('minute', now()) + interval '1 minute',
          'the next fire is planned');
SELECT is((pg_temp.sched('every-minute')).last_fire_at, date_trunc('minute', now()), 'last_fire_at');
SELECT is((pg_temp.sched('every-minute')).last_job_id, (SELECT job_id FROM broker.broker_jobs), 'last_job_id');

-- overlap: skip (default) while the previous job is pending
UPDATE broker.broker_schedule SET next_fire_at = date_trunc('minute', now()) WHERE schedule_name = 'every-minute';
SELECT is(pg_temp.tick(), 0, 'overlap skip: no job while the previous one is pending');
SELECT is((pg_temp.sched('every-minute')).skipped_fires, 1::bigint, 'the skipped fire is counted');
UPDATE broker.broker_jobs SET complete_status = 2, finished_at = now();
UPDATE broker.broker_schedule SET next_fire_at = date_trunc('minute', now()) WHERE schedule_name = 'every-minute';
SELECT is(pg_temp.tick(), 1, 'once the previous job finished, the fire enqueues');
UPDATE broker.broker_schedule SET next_fire_at = date_trunc('minute', now()), overlap = 'allow'
 WHERE schedule_name = 'every-minute';
SELECT is(pg_temp.tick(), 0, 'a fire time that already has an unfinished job is not enqueued twice (its key)');
UPDATE broker.broker_jobs SET idempotency_key = 'an earlier fire' WHERE complete_status = 0;
UPDATE broker.broker_schedule SET next_fire_at = date_trunc('minute', now()) WHERE schedule_name = 'every-minute';
SELECT is(pg_temp.tick(), 1, 'overlap allow: a job even while the previous one is pending');

-- catch-up after downtime (fires more than 60 s late are missed)
DELETE FROM broker.broker_jobs;
UPDATE broker.broker_schedule SET enabled = false;
SET LOCAL ROLE broker_test_alice;
SELECT broker.broker_add_schedule('monthly-one', '0 0 1 * *', 'SELECT 1', p_overlap => 'allow');
SELECT broker.broker_add_schedule('monthly-none', '0 0 1 * *', 'SELECT 1', p_catch_up => 'none');
SELECT broker.broker_add_schedule('monthly-all', '0 0 1 * *', 'SELECT 1', p_catch_up => 'all', p_catch_up_max => 5);
SELECT broker.broker_add_schedule('monthly-all-uncapped', '0 0 1 * *', 'SELECT 1', p_catch_up => 'all');
RESET ROLE;
UPDATE broker.broker_schedule SET next_fire_at = date_trunc('month', now()) - interval '12 months'
 WHERE schedule_name LIKE 'monthly-%';
SELECT is(pg_temp.tick(), 1 + 0 + 5 + 13, 'one + none + all (cap 5) + all (no cap reached)');
-- (how many of the dropped fires are counted depends on how far back the tick had to look)
SELECT results_eq($$SELECT s.schedule_name, count(j.job_id), s.skipped_fires BETWEEN 1 AND 13 - count(j.job_id)
                     FROM broker.broker_schedule s LEFT JOIN broker.broker_jobs j ON j.schedule_id = s.schedule_id
                     WHERE s.schedule_name LIKE 'monthly-%' GROUP BY 1, s.skipped_fires ORDER BY 1$$,
    $$VALUES ('monthly-all', 5::bigint, true), ('monthly-all-uncapped', 13, false), ('monthly-none', 0, true),
             ('monthly-one', 1, true)$$,
    '13 missed fires: jobs enqueued per policy, the dropped ones counted as skipped');
SELECT is((pg_temp.sched('monthly-all-uncapped')).skipped_fires, 0::bigint, 'nothing skipped when all fit the cap');
SELECT is((SELECT max(last_fire_at) FROM broker.broker_schedule WHERE schedule_name = 'monthly-one'),
          date_trunc('month', now()), 'catch-up one: the job is for the latest missed fire');
SELECT is(ARRAY(SELECT j.idempotency_key FROM broker.broker_jobs j JOIN broker.broker_schedule s USING (schedule_id)
                 WHERE s.schedule_name = 'monthly-all' ORDER BY j.job_id),
          ARRAY(SELECT format('broker_schedule:%s:%s', (pg_temp.sched('monthly-all')).schedule_id,
                              date_part('epoch', date_trunc('month', now()) - m * interval '1 month'))
                  FROM generate_series(4, 0, -1) AS m),
          'catch-up all: the latest five fires, oldest first');
SELECT is((SELECT count(DISTINCT next_fire_at) FROM broker.broker_schedule WHERE schedule_name LIKE 'monthly-%'), 1::bigint,
          'all four plan the same next fire');
SELECT is((pg_temp.sched('monthly-none')).next_fire_at, broker.broker_cron_next('0 0 1 * *', now()), '... the next one after now');

-- bounded work: a schedule a century behind costs the tick a couple of fires, not millions
UPDATE broker.broker_schedule SET enabled = false WHERE schedule_name LIKE 'monthly-%';
SET LOCAL ROLE broker_test_alice;
SELECT broker.broker_add_schedule('century', '* * * * *', 'SELECT 1');
RESET ROLE;
UPDATE broker.broker_schedule SET next_fire_at = '1926-01-01' WHERE schedule_name = 'century';
SELECT is(pg_temp.tick(), 1, 'a minutely schedule 100 years behind: one catch-up job');
SELECT is((pg_temp.sched('century')).skipped_fires, 1::bigint,
          'only the fires in the last two minutes were looked at (one dropped)');
UPDATE broker.broker_schedule SET enabled = true WHERE schedule_name LIKE 'monthly-%';

-- the tick's answer: when to come back
SELECT results_eq($$SELECT next_fire_at, seconds_until_next > 0 FROM broker.broker_schedule_tick()$$,
    $$SELECT min(next_fire_at), true FROM broker.broker_schedule WHERE enabled$$,
    'it returns the earliest next fire of the enabled schedules and the seconds until then');

-- disabled schedules do not fire; directly written ones get planned first
DELETE FROM broker.broker_jobs;
UPDATE broker.broker_schedule SET next_fire_at = now() - interval '1 hour' WHERE schedule_name = 'every-minute';
SELECT is(pg_temp.tick(), 0, 'a disabled schedule does not fire');
INSERT INTO broker.broker_schedule (schedule_name, cron_expr, execute_str, created_by, run_as)
VALUES ('direct', '*/5 * * * *', 'SELECT 1', 'broker_test_alice', 'broker_test_alice');
SELECT is(pg_temp.tick(), 0, 'a schedule written without a next fire time is planned, not fired');
SELECT is((pg_temp.sched('direct')).next_fire_at, broker.broker_cron_next('*/5 * * * *', now()), '... from now');

-- another tenant
SELECT broker.broker_set_tenant('acme');
SET LOCAL ROLE broker_test_alice;
SELECT broker.broker_add_schedule('acme-job', '* * * * *', 'SELECT 1');
RESET ROLE;
SELECT broker.broker_set_tenant('default');
UPDATE broker.broker_schedule SET next_fire_at = date_trunc('minute', now()) WHERE schedule_name = 'acme-job';
SELECT is(pg_temp.tick(), 1, 'schedules of every tenant fire');
SELECT is((SELECT tenant_id FROM broker.broker_jobs WHERE job_name = 'acme-job'), 'acme', 'in their own tenant');

-- owners who lose their rights; schedules that cannot be evaluated any more (the tick warns)
SET LOCAL client_min_messages = error;
UPDATE broker.broker_schedule SET next_fire_at = date_trunc('minute', now()), enabled = true, overlap = 'allow'
 WHERE schedule_name = 'every-minute';
REVOKE broker_test_reporter FROM broker_test_alice;
SELECT is(pg_temp.tick(), 0, 'no job when the owner may no longer run as run_as');
SELECT is(ROW((pg_temp.sched('every-minute')).enabled, (pg_temp.sched('every-minute')).last_error)::text,
          ROW(false, 'owner broker_test_alice may no longer run jobs as broker_test_reporter')::text,
          'the schedule is disabled, with the reason');
UPDATE broker.broker_schedule SET time_zone = 'Gone/Zone', next_fire_at = now() - interval '1 minute'
 WHERE schedule_name = 'direct';
SELECT is(pg_temp.tick(), 0, 'a schedule whose zone is unknown does not fire');
SELECT is((pg_temp.sched('direct')).last_error, 'broker_cron_next: unknown time zone ''Gone/Zone''',
          '... and is disabled, with the error');
SET LOCAL ROLE broker_test_alice;
SELECT throws_ok($$SELECT broker.broker_enable_schedule('every-minute')$$, '42501', NULL,
    'it cannot be enabled again without the right to run as run_as');
RESET ROLE;
GRANT broker_test_reporter TO broker_test_alice;
SET LOCAL ROLE broker_test_alice;
SELECT isnt(broker.broker_enable_schedule('every-minute'), NULL, 'once the right is back, enabling works');
RESET ROLE;
SELECT is((pg_temp.sched('every-minute')).last_error, NULL, '... and clears the error');

-- an owner no longer mapped to the schedule's tenant (strict tenancy), an owner that was dropped
UPDATE broker.broker_schedule SET next_fire_at = date_trunc('minute', now()), overlap = 'allow'
 WHERE schedule_name = 'acme-job';
SELECT broker.broker_set_strict_tenancy(true);
SELECT is(pg_temp.tick(), 0, 'no job when the owner may no longer act for the tenant');
SELECT is((pg_temp.sched('acme-job')).last_error, 'owner broker_test_alice may no longer act for tenant ''acme''',
          '... and the reason');
SELECT broker.broker_set_strict_tenancy(false);
CREATE ROLE broker_test_gone NOLOGIN IN ROLE broker_enqueue;
SET LOCAL ROLE broker_test_gone;
SELECT broker.broker_add_schedule('orphan', '* * * * *', 'SELECT 1');
RESET ROLE;
DROP OWNED BY broker_test_gone;
DROP ROLE broker_test_gone;
UPDATE broker.broker_schedule SET next_fire_at = date_trunc('minute', now()) WHERE schedule_name = 'orphan';
SELECT is(pg_temp.tick(), 0, 'no job when the owner was dropped');
SELECT is(ROW((pg_temp.sched('orphan')).enabled, (pg_temp.sched('orphan')).last_error)::text,
          ROW(false, 'owner role broker_test_gone no longer exists')::text, '... disabled, with the reason');

-- who may tick
SELECT function_privs_are('broker', 'broker_schedule_tick', '{}'::text[], 'broker_runtime', ARRAY['EXECUTE'],
                          'the runner role may tick');
SELECT function_privs_are('broker', 'broker_schedule_tick', '{}'::text[], 'broker_enqueue', '{}'::text[],
                          'enqueuers may not');

SELECT * FROM finish();
ROLLBACK;
