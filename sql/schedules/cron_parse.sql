-- sql/schedules/cron_parse.sql: cron expressions: parsing.
-- ---------------------------------------------------------------------------
-- Cron expressions: parsing.
--   Five fields (minute hour day-of-month month day-of-week) or an @macro.
--   A parsed field is a bigint bit mask (bit n set = value n allowed), so the
--   search in broker._cron_next_wall needs only integer arithmetic.
--   The cron functions are not SECURITY DEFINER and qualify every function,
--   operator and type that is not a keyword (pg_catalog.text, not text: a
--   variable's type is looked up once per session, so a pg_temp.text domain
--   created before the first call would otherwise run its CHECK inside every
--   later call, as whoever calls), so they carry no SET search_path: a SET
--   clause makes each call save and restore the setting, which costs about as
--   much as the rest of a broker_cron_next call. tests_sql/security/search_path_hijack/ guards this.
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- Function: broker._cron_field(p_field, p_label, p_min, p_max, p_names, p_expr)
--   The bit mask of one field: '*', lists 'a,b', ranges 'a-b', steps '*/s',
--   'a-b/s' and 'a/s' (= a-max/s), values as numbers or (month, day of week)
--   three-letter names, case-insensitive. p_names[i] names the value
--   p_min + i - 1. Day of week 7 is Sunday like 0 (the caller folds bit 7).
-- Errors: 22023 naming the field, the offending part and the whole expression.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._cron_field(p_field text, p_label text, p_min integer, p_max integer, p_names text[],
                                   p_expr text)
RETURNS bigint
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_mask  bigint := 0;
    v_item  pg_catalog.text;
    v_parts pg_catalog.text[];
    v_lo    integer;
    v_hi    integer;
    v_step  integer;
    v_bound pg_catalog.text[];
    v_i     integer;
BEGIN
    FOREACH v_item IN ARRAY pg_catalog.string_to_array(p_field, ',') LOOP
        -- item = base[/step], base = * | a | a-b (no regular expression with groups: those are slow)
        v_parts := pg_catalog.string_to_array(v_item, '/');
        v_bound := pg_catalog.string_to_array(v_parts[1], '-');
        IF pg_catalog.cardinality(v_parts) OPERATOR(pg_catalog.>) 2 OR pg_catalog.cardinality(v_bound) OPERATOR(pg_catalog.>) 2
           OR v_item OPERATOR(pg_catalog.!~) '^(\*|[a-z0-9]+(-[a-z0-9]+)?)(/[0-9]+)?$' THEN
            RAISE EXCEPTION 'cron expression %: % field: cannot read %', pg_catalog.quote_literal(p_expr), p_label,
                pg_catalog.quote_literal(v_item)
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'A field is *, a value, a range a-b, a list a,b, optionally followed by /step.';
        END IF;
        FOR v_i IN 1 .. 2 LOOP
            CONTINUE WHEN v_bound[v_i] IS NULL OR v_bound[v_i] OPERATOR(pg_catalog.=) '*';
            IF v_bound[v_i] OPERATOR(pg_catalog.~) '^[0-9]+$' THEN
                IF pg_catalog.length(v_bound[v_i]) OPERATOR(pg_catalog.>) 4
                   OR v_bound[v_i]::integer OPERATOR(pg_catalog.<) p_min
                   OR v_bound[v_i]::integer OPERATOR(pg_catalog.>) p_max THEN
                    RAISE EXCEPTION 'cron expression %: % field: % is outside %-%', pg_catalog.quote_literal(p_expr),
                        p_label, v_bound[v_i], p_min, p_max
                        USING ERRCODE = 'invalid_parameter_value';
                END IF;
            ELSIF pg_catalog.array_position(p_names, v_bound[v_i]) IS NOT NULL THEN
                v_bound[v_i] := (pg_catalog.array_position(p_names, v_bound[v_i]) OPERATOR(pg_catalog.+) p_min
                                 OPERATOR(pg_catalog.-) 1)::pg_catalog.text;
            ELSE
                RAISE EXCEPTION 'cron expression %: % field: unknown value %', pg_catalog.quote_literal(p_expr),
                    p_label, pg_catalog.quote_literal(v_bound[v_i])
                    USING ERRCODE = 'invalid_parameter_value',
                          HINT = CASE WHEN p_names IS NULL THEN pg_catalog.format('Use numbers %s-%s.', p_min, p_max)
                                      ELSE pg_catalog.format('Use numbers %s-%s or the names %s.', p_min, p_max,
                                                             pg_catalog.array_to_string(p_names, ', ')) END;
            END IF;
        END LOOP;
        v_step := 1;
        IF v_parts[2] IS NOT NULL THEN
            IF pg_catalog.length(v_parts[2]) OPERATOR(pg_catalog.>) 4 OR v_parts[2]::integer OPERATOR(pg_catalog.=) 0 THEN
                RAISE EXCEPTION 'cron expression %: % field: step in % must be 1-%', pg_catalog.quote_literal(p_expr),
                    p_label, pg_catalog.quote_literal(v_item), p_max
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            v_step := v_parts[2]::integer;
        END IF;
        IF v_bound[1] OPERATOR(pg_catalog.=) '*' THEN
            v_lo := p_min;
            v_hi := p_max;
        ELSE
            v_lo := v_bound[1]::integer;
            -- 'a/s' means a-max/s; a bare 'a' is just a
            v_hi := COALESCE(v_bound[2]::integer, CASE WHEN v_parts[2] IS NULL THEN v_lo ELSE p_max END);
        END IF;
        IF v_lo OPERATOR(pg_catalog.>) v_hi THEN
            RAISE EXCEPTION 'cron expression %: % field: range % runs backwards', pg_catalog.quote_literal(p_expr),
                p_label, pg_catalog.quote_literal(v_item)
                USING ERRCODE = 'invalid_parameter_value', HINT = 'Write the smaller value first (a-b with a <= b).';
        END IF;
        FOR v_i IN v_lo .. v_hi BY v_step LOOP
            v_mask := v_mask OPERATOR(pg_catalog.|) (1::bigint OPERATOR(pg_catalog.<<) v_i);
        END LOOP;
    END LOOP;
    RETURN v_mask;
