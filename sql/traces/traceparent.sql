-- sql/traces/traceparent.sql: the enqueuer's trace context (W3C traceparent), captured on every enqueue path.
-- ---------------------------------------------------------------------------
-- Function: broker._is_traceparent(p_value)
--   Is p_value a W3C traceparent of version 00
--   (https://www.w3.org/TR/trace-context/#traceparent-header): '00-', 32
--   lower-case hex digits (the trace id, not all zeros), '-', 16 (the parent
--   span id, not all zeros), '-', 2 (the flags)? NULL for NULL. String
--   functions, not a regular expression ('[0-9a-f]{32}' cost twice as much).
--   Without SET search_path on purpose: one expression, inlined where it is
--   called; everything is schema-qualified.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._is_traceparent(p_value text)
RETURNS boolean
LANGUAGE sql IMMUTABLE
AS $$
    -- (the shape: every hex digit made a 0, the text is the all-zero traceparent)
    SELECT pg_catalog.translate(p_value, '123456789abcdef', '000000000000000')
               OPERATOR(pg_catalog.=) '00-00000000000000000000000000000000-0000000000000000-00'
       AND pg_catalog.starts_with(p_value, '00-')
       AND pg_catalog.substr(p_value, 4, 32) OPERATOR(pg_catalog.<>) '00000000000000000000000000000000'
       AND pg_catalog.substr(p_value, 37, 16) OPERATOR(pg_catalog.<>) '0000000000000000'
$$;
COMMENT ON FUNCTION broker._is_traceparent(text) IS
    'Internal: p_value is a W3C traceparent of version 00 (lower-case hex, ids not all zeros).';

-- ---------------------------------------------------------------------------
-- Function: broker._checked_traceparent(p_value)
--   p_value, the setting broker.traceparent, once it is checked
--   (broker._is_traceparent; 22023 otherwise); remembered as
--   broker.traceparent_checked for the rest of the transaction, so that the
--   jobs after the first one made with it are not checked again (the check
--   costs more than the rest of the default). STABLE, not VOLATILE, although
--   it sets that setting: it returns the same for the same value, and a
--   VOLATILE call would keep the planner from inlining broker._traceparent,
--   which then cost an enqueue about 8 us per row (bench/traceparent_cost.py).
--   Calls: _is_traceparent
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._checked_traceparent(p_value text)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT broker._is_traceparent(p_value) THEN
        RAISE EXCEPTION 'broker.traceparent must be a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>, lower case, ids not all zero), got %',
            pg_catalog.quote_literal(pg_catalog.left(p_value, 100))
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Set it from the current span (SET LOCAL broker.traceparent = ''00-...''), or RESET it to enqueue without one.';
    END IF;
    PERFORM pg_catalog.set_config('broker.traceparent_checked', p_value, true);
    RETURN p_value;
END;
$$;
COMMENT ON FUNCTION broker._checked_traceparent(text) IS
    'Internal: the setting broker.traceparent once checked as a W3C traceparent (22023 otherwise), remembered for the transaction.';

-- ---------------------------------------------------------------------------
-- Function: broker._traceparent()
--   The transaction's trace context for the job an INSERT makes: the setting
--   broker.traceparent (SET LOCAL broker.traceparent = '00-...' by the
--   enqueuer, before it enqueues), NULL when unset or empty, checked by
--   broker._checked_traceparent (22023) unless this transaction checked the
--   same value already.
--   broker_jobs.traceparent's default, so that every way a job is made
--   (broker_add_job, broker_add_jobs, broker_add_task, a schedule run now, a
--   plain INSERT) carries it with no parameter of its own: the rule in one
--   place. Without SET search_path on purpose: one expression, which the
--   planner inlines into the INSERT (an unset setting costs one
--   current_setting per row); everything is schema-qualified.
--   Calls: _checked_traceparent
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._traceparent()
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT CASE
        WHEN COALESCE(pg_catalog.current_setting('broker.traceparent', true), '') OPERATOR(pg_catalog.=) '' THEN NULL
        WHEN pg_catalog.current_setting('broker.traceparent', true)
             OPERATOR(pg_catalog.=) pg_catalog.current_setting('broker.traceparent_checked', true)
            THEN pg_catalog.current_setting('broker.traceparent', true)
        ELSE broker._checked_traceparent(pg_catalog.current_setting('broker.traceparent', true))
    END
$$;
COMMENT ON FUNCTION broker._traceparent() IS
    'Internal: the setting broker.traceparent checked as a W3C traceparent (22023 otherwise), NULL when unset: broker_jobs.traceparent''s default.';
