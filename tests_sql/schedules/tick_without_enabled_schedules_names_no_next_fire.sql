-- With no enabled schedule the tick gives no next fire time (NULL, not 0 seconds: a runner would spin).
BEGIN;
SELECT plan(1);
SET LOCAL TimeZone = 'UTC';

UPDATE broker.broker_schedule SET enabled = false;
SELECT results_eq($$SELECT jobs_enqueued, next_fire_at, seconds_until_next FROM broker.broker_schedule_tick()$$,
    $$VALUES (0, NULL::timestamptz, NULL::double precision)$$, 'no enabled schedule: next fire and seconds are NULL');
-- (a due schedule locked by another session: tests_py/test_schedules.py)

SELECT * FROM finish();
ROLLBACK;
