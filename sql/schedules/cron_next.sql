-- sql/schedules/cron_next.sql: cron expressions: the next fire time.
-- ---------------------------------------------------------------------------
-- Cron expressions: the next fire time.
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- Function: broker._cron_next_wall(p_minutes, p_hours, p_days, p_months,
--     p_dows, p_day_and, p_from)
--   The first wall-clock minute >= p_from (a timestamp without time zone)
--   whose fields match the masks of broker._cron_parse; NULL when nothing
--   matches within 30 years (say day 31 of February). Pure calendar
--   arithmetic, no time zone.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._cron_next_wall(p_minutes bigint, p_hours bigint, p_days bigint, p_months bigint,
                                       p_dows bigint, p_day_and boolean, p_from timestamp)
RETURNS timestamp
LANGUAGE plpgsql IMMUTABLE STRICT
AS $$
DECLARE
    v_from  timestamp := pg_catalog.date_trunc('minute', p_from OPERATOR(pg_catalog.+) interval '59.999999 seconds');
    v_y     integer := pg_catalog.date_part('year', v_from)::integer;
    v_mo    integer := pg_catalog.date_part('month', v_from)::integer;
    v_d     integer := pg_catalog.date_part('day', v_from)::integer;
    v_h     integer := pg_catalog.date_part('hour', v_from)::integer;
    v_mi    integer := pg_catalog.date_part('minute', v_from)::integer;
    v_last  integer := v_y OPERATOR(pg_catalog.+) 30;
    v_dim   integer;
    v_dow1  integer;
    v_rest  bigint;
    v_match boolean;
BEGIN
    <<months>>
    LOOP
        IF v_y OPERATOR(pg_catalog.>) v_last THEN
            RETURN NULL;
        END IF;
        IF (p_months OPERATOR(pg_catalog.>>) v_mo) OPERATOR(pg_catalog.&) 1 OPERATOR(pg_catalog.=) 0 THEN
            v_mo := v_mo OPERATOR(pg_catalog.+) 1; v_d := 1; v_h := 0; v_mi := 0;
            IF v_mo OPERATOR(pg_catalog.>) 12 THEN v_mo := 1; v_y := v_y OPERATOR(pg_catalog.+) 1; END IF;
            CONTINUE months;
        END IF;
        v_dim := CASE WHEN v_mo OPERATOR(pg_catalog.=) 2 THEN
                          CASE WHEN v_y OPERATOR(pg_catalog.%) 4 OPERATOR(pg_catalog.=) 0
                                    AND (v_y OPERATOR(pg_catalog.%) 100 OPERATOR(pg_catalog.<>) 0
                                         OR v_y OPERATOR(pg_catalog.%) 400 OPERATOR(pg_catalog.=) 0)
                               THEN 29 ELSE 28 END
                      WHEN v_mo OPERATOR(pg_catalog.=) ANY (ARRAY[4, 6, 9, 11]) THEN 30
                      ELSE 31 END;
        v_dow1 := pg_catalog.date_part('dow', pg_catalog.make_date(v_y, v_mo, 1))::integer;
        <<days>>
        WHILE v_d OPERATOR(pg_catalog.<=) v_dim LOOP
            v_match := CASE WHEN p_day_and
                            THEN (p_days OPERATOR(pg_catalog.>>) v_d) OPERATOR(pg_catalog.&) 1 OPERATOR(pg_catalog.=) 1
                             AND (p_dows OPERATOR(pg_catalog.>>) ((v_dow1 OPERATOR(pg_catalog.+) v_d OPERATOR(pg_catalog.-) 1) OPERATOR(pg_catalog.%) 7))
                                 OPERATOR(pg_catalog.&) 1 OPERATOR(pg_catalog.=) 1
                            ELSE (p_days OPERATOR(pg_catalog.>>) v_d) OPERATOR(pg_catalog.&) 1 OPERATOR(pg_catalog.=) 1
                              OR (p_dows OPERATOR(pg_catalog.>>) ((v_dow1 OPERATOR(pg_catalog.+) v_d OPERATOR(pg_catalog.-) 1) OPERATOR(pg_catalog.%) 7))
                                 OPERATOR(pg_catalog.&) 1 OPERATOR(pg_catalog.=) 1 END;
            IF v_match THEN
                WHILE v_h OPERATOR(pg_catalog.<=) 23 LOOP
                    -- next allowed hour >= v_h: lowest set bit of the shifted mask
                    v_rest := p_hours OPERATOR(pg_catalog.>>) v_h;
                    EXIT WHEN v_rest OPERATOR(pg_catalog.=) 0;
                    v_rest := v_rest OPERATOR(pg_catalog.&) (OPERATOR(pg_catalog.-) v_rest);
                    IF v_rest OPERATOR(pg_catalog.>) 1 THEN
                        v_h := v_h OPERATOR(pg_catalog.+) pg_catalog.round(pg_catalog.ln(v_rest::pg_catalog.float8) OPERATOR(pg_catalog./) pg_catalog.ln(2::pg_catalog.float8))::integer;
                        v_mi := 0;
                    END IF;
                    v_rest := p_minutes OPERATOR(pg_catalog.>>) v_mi;
                    IF v_rest OPERATOR(pg_catalog.<>) 0 THEN
                        v_rest := v_rest OPERATOR(pg_catalog.&) (OPERATOR(pg_catalog.-) v_rest);
                        RETURN pg_catalog.make_timestamp(v_y, v_mo, v_d, v_h,
                            v_mi OPERATOR(pg_catalog.+) pg_catalog.round(pg_catalog.ln(v_rest::pg_catalog.float8) OPERATOR(pg_catalog./) pg_catalog.ln(2::pg_catalog.float8))::integer, 0);
                    END IF;
                    v_h := v_h OPERATOR(pg_catalog.+) 1; v_mi := 0;
                END LOOP;
            END IF;
            v_d := v_d OPERATOR(pg_catalog.+) 1; v_h := 0; v_mi := 0;
        END LOOP days;
        v_mo := v_mo OPERATOR(pg_catalog.+) 1; v_d := 1; v_h := 0; v_mi := 0;
        IF v_mo OPERATOR(pg_catalog.>) 12 THEN v_mo := 1; v_y := v_y OPERATOR(pg_catalog.+) 1; END IF;
    END LOOP months;
