-- Cron expressions are at most 256 characters (function, schedules and table).
BEGIN;
SELECT plan(3);
SET LOCAL TimeZone = 'UTC';

CREATE ROLE broker_test_mallory NOLOGIN IN ROLE broker_enqueue;

SELECT throws_ok(format('SELECT broker.broker_cron_next(%L, now())', '*/1,' || repeat('0,', 200) || '0 * * * *'),
    '22023', 'cron expression is 413 characters long; at most 256 are accepted', 'broker_cron_next: at most 256 characters');
SET LOCAL ROLE broker_test_mallory;
SELECT throws_ok(format('SELECT broker.broker_add_schedule(''long'', %L, ''SELECT 1'')', repeat('0,', 200) || '0 * * * *'),
    '22023', NULL, 'broker_add_schedule refuses them');
SELECT throws_ok(format('INSERT INTO broker.broker_schedule (schedule_name, cron_expr, execute_str) VALUES (''long'', %L, ''SELECT 1'')',
                        repeat('0,', 200) || '0 * * * *'),
    '23514', NULL, 'and so does the table');

SELECT * FROM finish();
ROLLBACK;
