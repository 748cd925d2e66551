-- An enqueuer cannot make the tick walk years of fires: a past next_fire_at becomes now.
BEGIN;
SELECT plan(2);
SET LOCAL TimeZone = 'UTC';

CREATE ROLE broker_test_mallory NOLOGIN IN ROLE broker_enqueue;

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

SELECT * FROM finish();
ROLLBACK;
