-- Schedules: add, alter, enable/disable, remove; every error; owners, run_as and tenants.
BEGIN;
SELECT plan(45);
SET LOCAL TimeZone = 'UTC';

CREATE ROLE broker_test_alice NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_bob NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_reporter NOLOGIN;
GRANT broker_test_reporter TO broker_test_alice;

-- add ----------------------------------------------------------------------
SET LOCAL ROLE broker_test_alice;
CREATE TEMP TABLE added AS
    SELECT * FROM broker.broker_add_schedule('nightly', '30 2 * * *', 'SELECT 1', 'Europe/Berlin');
SELECT is((SELECT next_fire_at FROM added), broker.broker_cron_next('30 2 * * *', now(), 'Europe/Berlin'),
          'add returns the next fire time in the schedule''s zone');
SELECT is((SELECT ROW(schedule_name, cron_expr, time_zone, execute_str, job_language, job_queue, job_priority,
                       run_as, max_attempts, job_group, enabled, catch_up, catch_up_max, overlap, created_by,
                       tenant_id)::text
             FROM broker.broker_schedule),
          ROW('nightly', '30 2 * * *', 'Europe/Berlin', 'SELECT 1', 'sql', 1, 0, 'broker_test_alice', 1, NULL,
              true, 'one', 100, 'skip', 'broker_test_alice', 'default')::text,
    'defaults: queue 1, priority 0, sql, run as and owned by the caller, catch-up one, overlap skip');
SELECT is((SELECT job_search_path FROM broker.broker_schedule), current_setting('search_path'),
          'jobs will run with the creator''s search_path');
SELECT lives_ok($$SELECT broker.broker_add_schedule('report', '@hourly', 'SELECT 2', p_run_as => 'broker_test_reporter',
                    p_job_queue => 2, p_job_priority => 5, p_job_language => 'PLpgSQL', p_max_attempts => 3,
                    p_job_group => 'reports', p_catch_up => 'All', p_catch_up_max => 5, p_overlap => 'allow',
                    p_job_timeout => interval '5 minutes', p_enabled => false)$$,
    'every option, run as a role alice belongs to');
SELECT results_eq($$SELECT job_language, catch_up, overlap, next_fire_at IS NULL FROM broker.broker_schedule
                     WHERE schedule_name = 'report'$$,
    $$VALUES ('plpgsql', 'all', 'allow', true)$$, 'names are normalised; a disabled schedule has no next fire');
SELECT isnt(broker._executor('broker_test_reporter'), NULL, 'the run_as role''s executor exists');

-- add: errors ----------------------------------------------------------------
SELECT throws_ok($$SELECT broker.broker_add_schedule('nightly', '* * * * *', 'SELECT 1')$$, '23505',
    'broker_add_schedule: schedule ''nightly'' exists already', 'a duplicate name');
SELECT throws_ok($$SELECT broker.broker_add_schedule('x', '61 * * * *', 'SELECT 1')$$, '22023',
    'cron expression ''61 * * * *'': minute field: 61 is outside 0-59', 'a bad expression names the field');
SELECT throws_ok($$SELECT broker.broker_add_schedule('x', '* * * * *', 'SELECT 1', 'Europe/Atlantis')$$, '22023',
    'broker_cron_next: unknown time zone ''Europe/Atlantis''', 'an unknown zone');
SELECT throws_ok($$SELECT broker.broker_add_schedule('x', '0 0 30 2 *', 'SELECT 1')$$, '22023',
    'broker_add_schedule: cron expression ''0 0 30 2 *'' never fires', 'an expression that never fires');
SELECT throws_ok($$SELECT broker.broker_add_schedule(NULL, '* * * * *', 'SELECT 1')$$, '22004', NULL, 'a NULL name');
SELECT throws_ok($$SELECT broker.broker_add_schedule('x', NULL, 'SELECT 1')$$, '22004', NULL, 'a NULL expression');
SELECT throws_ok($$SELECT broker.broker_add_schedule('x', '* * * * *', 'SELECT 1', NULL)$$, '22004', NULL, 'a NULL zone');
SELECT throws_ok($$SELECT broker.broker_add_schedule(' ', '* * * * *', 'SELECT 1')$$, '22023', NULL, 'a blank name');
SELECT throws_ok($$SELECT broker.broker_add_schedule('x', '* * * * *', '  ')$$, '22023', NULL, 'empty SQL');
SELECT throws_ok($$SELECT broker.broker_add_schedule('x', '* * * * *', 'SELECT 1', p_job_language => 'perl')$$, '22023',
    NULL, 'an unknown language');
SELECT throws_ok($$SELECT broker.broker_add_schedule('x', '* * * * *', 'SELECT 1', p_job_queue => 0)$$, '22023',
    'broker_add_schedule: p_job_queue must be >= 1, got 0', 'queue 0');
SELECT throws_ok($$SELECT broker.broker_add_schedule('x', '* * * * *', 'SELECT 1', p_max_attempts => 0)$$, '22023',
    'broker_add_schedule: p_max_attempts must be >= 1, got 0', 'max_attempts 0');
SELECT throws_ok($$SELECT broker.broker_add_schedule('x', '* * * * *', 'SELECT 1', p_catch_up_max => 0)$$, '22023',
    'broker_add_schedule: p_catch_up_max must be >= 1, got 0', 'catch_up_max 0');
SELECT throws_ok($$SELECT broker.broker_add_schedule('x', '* * * * *', 'SELECT 1', p_catch_up => 'some')$$, '22023',
    'broker_add_schedule: p_catch_up must be none, one or all, got ''some''', 'an unknown catch-up policy');
