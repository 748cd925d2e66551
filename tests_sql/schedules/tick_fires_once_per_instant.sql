-- broker_schedule_tick at fixed instants: due fires enqueue once, overlap skip/allow, owners that
-- lose their rights, tenants, and who may tick. The tick is driven through broker._schedule_tick_at,
-- so every fixture names its own instant and no outcome depends on the date the suite runs.
-- (Catch-up policies at many instants: policies_at_instants.sql. Two concurrent ticks:
-- tests_py/test_schedules.py.)
BEGIN;
SELECT plan(41);
SET LOCAL TimeZone = 'UTC';

CREATE ROLE broker_test_alice NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_reporter NOLOGIN;
GRANT broker_test_reporter TO broker_test_alice;

-- t0: the instant of every tick in this file; f0: its fire time (30 s earlier, so on time)
CREATE FUNCTION pg_temp.t0() RETURNS timestamptz LANGUAGE sql IMMUTABLE AS $$ SELECT '2027-06-15 10:00:30+00'::timestamptz $$;
CREATE FUNCTION pg_temp.f0() RETURNS timestamptz LANGUAGE sql IMMUTABLE AS $$ SELECT '2027-06-15 10:00:00+00'::timestamptz $$;
CREATE FUNCTION pg_temp.sched(p_name text) RETURNS broker.broker_schedule LANGUAGE sql AS
$$ SELECT * FROM broker.broker_schedule WHERE schedule_name = p_name $$;
CREATE FUNCTION pg_temp.tick() RETURNS integer LANGUAGE sql AS
$$ SELECT jobs_enqueued FROM broker._schedule_tick_at(pg_temp.t0()) $$;

SET LOCAL ROLE broker_test_alice;
SELECT broker.broker_add_schedule('every-minute', '* * * * *', 'SELECT 1', p_run_as => 'broker_test_reporter',
                                  p_job_queue => 3, p_job_priority => 4, p_max_attempts => 2, p_job_group => 'g');
RESET ROLE;

-- nothing due yet
UPDATE broker.broker_schedule SET next_fire_at = pg_temp.f0() + interval '1 minute' WHERE schedule_name = 'every-minute';
SELECT is(pg_temp.tick(), 0, 'nothing is due before the first fire time');
-- on time
UPDATE broker.broker_schedule SET next_fire_at = pg_temp.f0() WHERE schedule_name = 'every-minute';
SELECT is(pg_temp.tick(), 1, 'a due fire enqueues one job');
SELECT is(pg_temp.tick(), 0, 'ticking again enqueues nothing');
SELECT is((SELECT ROW(job_name, job_group, job_queue, job_priority, run_as, enqueued_by, max_attempts, tenant_id,
                      idempotency_key, complete_status)::text FROM broker.broker_jobs),
          ROW('every-minute', 'g', 3, 4, 'broker_test_reporter', 'broker_test_alice', 2, 'default',
              format('broker_schedule:%s:%s', (pg_temp.sched('every-minute')).schedule_id,
                     date_part('epoch', pg_temp.f0())), 0)::text,
          'the job: the schedule''s template, run as run_as, enqueued in the owner''s name, keyed by schedule and fire time');
SELECT is((SELECT schedule_id FROM broker.broker_jobs), (pg_temp.sched('every-minute')).schedule_id,
          'the job links to its schedule');
SELECT is((pg_temp.sched('every-minute')).next_fire_at, pg_temp.f0() + interval '1 minute', 'the next fire is planned');
SELECT is((pg_temp.sched('every-minute')).last_fire_at, pg_temp.f0(), 'last_fire_at');
SELECT is((pg_temp.sched('every-minute')).last_job_id, (SELECT job_id FROM broker.broker_jobs), 'last_job_id');

-- overlap: skip (default) while the previous job is pending
UPDATE broker.broker_schedule SET next_fire_at = pg_temp.f0() WHERE schedule_name = 'every-minute';
SELECT is(pg_temp.tick(), 0, 'overlap skip: no job while the previous one is pending');
SELECT is((pg_temp.sched('every-minute')).skipped_fires, 1::bigint, 'the skipped fire is counted');
UPDATE broker.broker_jobs SET complete_status = 2, finished_at = pg_temp.t0();
UPDATE broker.broker_schedule SET next_fire_at = pg_temp.f0() WHERE schedule_name = 'every-minute';
SELECT is(pg_temp.tick(), 1, 'once the previous job finished, the fire enqueues');
UPDATE broker.broker_schedule SET next_fire_at = pg_temp.f0(), overlap = 'allow' WHERE schedule_name = 'every-minute';
SELECT is(pg_temp.tick(), 0, 'a fire time that already has an unfinished job is not enqueued twice (its key)');
SELECT is((pg_temp.sched('every-minute')).skipped_fires, 2::bigint, '... and counts as skipped');
UPDATE broker.broker_jobs SET idempotency_key = 'an earlier fire' WHERE complete_status = 0;
UPDATE broker.broker_schedule SET next_fire_at = pg_temp.f0() WHERE schedule_name = 'every-minute';
SELECT is(pg_temp.tick(), 1, 'overlap allow: a job even while the previous one is pending');

-- the tick's answer: when to come back
SELECT results_eq($$SELECT next_fire_at, seconds_until_next > 0 FROM broker._schedule_tick_at(pg_temp.t0())$$,
    $$SELECT min(next_fire_at), true FROM broker.broker_schedule WHERE enabled$$,
    'it returns the earliest next fire of the enabled schedules and the seconds until then');

