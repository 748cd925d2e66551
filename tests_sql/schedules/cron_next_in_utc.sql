-- broker_cron_next in UTC: strictly-after, calendar edges (leap years, short months), the Vixie day rule.
BEGIN;
SELECT plan(24);
SET LOCAL TimeZone = 'UTC';

CREATE FUNCTION pg_temp.nx(p_expr text, p_after timestamptz) RETURNS timestamptz LANGUAGE sql AS
$$ SELECT broker.broker_cron_next(p_expr, p_after) $$;

SELECT is(pg_temp.nx('* * * * *', '2025-06-01 12:00:30Z'), '2025-06-01 12:01Z', 'the next minute');
SELECT is(pg_temp.nx('* * * * *', '2025-06-01 12:00:00Z'), '2025-06-01 12:01Z', 'strictly after p_after');
SELECT is(pg_temp.nx('*/15 * * * *', '2025-06-01 12:44:59.9Z'), '2025-06-01 12:45Z', 'sub-second p_after');
SELECT is(pg_temp.nx('5 4 * * *', '2025-06-01 04:05Z'), '2025-06-02 04:05Z', 'daily: to the next day');
SELECT is(pg_temp.nx('59 23 31 12 *', '2025-06-01Z'), '2025-12-31 23:59Z', 'the last minute of the year');
SELECT is(pg_temp.nx('0 0 1 1 *', '2025-12-31 23:59Z'), '2026-01-01 00:00Z', 'over the year boundary');
SELECT is(pg_temp.nx('0 9 * * mon-fri', '2025-06-06 09:00Z'), '2025-06-09 09:00Z', 'Friday to Monday');
SELECT is(pg_temp.nx('0 0 * * 7', '2025-06-01 00:00Z'), '2025-06-08 00:00Z', 'day of week 7 = Sunday');
-- leap years and short months
SELECT is(pg_temp.nx('0 0 29 2 *', '2025-03-01Z'), '2028-02-29 00:00Z', 'Feb 29: the next leap year');
SELECT is(pg_temp.nx('0 0 29 2 *', '2024-02-28 12:00Z'), '2024-02-29 00:00Z', 'Feb 29 in a leap year');
SELECT is(pg_temp.nx('0 0 29 2 *', '2096-03-01Z'), '2104-02-29 00:00Z', '2100 is not a leap year');
SELECT is(pg_temp.nx('0 0 29 2 *', '1999-03-01Z'), '2000-02-29 00:00Z', '2000 is a leap year');
SELECT is(pg_temp.nx('0 0 31 * *', '2025-04-01Z'), '2025-05-31 00:00Z', 'day 31 skips April');
SELECT is(pg_temp.nx('0 0 31 * *', '2025-08-31 00:00Z'), '2025-10-31 00:00Z', 'day 31 skips September');
SELECT is(pg_temp.nx('0 0 30 * *', '2025-01-30 00:00Z'), '2025-03-30 00:00Z', 'day 30 skips February');
SELECT is(pg_temp.nx('0 0 30 2 *', '2025-01-01Z'), NULL, 'February 30 never comes: NULL');
-- Vixie day rule
SELECT is(pg_temp.nx('0 0 13 * 5', '2025-06-01Z'), '2025-06-06 00:00Z', 'day 13 OR Friday: the first Friday');
SELECT is(pg_temp.nx('0 0 13 * 5', '2025-06-12Z'), '2025-06-13 00:00Z', 'day 13 OR Friday: the 13th');
SELECT is(pg_temp.nx('0 0 1-7 * 1', '2025-06-01Z'), '2025-06-02 00:00Z', 'days 1-7 OR Monday');
SELECT is(pg_temp.nx('0 0 */7 * 1', '2025-06-01Z'), '2025-09-01 00:00Z', '*/7 AND Monday: a Monday that is day 1, 8, 15, 22 or 29');
SELECT is(pg_temp.nx('0 0 * * 1', '2025-06-01Z'), '2025-06-02 00:00Z', '* AND Monday: every Monday');
-- errors and the time-zone argument
SELECT throws_ok($$SELECT broker.broker_cron_next('* * * * *', NULL)$$, '22004', NULL, 'NULL p_after');
SELECT throws_ok($$SELECT broker.broker_cron_next('* * * * *', now(), 'Mars/Olympus_Mons')$$, '22023',
    'broker_cron_next: unknown time zone ''Mars/Olympus_Mons''', 'an unknown time zone');
SELECT throws_ok($$SELECT broker.broker_cron_next('* * * 13 *', now(), 'UTC')$$, '22023',
    'cron expression ''* * * 13 *'': month field: 13 is outside 1-12', 'an invalid expression');

SELECT * FROM finish();
ROLLBACK;
