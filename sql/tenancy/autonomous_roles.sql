-- sql/tenancy/autonomous_roles.sql: which roles may run autonomous jobs, and how (the administrator's per-role arrangement).
-- ---------------------------------------------------------------------------
-- Function: broker._autonomous_via(p_role)
--   How jobs of p_role may run autonomously ('set_role' or 'login', see
--   broker_autonomous_role), or NULL when an administrator has not allowed it.
--   Calls: none
--   Tables: reads broker_autonomous_role
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._autonomous_via(p_role name)
RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER  -- (PL/pgSQL: created before the table, and planned once)
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT a.via FROM broker.broker_autonomous_role AS a WHERE a.role_name OPERATOR(pg_catalog.=) p_role);
END;
$$;
COMMENT ON FUNCTION broker._autonomous_via(name) IS
    'Internal: set_role or login when an administrator allowed autonomous jobs for the role (broker_allow_autonomous), else NULL.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_allow_autonomous(p_role, p_via)
--   Lets jobs of p_role run outside a transaction (autonomous jobs), as an
--   administrator's explicit, per-role decision (broker_admin only):
--   * 'set_role' (default): the maintenance statements only. The runner's
--     login runs SET ROLE p_role on a connection of its own, so it must be
--     able to: GRANT p_role TO broker_runtime first. That grant lets every
--     session of the runner's login act as p_role (broker_runtime is
--     NOINHERIT, so it does not use p_role's privileges without SET ROLE).
--   * 'login': CALL too. The runner logs in as p_role with credentials the
--     operator configures for it (the runner's autonomous_logins); no grant.
--   Refused for a role that is a superuser or has BYPASSRLS, CREATEROLE or
--   REPLICATION, or is a member of broker_admin or broker_runtime.
-- Errors: 22004 NULL; 22023 unknown p_via; 42704 unknown role; 42501 a role
--   refused above, or (set_role) broker_runtime not a member of it.
-- Example:
--   GRANT app TO broker_runtime;
--   SELECT broker.broker_allow_autonomous('app');            -- VACUUM, REINDEX ... CONCURRENTLY, ...
--   SELECT broker.broker_allow_autonomous('etl', 'login');   -- CALL etl.load_in_chunks() too
--   Calls: none
--   Tables: writes broker_autonomous_role
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_allow_autonomous(p_role text, p_via text DEFAULT 'set_role')
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_role pg_catalog.pg_roles;
    v_via  text := pg_catalog.lower(pg_catalog.btrim(p_via));
BEGIN
    IF p_role IS NULL OR p_via IS NULL THEN
        RAISE EXCEPTION 'broker_allow_autonomous: % must not be NULL', CASE WHEN p_role IS NULL THEN 'p_role' ELSE 'p_via' END
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF v_via OPERATOR(pg_catalog.<>) ALL (ARRAY['set_role', 'login']) THEN
        RAISE EXCEPTION 'broker_allow_autonomous: p_via must be set_role or login, got %', pg_catalog.quote_literal(p_via)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO v_role FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) p_role;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'broker_allow_autonomous: role % does not exist', pg_catalog.quote_ident(p_role)
            USING ERRCODE = 'undefined_object';
    END IF;
    IF v_role.rolsuper OR v_role.rolbypassrls OR v_role.rolcreaterole OR v_role.rolreplication
       OR pg_catalog.pg_has_role(v_role.oid, 'broker_admin', 'MEMBER') OR pg_catalog.pg_has_role(v_role.oid, 'broker_runtime', 'MEMBER') THEN
        RAISE EXCEPTION 'broker_allow_autonomous: role % is privileged (superuser, BYPASSRLS, CREATEROLE, REPLICATION, or a member of broker_admin or broker_runtime)',
            pg_catalog.quote_ident(p_role)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Run maintenance as an ordinary role that owns the objects.';
    END IF;
    IF v_via OPERATOR(pg_catalog.=) 'set_role' AND NOT pg_catalog.pg_has_role('broker_runtime', v_role.oid, 'MEMBER') THEN
        RAISE EXCEPTION 'broker_allow_autonomous: broker_runtime is not a member of role %, so the runner cannot SET ROLE to it',
            pg_catalog.quote_ident(p_role)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = pg_catalog.format('GRANT %I TO broker_runtime first: every session of the runner''s login may then act as %I (docs/security.md).',
                                           p_role, p_role);
    END IF;
    INSERT INTO broker.broker_autonomous_role AS a (role_name, via) VALUES (p_role, v_via)
    ON CONFLICT (role_name) DO UPDATE SET via = EXCLUDED.via, allowed_by = EXCLUDED.allowed_by, allowed_at = EXCLUDED.allowed_at;
END;
$$;
COMMENT ON FUNCTION broker.broker_allow_autonomous(text, text) IS
    'Lets jobs of a role run outside a transaction (autonomous jobs): set_role (maintenance statements; needs GRANT role TO broker_runtime) or login (CALL too; the runner logs in as the role). broker_admin only.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_disallow_autonomous(p_role)
--   Withdraws broker_allow_autonomous: new autonomous jobs of p_role are
--   refused at enqueue, pending ones fail when they come to run (42501).
--   Returns whether there was an arrangement. (Revoke the role from
--   broker_runtime yourself.)
-- Example:
--   SELECT broker.broker_disallow_autonomous('app');  REVOKE app FROM broker_runtime;
--   Calls: none
--   Tables: writes broker_autonomous_role
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_disallow_autonomous(p_role text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM broker.broker_autonomous_role AS a WHERE a.role_name OPERATOR(pg_catalog.=) p_role;
    RETURN FOUND;
END;
$$;
COMMENT ON FUNCTION broker.broker_disallow_autonomous(text) IS
    'Withdraws broker_allow_autonomous for a role: its autonomous jobs are refused at enqueue and fail at run time (42501). broker_admin only.';
