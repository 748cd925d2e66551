-- A tenant with many due schedules cannot make the tick one long transaction that delays every other
-- tenant's fires: one tick handles at most p_max_schedules schedules (100 for broker_schedule_tick),
-- the tenants in turn, and says "again at once" while more are due.
BEGIN;
SELECT plan(7);
SET LOCAL client_min_messages = warning;
SET LOCAL jit = off;

CREATE ROLE broker_test_flooder NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_victim NOLOGIN IN ROLE broker_enqueue;
-- the flooder's 300 schedules are all due before the victim's one (its fire is the latest)
INSERT INTO broker.broker_schedule (tenant_id, schedule_name, cron_expr, execute_str, created_by, run_as, next_fire_at)
SELECT 'flood', 'f' || i, '* * * * *', 'SELECT 1', 'broker_test_flooder', 'broker_test_flooder',
       '2027-06-15 10:00:00+00'::timestamptz - interval '1 minute'
  FROM generate_series(1, 300) AS i;
INSERT INTO broker.broker_schedule (tenant_id, schedule_name, cron_expr, execute_str, created_by, run_as, next_fire_at)
VALUES ('victim', 'v', '* * * * *', 'SELECT 1', 'broker_test_victim', 'broker_test_victim', '2027-06-15 10:00:00+00');

CREATE TEMP TABLE tick1 AS SELECT * FROM broker._schedule_tick_at('2027-06-15 10:00:30+00', 100);
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE tenant_id = 'victim'), 1::bigint,
          'the first tick already fires the other tenant''s schedule, although all 300 of the flooder''s were due earlier');
SELECT is((SELECT jobs_enqueued FROM tick1), 100, 'one tick handles 100 schedules, no more');
SELECT is((SELECT seconds_until_next FROM tick1), 0::double precision, '... and says to come back at once');
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE tenant_id = 'flood'), 99::bigint,
          'the flooder got the other 99 places');
SELECT is((SELECT sum(jobs_enqueued) FROM (SELECT (broker._schedule_tick_at('2027-06-15 10:00:30+00', 100)).jobs_enqueued
                                              FROM generate_series(1, 3)) AS t), 201::bigint,
          'the following ticks take the rest');
SELECT is((SELECT seconds_until_next > 0 FROM broker._schedule_tick_at('2027-06-15 10:00:30+00', 100)), true,
          'and once none is due, the next fire is ahead');
SELECT throws_ok($$SELECT broker._schedule_tick_at('2027-06-15 10:00:30+00', 0)$$, '22023', NULL,
                 'p_max_schedules must be at least 1');

SELECT * FROM finish();
ROLLBACK;
