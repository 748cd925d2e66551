-- ---------------------------------------------------------------------------
-- Job executors. A job runs inside broker_exec.run_as_<role oid>(sql,
-- language, search_path): a SECURITY DEFINER function owned by the job's
-- run_as role. Inside it the job has exactly that role's privileges, and
-- PostgreSQL refuses SET ROLE, RESET ROLE, SET SESSION AUTHORIZATION and
-- set_config('role', ...) in a security-definer context, also in DO blocks
-- and functions the job calls or creates, so the job cannot get back to the
-- privileges of the broker that called it.
-- Schema broker_exec holds nothing else. Only its owner and (via the
-- broker_enqueue grant) enqueuers may create functions there; broker_run
-- only calls a function whose name, owner and SECURITY DEFINER flag match.
-- ---------------------------------------------------------------------------
CREATE SCHEMA broker_exec;
COMMENT ON SCHEMA broker_exec IS 'pgsql_broker job executors: one SECURITY DEFINER function per run_as role.';
REVOKE ALL ON SCHEMA broker_exec FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- Function: broker._executor(p_role)
--   The executor of role p_role, or NULL when it has none (or the function
--   with that name is not a SECURITY DEFINER function owned by the role).
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._executor(p_role name)
RETURNS regprocedure
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT p.oid::regprocedure
      FROM pg_catalog.pg_roles AS r
      JOIN pg_catalog.pg_proc AS p
        ON p.proname OPERATOR(pg_catalog.=) ('run_as_' OPERATOR(pg_catalog.||) r.oid::text)
       AND p.pronamespace OPERATOR(pg_catalog.=) 'broker_exec'::regnamespace
       AND p.proargtypes OPERATOR(pg_catalog.=) '25 25 25'::oidvector
     WHERE r.rolname OPERATOR(pg_catalog.=) p_role
       AND p.proowner OPERATOR(pg_catalog.=) r.oid
       AND p.prosecdef
$$;
COMMENT ON FUNCTION broker._executor(name) IS
    'Internal: the executor function of a role (SECURITY DEFINER, owned by it), or NULL.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_create_executor(p_role)
--   Creates the executor of p_role if it has none, and returns it. Runs with
--   the caller's rights: the caller must be p_role, a member of it, or a
--   superuser, and p_role needs CREATE on schema broker_exec (granted to
--   broker_enqueue). EXECUTE goes to the broker's owner only.
-- Errors: 42704 unknown role; 42501 not allowed (the hint says what to grant).
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_create_executor(p_role name)
RETURNS regprocedure
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_oid   oid;
    v_name  text;
    v_owner name := (SELECT n.nspowner::regrole::name FROM pg_catalog.pg_namespace AS n
                      WHERE n.nspname OPERATOR(pg_catalog.=) 'broker');
    v_exec  regprocedure := broker._executor(p_role);
BEGIN
    IF v_exec IS NOT NULL THEN
        RETURN v_exec;
    END IF;
    SELECT r.oid INTO v_oid FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) p_role;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'broker_create_executor: role % does not exist', pg_catalog.quote_ident(p_role)
            USING ERRCODE = 'undefined_object';
    END IF;
    IF NOT pg_catalog.pg_has_role(CURRENT_USER, v_oid, 'MEMBER') THEN
        RAISE EXCEPTION 'broker_create_executor: % is not a member of %', pg_catalog.quote_ident(CURRENT_USER),
            pg_catalog.quote_ident(p_role)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Run it as that role or as a superuser.';
    END IF;
    -- (a superuser may give the executor to any role; anyone else needs CREATE
    -- on broker_exec, and so does the role that will own it)
    IF NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER)
       AND (NOT pg_catalog.has_schema_privilege(v_oid, 'broker_exec', 'CREATE')
            OR NOT pg_catalog.has_schema_privilege(CURRENT_USER, 'broker_exec', 'CREATE')) THEN
        RAISE EXCEPTION 'broker_create_executor: role % cannot own an executor', pg_catalog.quote_ident(p_role)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = pg_catalog.format('GRANT CREATE ON SCHEMA broker_exec TO %I; (or GRANT broker_enqueue TO %I;)',
                                           p_role, p_role);
    END IF;
    v_name := 'run_as_' OPERATOR(pg_catalog.||) v_oid::text;
    BEGIN
        EXECUTE pg_catalog.format($ddl$
CREATE FUNCTION broker_exec.%I(p_sql text, p_language text, p_search_path text)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
BEGIN
    PERFORM pg_catalog.set_config('search_path', p_search_path, true);
    IF p_language OPERATOR(pg_catalog.=) 'plpgsql' THEN
        EXECUTE 'DO LANGUAGE plpgsql ' OPERATOR(pg_catalog.||) pg_catalog.quote_literal(p_sql);
    ELSE
        EXECUTE p_sql;
    END IF;
END;
$body$$ddl$, v_name);
    EXCEPTION WHEN duplicate_function OR unique_violation THEN
        v_exec := broker._executor(p_role);
        IF v_exec IS NOT NULL THEN
            RETURN v_exec;  -- created concurrently
        END IF;
        RAISE EXCEPTION 'broker_create_executor: broker_exec.% exists but is not the executor of %', v_name,
            pg_catalog.quote_ident(p_role)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = pg_catalog.format('A superuser must drop it: DROP FUNCTION broker_exec.%I(text, text, text);', v_name);
    END;
    EXECUTE pg_catalog.format('COMMENT ON FUNCTION broker_exec.%I(text, text, text) IS %L', v_name,
        pg_catalog.format('pgsql_broker executor: runs jobs as role %s', p_role));
    EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION broker_exec.%I(text, text, text) FROM PUBLIC', v_name);
    EXECUTE pg_catalog.format('ALTER FUNCTION broker_exec.%I(text, text, text) OWNER TO %I', v_name, p_role);
    IF v_owner OPERATOR(pg_catalog.<>) p_role THEN
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION broker_exec.%I(text, text, text) TO %I', v_name, v_owner);
    END IF;
    RETURN broker._executor(p_role);
END;
$fn$;
COMMENT ON FUNCTION broker.broker_create_executor(name) IS
    'Creates (if missing) and returns the SECURITY DEFINER executor that runs jobs as p_role; the caller must be able to act as p_role.';
