-- sql/flow/weights.sql: tenants' weights in the fair share of a queue's claims.

-- ---------------------------------------------------------------------------
-- Function: broker.broker_set_tenant_weight(p_tenant_id, p_weight)
--   Sets tenant p_tenant_id's weight in the fair share of every queue's
--   claims (broker_get): each claim serves the tenants that have claimable
--   jobs in proportion to their weights. A tenant without a weight weighs 1;
--   p_weight NULL removes the weight (back to 1). Administrators only.
--   Returns the weight now in force.
-- Errors: 22004 NULL tenant; 22023 blank tenant or over 200 characters, a
--   weight outside 1..1000; 42501 the caller is not an administrator.
-- Example:
--   SELECT broker.broker_set_tenant_weight('premium', 3);
--   Calls: _is_broker_admin
--   Tables: writes broker_tenant_weight
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_set_tenant_weight(p_tenant_id text, p_weight integer)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT broker._is_broker_admin(CURRENT_USER) THEN
        RAISE EXCEPTION 'broker_set_tenant_weight: only administrators (broker_admin) set tenants'' weights'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF p_tenant_id IS NULL THEN
        RAISE EXCEPTION 'broker_set_tenant_weight: p_tenant_id must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF pg_catalog.btrim(p_tenant_id) OPERATOR(pg_catalog.=) '' OR pg_catalog.length(p_tenant_id) OPERATOR(pg_catalog.>) 200 THEN
        RAISE EXCEPTION 'broker_set_tenant_weight: tenant id must be 1 to 200 characters and not blank'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_weight OPERATOR(pg_catalog.<) 1 OR p_weight OPERATOR(pg_catalog.>) 1000 THEN
        RAISE EXCEPTION 'broker_set_tenant_weight: weights are 1 to 1000, got %', p_weight
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'NULL removes the weight (a tenant without one weighs 1).';
    END IF;
    IF p_weight IS NULL THEN
        DELETE FROM broker.broker_tenant_weight AS w WHERE w.tenant_id OPERATOR(pg_catalog.=) p_tenant_id;
        RETURN 1;
    END IF;
    INSERT INTO broker.broker_tenant_weight AS w (tenant_id, weight) VALUES (p_tenant_id, p_weight)
        ON CONFLICT (tenant_id) DO UPDATE
           SET weight = EXCLUDED.weight, set_by = CURRENT_USER, set_at = pg_catalog.now();
    RETURN p_weight;
END;
$$;
COMMENT ON FUNCTION broker.broker_set_tenant_weight(text, integer) IS
    'Sets a tenant''s weight (1 to 1000; NULL: back to 1) in the fair share of every queue''s claims. Administrators only.';
