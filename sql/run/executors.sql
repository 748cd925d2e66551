-- sql/run/executors.sql: job executors: the per-role functions a job's SQL runs in, and calling them.
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
-- run_job is the one place a job's SQL runs (its search_path, its language).
-- Next to it, run_jobs(sqls, languages, search_paths, tenant) runs the jobs
-- of a batch in one call, each through run_job in a subtransaction of its
-- own, and returns each one's error (NULL: success; the message then reports
-- the run: rows of its last statement, chr(31), the value it set with
-- broker_set_output, as run_job leaves them in broker.job_rows and
-- broker.job_output) and run time;
-- broker_run_batch calls it under the same checks. An executor without
-- run_jobs (made by 0.1.0) runs its jobs one run_job call each
-- (sql/compat/executor_fallback.sql; broker_create_executor adds run_jobs).
-- Under a batch budget run_jobs starts no job once broker.batch_deadline
-- passed (the jobs not started get no row), and it names the job running in
-- application_name ('pgsql_broker job <id>', from broker.batch_job_ids),
-- which other sessions see at once in pg_stat_activity (broker_job_activity).
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- Function: broker._executor(p_role)
--   The executor of role p_role, or NULL when it has none that passes the
--   checks above. Generic plans (here and in _executor_jobs): a custom plan
--   of the catalog join, made again at every call (every batch of jobs run,
--   every batch enqueued), cost several times more than running it.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._executor(p_role name)
RETURNS regprocedure
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
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
-- Function: broker._executor_jobs(p_exec)
--   The batch entry point run_jobs next to executor p_exec (same schema and
--   owner, SECURITY DEFINER, the one run_jobs there, signature (text[],
--   text[], text[], text)) as schema-qualified name, or NULL when it has none.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._executor_jobs(p_exec regprocedure)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    -- plpgsql, not sql: a SQL function with SET is planned again at every call
    RETURN (SELECT pg_catalog.format('%I.run_jobs', n.nspname)
      FROM pg_catalog.pg_proc AS e
      JOIN pg_catalog.pg_namespace AS n ON n.oid OPERATOR(pg_catalog.=) e.pronamespace
      JOIN pg_catalog.pg_proc AS p
        ON p.pronamespace OPERATOR(pg_catalog.=) e.pronamespace
       AND p.proname OPERATOR(pg_catalog.=) 'run_jobs'
       AND p.proargtypes OPERATOR(pg_catalog.=) '1009 1009 1009 25'::pg_catalog.oidvector
       AND p.proowner OPERATOR(pg_catalog.=) e.proowner
       AND p.prosecdef
     WHERE e.oid OPERATOR(pg_catalog.=) p_exec
       AND (SELECT pg_catalog.count(*) FROM pg_catalog.pg_proc AS o
             WHERE o.pronamespace OPERATOR(pg_catalog.=) e.pronamespace
               AND o.proname OPERATOR(pg_catalog.=) 'run_jobs') OPERATOR(pg_catalog.=) 1);
END;
$$;
COMMENT ON FUNCTION broker._executor_jobs(regprocedure) IS
    'Internal: the batch entry point run_jobs next to a job executor (same schema and owner, SECURITY DEFINER, unique), or NULL.';

-- ---------------------------------------------------------------------------
-- Function: broker._executor_schema(p_role)
--   Creates (if missing) the executor schema of p_role: owned by the broker's
--   owner, CREATE and USAGE for p_role only. Returns its name. A schema of
--   that name owned by anyone else was not made here (another role can make
--   it before the broker does): it is never used.
-- Errors: 42704 unknown role; 42501 the schema exists with another owner.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._executor_schema(p_role name)
RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_oid    oid := (SELECT r.oid FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) p_role);
    v_schema text;
    v_owner  oid;