END;
$$;
COMMENT ON FUNCTION broker._cron_next_wall(bigint, bigint, bigint, bigint, bigint, boolean, timestamp) IS
    'Internal: first wall-clock minute at or after p_from matching the parsed cron masks (no time zone); NULL if none within 30 years.';

-- ---------------------------------------------------------------------------
-- Function: broker._cron_utc_offset(p_utc, p_timezone)
--   The UTC offset of p_timezone at the instant whose UTC wall time is p_utc.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._cron_utc_offset(p_utc timestamp, p_timezone text)
RETURNS interval
LANGUAGE sql STABLE STRICT
AS $$
    SELECT ((p_utc AT TIME ZONE 'UTC') AT TIME ZONE p_timezone) OPERATOR(pg_catalog.-) p_utc
$$;
COMMENT ON FUNCTION broker._cron_utc_offset(timestamp, text) IS
    'Internal: UTC offset of a time zone at an instant given as its UTC wall time.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_cron_next(p_expr, p_after, p_timezone)
--   The first fire time of cron expression p_expr strictly after p_after,
--   with the fields matched against the wall clock of p_timezone (an IANA
--   name such as 'Europe/Berlin', or anything PostgreSQL's AT TIME ZONE
--   takes). NULL when the expression never matches (such as 0 0 30 2 *).
--   Day rule (Vixie cron): when the day-of-month or day-of-week field starts
--   with '*', a day must match both; otherwise either.
--   Daylight saving (ISC cron): a schedule is fixed-time when neither its
--   minute nor its hour field starts with '*'.
--     * Clocks jump forward: a fixed-time schedule whose wall time was
--       skipped fires once, at the first instant after the jump (02:30 on a
--       02:00->03:00 night fires at 03:00); a wildcard schedule simply has no
--       fire in the skipped hour.
--     * Clocks go back: a fixed-time schedule fires only at the first
--       occurrence of a repeated wall time; a wildcard schedule at both.
--   Works with any offsets (30-minute shifts as in Australia/Lord_Howe,
--   45-minute zones) as long as two transitions are more than a day apart.
--   STABLE, not IMMUTABLE: the answer depends on the time zone database.
-- Errors: 22004 NULL argument; 22023 invalid expression (the message names
--   the field), unknown time zone, or p_after +-infinity.
-- Example:
--   SELECT broker.broker_cron_next('30 2 * * *', '2027-03-13 12:00+00', 'America/New_York');
--   -- 2027-03-14 07:00:00+00 (02:30 does not exist that night: 03:00 EDT)
--   Calls: _cron_parse, _cron_utc_offset, _cron_next_wall
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_cron_next(p_expr text, p_after timestamptz, p_timezone text DEFAULT 'UTC')
RETURNS timestamptz
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    c      record;
    v_u    timestamp;    -- search from this instant on (as its UTC wall time)
    v_off  interval;     -- offset in force at v_u
    v_lb   timestamp;    -- wall-clock lower bound
    v_w    timestamp;    -- candidate wall time
    v_c    timestamp;    -- candidate instant (UTC wall time)
    v_off2 interval;
    v_lo   timestamp;
    v_hi   timestamp;
    v_mid  timestamp;
    v_t    timestamp;    -- a transition instant
    v_i    integer := 0;
