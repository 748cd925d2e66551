-- ---------------------------------------------------------------------------
-- Job executors. A job runs inside broker_exec_<role oid>.run_job(sql,
-- language, search_path): a SECURITY DEFINER function owned by the job's
-- run_as role. Inside it the job has exactly that role's privileges, and
-- PostgreSQL refuses SET ROLE, RESET ROLE, SET SESSION AUTHORIZATION and
-- set_config('role', ...) in a security-definer context, also in DO blocks
-- and functions the job calls or creates, so the job cannot get back to the
-- privileges of the broker that called it.
-- Each role gets its own schema, owned by the broker's owner, in which only
-- that role (and its members) may create: nobody else can plant a look-alike
-- or an overload next to its executor. broker_run only calls a run_job whose
-- schema, owner, signature and SECURITY DEFINER flag all match.
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- Function: broker._executor(p_role)
--   The executor of role p_role, or NULL when it has none that passes the
--   checks above.
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._executor(p_role name)
RETURNS regprocedure
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT p.oid::regprocedure
      FROM pg_catalog.pg_roles AS r
      JOIN pg_catalog.pg_namespace AS n
        ON n.nspname OPERATOR(pg_catalog.=) ('broker_exec_' OPERATOR(pg_catalog.||) r.oid::text)
       AND n.nspowner OPERATOR(pg_catalog.=) (SELECT b.nspowner FROM pg_catalog.pg_namespace AS b
                                               WHERE b.nspname OPERATOR(pg_catalog.=) 'broker')
      JOIN pg_catalog.pg_proc AS p
        ON p.pronamespace OPERATOR(pg_catalog.=) n.oid
       AND p.proname OPERATOR(pg_catalog.=) 'run_job'
       AND p.proargtypes OPERATOR(pg_catalog.=) '25 25 25'::pg_catalog.oidvector
     WHERE r.rolname OPERATOR(pg_catalog.=) p_role
       AND p.proowner OPERATOR(pg_catalog.=) r.oid
       AND p.prosecdef
       AND (SELECT pg_catalog.count(*) FROM pg_catalog.pg_proc AS o
             WHERE o.pronamespace OPERATOR(pg_catalog.=) n.oid
               AND o.proname OPERATOR(pg_catalog.=) 'run_job') OPERATOR(pg_catalog.=) 1
     LIMIT 1);
END;
$$;
COMMENT ON FUNCTION broker._executor(name) IS
    'Internal: the executor function of a role (its own schema, SECURITY DEFINER, owned by it, unique), or NULL.';

-- ---------------------------------------------------------------------------
-- Function: broker._executor_schema(p_role)
--   Creates (if missing) the executor schema of p_role: owned by the broker's
--   owner, CREATE and USAGE for p_role only. Returns its name.
-- Errors: 42704 unknown role.
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._executor_schema(p_role name)
RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_oid    oid := (SELECT r.oid FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) p_role);
    v_schema text;
BEGIN
    IF v_oid IS NULL THEN
        RAISE EXCEPTION 'role % does not exist', pg_catalog.quote_ident(p_role) USING ERRCODE = 'undefined_object';
    END IF;
    v_schema := 'broker_exec_' OPERATOR(pg_catalog.||) v_oid::text;
    IF pg_catalog.to_regnamespace(v_schema) IS NULL THEN
        BEGIN
            EXECUTE pg_catalog.format('CREATE SCHEMA %I', v_schema);
        EXCEPTION WHEN duplicate_schema OR unique_violation THEN
            NULL;  -- created concurrently
        END;
        EXECUTE pg_catalog.format('COMMENT ON SCHEMA %I IS %L', v_schema,
            pg_catalog.format('pgsql_broker: the job executor of role %s', p_role));
        EXECUTE pg_catalog.format('REVOKE ALL ON SCHEMA %I FROM PUBLIC', v_schema);
        EXECUTE pg_catalog.format('GRANT USAGE, CREATE ON SCHEMA %I TO %I', v_schema, p_role);
    END IF;
    RETURN v_schema;