BEGIN
    IF v_oid IS NULL THEN
        RAISE EXCEPTION 'role % does not exist', pg_catalog.quote_ident(p_role) USING ERRCODE = 'undefined_object';
    END IF;
    v_schema := 'broker_exec_' OPERATOR(pg_catalog.||) v_oid::text;
    v_owner := (SELECT n.nspowner FROM pg_catalog.pg_namespace AS n WHERE n.nspname OPERATOR(pg_catalog.=) v_schema);
    IF v_owner OPERATOR(pg_catalog.<>) (SELECT b.nspowner FROM pg_catalog.pg_namespace AS b
                                         WHERE b.nspname OPERATOR(pg_catalog.=) 'broker') THEN
        RAISE EXCEPTION 'schema % exists but is owned by %, not by % (the owner of schema broker): pgsql_broker did not make it',
            v_schema, v_owner::pg_catalog.regrole,
            (SELECT b.nspowner::pg_catalog.regrole FROM pg_catalog.pg_namespace AS b WHERE b.nspname OPERATOR(pg_catalog.=) 'broker')
            USING ERRCODE = 'insufficient_privilege',
                  HINT = pg_catalog.format('Find out who made it and why, drop it (DROP SCHEMA %I CASCADE), then try again.', v_schema);
    END IF;
    IF v_owner IS NULL THEN
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
--   Creates (if missing) and returns the executor of p_role: run_job and the
--   batch entry point run_jobs (an executor without run_jobs gets
--   it here). Runs with the caller's rights: the caller must be p_role, an
--   (inheriting) member of it, or a superuser (for an executor without
--   run_jobs, anyone else just gets it back as it is). EXECUTE goes to the
--   broker's owner only.
-- Errors: 42704 unknown role; 42501 not allowed (the hint says what to do).
-- Example:
--   SELECT broker.broker_create_executor('reporting');   -- as a member of reporting
--   Calls: _executor, _executor_schema
--   Tables: none
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
    v_made   text[] := '{}';  -- the functions created here (signatures)
    v_fn     text;
