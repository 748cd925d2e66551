-- sql/core/settings.sql: database-wide options (broker_config) and their reader.
-- ---------------------------------------------------------------------------
-- Function: broker._setting_int(p_name, p_default, p_min)
--   The integer option p_name from broker_config, or p_default when unset.
--   Calls: none
--   Tables: reads broker_config
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._setting_int(p_name text, p_default integer, p_min integer)
RETURNS integer
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN GREATEST(COALESCE((SELECT c.value::integer FROM broker.broker_config AS c
                               WHERE c.setting OPERATOR(pg_catalog.=) p_name), p_default), p_min);
END;
$$;
COMMENT ON FUNCTION broker._setting_int(text, integer, integer) IS
    'Internal: integer option from broker_config, or the default when unset.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_set(p_setting, p_value, p_is_local)
--   Sets a broker option and returns the value now in force.
--     application_name    the session's application_name (p_is_local: this
--                         transaction only)
--     tenant_id           same as broker_set_tenant (always transaction-local)
--     lease_seconds       default lease of broker_get (default 60)
--     retry_base_seconds  first retry delay, doubling per attempt (default 5)
--     retry_max_seconds   upper bound of the retry delay (default 3600)
--     max_schedules_per_tenant  schedules a tenant may have (default 1000)
--   The last four are database-wide options in broker_config: only roles
--   that may write it (broker_admin, superusers) can set them, and they take
--   effect when the transaction commits.
-- Errors: 22023 unknown option or invalid value; 22004 NULL value;
--   42501 no right to change database-wide options.
-- Example:
--   SELECT broker.broker_set('application_name', 'nightly-etl');
--   SELECT broker.broker_set('retry_max_seconds', '600');   -- broker_admin: database-wide
--   Calls: broker_set_tenant
--   Tables: writes broker_config
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_set(p_setting text, p_value text, p_is_local boolean DEFAULT false)
RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_setting text := pg_catalog.lower(pg_catalog.btrim(p_setting));
    v_min     integer;
    v_val     integer;
BEGIN
    IF p_value IS NULL THEN
        RAISE EXCEPTION 'broker_set: value for % must not be NULL', p_setting
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF v_setting OPERATOR(pg_catalog.=) 'tenant_id' THEN
        RETURN broker.broker_set_tenant(p_value);
    ELSIF v_setting OPERATOR(pg_catalog.=) 'application_name' THEN
        RETURN pg_catalog.set_config('application_name', p_value, COALESCE(p_is_local, false));
    ELSIF v_setting OPERATOR(pg_catalog.=) ANY (ARRAY['lease_seconds', 'retry_base_seconds', 'retry_max_seconds',
                                                    'max_schedules_per_tenant']) THEN
        v_min := CASE v_setting WHEN 'retry_base_seconds' THEN 0 ELSE 1 END;
        BEGIN
            v_val := p_value::integer;
        EXCEPTION WHEN invalid_text_representation OR numeric_value_out_of_range THEN
            v_val := NULL;
        END;
        IF v_val IS NULL OR v_val OPERATOR(pg_catalog.<) v_min OR v_val OPERATOR(pg_catalog.>) 999999999 THEN
            RAISE EXCEPTION 'broker_set: % must be an integer from % to 999999999, got %', v_setting, v_min,
                pg_catalog.quote_literal(p_value)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF NOT pg_catalog.has_table_privilege('broker.broker_config', 'INSERT, UPDATE') THEN
            RAISE EXCEPTION 'broker_set: % is a database-wide option; only broker_admin may change it', v_setting
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        INSERT INTO broker.broker_config AS c (setting, value) VALUES (v_setting, v_val::text)
        ON CONFLICT (setting) DO UPDATE SET value = EXCLUDED.value;
        RETURN v_val::text;
    END IF;
    RAISE EXCEPTION 'broker_set: unknown setting %', pg_catalog.quote_literal(p_setting)
        USING ERRCODE = 'invalid_parameter_value',
              HINT = 'Known settings: lease_seconds, retry_base_seconds, retry_max_seconds, max_schedules_per_tenant, application_name, tenant_id.';
END;
$$;
COMMENT ON FUNCTION broker.broker_set(text, text, boolean) IS
    'Sets application_name or tenant_id for the session/transaction, or (broker_admin) the database-wide options lease_seconds, retry_base_seconds, retry_max_seconds, max_schedules_per_tenant; returns the value in force.';
