-- sql/tenancy/admin.sql: who administers the broker (pauses queues for every tenant).
-- ---------------------------------------------------------------------------
-- Function: broker._is_broker_admin(p_role)
--   Policy helper: is p_role an administrator of the broker (a superuser, or
--   a member of broker_admin with its privileges)? Administrators pause a
--   queue for every tenant.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._is_broker_admin(p_role name)
RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_role  oid := pg_catalog.to_regrole(pg_catalog.quote_ident(p_role));
    v_admin oid := pg_catalog.to_regrole('broker_admin');
BEGIN
    IF v_role IS NULL THEN
        RETURN false;
    END IF;
    RETURN COALESCE((SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.oid OPERATOR(pg_catalog.=) v_role), false)
        OR (v_admin IS NOT NULL AND pg_catalog.pg_has_role(v_role, v_admin, 'USAGE'));
END;
$$;
COMMENT ON FUNCTION broker._is_broker_admin(name) IS
    'Policy helper: true for a superuser or a role with the privileges of broker_admin.';