END;
$$;
COMMENT ON FUNCTION broker._executor_schema(name) IS
    'Internal: create (if missing) the schema broker_exec_<role oid>, where only that role may create its executor.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_create_executor(p_role)
--   Creates (if missing) and returns the executor of p_role. Runs with the
--   caller's rights: the caller must be p_role, an (inheriting) member of it,
--   or a superuser. EXECUTE goes to the broker's owner only.
-- Errors: 42704 unknown role; 42501 not allowed (the hint says what to do).
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_create_executor(p_role name)
RETURNS regprocedure
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_owner  name := (SELECT n.nspowner::regrole::name FROM pg_catalog.pg_namespace AS n
                       WHERE n.nspname OPERATOR(pg_catalog.=) 'broker');
    v_exec   regprocedure := broker._executor(p_role);
    v_schema text;
BEGIN
    IF v_exec IS NOT NULL THEN
        RETURN v_exec;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) p_role) THEN
        RAISE EXCEPTION 'broker_create_executor: role % does not exist', pg_catalog.quote_ident(p_role)
            USING ERRCODE = 'undefined_object';
    END IF;
    IF NOT pg_catalog.pg_has_role(CURRENT_USER, p_role, 'USAGE') THEN
        RAISE EXCEPTION 'broker_create_executor: % cannot act as %', pg_catalog.quote_ident(CURRENT_USER),
            pg_catalog.quote_ident(p_role)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Run it as that role, an inheriting member of it, or a superuser.';
    END IF;
    v_schema := broker._executor_schema(p_role);
    BEGIN
        EXECUTE pg_catalog.format($ddl$
CREATE FUNCTION %I.run_job(p_sql text, p_language text, p_search_path text)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
BEGIN
    -- the job's own search_path, with pg_temp explicitly last: temporary
    -- objects never shadow anything that exists elsewhere
    PERFORM pg_catalog.set_config('search_path',
        CASE WHEN pg_catalog.btrim(p_search_path) OPERATOR(pg_catalog.=) '' THEN 'pg_temp'
             ELSE p_search_path OPERATOR(pg_catalog.||) ', pg_temp' END, true);
    IF p_language OPERATOR(pg_catalog.=) 'plpgsql' THEN
        EXECUTE 'DO LANGUAGE plpgsql ' OPERATOR(pg_catalog.||) pg_catalog.quote_literal(p_sql);
    ELSE
        EXECUTE p_sql;
    END IF;
END;
$body$$ddl$, v_schema);
    EXCEPTION WHEN duplicate_function OR unique_violation THEN
        v_exec := broker._executor(p_role);
        IF v_exec IS NOT NULL THEN
            RETURN v_exec;  -- created concurrently
        END IF;
        RAISE EXCEPTION 'broker_create_executor: %.run_job exists but is not a valid executor of %', v_schema,
            pg_catalog.quote_ident(p_role)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = pg_catalog.format('Drop it (as %I or a superuser): DROP FUNCTION %I.run_job(text, text, text);',
                                           p_role, v_schema);
    END;
    EXECUTE pg_catalog.format('COMMENT ON FUNCTION %I.run_job(text, text, text) IS %L', v_schema,
        pg_catalog.format('pgsql_broker executor: runs jobs as role %s', p_role));
    EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %I.run_job(text, text, text) FROM PUBLIC', v_schema);
    EXECUTE pg_catalog.format('ALTER FUNCTION %I.run_job(text, text, text) OWNER TO %I', v_schema, p_role);
    IF v_owner OPERATOR(pg_catalog.<>) p_role THEN
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %I.run_job(text, text, text) TO %I', v_schema, v_owner);
    END IF;
    v_exec := broker._executor(p_role);
    IF v_exec IS NULL THEN
        RAISE EXCEPTION 'broker_create_executor: the executor of % failed its checks (another run_job in %?)',
            pg_catalog.quote_ident(p_role), v_schema
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN v_exec;
END;
$fn$;
COMMENT ON FUNCTION broker.broker_create_executor(name) IS
    'Creates (if missing) and returns the SECURITY DEFINER executor that runs jobs as p_role; the caller must be able to act as p_role.';
