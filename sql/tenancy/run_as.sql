-- sql/tenancy/run_as.sql: which roles a role may enqueue as (run_as), and when that right is lost.
-- ---------------------------------------------------------------------------
-- Function: broker._can_read_every_tenant(p_role)
--   Whether role p_role is, or is a member of in any way (inheriting or not,
--   directly or through other roles), a superuser, a BYPASSRLS role or
--   broker_admin (whose policies broker_admin_all show it every row). Not
--   only the privileges p_role has count: a job runs as its run_as role
--   without SET ROLE (its executor is SECURITY DEFINER), but ALTER ...
--   OWNER TO needs membership alone, so a job running as a NOINHERIT member
--   of broker_admin could hand a SECURITY DEFINER function to broker_admin
--   (which owns the executor schemas) and call it.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._can_read_every_tenant(p_role oid)
RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS a
                    WHERE (a.rolsuper OR a.rolbypassrls OR a.rolname OPERATOR(pg_catalog.=) 'broker_admin')
                      AND pg_catalog.pg_has_role(p_role, a.oid, 'MEMBER'));
END;
$$;
COMMENT ON FUNCTION broker._can_read_every_tenant(oid) IS
    'Internal: whether a role is, or is a member of in any way, a superuser, a BYPASSRLS role or broker_admin.';

-- ---------------------------------------------------------------------------
-- Function: broker._may_run_as(p_run_as, p_role)
--   Policy helper: may p_role enqueue jobs that run as p_run_as? It must be a
--   member of it; a target that reads, or may become a role that reads, every
--   tenant (_can_read_every_tenant: a superuser, BYPASSRLS, broker_admin, or
--   a member of one) other than itself needs p_role to be superuser.
--   Calls: _can_read_every_tenant
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._may_run_as(p_run_as name, p_role name)
RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER  -- (PL/pgSQL keeps the query's plan; a SQL function with SET plans it at every statement)
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- (p_role by oid, to_regrole: a p_role that no longer exists answers false, not an error)
    RETURN EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS t
                    WHERE t.rolname OPERATOR(pg_catalog.=) p_run_as
                      AND pg_catalog.pg_has_role(pg_catalog.to_regrole(pg_catalog.quote_ident(p_role)), t.oid, 'MEMBER')
                      -- (the common case first: a job that runs as its enqueuer needs no role scan)
                      AND (t.rolname OPERATOR(pg_catalog.=) p_role
                           OR NOT broker._can_read_every_tenant(t.oid)
                           OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS s
                                       WHERE s.rolname OPERATOR(pg_catalog.=) p_role AND s.rolsuper)));
END;
$$;
COMMENT ON FUNCTION broker._may_run_as(name, name) IS
    'Policy helper: p_role is a member of p_run_as, and p_run_as neither reads nor may become a role that reads every tenant (superuser, BYPASSRLS, broker_admin) unless p_role is superuser or that role.';

-- ---------------------------------------------------------------------------
-- Function: broker._authority_lost(p_role, p_tenant_id, p_run_as, p_who)
--   Checked again when work enqueued in p_role's name is about to happen (a
--   job about to run: p_role is its enqueued_by; a schedule about to fire:
--   its owner): p_role must still exist, still act for the tenant (strict
--   tenancy) and still be allowed to run jobs as p_run_as (_may_run_as).
--   NULL when all hold, else why not, naming p_role as p_who.
--   Calls: _tenant_allowed, _may_run_as
--   Tables: none
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
--   it; a role that reads, or may become by membership a role that reads,
--   every tenant (_can_read_every_tenant) other than the caller only for a
--   superuser. NULL for NULL (the caller itself). Errors start with p_fn.
-- Errors: 42704 unknown role; 42501 not a member, or a privileged role.
--   Calls: _can_read_every_tenant
--   Tables: none
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
    SELECT r.rolname, broker._can_read_every_tenant(r.oid) AS every_tenant
      INTO v_role
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
    IF v_role.every_tenant AND v_role.rolname OPERATOR(pg_catalog.<>) CURRENT_USER
       AND NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER) THEN
        RAISE EXCEPTION '%: only a superuser may enqueue jobs that run as role %, which reads or may become a role that reads every tenant (superuser, BYPASSRLS or broker_admin)', p_fn,
            pg_catalog.quote_ident(p_run_as)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN v_role.rolname;
END;
$$;
COMMENT ON FUNCTION broker._check_run_as(text, text) IS
    'Internal: the run_as role the current user may give a job it enqueues (member of it; privileged roles for superusers only), or an error.';