SELECT throws_ok($$SELECT broker.broker_add_schedule('x', '* * * * *', 'SELECT 1', p_overlap => 'queue')$$, '22023',
    'broker_add_schedule: p_overlap must be skip or allow, got ''queue''', 'an unknown overlap policy');
SELECT throws_ok($$SELECT broker.broker_add_schedule('x', '* * * * *', 'SELECT 1', p_job_timeout => interval '0')$$,
    '22023', NULL, 'a zero timeout');
SELECT throws_ok($$SELECT broker.broker_add_schedule('x', '* * * * *', 'SELECT 1', p_job_group => '')$$, '22023', NULL,
    'a blank group');
SELECT throws_ok($$SELECT broker.broker_add_schedule('x', '* * * * *', 'SELECT 1', p_run_as => 'no_such_role')$$,
    '42704', 'broker_add_schedule: run_as role no_such_role does not exist', 'an unknown run_as role');
SELECT throws_ok($$SELECT broker.broker_add_schedule('x', '* * * * *', 'SELECT 1', p_run_as => 'broker_test_bob')$$,
    '42501', NULL, 'a run_as role the caller does not belong to');
SELECT throws_ok($$SELECT broker.broker_add_schedule('x', '* * * * *', 'SELECT 1', p_run_as => 'postgres')$$,
    '42501', NULL, 'a superuser run_as');
-- direct writes are held to the same rules by the policies
SELECT throws_ok($$INSERT INTO broker.broker_schedule (schedule_name, cron_expr, execute_str, run_as)
                   VALUES ('direct', '* * * * *', 'SELECT 1', 'broker_test_bob')$$,
    '42501', NULL, 'a direct INSERT cannot pick a foreign run_as');
SELECT throws_ok($$INSERT INTO broker.broker_schedule (schedule_name, cron_expr, execute_str, created_by)
                   VALUES ('direct', '* * * * *', 'SELECT 1', 'broker_test_bob')$$,
    '42501', NULL, 'nor name another owner');

-- alter, enable, remove -------------------------------------------------------
SELECT is((SELECT next_fire_at FROM broker.broker_alter_schedule('nightly', p_cron_expr => '0 3 * * *',
                                                                 p_time_zone => 'America/New_York')),
          broker.broker_cron_next('0 3 * * *', now(), 'America/New_York'), 'a new expression and zone re-plan');
SELECT lives_ok($$SELECT broker.broker_alter_schedule('nightly', p_job_priority => 7, p_new_name => 'nightly-3am')$$,
    'rename and change the template');
SELECT results_eq($$SELECT schedule_name, cron_expr, time_zone, job_priority, execute_str FROM broker.broker_schedule
                     WHERE schedule_id = (SELECT schedule_id FROM added)$$,
    $$VALUES ('nightly-3am', '0 3 * * *', 'America/New_York', 7, 'SELECT 1')$$, 'other properties stay');
SELECT throws_ok($$SELECT broker.broker_alter_schedule('nightly-3am', p_cron_expr => '0 0 * * * *')$$, '22023', NULL,
    'alter validates like add');
SELECT throws_ok($$SELECT broker.broker_alter_schedule('report', p_new_name => 'nightly-3am')$$, '23505', NULL,
    'a rename onto an existing name');
SELECT throws_ok($$SELECT broker.broker_alter_schedule('nope')$$, '42704',
    'broker_alter_schedule: schedule ''nope'' does not exist in tenant ''default''', 'an unknown schedule');
SELECT is(broker.broker_enable_schedule('nightly-3am', false), NULL, 'disable: no next fire');
SELECT is(broker.broker_enable_schedule('nightly-3am'), broker.broker_cron_next('0 3 * * *', now(), 'America/New_York'),
          'enable: planned from now');
SELECT throws_ok($$SELECT broker.broker_enable_schedule('nightly-3am', NULL)$$, '22004', NULL, 'NULL p_enabled');

-- another owner and another tenant --------------------------------------------
RESET ROLE;
SET LOCAL ROLE broker_test_bob;
SELECT throws_ok($$SELECT broker.broker_alter_schedule('nightly-3am', p_execute_str => 'DROP TABLE x')$$, '42501',
    NULL, 'bob cannot change alice''s schedule');
SELECT throws_ok($$SELECT broker.broker_remove_schedule('nightly-3am')$$, '42501', NULL, 'nor remove it');
SELECT is_empty($$UPDATE broker.broker_schedule SET execute_str = 'DROP TABLE x' RETURNING 1$$,
    'nor rewrite it directly');
SELECT broker.broker_set_tenant('other');
SELECT is((SELECT count(*) FROM broker.broker_schedule), 0::bigint, 'another tenant sees no schedules');
SELECT lives_ok($$SELECT broker.broker_add_schedule('nightly-3am', '0 3 * * *', 'SELECT 1')$$,
    'names are per tenant');
RESET ROLE;
SET LOCAL ROLE broker_test_alice;
SELECT broker.broker_set_tenant('default');
SELECT is(broker.broker_remove_schedule('nightly-3am'), true, 'remove');
SELECT is(broker.broker_remove_schedule('nightly-3am', p_missing_ok => true), false, 'remove a missing one, missing_ok');
SELECT throws_ok($$SELECT broker.broker_remove_schedule('nightly-3am')$$, '42704', NULL, 'remove a missing one');

RESET ROLE;
SELECT * FROM finish();
ROLLBACK;
