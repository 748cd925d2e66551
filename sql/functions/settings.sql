-- ---------------------------------------------------------------------------
-- Function: broker._setting_int(p_name, p_default, p_min)
--   Reads the integer setting broker.<p_name> (set with broker_set or SET),
--   falling back to p_default when unset or empty.
-- Errors: 22023 when the value is not an integer >= p_min.
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._setting_int(p_name text, p_default integer, p_min integer)
RETURNS integer
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_raw text := pg_catalog.current_setting('broker.' OPERATOR(pg_catalog.||) p_name, true);
    v_val integer;
BEGIN
    IF v_raw IS NULL OR pg_catalog.btrim(v_raw) OPERATOR(pg_catalog.=) '' THEN
        RETURN p_default;
    END IF;
    BEGIN
        v_val := v_raw::integer;
    EXCEPTION WHEN invalid_text_representation OR numeric_value_out_of_range THEN
        v_val := NULL;
    END;
    IF v_val IS NULL OR v_val OPERATOR(pg_catalog.<) p_min THEN
        RAISE EXCEPTION 'setting broker.% is %, expected an integer >= %', p_name, pg_catalog.quote_literal(v_raw), p_min
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = pg_catalog.format('Fix it with SELECT broker.broker_set(%L, ''<value>'').', p_name);
    END IF;
    RETURN v_val;
END;
$$;
COMMENT ON FUNCTION broker._setting_int(text, integer, integer) IS
    'Internal: integer value of setting broker.<name>, or the default when unset; 22023 when invalid.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_set(p_setting, p_value, p_is_local)
--   Sets a broker runtime option for this session (or, with p_is_local, this
--   transaction) and returns the value now in force. Options:
--     lease_seconds       default lease length of broker_get (default 60)
--     retry_base_seconds  first retry delay; doubles per attempt (default 5)
--     retry_max_seconds   upper bound of the retry delay (default 3600)
--     application_name    the session's application_name
--     tenant_id           same as broker_set_tenant (always transaction-local)
-- Errors: 22023 unknown option or invalid value; 22004 NULL value.
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_set(p_setting text, p_value text, p_is_local boolean DEFAULT false)
RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_setting text := pg_catalog.lower(pg_catalog.btrim(p_setting));
    v_min integer;
BEGIN
    IF p_value IS NULL THEN
        RAISE EXCEPTION 'broker_set: value for % must not be NULL', p_setting
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF v_setting OPERATOR(pg_catalog.=) 'tenant_id' THEN
        RETURN broker.broker_set_tenant(p_value);
    ELSIF v_setting OPERATOR(pg_catalog.=) 'application_name' THEN
        RETURN pg_catalog.set_config('application_name', p_value, COALESCE(p_is_local, false));
    ELSIF v_setting OPERATOR(pg_catalog.=) ANY (ARRAY['lease_seconds', 'retry_base_seconds', 'retry_max_seconds']) THEN
        v_min := CASE v_setting WHEN 'retry_base_seconds' THEN 0 ELSE 1 END;
        PERFORM pg_catalog.set_config('broker.' OPERATOR(pg_catalog.||) v_setting, p_value, COALESCE(p_is_local, false));
        RETURN broker._setting_int(v_setting, NULL, v_min)::text;
    END IF;
    RAISE EXCEPTION 'broker_set: unknown setting %', pg_catalog.quote_literal(p_setting)
        USING ERRCODE = 'invalid_parameter_value',
              HINT = 'Known settings: lease_seconds, retry_base_seconds, retry_max_seconds, application_name, tenant_id.';
END;
$$;
COMMENT ON FUNCTION broker.broker_set(text, text, boolean) IS
    'Sets a broker runtime option (lease_seconds, retry_base_seconds, retry_max_seconds, application_name, tenant_id) for the session or, with p_is_local, the transaction; returns the value in force.';
