-- sql/traces/traceparent.sql: the enqueuer's trace context (W3C traceparent), captured on every enqueue path.
-- ---------------------------------------------------------------------------
-- Function: broker._bad_traceparent(p_value)
--   Raises a setting broker.traceparent that is not a W3C traceparent
--   (22023). Declared to return text so that broker._traceparent can call it
--   where a value is expected; VOLATILE so that the planner never runs it
--   ahead of the row.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._bad_traceparent(p_value text)
RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'broker.traceparent must be a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>, lower case, ids not all zero), got %',
        pg_catalog.quote_literal(pg_catalog.left(p_value, 100))
        USING ERRCODE = 'invalid_parameter_value',
              HINT = 'Set it from the current span (SET LOCAL broker.traceparent = ''00-...''), or RESET it to enqueue without one.';
END;
$$;
COMMENT ON FUNCTION broker._bad_traceparent(text) IS
    'Internal: raise a setting broker.traceparent that is not a W3C traceparent (22023).';

-- ---------------------------------------------------------------------------
-- Function: broker._traceparent()
--   The transaction's trace context for the job an INSERT makes: the setting
--   broker.traceparent (SET LOCAL broker.traceparent = '00-...' by the
--   enqueuer, before it enqueues), NULL when unset or empty, raised by
--   broker._bad_traceparent when it is not a W3C traceparent of version 00
--   (https://www.w3.org/TR/trace-context/#traceparent-header).
--   broker_jobs.traceparent's default, so that every way a job is made
--   (broker_add_job, broker_add_jobs, broker_add_task, a schedule run now, a
--   plain INSERT) carries it with no parameter of its own: the rule in one
--   place. Without SET search_path on purpose: one expression, which the
--   planner inlines into the INSERT (an unset setting costs one
--   current_setting per row); everything is schema-qualified.
--   Calls: _bad_traceparent
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._traceparent()
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT CASE
        WHEN COALESCE(pg_catalog.current_setting('broker.traceparent', true), '') OPERATOR(pg_catalog.=) '' THEN NULL
        WHEN pg_catalog.current_setting('broker.traceparent', true)
                 OPERATOR(pg_catalog.~) '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'
             AND pg_catalog.substr(pg_catalog.current_setting('broker.traceparent', true), 4, 32)
                 OPERATOR(pg_catalog.<>) '00000000000000000000000000000000'
             AND pg_catalog.substr(pg_catalog.current_setting('broker.traceparent', true), 37, 16)
                 OPERATOR(pg_catalog.<>) '0000000000000000'
            THEN pg_catalog.current_setting('broker.traceparent', true)
        ELSE broker._bad_traceparent(pg_catalog.current_setting('broker.traceparent', true))
    END
$$;
COMMENT ON FUNCTION broker._traceparent() IS
    'Internal: the setting broker.traceparent checked as a W3C traceparent (22023 otherwise), NULL when unset: broker_jobs.traceparent''s default.';
