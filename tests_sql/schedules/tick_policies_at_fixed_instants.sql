-- The tick's catch-up policies, skipped_fires, overlap, owners losing rights and daylight-saving fires,
-- each checked at fixed instants that include the first and last minute of a month and of a year,
-- Feb 29 of a leap year, and an hour before and after the 2027 DST changes of America/New_York and
-- Europe/Berlin. Every instant comes from the fixtures; the expected fires are computed here from
-- calendar series in UTC, independently of broker_cron_next, and the session zone is not UTC.
BEGIN;
SELECT plan(53);
SET LOCAL TimeZone = 'Asia/Kathmandu';
SET LOCAL client_min_messages = error;
SET LOCAL jit = off;  -- the expectations are tiny queries over set-returning functions the planner overestimates

CREATE ROLE broker_test_alice NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_reporter NOLOGIN;

CREATE TABLE pg_temp.instants (label text, t timestamptz);
INSERT INTO pg_temp.instants VALUES
    ('mid-June', '2027-06-15 10:00:30+00'),
    ('first minute of a month', '2027-03-01 00:00:30+00'),
    ('last minute of a month', '2027-04-30 23:59:30+00'),
    ('last minute of a year', '2026-12-31 23:59:30+00'),
    ('first seconds of a year', '2027-01-01 00:00:10+00'),
    ('Feb 29 of a leap year', '2028-02-29 12:00:30+00'),
    ('New York, an hour before spring forward', '2027-03-14 06:00:30+00'),
    ('New York, an hour after spring forward', '2027-03-14 08:00:30+00'),
    ('New York, an hour before fall back', '2027-11-07 05:00:30+00'),
    ('New York, an hour after fall back', '2027-11-07 07:00:30+00'),
    ('Berlin, an hour before spring forward', '2027-03-28 00:00:30+00'),
    ('Berlin, an hour after spring forward', '2027-03-28 02:00:30+00'),
    ('Berlin, an hour before fall back', '2027-10-31 00:00:30+00'),
    ('Berlin, an hour after fall back', '2027-10-31 02:00:30+00');

-- UTC fire times in [p_from, p_to] of a schedule that fires every p_step from the start of each p_unit
CREATE FUNCTION pg_temp.utc_series(p_from timestamptz, p_to timestamptz, p_unit text, p_step interval)
RETURNS SETOF timestamptz LANGUAGE sql AS $$
    SELECT f FROM (SELECT g AT TIME ZONE 'UTC' AS f
                     FROM generate_series(date_trunc(p_unit, p_from AT TIME ZONE 'UTC'), p_to AT TIME ZONE 'UTC', p_step) AS g) s
     WHERE f >= p_from
$$;

-- The outages: (kind, cron expression, how long, unit and step of its fires)
CREATE TABLE pg_temp.outages (kind text, expr text, outage interval, unit text, step interval);
INSERT INTO pg_temp.outages VALUES
    ('1 hour', '*/5 * * * *', '1 hour', 'hour', '5 minutes'),
    ('13 months', '0 0 1 * *', '13 months', 'month', '1 month'),
    ('100 years, yearly', '0 0 1 1 *', '100 years', 'year', '1 year'),
    ('100 years, minutely', '* * * * *', '100 years', 'minute', '1 minute');
CREATE TABLE pg_temp.policies (policy text, catch_up text, catch_up_max integer);
INSERT INTO pg_temp.policies VALUES ('none', 'none', 100), ('one', 'one', 100), ('all, cap 5', 'all', 5),
                                    ('all, cap 100', 'all', 100);

-- What the tick must do for one schedule: m fires were due at t, the latest at fire_last, the first
-- after t is fire_next. Rules of the docs: a fire less than 60 s late is on time and always enqueues;
-- none drops missed fires, one enqueues the latest, all the latest catch_up_max; skipped_fires adds
-- the fires that enqueued nothing, at most 1,000, and is marked capped beyond.
CREATE FUNCTION pg_temp.expected(p_t timestamptz, p_m bigint, p_last timestamptz, p_catch_up text, p_max integer,
                                 OUT jobs bigint, OUT skipped bigint, OUT capped boolean) LANGUAGE sql AS $$
    SELECT j, LEAST(p_m - j, 1000), p_m - j > 1000
      FROM (SELECT CASE WHEN p_m = 0 THEN 0
                        WHEN p_catch_up = 'all' THEN LEAST(p_m, p_max)
                        WHEN p_catch_up = 'one' OR p_last >= p_t - interval '60 seconds' THEN 1
                        ELSE 0 END::bigint AS j) AS x
$$;

-- The schedules of one instant: every outage under every policy, as broker_test_alice, in UTC.
CREATE FUNCTION pg_temp.setup(p_t timestamptz) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM broker.broker_jobs;
    DELETE FROM broker.broker_schedule;
    INSERT INTO broker.broker_schedule (schedule_name, cron_expr, execute_str, created_by, run_as, catch_up,
                                        catch_up_max, overlap, next_fire_at)
    SELECT o.kind || ' / ' || p.policy, o.expr, 'SELECT 1', 'broker_test_alice', 'broker_test_alice', p.catch_up,
           p.catch_up_max, 'allow',
           CASE WHEN o.unit = 'minute' THEN date_trunc('minute', p_t - o.outage, 'UTC') + interval '1 minute'
                ELSE (SELECT min(f) FROM pg_temp.utc_series(p_t - o.outage, p_t, o.unit, o.step) f) END
      FROM pg_temp.outages o CROSS JOIN pg_temp.policies p;