END;
$$;
COMMENT ON FUNCTION broker._cron_field(text, text, integer, integer, text[], text) IS
    'Internal: bit mask of one cron field (values, ranges, lists, steps, names); 22023 naming the field on errors.';

-- ---------------------------------------------------------------------------
-- Function: broker._cron_parse(p_expr)
--   Parses a cron expression into bit masks: minutes (0-59), hours (0-23),
--   days of month (1-31), months (1-12), days of week (0-6, 0 = Sunday),
--   and two flags:
--     day_and     true when the day-of-month or day-of-week field starts
--                 with '*' (Vixie cron: then a day must match both fields;
--                 otherwise it matches when either field matches);
--     fixed_time  true when neither the minute nor the hour field starts
--                 with '*' (ISC cron's daylight-saving rule, see
--                 broker_cron_next).
--   Macros: @yearly @annually @monthly @weekly @daily @midnight @hourly.
-- Errors: 22004 NULL expression; 22023 longer than 256 characters, wrong
--   field count, unknown macro, bad value, range or step (the message names
--   the field).
--   Calls: _cron_field
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._cron_parse(p_expr text,
    OUT minutes bigint, OUT hours bigint, OUT days bigint, OUT months bigint, OUT dows bigint,
    OUT day_and boolean, OUT fixed_time boolean)
RETURNS record
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_text   pg_catalog.text := pg_catalog.lower(pg_catalog.btrim(p_expr));
    v_fields pg_catalog.text[];
BEGIN
    IF p_expr IS NULL THEN
        RAISE EXCEPTION 'cron expression must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF pg_catalog.length(p_expr) OPERATOR(pg_catalog.>) 256 THEN
        RAISE EXCEPTION 'cron expression is % characters long; at most 256 are accepted', pg_catalog.length(p_expr)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_catalog.left(v_text, 1) OPERATOR(pg_catalog.=) '@' THEN
        v_text := (ARRAY['0 0 1 1 *', '0 0 1 1 *', '0 0 1 * *', '0 0 * * 0', '0 0 * * *', '0 0 * * *', '0 * * * *'])
                  [pg_catalog.array_position(ARRAY['@yearly', '@annually', '@monthly', '@weekly', '@daily', '@midnight',
                                                   '@hourly'], v_text)];
        IF v_text IS NULL THEN
            RAISE EXCEPTION 'cron expression %: unknown macro', pg_catalog.quote_literal(p_expr)
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Macros: @yearly @annually @monthly @weekly @daily @midnight @hourly.';
        END IF;
    END IF;
    v_fields := pg_catalog.regexp_split_to_array(v_text, '\s+');
    IF pg_catalog.cardinality(v_fields) OPERATOR(pg_catalog.<>) 5 OR v_text OPERATOR(pg_catalog.=) '' THEN
        RAISE EXCEPTION 'cron expression % has % fields; it needs 5 (minute hour day-of-month month day-of-week)',
            pg_catalog.quote_literal(p_expr), CASE WHEN v_text OPERATOR(pg_catalog.=) '' THEN 0
                                                   ELSE pg_catalog.cardinality(v_fields) END
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    minutes := broker._cron_field(v_fields[1], 'minute', 0, 59, NULL, p_expr);
    hours := broker._cron_field(v_fields[2], 'hour', 0, 23, NULL, p_expr);
    days := broker._cron_field(v_fields[3], 'day-of-month', 1, 31, NULL, p_expr);
    months := broker._cron_field(v_fields[4], 'month', 1, 12,
        ARRAY['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'], p_expr);
    dows := broker._cron_field(v_fields[5], 'day-of-week', 0, 7,
        ARRAY['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'], p_expr);
    -- 7 is Sunday too
    dows := (dows OPERATOR(pg_catalog.|) (dows OPERATOR(pg_catalog.>>) 7)) OPERATOR(pg_catalog.&) 127;
    day_and := pg_catalog.left(v_fields[3], 1) OPERATOR(pg_catalog.=) '*'
            OR pg_catalog.left(v_fields[5], 1) OPERATOR(pg_catalog.=) '*';
    fixed_time := pg_catalog.left(v_fields[1], 1) OPERATOR(pg_catalog.<>) '*'
              AND pg_catalog.left(v_fields[2], 1) OPERATOR(pg_catalog.<>) '*';
END;
$$;
COMMENT ON FUNCTION broker._cron_parse(text) IS
    'Internal: parses a five-field cron expression or @macro into bit masks plus the Vixie day rule and ISC fixed-time flags.';