BEGIN
    IF p_after IS NULL OR p_timezone IS NULL THEN
        RAISE EXCEPTION 'broker_cron_next: % must not be NULL', CASE WHEN p_after IS NULL THEN 'p_after' ELSE 'p_timezone' END
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF NOT pg_catalog.isfinite(p_after) THEN
        RAISE EXCEPTION 'broker_cron_next: p_after must be a finite time, got %', p_after
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    c := broker._cron_parse(p_expr);
    v_u := p_after AT TIME ZONE 'UTC';
    BEGIN
        v_off := broker._cron_utc_offset(v_u, p_timezone);
    EXCEPTION WHEN invalid_parameter_value THEN
        RAISE EXCEPTION 'broker_cron_next: unknown time zone %', pg_catalog.quote_literal(p_timezone)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Use an IANA zone name such as ''Europe/Berlin'' (see pg_timezone_names).';
    END;
    v_lb := pg_catalog.date_trunc('minute', v_u OPERATOR(pg_catalog.+) v_off) OPERATOR(pg_catalog.+) interval '1 minute';
    LOOP
        v_i := v_i OPERATOR(pg_catalog.+) 1;
        IF v_i OPERATOR(pg_catalog.>) 1000 THEN  -- a zone with transitions less than a day apart
            RAISE EXCEPTION 'broker_cron_next: no fire time found for % in time zone %',
                pg_catalog.quote_literal(p_expr), pg_catalog.quote_literal(p_timezone)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_w := broker._cron_next_wall(c.minutes, c.hours, c.days, c.months, c.dows, c.day_and, v_lb);
        IF v_w IS NULL THEN
            RETURN NULL;
        END IF;
        v_c := v_w OPERATOR(pg_catalog.-) v_off;
        IF broker._cron_utc_offset(v_c, p_timezone) OPERATOR(pg_catalog.=) v_off THEN
            -- v_w exists at v_c. Did it also exist earlier (clocks went back in the last day)?
            v_off2 := broker._cron_utc_offset(v_c OPERATOR(pg_catalog.-) interval '1 day', p_timezone);
            IF v_off2 OPERATOR(pg_catalog.>) v_off
               AND broker._cron_utc_offset(v_w OPERATOR(pg_catalog.-) v_off2, p_timezone) OPERATOR(pg_catalog.=) v_off2 THEN
                IF (v_w OPERATOR(pg_catalog.-) v_off2) OPERATOR(pg_catalog.>) (p_after AT TIME ZONE 'UTC') THEN
                    RETURN (v_w OPERATOR(pg_catalog.-) v_off2) AT TIME ZONE 'UTC';   -- first occurrence
                ELSIF c.fixed_time THEN
                    v_lb := v_w OPERATOR(pg_catalog.+) interval '1 minute';          -- repeated: fixed-time skips it
                    CONTINUE;
                END IF;
            END IF;
            RETURN v_c AT TIME ZONE 'UTC';
        END IF;
        -- The offset changes between v_u and v_c: find that transition (to the second).
        v_lo := v_u;
        v_hi := v_c;
        WHILE v_hi OPERATOR(pg_catalog.-) v_lo OPERATOR(pg_catalog.>) interval '1 second' LOOP
            v_mid := v_lo OPERATOR(pg_catalog.+) ((v_hi OPERATOR(pg_catalog.-) v_lo) OPERATOR(pg_catalog./) 2);
            IF broker._cron_utc_offset(v_mid, p_timezone) OPERATOR(pg_catalog.=) v_off THEN
                v_lo := v_mid;
            ELSE
                v_hi := v_mid;
            END IF;
        END LOOP;
        v_t := pg_catalog.date_trunc('second', v_hi);
        IF v_t OPERATOR(pg_catalog.<=) v_lo THEN
            v_t := v_hi;
        END IF;
        v_off2 := broker._cron_utc_offset(v_t, p_timezone);
        IF v_off2 OPERATOR(pg_catalog.>) v_off AND v_w OPERATOR(pg_catalog.<) (v_t OPERATOR(pg_catalog.+) v_off2) THEN
            -- v_w was skipped by a jump forward
            IF c.fixed_time THEN
                RETURN v_t AT TIME ZONE 'UTC';
            END IF;
            v_lb := v_t OPERATOR(pg_catalog.+) v_off2;
        ELSIF v_off2 OPERATOR(pg_catalog.>) v_off THEN
            v_lb := v_w;
        ELSE
            -- clocks went back: wall times from v_t + v_off2 on come (again) after v_t
            v_lb := v_t OPERATOR(pg_catalog.+) v_off2;
        END IF;
        v_u := v_t;
        v_off := v_off2;
    END LOOP;
END;
$$;
COMMENT ON FUNCTION broker.broker_cron_next(text, timestamptz, text) IS
    'First fire time of a cron expression strictly after p_after, matched on the wall clock of p_timezone (Vixie day rule, ISC daylight-saving rules).';