END $$;

-- (the minutely outage's fires are counted by arithmetic: the series would hold 52 million)
-- Expected outcome per schedule at instant p_t (name, jobs, skipped, capped, fire times of its jobs, next fire)
CREATE FUNCTION pg_temp.expected_at(p_t timestamptz)
RETURNS TABLE (name text, jobs bigint, skipped bigint, capped boolean, fires timestamptz[], next_fire timestamptz)
LANGUAGE sql AS $$
    WITH due AS (
        SELECT o.kind, o.unit, o.step,
               (SELECT count(*) FROM pg_temp.utc_series(p_t - o.outage, p_t, o.unit, o.step)) AS m,
               (SELECT max(f) FROM pg_temp.utc_series(p_t - o.outage, p_t, o.unit, o.step) f) AS last,
               (SELECT min(f) FROM pg_temp.utc_series(p_t, p_t + o.step + o.step, o.unit, o.step) f
                 WHERE f > p_t) AS next_fire
          FROM pg_temp.outages o WHERE o.unit <> 'minute'
         UNION ALL
        SELECT o.kind, o.unit, o.step,
               (extract(epoch FROM date_trunc('minute', p_t, 'UTC')
                                   - (date_trunc('minute', p_t - o.outage, 'UTC') + interval '1 minute')) / 60)::bigint + 1,
               date_trunc('minute', p_t, 'UTC'), date_trunc('minute', p_t, 'UTC') + interval '1 minute'
          FROM pg_temp.outages o WHERE o.unit = 'minute')
    SELECT d.kind || ' / ' || p.policy, e.jobs, e.skipped, e.capped,
           -- the jobs' fires: the latest e.jobs due fires, oldest first
           ARRAY(SELECT f FROM (SELECT ((d.last AT TIME ZONE 'UTC') - (n * d.step)) AT TIME ZONE 'UTC' AS f FROM generate_series(0, e.jobs - 1) AS n) x
                  ORDER BY f),
           d.next_fire
      FROM due d CROSS JOIN pg_temp.policies p
     CROSS JOIN LATERAL pg_temp.expected(p_t, d.m, d.last, p.catch_up, p.catch_up_max) e
$$;

-- What the tick did
CREATE FUNCTION pg_temp.actual_at()
RETURNS TABLE (name text, jobs bigint, skipped bigint, capped boolean, fires timestamptz[], next_fire timestamptz)
LANGUAGE sql AS $$
    SELECT s.schedule_name, count(j.job_id), s.skipped_fires, s.skipped_fires_capped,
           COALESCE(array_agg(to_timestamp(split_part(j.idempotency_key, ':', 3)::double precision)
                              ORDER BY j.job_id) FILTER (WHERE j.job_id IS NOT NULL), '{}'),
           s.next_fire_at
      FROM broker.broker_schedule s LEFT JOIN broker.broker_jobs j ON j.schedule_id = s.schedule_id
     GROUP BY s.schedule_id
$$;

CREATE FUNCTION pg_temp.policies_at(p_label text, p_t timestamptz) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    v_jobs integer;
BEGIN
    PERFORM pg_temp.setup(p_t);
    SELECT jobs_enqueued INTO v_jobs FROM broker._schedule_tick_at(p_t);
    RETURN NEXT is(v_jobs::bigint, (SELECT sum(jobs) FROM pg_temp.expected_at(p_t))::bigint,
                   p_label || ': the tick enqueues the jobs of every policy');
    RETURN NEXT set_eq(format('SELECT * FROM pg_temp.actual_at()'), format('SELECT * FROM pg_temp.expected_at(%L)', p_t),
                   p_label || ': per outage (1 hour, 13 months, 100 years) and policy: jobs, their fires, skipped_fires, capped, next fire');
    -- a second tick at the same instant changes nothing
    PERFORM broker._schedule_tick_at(p_t);
    RETURN NEXT set_eq(format('SELECT * FROM pg_temp.actual_at()'), format('SELECT * FROM pg_temp.expected_at(%L)', p_t),
                   p_label || ': ticking again at the same instant enqueues and counts nothing more');
END $$;

SELECT pg_temp.policies_at(label, t) FROM pg_temp.instants ORDER BY t;

-- overlap skip and an owner without the right to run as run_as, at each instant
CREATE FUNCTION pg_temp.overlap_and_owner_at(p_label text, p_t timestamptz) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    v_pending bigint;
BEGIN
    DELETE FROM broker.broker_jobs;
    DELETE FROM broker.broker_schedule;
    INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, run_as, enqueued_by)
    VALUES ('still running', 'still running', 'SELECT 1', 'broker_test_alice', 'broker_test_alice') RETURNING job_id INTO v_pending;
    INSERT INTO broker.broker_schedule (schedule_name, cron_expr, execute_str, created_by, run_as, next_fire_at, last_job_id)
    VALUES ('overlap', '* * * * *', 'SELECT 1', 'broker_test_alice', 'broker_test_alice',
            date_trunc('minute', p_t, 'UTC') - interval '2 minutes', v_pending),
           ('lost right', '* * * * *', 'SELECT 1', 'broker_test_alice', 'broker_test_reporter',
            date_trunc('minute', p_t, 'UTC'), NULL);
    PERFORM broker._schedule_tick_at(p_t);
    RETURN NEXT results_eq(
        $q$SELECT schedule_name, enabled, skipped_fires, next_fire_at, last_error FROM broker.broker_schedule ORDER BY 1$q$,
        format($q$VALUES ('lost right', false, 0::bigint, NULL::timestamptz,
                          'owner broker_test_alice may no longer run jobs as broker_test_reporter'),
                         ('overlap', true, 3, %L, NULL)$q$, date_trunc('minute', p_t, 'UTC') + interval '1 minute'),
        p_label || ': overlap skip counts its three fires as skipped; an owner without the right is disabled');