BEGIN
    -- (a run_jobs there that fails _executor_jobs' checks is not used, nor replaced)
    IF v_exec IS NOT NULL AND EXISTS (SELECT 1 FROM pg_catalog.pg_proc AS e JOIN pg_catalog.pg_proc AS p
                                          ON p.pronamespace OPERATOR(pg_catalog.=) e.pronamespace
                                       WHERE e.oid OPERATOR(pg_catalog.=) v_exec
                                         AND p.proname OPERATOR(pg_catalog.=) 'run_jobs') THEN
        RETURN v_exec;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) p_role) THEN
        RAISE EXCEPTION 'broker_create_executor: role % does not exist', pg_catalog.quote_ident(p_role)
            USING ERRCODE = 'undefined_object';
    END IF;
    IF NOT pg_catalog.pg_has_role(CURRENT_USER, p_role, 'USAGE') THEN
        IF v_exec IS NOT NULL THEN
            RETURN v_exec;  -- as it is (without run_jobs, its jobs run one run_job call each)
        END IF;
        RAISE EXCEPTION 'broker_create_executor: % cannot act as %', pg_catalog.quote_ident(CURRENT_USER),
            pg_catalog.quote_ident(p_role)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Run it as that role, an inheriting member of it, or a superuser.';
    END IF;
    v_schema := broker._executor_schema(p_role);
    IF v_exec IS NULL THEN
        BEGIN
            EXECUTE pg_catalog.format($ddl$
CREATE FUNCTION %I.run_job(p_sql text, p_language text, p_search_path text)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    v_rows bigint;
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
        -- the rows of its last statement, for the attempt history (run_jobs reports them)
        GET DIAGNOSTICS v_rows = ROW_COUNT;
        PERFORM pg_catalog.set_config('broker.job_rows', v_rows::text, true);
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
        v_made := ARRAY['run_job(text, text, text)'];
    END IF;
    -- the batch entry point: each job through run_job (the one place a job's SQL runs), in a
    -- subtransaction of its own; everything here is schema-qualified all the same
    BEGIN
        EXECUTE pg_catalog.format($ddl$
CREATE FUNCTION %I.run_jobs(p_sqls text[], p_languages text[], p_search_paths text[], p_tenant_id text)
RETURNS TABLE (error_sqlstate text, error_message text, duration interval)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    v_started timestamptz;
    v_set     text;
    -- read before any job runs (broker_run_batch sets them for the call): the time after which no
    -- further job starts, and the job ids, named in application_name while each job runs
    v_deadline timestamptz := pg_catalog.to_timestamp(NULLIF(pg_catalog.current_setting('broker.batch_deadline', true), '')::float8);
    v_ids     bigint[] := NULLIF(pg_catalog.current_setting('broker.batch_job_ids', true), '')::bigint[];
BEGIN
    FOR i IN 1 .. COALESCE(pg_catalog.array_length(p_sqls, 1), 0) LOOP
        EXIT WHEN i OPERATOR(pg_catalog.>) 1 AND pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>=) v_deadline;
        IF v_ids IS NOT NULL THEN
            v_set := pg_catalog.set_config('application_name', 'pgsql_broker job ' OPERATOR(pg_catalog.||) v_ids[i], true);
        END IF;
        error_sqlstate := NULL;
        error_message := NULL;
        v_started := pg_catalog.clock_timestamp();
        BEGIN
            v_set := pg_catalog.set_config('broker.tenant_id', p_tenant_id, true);
            v_set := pg_catalog.set_config('broker.job_rows', '', true);
            v_set := pg_catalog.set_config('broker.job_output', '', true);
            PERFORM %I.run_job(p_sqls[i], p_languages[i], p_search_paths[i]);
            -- on success the message reports the run: rows of its last statement, chr(31), its output
            error_message := pg_catalog.current_setting('broker.job_rows', true) OPERATOR(pg_catalog.||) pg_catalog.chr(31)
                OPERATOR(pg_catalog.||) pg_catalog.current_setting('broker.job_output', true);
        EXCEPTION WHEN OTHERS OR query_canceled OR assert_failure THEN
            GET STACKED DIAGNOSTICS error_sqlstate = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT;
        END;
        duration := pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) v_started;
        RETURN NEXT;
        -- under a batch budget, its statement_timeout ended this job: start no other
        EXIT WHEN v_deadline IS NOT NULL AND error_sqlstate OPERATOR(pg_catalog.=) '57014';
    END LOOP;
END;
$body$$ddl$, v_schema, v_schema);
        v_made := v_made OPERATOR(pg_catalog.||) 'run_jobs(text[], text[], text[], text)'::text;
    EXCEPTION WHEN duplicate_function OR unique_violation THEN
        NULL;  -- created concurrently, or not ours: _executor_jobs decides whether it is used
    END;
    FOREACH v_fn IN ARRAY v_made LOOP
        EXECUTE pg_catalog.format('COMMENT ON FUNCTION %I.%s IS %L', v_schema, v_fn,
            pg_catalog.format('pgsql_broker executor: runs jobs as role %s', p_role));
        EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %I.%s FROM PUBLIC', v_schema, v_fn);
        EXECUTE pg_catalog.format('ALTER FUNCTION %I.%s OWNER TO %I', v_schema, v_fn, p_role);
        IF v_owner OPERATOR(pg_catalog.<>) p_role THEN
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %I.%s TO %I', v_schema, v_fn, v_owner);
        END IF;
    END LOOP;
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

-- ---------------------------------------------------------------------------
-- Function: broker._executor_call(p_exec)
--   The statement that calls executor p_exec with a job's SQL, language and
--   search_path as $1, $2, $3 (NULL when p_exec is NULL).
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._executor_call(p_exec regprocedure)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT pg_catalog.format('SELECT %I.run_job($1, $2, $3)', n.nspname)
      FROM pg_catalog.pg_proc AS p
      JOIN pg_catalog.pg_namespace AS n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace
     WHERE p.oid OPERATOR(pg_catalog.=) p_exec);
END;
$$;
COMMENT ON FUNCTION broker._executor_call(regprocedure) IS
    'Internal: the SELECT that calls a job executor with a job''s SQL, language and search_path ($1, $2, $3).';
