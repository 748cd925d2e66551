-- Regressions from the adversarial review of schedules (README "Schedules"): each was a real attack.
BEGIN;
SELECT plan(9);
SET LOCAL TimeZone = 'UTC';

CREATE ROLE broker_test_mallory NOLOGIN IN ROLE broker_enqueue;
CREATE TEMP TABLE trap_result (step pg_catalog.text, outcome pg_catalog.text);
GRANT INSERT, SELECT ON trap_result TO broker_test_mallory;

-- 1. The cron functions have no SET search_path: a pg_temp.text domain created before their first call
--    in a session must not be picked up as the type of their variables (its CHECK would run as every
--    later caller). The first cron call of this session happens inside the trap.
SET LOCAL ROLE broker_test_mallory;
CREATE FUNCTION pg_temp.trap(v pg_catalog.text) RETURNS boolean LANGUAGE plpgsql AS
$$ BEGIN RAISE EXCEPTION 'trap ran as %', current_user; END $$;
CREATE DOMAIN pg_temp.text AS pg_catalog.text CHECK (pg_temp.trap(VALUE));
DO $$
DECLARE v_res pg_catalog.text;
BEGIN
    BEGIN
        v_res := broker.broker_cron_next('*/5 1-3 * jan-mar mon', '2025-01-01 00:00Z')::pg_catalog.text;
        INSERT INTO trap_result VALUES ('cron_next', v_res);
    EXCEPTION WHEN OTHERS THEN
        INSERT INTO trap_result VALUES ('cron_next', SQLERRM);
    END;
    BEGIN
        PERFORM broker._cron_parse('@daily');
        INSERT INTO trap_result VALUES ('parse macro', 'ok');
    EXCEPTION WHEN OTHERS THEN
        INSERT INTO trap_result VALUES ('parse macro', SQLERRM);
    END;
END $$;
DROP DOMAIN pg_temp.text;
RESET ROLE;
SELECT results_eq($$SELECT step, outcome FROM trap_result ORDER BY step$$,
    $$VALUES ('cron_next'::pg_catalog.text, '2025-01-06 01:00:00+00'::pg_catalog.text), ('parse macro', 'ok')$$,
    'a pg_temp.text domain does not hijack the cron functions');

-- 2. Any enqueuer could make the tick walk years of fires: past next_fire_at values are clamped to now,
--    and the tick looks back only as far as the catch-up policy needs (31_schedule_tick: 'century').
SET LOCAL ROLE broker_test_mallory;
SELECT broker.broker_add_schedule('dos', '* * * * *', 'SELECT 1');
UPDATE broker.broker_schedule SET next_fire_at = '1900-01-01' WHERE schedule_name = 'dos';
SELECT cmp_ok((SELECT next_fire_at FROM broker.broker_schedule WHERE schedule_name = 'dos'), '>=', now(),
    'an enqueuer''s past next_fire_at becomes now');
INSERT INTO broker.broker_schedule (schedule_name, cron_expr, execute_str, next_fire_at)
VALUES ('dos2', '* * * * *', 'SELECT 1', '1900-01-01');
SELECT cmp_ok((SELECT next_fire_at FROM broker.broker_schedule WHERE schedule_name = 'dos2'), '>=', now(),
    '... on INSERT too');
RESET ROLE;

-- 3. Huge expressions made every parse cost hundreds of milliseconds.
SELECT throws_ok(format('SELECT broker.broker_cron_next(%L, now())', '*/1,' || repeat('0,', 200) || '0 * * * *'),
    '22023', 'cron expression is 413 characters long; at most 256 are accepted', 'broker_cron_next: at most 256 characters');
SET LOCAL ROLE broker_test_mallory;
SELECT throws_ok(format('SELECT broker.broker_add_schedule(''long'', %L, ''SELECT 1'')', repeat('0,', 200) || '0 * * * *'),
    '22023', NULL, 'broker_add_schedule refuses them');
SELECT throws_ok(format('INSERT INTO broker.broker_schedule (schedule_name, cron_expr, execute_str) VALUES (''long'', %L, ''SELECT 1'')',
                        repeat('0,', 200) || '0 * * * *'),
    '23514', NULL, 'and so does the table');

-- 4. Another role could take a schedule's idempotency key and silently suppress its fires.
SELECT throws_ok($$SELECT broker.broker_add_job('squat', 'SELECT 1', p_idempotency_key => 'broker_schedule:1:1')$$,
    '22023', 'broker_add_job: idempotency keys starting with broker_schedule: are reserved for schedules',
    'broker_add_job refuses the schedules'' key prefix');
SELECT throws_ok($$INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, idempotency_key)
                   VALUES ('squat', 'squat', 'SELECT 1', 'broker_schedule:1:1')$$,
    '42501', NULL, 'so does a direct INSERT');
RESET ROLE;

-- 5. With no enabled schedule the tick said "0 seconds", which would make a runner spin.
UPDATE broker.broker_schedule SET enabled = false;
SELECT results_eq($$SELECT jobs_enqueued, next_fire_at, seconds_until_next FROM broker.broker_schedule_tick()$$,
    $$VALUES (0, NULL::timestamptz, NULL::double precision)$$, 'no enabled schedule: next fire and seconds are NULL');
-- (a due schedule locked by another session: tests_py/test_schedules.py)

SELECT * FROM finish();
ROLLBACK;