END $$;
SELECT pg_temp.overlap_and_owner_at(label, t) FROM pg_temp.instants
 WHERE label IN ('first minute of a month', 'last minute of a year', 'Feb 29 of a leap year') ORDER BY t;

-- daylight saving: a daily schedule at a wall time the change skips or repeats, a day behind, catch_up all.
-- The expected UTC instants follow the ISC rules of the docs (a skipped wall time fires once right after
-- the jump, a repeated one at its first occurrence).
CREATE TABLE pg_temp.dst (label text, zone text, expr text, t timestamptz, from_fire timestamptz,
                          fires timestamptz[], next_fire timestamptz);
INSERT INTO pg_temp.dst VALUES
    ('New York, an hour before spring forward', 'America/New_York', '30 2 * * *', '2027-03-14 06:00:30+00',
     '2027-03-13 07:30+00', '{2027-03-13 07:30+00}', '2027-03-14 07:00+00'),
    ('New York, an hour after spring forward', 'America/New_York', '30 2 * * *', '2027-03-14 08:00:30+00',
     '2027-03-13 07:30+00', '{2027-03-13 07:30+00,2027-03-14 07:00+00}', '2027-03-15 06:30+00'),
    ('New York, an hour before fall back', 'America/New_York', '30 1 * * *', '2027-11-07 05:00:30+00',
     '2027-11-06 05:30+00', '{2027-11-06 05:30+00}', '2027-11-07 05:30+00'),
    ('New York, an hour after fall back', 'America/New_York', '30 1 * * *', '2027-11-07 07:00:30+00',
     '2027-11-06 05:30+00', '{2027-11-06 05:30+00,2027-11-07 05:30+00}', '2027-11-08 06:30+00'),
    ('Berlin, an hour before spring forward', 'Europe/Berlin', '30 2 * * *', '2027-03-28 00:00:30+00',
     '2027-03-27 01:30+00', '{2027-03-27 01:30+00}', '2027-03-28 01:00+00'),
    ('Berlin, an hour after spring forward', 'Europe/Berlin', '30 2 * * *', '2027-03-28 02:00:30+00',
     '2027-03-27 01:30+00', '{2027-03-27 01:30+00,2027-03-28 01:00+00}', '2027-03-29 00:30+00'),
    ('Berlin, an hour before fall back', 'Europe/Berlin', '30 2 * * *', '2027-10-31 00:00:30+00',
     '2027-10-30 00:30+00', '{2027-10-30 00:30+00}', '2027-10-31 00:30+00'),
    ('Berlin, an hour after fall back', 'Europe/Berlin', '30 2 * * *', '2027-10-31 02:00:30+00',
     '2027-10-30 00:30+00', '{2027-10-30 00:30+00,2027-10-31 00:30+00}', '2027-11-01 01:30+00');
CREATE FUNCTION pg_temp.dst_at(d pg_temp.dst) RETURNS SETOF text LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM broker.broker_jobs;
    DELETE FROM broker.broker_schedule;
    INSERT INTO broker.broker_schedule (schedule_name, cron_expr, time_zone, execute_str, created_by, run_as,
                                        catch_up, next_fire_at)
    VALUES ('daily', d.expr, d.zone, 'SELECT 1', 'broker_test_alice', 'broker_test_alice', 'all', d.from_fire);
    PERFORM broker._schedule_tick_at(d.t);
    RETURN NEXT results_eq(
        $q$SELECT fires, next_fire, skipped FROM pg_temp.actual_at()$q$,
        format($q$VALUES (%L::timestamptz[], %L::timestamptz, 0::bigint)$q$, d.fires, d.next_fire),
        d.label || ' (' || d.zone || ', ' || d.expr || '): the fires of the last day, then the next one');
END $$;
SELECT pg_temp.dst_at(d) FROM pg_temp.dst d ORDER BY d.t;

SELECT * FROM finish();
ROLLBACK;
