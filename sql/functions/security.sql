-- ---------------------------------------------------------------------------
-- Function: broker._strict_tenancy()
--   True when strict tenancy is on (broker_config.strict_tenancy = 'on').
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
-- Function: broker._may_run_as(p_run_as, p_role)
--   Policy helper: may p_role enqueue jobs that run as p_run_as? It must be a
--   member of it; a superuser or BYPASSRLS target other than itself needs
--   p_role to be superuser.
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._may_run_as(p_run_as name, p_role name)
RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    -- (p_role by oid, to_regrole: a p_role that no longer exists answers false, not an error)
    SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS t
                    WHERE t.rolname OPERATOR(pg_catalog.=) p_run_as
                      AND pg_catalog.pg_has_role(pg_catalog.to_regrole(pg_catalog.quote_ident(p_role)), t.oid, 'MEMBER')
                      AND (NOT (t.rolsuper OR t.rolbypassrls)
                           OR t.rolname OPERATOR(pg_catalog.=) p_role
                           OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS s
                                       WHERE s.rolname OPERATOR(pg_catalog.=) p_role AND s.rolsuper)))
$$;
COMMENT ON FUNCTION broker._may_run_as(name, name) IS
    'Policy helper: p_role is a member of p_run_as, and p_run_as is not a superuser/BYPASSRLS role unless p_role is superuser or that role.';

-- ---------------------------------------------------------------------------
-- Function: broker._authority_lost(p_role, p_tenant_id, p_run_as, p_who)
--   Checked again when work enqueued in p_role's name is about to happen (a
--   job about to run: p_role is its enqueued_by; a schedule about to fire:
--   its owner): p_role must still exist, still act for the tenant (strict
--   tenancy) and still be allowed to run jobs as p_run_as (_may_run_as).
--   NULL when all hold, else why not, naming p_role as p_who.
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._authority_lost(p_role name, p_tenant_id text, p_run_as name, p_who text)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN CASE
        WHEN NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) p_role)
            THEN pg_catalog.format('%s role %I no longer exists', p_who, p_role)
        WHEN NOT broker._tenant_allowed(p_tenant_id, p_role)
            THEN pg_catalog.format('%s %I may no longer act for tenant %L', p_who, p_role, p_tenant_id)
        WHEN p_run_as OPERATOR(pg_catalog.<>) p_role AND NOT broker._may_run_as(p_run_as, p_role)
            THEN pg_catalog.format('%s %I may no longer run jobs as %I', p_who, p_role, p_run_as) END;
END;
$$;
COMMENT ON FUNCTION broker._authority_lost(name, text, name, text) IS
    'Internal: why p_role (a job''s enqueuer, a schedule''s owner) may no longer have work run as p_run_as in the tenant; NULL when it still may.';

-- ---------------------------------------------------------------------------
-- Function: broker._check_run_as(p_fn, p_run_as)
--   The role a job the current user enqueues may run as (broker_add_job,
--   broker_add_jobs): p_run_as must exist and the caller must be a member of
--   it; a superuser or BYPASSRLS role other than the caller only for a
--   superuser. NULL for NULL (the caller itself). Errors start with p_fn.
-- Errors: 42704 unknown role; 42501 not a member, or a privileged role.
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._check_run_as(p_fn text, p_run_as text)
RETURNS name
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_role record;
BEGIN
    IF p_run_as IS NULL THEN
        RETURN NULL;
    END IF;
    SELECT r.rolname, r.rolsuper, r.rolbypassrls INTO v_role
      FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) p_run_as;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: run_as role % does not exist', p_fn, pg_catalog.quote_ident(p_run_as)
            USING ERRCODE = 'undefined_object';
    END IF;
    IF NOT pg_catalog.pg_has_role(CURRENT_USER, v_role.rolname, 'MEMBER') THEN
        RAISE EXCEPTION '%: role % may not enqueue jobs that run as %', p_fn,
            pg_catalog.quote_ident(CURRENT_USER), pg_catalog.quote_ident(p_run_as)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = pg_catalog.format('Only members of %I may: GRANT %I TO %I.', p_run_as, p_run_as, CURRENT_USER);
    END IF;
    IF (v_role.rolsuper OR v_role.rolbypassrls) AND v_role.rolname OPERATOR(pg_catalog.<>) CURRENT_USER
       AND NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER) THEN
        RAISE EXCEPTION '%: only a superuser may enqueue jobs that run as superuser or BYPASSRLS role %', p_fn,
            pg_catalog.quote_ident(p_run_as)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN v_role.rolname;
END;
$$;
COMMENT ON FUNCTION broker._check_run_as(text, text) IS
    'Internal: the run_as role the current user may give a job it enqueues (member of it; privileged roles for superusers only), or an error.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_set_strict_tenancy(p_enabled)
--   Turns strict tenancy on or off. Runs with the caller's rights: only
--   roles that may write broker_config (broker_admin, superusers) can.
-- Example:
--   INSERT INTO broker.broker_tenant_roles (tenant_id, role_name) VALUES ('acme', 'acme_app');
--   SELECT broker.broker_set_strict_tenancy(true);   -- broker_admin
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
