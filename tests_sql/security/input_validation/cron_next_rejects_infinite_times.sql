-- broker_cron_next has no fire time after an infinite instant: ±infinity is a bad argument
-- (22023 naming p_after), not 22008 from date arithmetic.
BEGIN;
SELECT plan(3);

SELECT throws_ok($$SELECT broker.broker_cron_next('* * * * *', 'infinity')$$, '22023',
    'broker_cron_next: p_after must be a finite time, got infinity', 'infinity: 22023');
SELECT throws_ok($$SELECT broker.broker_cron_next('0 3 * * *', '-infinity', 'Europe/Berlin')$$, '22023',
    'broker_cron_next: p_after must be a finite time, got -infinity', '-infinity: 22023');
SELECT is(broker.broker_cron_next('0 3 * * *', '2026-03-01 00:00+00', 'UTC'), '2026-03-01 03:00+00'::timestamptz,
    'a finite time still works');

SELECT * FROM finish();
ROLLBACK;
