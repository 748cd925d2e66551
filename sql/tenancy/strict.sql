-- sql/tenancy/strict.sql: strict tenancy: which roles may act for which tenant.
-- ---------------------------------------------------------------------------
-- Function: broker._strict_tenancy()
--   True when strict tenancy is on (broker_config.strict_tenancy = 'on').
--   Calls: none
--   Tables: reads broker_config
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._strict_tenancy()
RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN COALESCE((SELECT c.value OPERATOR(pg_catalog.=) 'on' FROM broker.broker_config AS c
                      WHERE c.setting OPERATOR(pg_catalog.=) 'strict_tenancy'), false);
END;
$$;
COMMENT ON FUNCTION broker._strict_tenancy() IS 'Internal: whether strict tenancy (broker_tenant_roles) is enforced.';

-- ---------------------------------------------------------------------------
-- Function: broker._tenant_allowed(p_tenant_id, p_role)
--   Policy helper: may p_role act for p_tenant_id? Always true unless strict
--   tenancy is on; then p_role must belong to a role mapped to the tenant in
--   broker_tenant_roles. Policies pass CURRENT_USER, evaluated as the querying
--   role, so a caller cannot answer for someone else.
--   Calls: none
--   Tables: reads broker_config, broker_tenant_roles
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._tenant_allowed(p_tenant_id text, p_role name)
RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_role oid;
BEGIN
    -- (broker._strict_tenancy() inline: every enqueue and every policy check
    -- comes here, and a nested call with its own SET costs more than the query)
    IF NOT COALESCE((SELECT c.value OPERATOR(pg_catalog.=) 'on' FROM broker.broker_config AS c
                      WHERE c.setting OPERATOR(pg_catalog.=) 'strict_tenancy'), false) THEN
        RETURN true;
    END IF;
    -- roles by oid (to_regrole: NULL, not an error, for a name no role has): a p_role that no
    -- longer exists answers false, a mapping left behind by a dropped role is skipped
    -- (pg_has_role raises for an unknown role name, and is strict)
    v_role := pg_catalog.to_regrole(pg_catalog.quote_ident(p_role));
    IF v_role IS NULL THEN
        RETURN false;
    END IF;
    RETURN EXISTS (SELECT 1 FROM broker.broker_tenant_roles AS m
                    WHERE m.tenant_id OPERATOR(pg_catalog.=) p_tenant_id
                      AND pg_catalog.pg_has_role(v_role, pg_catalog.to_regrole(pg_catalog.quote_ident(m.role_name)),
                                                 'MEMBER'));
END;
$$;
COMMENT ON FUNCTION broker._tenant_allowed(text, name) IS
    'Policy helper: true unless strict tenancy is on and p_role belongs to no role mapped to the tenant.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_set_strict_tenancy(p_enabled)
--   Turns strict tenancy on or off. Runs with the caller's rights: only
--   roles that may write broker_config (broker_admin, superusers) can.
-- Example:
--   INSERT INTO broker.broker_tenant_roles (tenant_id, role_name) VALUES ('acme', 'acme_app');
--   SELECT broker.broker_set_strict_tenancy(true);   -- broker_admin
--   Calls: none
--   Tables: writes broker_config
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_set_strict_tenancy(p_enabled boolean)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_enabled IS NULL THEN
        RAISE EXCEPTION 'broker_set_strict_tenancy: p_enabled must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    INSERT INTO broker.broker_config AS c (setting, value)
    VALUES ('strict_tenancy', CASE WHEN p_enabled THEN 'on' ELSE 'off' END)
    ON CONFLICT (setting) DO UPDATE SET value = EXCLUDED.value;
    RETURN p_enabled;
END;
$$;
COMMENT ON FUNCTION broker.broker_set_strict_tenancy(boolean) IS
    'Turns strict tenancy on/off (roles may then act only for tenants mapped in broker_tenant_roles); needs write access to broker_config.';
