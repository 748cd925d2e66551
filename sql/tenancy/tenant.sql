-- sql/tenancy/tenant.sql: the current tenant (setting broker.tenant_id); table defaults call it.
-- ---------------------------------------------------------------------------
-- Function: broker.broker_current_tenant()
--   The tenant this transaction acts for: the broker.tenant_id setting, or
--   'default' when it is unset or empty.
--   No SET search_path on purpose: the column defaults and every row-level
--   security policy call it once per row, and only a function without SET
--   clauses is inlined into the query. Every
--   name in it is schema-qualified, so no search_path can change its meaning
--   (listed in sql/pgspot-no-search-path.txt for pgspot).
-- Example:
--   SELECT broker.broker_current_tenant();   -- 'default' unless broker.tenant_id is set
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_current_tenant()
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT CASE WHEN pg_catalog.current_setting('broker.tenant_id', true) OPERATOR(pg_catalog.<>) ''
                THEN pg_catalog.current_setting('broker.tenant_id', true) ELSE 'default' END
$$;
COMMENT ON FUNCTION broker.broker_current_tenant() IS
    'Tenant of the current transaction: broker.tenant_id, or ''default'' when unset.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_set_tenant(p_tenant_id)
--   Sets broker.tenant_id for the current transaction only (set_config with
--   is_local), so a pooled connection never carries a tenant over.
-- Errors: 22004 NULL; 22023 blank or longer than 200 characters.
-- Example:
--   BEGIN;
--   SELECT broker.broker_set_tenant('acme');
--   SELECT * FROM broker.broker_add_job('acme report', 'CALL acme.report()');
--   COMMIT;
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_set_tenant(p_tenant_id text)
RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_tenant_id IS NULL THEN
        RAISE EXCEPTION 'broker_set_tenant: tenant id must not be NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF pg_catalog.btrim(p_tenant_id) OPERATOR(pg_catalog.=) '' OR pg_catalog.length(p_tenant_id) OPERATOR(pg_catalog.>) 200 THEN
        RAISE EXCEPTION 'broker_set_tenant: tenant id must be 1 to 200 characters and not blank'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN pg_catalog.set_config('broker.tenant_id', p_tenant_id, true);
END;
$$;
COMMENT ON FUNCTION broker.broker_set_tenant(text) IS
    'Sets broker.tenant_id for the current transaction only; new jobs and queries act for that tenant.';
