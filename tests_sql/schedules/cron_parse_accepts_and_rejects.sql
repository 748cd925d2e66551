-- Cron expressions: what the parser accepts, and a 22023 naming the field for everything else.
BEGIN;
SELECT plan(39);

-- masks as lists of values, for readable expectations
CREATE FUNCTION pg_temp.bits(p_mask bigint) RETURNS int[] LANGUAGE sql AS
$$ SELECT ARRAY(SELECT b FROM generate_series(0, 62) AS b WHERE (p_mask >> b) & 1 = 1) $$;
CREATE FUNCTION pg_temp.f(p_expr text, OUT mi int[], OUT h int[], OUT dom int[], OUT mon int[], OUT dow int[],
                          OUT day_and boolean, OUT fixed boolean) LANGUAGE sql AS
$$ SELECT pg_temp.bits(minutes), pg_temp.bits(hours), pg_temp.bits(days), pg_temp.bits(months), pg_temp.bits(dows),
          day_and, fixed_time FROM broker._cron_parse(p_expr) $$;

-- the field a 22023 names ('' when the expression does not parse at all)
CREATE FUNCTION pg_temp.bad_field(p_expr text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    PERFORM broker._cron_parse(p_expr);
    RETURN 'accepted';
EXCEPTION WHEN invalid_parameter_value THEN
    RETURN substring(SQLERRM from ': ([a-z-]+) field: ');
END $$;

-- values, lists, ranges, steps
SELECT is((pg_temp.f('5 4 * * *')).mi, '{5}', 'a single minute');
SELECT is((pg_temp.f('0,15,45 * * * *')).mi, '{0,15,45}', 'a list');
SELECT is((pg_temp.f('10-13 * * * *')).mi, '{10,11,12,13}', 'a range');
SELECT is((pg_temp.f('*/20 * * * *')).mi, '{0,20,40}', '*/20');
SELECT is((pg_temp.f('10-40/10 * * * *')).mi, '{10,20,30,40}', 'a range with a step');
SELECT is((pg_temp.f('5/15 * * * *')).mi, '{5,20,35,50}', '5/15 means 5-59/15');
SELECT is((pg_temp.f('1-5,50-52/2,7 * * * *')).mi, '{1,2,3,4,5,7,50,52}', 'lists of ranges and steps');
SELECT is((pg_temp.f('* */100 * * *')).h, '{0}', 'a step longer than the range keeps the first value');
SELECT is((pg_temp.f('* 0-23 * * *')).h, (SELECT array_agg(g) FROM generate_series(0, 23) g), 'hours 0-23');
SELECT is((pg_temp.f('* * 1,31 * *')).dom, '{1,31}', 'days of month 1-31');
-- names, case-insensitive
SELECT is((pg_temp.f('0 0 1 jan,MAR,Dec *')).mon, '{1,3,12}', 'month names in any case');
SELECT is((pg_temp.f('0 0 * feb-apr *')).mon, '{2,3,4}', 'a range of month names');
SELECT is((pg_temp.f('0 0 * * MON-fri')).dow, '{1,2,3,4,5}', 'day-of-week names');
SELECT is((pg_temp.f('0 0 * * sun')).dow, '{0}', 'sun is 0');
SELECT is((pg_temp.f('0 0 * * 7')).dow, '{0}', '7 is Sunday too');
SELECT is((pg_temp.f('0 0 * * 5-7')).dow, '{0,5,6}', 'a range up to 7 covers Sunday');
SELECT is((pg_temp.f('0 0 * * */2')).dow, '{0,2,4,6}', 'a day-of-week step');
SELECT is((pg_temp.f('  0   0  *  *  *  ')).mi, '{0}', 'extra spaces and tabs are fine');
-- flags
SELECT is((pg_temp.f('0 0 1 * 1')).day_and, false, 'both day fields restricted: a day matches either (Vixie)');
SELECT is((pg_temp.f('0 0 */2 * 1')).day_and, true, 'a day field starting with * means both must match (Vixie)');
SELECT is((pg_temp.f('30 2 * * *')).fixed, true, 'minute and hour without *: fixed-time');
SELECT is((pg_temp.f('*/30 2 * * *')).fixed, false, 'a minute starting with *: wildcard');
SELECT is((pg_temp.f('30 */2 * * *')).fixed, false, 'an hour starting with *: wildcard');
-- macros
SELECT is(pg_temp.f('@yearly'), pg_temp.f('0 0 1 1 *'), '@yearly');
SELECT is(pg_temp.f('@Annually'), pg_temp.f('0 0 1 1 *'), '@annually (any case)');
SELECT is(pg_temp.f('@monthly'), pg_temp.f('0 0 1 * *'), '@monthly');
SELECT is(pg_temp.f('@weekly'), pg_temp.f('0 0 * * 0'), '@weekly');
SELECT is(pg_temp.f('@daily'), pg_temp.f('0 0 * * *'), '@daily');
SELECT is(pg_temp.f('@midnight'), pg_temp.f('0 0 * * *'), '@midnight');
SELECT is(pg_temp.f('@hourly'), pg_temp.f('0 * * * *'), '@hourly');

-- errors
SELECT throws_ok($$SELECT broker._cron_parse('* * * *')$$, '22023',
    'cron expression ''* * * *'' has 4 fields; it needs 5 (minute hour day-of-month month day-of-week)', 'four fields');
SELECT throws_ok($$SELECT broker._cron_parse('0 0 * * * *')$$, '22023', NULL, 'six fields');
SELECT throws_ok($$SELECT broker._cron_parse('')$$, '22023', NULL, 'empty');
SELECT throws_ok($$SELECT broker._cron_parse('60 * * * *')$$, '22023',
    'cron expression ''60 * * * *'': minute field: 60 is outside 0-59', 'minute 60');
SELECT throws_ok($$SELECT broker._cron_parse('* * 0 * *')$$, '22023',
    'cron expression ''* * 0 * *'': day-of-month field: 0 is outside 1-31', 'day of month 0');
SELECT throws_ok($$SELECT broker._cron_parse('*/0 * * * *')$$, '22023',
    'cron expression ''*/0 * * * *'': minute field: step in ''*/0'' must be 1-59', 'a zero step');
SELECT throws_ok($$SELECT broker._cron_parse('0 0 * foo *')$$, '22023',
    'cron expression ''0 0 * foo *'': month field: unknown value ''foo''', 'an unknown month name');
SELECT throws_ok($$SELECT broker._cron_parse('@reboot')$$, '22023', 'cron expression ''@reboot'': unknown macro',
    'an unknown macro');
SELECT results_eq($$
    SELECT pg_temp.bad_field(e) FROM (VALUES
        ('* 24 * * *'), ('* * 32 * *'), ('* * * 13 *'), ('* * * 0 *'), ('* * * * 8'), ('5-1 * * * *'),
        ('1,,2 * * * *'), ('*-5 * * * *'), ('1-2-3 * * * *'), ('1/2/3 * * * *'), ('-1 * * * *'),
        ('* * * * mon-sun'), ('0 0 * * jan'), ('0 0 * dec-jan *'), ('a * * * *'), ('99999 * * * *'),
        ('* * * * 1/0')) AS t(e) $$,
    $$VALUES ('hour'), ('day-of-month'), ('month'), ('month'), ('day-of-week'), ('minute'),
             ('minute'), ('minute'), ('minute'), ('minute'), ('minute'),
             ('day-of-week'), ('day-of-week'), ('month'), ('minute'), ('minute'),
             ('day-of-week')$$,
    'every other malformed field raises 22023 naming that field');

SELECT * FROM finish();
ROLLBACK;