-- disabled schedules do not fire; directly written ones get planned first
DELETE FROM broker.broker_jobs;
UPDATE broker.broker_schedule SET enabled = false, next_fire_at = pg_temp.t0() - interval '1 hour'
 WHERE schedule_name = 'every-minute';
SELECT is(pg_temp.tick(), 0, 'a disabled schedule does not fire');
INSERT INTO broker.broker_schedule (schedule_name, cron_expr, execute_str, created_by, run_as)
VALUES ('direct', '*/5 * * * *', 'SELECT 1', 'broker_test_alice', 'broker_test_alice');
SELECT is(pg_temp.tick(), 0, 'a schedule written without a next fire time is planned, not fired');
SELECT is((pg_temp.sched('direct')).next_fire_at, '2027-06-15 10:05:00+00'::timestamptz, '... from the tick''s instant');

-- another tenant
SELECT broker.broker_set_tenant('acme');
SET LOCAL ROLE broker_test_alice;
SELECT broker.broker_add_schedule('acme-job', '* * * * *', 'SELECT 1');
RESET ROLE;
SELECT broker.broker_set_tenant('default');
UPDATE broker.broker_schedule SET next_fire_at = pg_temp.f0() WHERE schedule_name = 'acme-job';
SELECT is(pg_temp.tick(), 1, 'schedules of every tenant fire');
SELECT is((SELECT tenant_id FROM broker.broker_jobs WHERE job_name = 'acme-job'), 'acme', 'in their own tenant');

-- owners who lose their rights; schedules that cannot be evaluated any more (the tick warns)
SET LOCAL client_min_messages = error;
UPDATE broker.broker_schedule SET next_fire_at = pg_temp.f0(), enabled = true, overlap = 'allow'
 WHERE schedule_name = 'every-minute';
REVOKE broker_test_reporter FROM broker_test_alice;
SELECT is(pg_temp.tick(), 0, 'no job when the owner may no longer run as run_as');
SELECT is(ROW((pg_temp.sched('every-minute')).enabled, (pg_temp.sched('every-minute')).last_error)::text,
          ROW(false, 'owner broker_test_alice may no longer run jobs as broker_test_reporter')::text,
          'the schedule is disabled, with the reason');
UPDATE broker.broker_schedule SET time_zone = 'Gone/Zone', next_fire_at = pg_temp.t0() - interval '1 minute'
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
UPDATE broker.broker_schedule SET next_fire_at = pg_temp.f0(), overlap = 'allow' WHERE schedule_name = 'acme-job';
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
UPDATE broker.broker_schedule SET next_fire_at = pg_temp.f0() WHERE schedule_name = 'orphan';
SELECT is(pg_temp.tick(), 0, 'no job when the owner was dropped');
SELECT is(ROW((pg_temp.sched('orphan')).enabled, (pg_temp.sched('orphan')).last_error)::text,
          ROW(false, 'owner role broker_test_gone no longer exists')::text, '... disabled, with the reason');

-- bad instants
SELECT throws_ok($$SELECT broker._schedule_tick_at(NULL)$$, '22023', NULL, 'the instant may not be NULL');
SELECT throws_ok($$SELECT broker._schedule_tick_at('infinity')$$, '22023', NULL, '... nor infinite');

-- who may tick, and who may name the instant
SELECT function_privs_are('broker', 'broker_schedule_tick', '{}'::text[], 'broker_runtime', ARRAY['EXECUTE'],
                          'the runner role may tick');
SELECT function_privs_are('broker', 'broker_schedule_tick', '{}'::text[], 'broker_enqueue', '{}'::text[],
                          'enqueuers may not');
SELECT function_privs_are('broker', '_schedule_tick_at', ARRAY['timestamptz', 'integer'], 'broker_runtime', '{}'::text[],
                          'the runner role may not tick at an instant of its choosing');
SELECT function_privs_are('broker', '_schedule_tick_at', ARRAY['timestamptz', 'integer'], 'broker_enqueue', '{}'::text[],
                          '... nor may enqueuers');
CREATE ROLE broker_test_runner NOLOGIN IN ROLE broker_runtime;
SET LOCAL ROLE broker_test_runner;
SELECT throws_ok($$SELECT broker._schedule_tick_at(now() + interval '1 year')$$, '42501', NULL,
                 'a runtime member cannot fire next year''s jobs today');
RESET ROLE;
SELECT is((SELECT count(*) FROM pg_catalog.pg_proc p WHERE p.oid = 'broker._schedule_tick_at(timestamptz, integer)'::regprocedure
            AND has_function_privilege('broker_admin', p.oid, 'EXECUTE')), 1::bigint,
          'administrators may tick at a given instant');

-- broker_schedule_tick() ticks at now(): a yearly schedule due exactly now fires once, and its next fire is
-- after now (whatever now is); alone, so that no other fixture's instant meets the clock
DELETE FROM broker.broker_jobs;
DELETE FROM broker.broker_schedule;
INSERT INTO broker.broker_schedule (schedule_name, cron_expr, execute_str, created_by, run_as, next_fire_at)
VALUES ('yearly-now', '0 0 1 1 *', 'SELECT 1', 'broker_test_alice', 'broker_test_alice', now());
SELECT results_eq($$SELECT jobs_enqueued, seconds_until_next > 0 FROM broker.broker_schedule_tick()$$,
    $$VALUES (1, true)$$, 'broker_schedule_tick() fires what is due at now()');
SELECT cmp_ok((pg_temp.sched('yearly-now')).next_fire_at, '>', now(), '... and plans the next fire after now()');

SELECT * FROM finish();
ROLLBACK;
