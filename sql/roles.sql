-- ---------------------------------------------------------------------------
-- pgsql_broker roles and grants: the one place privileges are given.
-- Not part of the extension script (roles are cluster-wide): run it after
-- CREATE EXTENSION / every upgrade, in each broker database, as a superuser
-- or as the database owner with CREATEROLE that installed pgsql_broker
-- (managed PostgreSQL: nothing of a superuser is needed; the installer
-- becomes a member of broker_admin, to hand it what it installed). It changes
-- a role attribute only where the role lacks it. Idempotent. `pgsql-broker install
-- --with-roles` runs it (and --set-passwords gives the roles passwords).
--
--   broker_admin    owns schema broker, every object in it and the per-role
--                   executor schemas broker_exec_<oid>; no BYPASSRLS: it reads
--                   and writes every tenant's rows through the policy
--                   broker_admin_all of each table (made below); runs
--                   migrations; may create schemas in this database (for the
--                   executor schemas). The runtime functions run with its
--                   rights (SECURITY DEFINER).
--   broker_runtime  what the runner connects as: EXECUTE on the runtime
--                   functions, SELECT (tenant-scoped by RLS); no BYPASSRLS,
--                   no direct writes.
--   broker_enqueue  enqueue, read and cancel jobs of its tenant; may create
--                   its own job executor (in its own schema). No BYPASSRLS.
--   broker_retention  broker_purge_jobs only: for a runner login that purges on
--                   its retention policy (granted by the operator, not by default).
--   broker_worker   claim, extend, complete and fail tasks of its tenant
--                   (application code, sql/tasks/) and nothing else: no SQL
--                   jobs, no reads of the tables (granted by the operator to
--                   worker logins).
-- LOGIN and passwords are left to the installer (ALTER ROLE ... LOGIN PASSWORD).
-- It hands to broker_admin only what pgsql_broker made, and first refuses
-- (42501, changing nothing) a database whose schema broker or executor
-- schemas hold anything else. With psql, run it as one transaction that
-- stops at the first error: psql -v ON_ERROR_STOP=1 -1 -f sql/roles.sql
-- ---------------------------------------------------------------------------

-- Refuse first. The role attributes this script needs and who may give them:
-- only a superuser may give or take SUPERUSER and BYPASSRLS, so a CREATEROLE
-- installer needs the broker roles without them (none of them needs either).
-- From PostgreSQL 16 a CREATEROLE role administers only roles it created or
-- holds ADMIN OPTION on: a broker role that another role made must already
-- be what this script makes of it, and broker_admin already granted to the
-- installer. (pgsql-broker install --with-roles runs this block alone before
-- it changes anything.)
DO $check_roles$
DECLARE
    v_super boolean := (SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER);
    v_admin record;
    v_found text;
BEGIN
    IF v_super THEN
        RETURN;
    END IF;
    IF NOT (SELECT r.rolcreaterole FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER) THEN
        RAISE EXCEPTION 'roles.sql: % may not create or alter roles (it has neither CREATEROLE nor superuser); nothing was changed',
            pg_catalog.quote_ident(CURRENT_USER)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Run it as the database owner your provider gives CREATEROLE (or as a superuser), or have one run ALTER ROLE '
                         OPERATOR(pg_catalog.||) pg_catalog.quote_ident(CURRENT_USER) OPERATOR(pg_catalog.||) ' CREATEROLE.';
    END IF;
    -- From PostgreSQL 16 CREATEROLE administers only roles this login made or holds ADMIN OPTION on:
    -- a broker_admin made by another role must already be granted to it (membership hands broker_admin
    -- what the installer made, and lets it create the policies on broker_admin's tables).
    SELECT r.oid INTO v_admin FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) 'broker_admin';
    IF FOUND AND pg_catalog.current_setting('server_version_num')::integer OPERATOR(pg_catalog.>=) 160000
       AND NOT pg_catalog.pg_has_role(CURRENT_USER, v_admin.oid, 'USAGE')
       AND NOT pg_catalog.pg_has_role(CURRENT_USER, v_admin.oid, 'MEMBER WITH ADMIN OPTION') THEN
        RAISE EXCEPTION 'roles.sql: broker_admin was made by another role and % may neither use it nor grant it to itself (PostgreSQL 16: CREATEROLE administers only the roles it made); nothing was changed',
            pg_catalog.quote_ident(CURRENT_USER)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Have the role that made broker_admin (or a superuser) run GRANT broker_admin TO '
                         OPERATOR(pg_catalog.||) pg_catalog.quote_ident(CURRENT_USER) OPERATOR(pg_catalog.||) ', then run this again.';
    END IF;
    SELECT pg_catalog.string_agg(pg_catalog.format('%s is %s', r.rolname,
                                 CASE WHEN r.rolsuper THEN 'a superuser' ELSE 'BYPASSRLS' END), ', ' ORDER BY r.rolname)
      INTO v_found
      FROM pg_catalog.pg_roles AS r
     WHERE (r.rolname OPERATOR(pg_catalog.=) ANY (ARRAY['broker_runtime', 'broker_enqueue', 'broker_retention', 'broker_worker'])
            AND (r.rolsuper OR r.rolbypassrls))
        OR (r.rolname OPERATOR(pg_catalog.=) 'broker_admin' AND r.rolsuper);
    IF v_found IS NOT NULL THEN
        RAISE EXCEPTION 'roles.sql: %, which only a superuser can take away; nothing was changed', v_found
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Have a superuser run ALTER ROLE ... NOSUPERUSER NOBYPASSRLS on it (broker_admin: NOSUPERUSER), then run this again.';
    END IF;
END
$check_roles$;

-- Refuse first. What pgsql_broker made (the same rule as the upgrade guard,
-- sql/guards/objects_are_the_brokers.sql): with CREATE EXTENSION, a member of
-- the extension (pg_depend deptype 'e') in a schema owned by the extension's
-- owner, broker_admin or a superuser; with tracked migrations, a table or
-- function owned by the schema's owner or broker_admin, in a schema owned by
-- a superuser, broker_admin or the role running this script. An executor
-- schema broker_exec_<oid> is the
-- broker's when owned by schema broker's owner, the extension's owner or
-- broker_admin (broker._executor_schema makes them so).
DO $guard$
DECLARE
    v_schema oid := pg_catalog.to_regnamespace('broker');
    v_ext    oid := (SELECT e.oid FROM pg_catalog.pg_extension AS e WHERE e.extname OPERATOR(pg_catalog.=) 'pgsql_broker');
    v_admin  oid := pg_catalog.to_regrole('broker_admin');
    v_owner  oid := (SELECT n.nspowner FROM pg_catalog.pg_namespace AS n WHERE n.oid OPERATOR(pg_catalog.=) v_schema);
    v_extown oid := (SELECT e.extowner FROM pg_catalog.pg_extension AS e WHERE e.oid OPERATOR(pg_catalog.=) v_ext);
    -- with tracked migrations, the role running this script may own what it installed (a database owner)
    v_self   oid := CASE WHEN v_ext IS NULL THEN (SELECT me.oid FROM pg_catalog.pg_roles AS me
                                                   WHERE me.rolname OPERATOR(pg_catalog.=) CURRENT_USER) END;
    v_found  text;
BEGIN
    IF v_schema IS NULL THEN
        RAISE EXCEPTION 'roles.sql: schema broker does not exist' USING ERRCODE = 'invalid_schema_name',
            HINT = 'Install pgsql_broker first (CREATE EXTENSION pgsql_broker, or pgsql-broker install).';
    END IF;
    IF v_ext IS NULL AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class AS c
                                      WHERE c.relnamespace OPERATOR(pg_catalog.=) v_schema
                                        AND c.relname OPERATOR(pg_catalog.=) 'broker_schema_migrations'
                                        AND c.relkind OPERATOR(pg_catalog.=) 'r') THEN
        RAISE EXCEPTION 'roles.sql: schema broker exists but pgsql_broker is not installed in it (no extension, no recorded migrations)'
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Another role may have made it: find out who and why before installing.';
    END IF;
    -- (= ANY of an array holding NULLs is NULL, not false, when nothing matches: hence COALESCE)
    IF NOT (COALESCE(v_owner OPERATOR(pg_catalog.=) ANY (ARRAY[v_admin, v_extown, v_self]), false)
            OR (SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.oid OPERATOR(pg_catalog.=) v_owner)) THEN
        RAISE EXCEPTION 'roles.sql: schema broker is owned by %, which did not install pgsql_broker; nothing was changed',
            v_owner::pg_catalog.regrole
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'It was made before the install by another role: move your data out and drop it.';
    END IF;
    SELECT pg_catalog.string_agg((i.type OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) i.identity) OPERATOR(pg_catalog.||)
                                 COALESCE(' (owner ' OPERATOR(pg_catalog.||) COALESCE(c.relowner, p.proowner, t.typowner)::pg_catalog.regrole::pg_catalog.text
                                          OPERATOR(pg_catalog.||) ')', ''), ', '
                                 ORDER BY (i.type OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) i.identity))
      INTO v_found
      FROM pg_catalog.pg_depend AS d
     CROSS JOIN LATERAL pg_catalog.pg_identify_object(d.classid, d.objid, 0) AS i
      LEFT JOIN pg_catalog.pg_class AS c
        ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass AND c.oid OPERATOR(pg_catalog.=) d.objid
      LEFT JOIN pg_catalog.pg_proc AS p
        ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass AND p.oid OPERATOR(pg_catalog.=) d.objid
      LEFT JOIN pg_catalog.pg_type AS t
        ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass AND t.oid OPERATOR(pg_catalog.=) d.objid
     WHERE d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_namespace'::pg_catalog.regclass
       AND d.refobjid OPERATOR(pg_catalog.=) v_schema
       AND NOT (d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
                AND COALESCE(d.objid OPERATOR(pg_catalog.=) v_ext, false))
       AND NOT CASE WHEN v_ext IS NOT NULL
                    THEN EXISTS (SELECT 1 FROM pg_catalog.pg_depend AS m
                                  WHERE m.classid OPERATOR(pg_catalog.=) d.classid AND m.objid OPERATOR(pg_catalog.=) d.objid
                                    AND m.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
                                    AND m.refobjid OPERATOR(pg_catalog.=) v_ext AND m.deptype OPERATOR(pg_catalog.=) 'e')
                    ELSE COALESCE(COALESCE(c.relowner, p.proowner, t.typowner) OPERATOR(pg_catalog.=) ANY (ARRAY[v_owner, v_admin]), false)
               END;
    IF v_found IS NOT NULL THEN
        RAISE EXCEPTION 'roles.sql: schema broker holds objects pgsql_broker did not create: %; nothing was changed',
            pg_catalog.left(v_found, 1000)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Find out who made them and why, and drop them, then run roles.sql again.';
    END IF;
    SELECT pg_catalog.string_agg(pg_catalog.format('%I (owner %s)', n.nspname, n.nspowner::pg_catalog.regrole), ', '
                                 ORDER BY n.nspname)
      INTO v_found
      FROM pg_catalog.pg_namespace AS n
     WHERE n.nspname OPERATOR(pg_catalog.~) '^broker_exec_[0-9]+$'
       AND NOT COALESCE(n.nspowner OPERATOR(pg_catalog.=) ANY (ARRAY[v_owner, v_extown, v_admin]), false);
    IF v_found IS NOT NULL THEN
        RAISE EXCEPTION 'roles.sql: executor schemas that pgsql_broker did not make: schema %; nothing was changed',
            pg_catalog.left(v_found, 1000)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Another role made them under the name of a job executor schema: find out who and why, and drop them.';
    END IF;
END
$guard$;
DO $roles$
DECLARE
    v_super boolean := (SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER);
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) 'broker_admin') THEN
        CREATE ROLE broker_admin NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) 'broker_runtime') THEN
        CREATE ROLE broker_runtime NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) 'broker_enqueue') THEN
        CREATE ROLE broker_enqueue NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) 'broker_retention') THEN
        CREATE ROLE broker_retention NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) 'broker_worker') THEN
        CREATE ROLE broker_worker NOLOGIN;
    END IF;
    -- Only what differs: naming SUPERUSER or BYPASSRLS at all (even to keep them
    -- as they are) needs a superuser, and $check_roles$ refused what only one may change.
    -- broker_admin reads across tenants through the policies below, not BYPASSRLS: one made BYPASSRLS
    -- by an earlier version loses it where a superuser runs this, and is named where none does.
    IF (SELECT r.rolsuper OR r.rolbypassrls FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) 'broker_admin') THEN
        IF v_super THEN
            ALTER ROLE broker_admin NOSUPERUSER NOBYPASSRLS;
        ELSE
            RAISE NOTICE 'roles.sql: broker_admin still has BYPASSRLS, which it no longer needs; a superuser may take it away: ALTER ROLE broker_admin NOBYPASSRLS';
        END IF;
    END IF;
    IF (SELECT r.rolsuper OR r.rolbypassrls FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) 'broker_runtime') THEN
        ALTER ROLE broker_runtime NOSUPERUSER NOBYPASSRLS;
    END IF;
    IF (SELECT r.rolsuper OR r.rolbypassrls FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) 'broker_enqueue') THEN
        ALTER ROLE broker_enqueue NOSUPERUSER NOBYPASSRLS;
    END IF;
    IF (SELECT r.rolsuper OR r.rolbypassrls FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) 'broker_retention') THEN
        ALTER ROLE broker_retention NOSUPERUSER NOBYPASSRLS;
    END IF;
    IF (SELECT r.rolsuper OR r.rolbypassrls FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) 'broker_worker') THEN
        ALTER ROLE broker_worker NOSUPERUSER NOBYPASSRLS;
    END IF;
    -- (only where it differs: from PostgreSQL 16 altering a role another role made needs ADMIN OPTION on it)
    IF (SELECT r.rolcreaterole FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) 'broker_admin') THEN
        ALTER ROLE broker_admin NOCREATEROLE;
    END IF;
    -- NOINHERIT: a role granted to broker_runtime for autonomous jobs (GRANT app TO broker_runtime, see
    -- broker_allow_autonomous) lets the runner's login SET ROLE app, but not use app's privileges without it
    IF (SELECT r.rolcreaterole OR r.rolinherit FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) 'broker_runtime') THEN
        ALTER ROLE broker_runtime NOCREATEROLE NOINHERIT;
    END IF;
    IF (SELECT r.rolcreaterole FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) 'broker_enqueue') THEN
        ALTER ROLE broker_enqueue NOCREATEROLE;
    END IF;
    IF (SELECT r.rolcreaterole FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) 'broker_retention') THEN
        ALTER ROLE broker_retention NOCREATEROLE;
    END IF;
    IF (SELECT r.rolcreaterole FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) 'broker_worker') THEN
        ALTER ROLE broker_worker NOCREATEROLE;
    END IF;
    -- Handing an object to broker_admin takes membership in it (a superuser needs none);
    -- a CREATEROLE installer may grant it to itself (from PostgreSQL 16: one it made, on which it holds
    -- ADMIN OPTION but, unless createrole_self_grant says otherwise, neither INHERIT nor SET).
    IF NOT v_super AND NOT pg_catalog.pg_has_role(CURRENT_USER, 'broker_admin', 'USAGE') THEN
        EXECUTE pg_catalog.format('GRANT broker_admin TO %I', CURRENT_USER);
    END IF;
END
$roles$;
COMMENT ON ROLE broker_admin IS 'pgsql_broker: owns the broker schemas, reads every tenant through the policies broker_admin_all (no BYPASSRLS), runs migrations.';
COMMENT ON ROLE broker_runtime IS 'pgsql_broker: the runner''s role; runtime functions only, no BYPASSRLS.';
COMMENT ON ROLE broker_enqueue IS 'pgsql_broker: enqueue, read and cancel jobs of its own tenant.';
COMMENT ON ROLE broker_worker IS 'pgsql_broker: claim, extend, complete and fail tasks of its own tenant (application code) and nothing else.';
COMMENT ON ROLE broker_retention IS 'pgsql_broker: purge finished jobs (broker_purge_jobs) and nothing else; granted to a runner login that purges on its retention policy.';

-- Ownership: what pgsql_broker made in broker (the rule above), and its
-- executor schemas, belong to broker_admin (the executors themselves keep
-- their run_as owner). The filters repeat the guard, so nothing else is
-- handed over even where a client went on past its error.
DO $owner$
DECLARE
    r        record;
    v_schema oid := pg_catalog.to_regnamespace('broker');
    v_ext    oid := (SELECT e.oid FROM pg_catalog.pg_extension AS e WHERE e.extname OPERATOR(pg_catalog.=) 'pgsql_broker');
    v_admin  oid := pg_catalog.to_regrole('broker_admin');
    v_owner  oid := (SELECT n.nspowner FROM pg_catalog.pg_namespace AS n WHERE n.oid OPERATOR(pg_catalog.=) v_schema);
    v_extown oid := (SELECT e.extowner FROM pg_catalog.pg_extension AS e WHERE e.oid OPERATOR(pg_catalog.=) v_ext);
    -- with tracked migrations, the role running this script may own what it installed (a database owner)
    v_self   oid := CASE WHEN v_ext IS NULL THEN (SELECT me.oid FROM pg_catalog.pg_roles AS me
                                                   WHERE me.rolname OPERATOR(pg_catalog.=) CURRENT_USER) END;
BEGIN
    IF NOT (COALESCE(v_owner OPERATOR(pg_catalog.=) ANY (ARRAY[v_admin, v_extown, v_self]), false)
            OR (SELECT a.rolsuper FROM pg_catalog.pg_roles AS a WHERE a.oid OPERATOR(pg_catalog.=) v_owner)) THEN
        RAISE EXCEPTION 'roles.sql: schema broker is owned by %, which did not install pgsql_broker', v_owner::pg_catalog.regrole
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    ALTER SCHEMA broker OWNER TO broker_admin;
    EXECUTE pg_catalog.format('GRANT CREATE ON DATABASE %I TO broker_admin', pg_catalog.current_database());
    FOR r IN SELECT n.nspname FROM pg_catalog.pg_namespace AS n
              WHERE n.nspname OPERATOR(pg_catalog.~) '^broker_exec_[0-9]+$'
                AND n.nspowner OPERATOR(pg_catalog.=) ANY (ARRAY[v_owner, v_extown, v_admin])
    LOOP
        EXECUTE pg_catalog.format('ALTER SCHEMA %I OWNER TO broker_admin', r.nspname);
        -- broker_admin calls every executor (broker_run runs as broker_admin)
        EXECUTE pg_catalog.format('GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA %I TO broker_admin', r.nspname);
    END LOOP;
    FOR r IN SELECT c.oid::pg_catalog.regclass AS rel FROM pg_catalog.pg_class AS c
              WHERE c.relnamespace OPERATOR(pg_catalog.=) v_schema AND c.relkind OPERATOR(pg_catalog.=) ANY ('{r,p,v,m}'::"char"[])
                AND CASE WHEN v_ext IS NOT NULL
                         THEN EXISTS (SELECT 1 FROM pg_catalog.pg_depend AS m
                                       WHERE m.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
                                         AND m.objid OPERATOR(pg_catalog.=) c.oid
                                         AND m.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
                                         AND m.refobjid OPERATOR(pg_catalog.=) v_ext AND m.deptype OPERATOR(pg_catalog.=) 'e')
                         ELSE c.relowner OPERATOR(pg_catalog.=) ANY (ARRAY[v_owner, v_admin]) END
    LOOP
        EXECUTE pg_catalog.format('ALTER TABLE %s OWNER TO broker_admin', r.rel);
    END LOOP;
    FOR r IN SELECT p.oid::pg_catalog.regprocedure AS fn FROM pg_catalog.pg_proc AS p
              WHERE p.pronamespace OPERATOR(pg_catalog.=) v_schema
                AND CASE WHEN v_ext IS NOT NULL
                         THEN EXISTS (SELECT 1 FROM pg_catalog.pg_depend AS m
                                       WHERE m.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
                                         AND m.objid OPERATOR(pg_catalog.=) p.oid
                                         AND m.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
                                         AND m.refobjid OPERATOR(pg_catalog.=) v_ext AND m.deptype OPERATOR(pg_catalog.=) 'e')
                         ELSE p.proowner OPERATOR(pg_catalog.=) ANY (ARRAY[v_owner, v_admin]) END
    LOOP
        EXECUTE pg_catalog.format('ALTER FUNCTION %s OWNER TO broker_admin', r.fn);
    END LOOP;
    -- composite types (internal; their pg_class row follows the type)
    FOR r IN SELECT t.oid::pg_catalog.regtype AS typ FROM pg_catalog.pg_type AS t
              WHERE t.typnamespace OPERATOR(pg_catalog.=) v_schema AND t.typtype OPERATOR(pg_catalog.=) 'c'
                AND (SELECT c.relkind FROM pg_catalog.pg_class AS c WHERE c.oid OPERATOR(pg_catalog.=) t.typrelid) OPERATOR(pg_catalog.=) 'c'
                AND CASE WHEN v_ext IS NOT NULL
                         THEN EXISTS (SELECT 1 FROM pg_catalog.pg_depend AS m
                                       WHERE m.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass
                                         AND m.objid OPERATOR(pg_catalog.=) t.oid
                                         AND m.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
                                         AND m.refobjid OPERATOR(pg_catalog.=) v_ext AND m.deptype OPERATOR(pg_catalog.=) 'e')
                         ELSE t.typowner OPERATOR(pg_catalog.=) ANY (ARRAY[v_owner, v_admin]) END
    LOOP
        EXECUTE pg_catalog.format('ALTER TYPE %s OWNER TO broker_admin', r.typ);
    END LOOP;
END
$owner$;

-- broker_admin reads and writes every tenant's rows (the SECURITY DEFINER runtime functions run as it)
-- through one permissive policy per table, broker_admin_all, instead of BYPASSRLS, which only a superuser
-- can give. A policy naming a role applies to that role and the roles with its privileges only, and
-- PostgreSQL picks the policies when it plans a query as a role: every other role's plans keep exactly
-- the policies they had. The tables keep FORCE ROW LEVEL SECURITY. It is made here, not in the
-- extension script, because broker_admin exists only once this script made it; each run makes the
-- missing ones (a table an upgrade added) and remakes one that differs.
DO $admin_policies$
DECLARE
    r        record;
    v_schema oid := pg_catalog.to_regnamespace('broker');
    v_admin  oid := pg_catalog.to_regrole('broker_admin');
BEGIN
    FOR r IN SELECT c.oid, c.oid::pg_catalog.regclass AS rel,
                    (SELECT p.polcmd OPERATOR(pg_catalog.=) '*' AND p.polpermissive
                            AND p.polroles OPERATOR(pg_catalog.=) ARRAY[v_admin]
                            AND pg_catalog.pg_get_expr(p.polqual, p.polrelid) OPERATOR(pg_catalog.=) 'true'
                            AND pg_catalog.pg_get_expr(p.polwithcheck, p.polrelid) OPERATOR(pg_catalog.=) 'true'
                       FROM pg_catalog.pg_policy AS p
                      WHERE p.polrelid OPERATOR(pg_catalog.=) c.oid
                        AND p.polname OPERATOR(pg_catalog.=) 'broker_admin_all') AS same
               FROM pg_catalog.pg_class AS c
              WHERE c.relnamespace OPERATOR(pg_catalog.=) v_schema
                AND c.relkind OPERATOR(pg_catalog.=) ANY ('{r,p}'::"char"[])
                AND c.relowner OPERATOR(pg_catalog.=) v_admin
              ORDER BY c.relname
    LOOP
        CONTINUE WHEN r.same;
        IF r.same IS NOT NULL THEN
            EXECUTE pg_catalog.format('DROP POLICY broker_admin_all ON %s', r.rel);
        END IF;
        EXECUTE pg_catalog.format('CREATE POLICY broker_admin_all ON %s AS PERMISSIVE FOR ALL TO broker_admin '
                                  'USING (true) WITH CHECK (true)', r.rel);
        EXECUTE pg_catalog.format('COMMENT ON POLICY broker_admin_all ON %s IS %L', r.rel,
                                  'broker_admin (the owner, as which the runtime functions run) reads and writes every tenant''s rows; made by roles.sql, instead of BYPASSRLS.');
    END LOOP;
END
$admin_policies$;

-- Nothing for PUBLIC (the extension script revokes too; this covers upgrades).
REVOKE ALL ON SCHEMA broker FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA broker FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA broker FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA broker FROM PUBLIC;

-- Functions every broker role may call (policy helpers, tenancy, settings).
GRANT USAGE ON SCHEMA broker TO broker_runtime, broker_enqueue;
GRANT EXECUTE ON FUNCTION
    broker.broker_current_tenant(),
    broker.broker_set_tenant(text),
    broker._set_tenant(text, text),
    broker._whole_transaction(timestamptz, timestamptz, text),
    broker.broker_set(text, text, boolean),
    broker._tenant_allowed(text, name),
    broker._is_broker_admin(name),
    broker._strict_tenancy(),
    broker._setting_int(text, integer, integer),
    broker._state(text),
    broker._parked(text),
    broker._due_time(),
    broker._notify_queue(integer),
    broker._notify_due(),
    broker._claimable(smallint, integer, smallint),
    broker.broker_cron_next(text, timestamptz, text),
    broker._cron_parse(text),
    broker._cron_field(text, text, integer, integer, text[], text),
    broker._cron_next_wall(bigint, bigint, bigint, bigint, bigint, boolean, timestamp),
    broker._cron_utc_offset(timestamp, text),
    broker._traceparent(),
    broker._is_traceparent(text),
    broker._checked_traceparent(text)
    TO broker_runtime, broker_enqueue;

-- broker_runtime: the runtime functions; reads are tenant-scoped by RLS.
GRANT EXECUTE ON FUNCTION
    broker.broker_get(integer, bigint, integer, integer, uuid),
    broker.broker_claim_batches(integer, bigint, integer, integer, interval, boolean, integer, uuid),
    broker.broker_run(bigint, uuid),
    broker.broker_run_batch(bigint[], uuid[], interval),
    broker.broker_recover_stale_jobs(integer),
    broker.broker_release_jobs(bigint[], uuid[], boolean),
    broker.broker_release_claim(uuid),
    broker.broker_interrupt_jobs(bigint[], uuid[]),
    broker.broker_cancel_requests(bigint[]),
    broker.broker_apply_deferred_releases(integer),
    broker.broker_register_instance(text, text, integer, integer, text),
    broker.broker_ping_instance(bigint),
    broker.broker_shutdown_instance(bigint),
    broker.broker_park_instance(bigint),
    broker.broker_resume_instance(bigint),
    broker.broker_stale_instance_holder(interval),
    broker.broker_queue_stats(),
    broker.broker_finished_per_minute(interval),
    broker._tenant_stats_every_tenant(interval),
    broker._key_stats_every_tenant(),
    broker.broker_ready_queues(),
    broker.broker_next_due(),
    broker.broker_job_activity(),
    broker.broker_schedule_tick()
    TO broker_runtime;
GRANT SELECT ON broker.broker_jobs, broker.broker_job_dependency, broker.broker_queueinstance,
                broker.broker_schedule, broker.broker_schema_migrations, broker.broker_config,
                broker.broker_deferred_release, broker.broker_job_attempts, broker.broker_job_actions,
                broker.broker_queue_pause
    TO broker_runtime;
-- retention is not granted to broker_runtime: a runtime login that deletes jobs could delete every
-- tenant's history. broker_retention may call broker_purge_jobs and nothing else; the operator
-- grants it to the runner's login when that runner purges on its retention policy (docs/operations.md).
REVOKE EXECUTE ON FUNCTION broker.broker_purge_jobs(interval, integer, smallint) FROM broker_runtime;
GRANT USAGE ON SCHEMA broker TO broker_retention;
GRANT EXECUTE ON FUNCTION broker.broker_purge_jobs(interval, integer, smallint) TO broker_retention;
-- broker_worker: tasks of its tenant (sql/tasks/: the functions check the tenant, as strict
-- tenancy maps the worker's login) and nothing else; it reads no table
GRANT USAGE ON SCHEMA broker TO broker_worker;
GRANT EXECUTE ON FUNCTION
    broker.broker_current_tenant(),
    broker.broker_set_tenant(text),
    broker._set_tenant(text, text),
    broker._whole_transaction(timestamptz, timestamptz, text),
    broker.broker_claim_tasks(text[], integer, integer),
    broker.broker_extend_task(bigint, uuid, integer),
    broker.broker_complete_task(bigint, uuid, jsonb),
    broker.broker_complete_tasks(bigint[], uuid[], jsonb[]),
    broker.broker_fail_task(bigint, uuid, text, boolean),
    broker.broker_release_task(bigint, uuid)
    TO broker_worker;
-- task names and their queues: the insert policy checks a task's queue; each tenant sees the names
-- it uses (policy broker_task_queue_select, through broker_task_name_tenant)
GRANT SELECT ON broker.broker_task_queue, broker.broker_task_name_tenant TO broker_runtime, broker_enqueue;
-- each role sees its own tenant mappings (policy broker_tenant_roles_own)
GRANT SELECT ON broker.broker_tenant_roles TO broker_runtime, broker_enqueue;

-- broker_enqueue: enqueue (functions or, equivalently, column-limited INSERTs
-- that the policies and triggers check), read and cancel its tenant's jobs,
-- and create its own executor.
GRANT EXECUTE ON FUNCTION
    broker.broker_add_job(text, text, integer, integer, text, text, bigint, bigint[], text, integer, text, text[],
                          timestamptz, interval, text, text, boolean, text),
    broker.broker_add_job_simple(text, text, integer, text[], text),
    broker.broker_add_jobs(jsonb, text),
    broker._add_jobs(jsonb, text, text),
    broker._parse_jobs(jsonb, text),
    broker._add_plain_jobs(jsonb, text),
    broker.broker_add_jobs_arrays(text[], text[], integer[], integer[], text[], integer[], timestamptz[], interval[], text[], text, text,
                                  text[]),
    broker._jobs_of_arrays(text[], text[], integer[], integer[], text[], integer[], timestamptz[], interval[], text[], text[], text),
    broker._job_problem(broker._job_fields),
    broker._job_field_error(text, text, text[]),
    broker._blank_in(text[]),
    broker.broker_cancel_job(bigint, text),
    broker.broker_retry_job(bigint, timestamptz, boolean),
    broker.broker_pause_queue(integer, boolean),
    broker.broker_pause_task(text, boolean),
    broker._pause(text, integer, boolean),
    broker.broker_set_limit(text, integer, double precision, integer, boolean),
    broker.broker_set_output(text),
    broker._error_text(text),
    broker.broker_create_executor(name),
    broker._executor(name),
    broker._executor_schema(name),
    broker._may_run_as(name, name),
    broker._can_read_every_tenant(oid),
    broker._check_run_as(text, text),
    broker._lock_dependency_keys(text, text[], text[], bigint[], bigint[]),
    broker._dependency_lock_key(text, text, bigint),
    broker._notify_queues(integer[]),
    broker.broker_add_task(text, jsonb, integer, bigint[], text, integer, text, text[], timestamptz, interval, text, text),
    broker._task_queue(text, text, boolean),
    broker._task_queue_of(text, text),
    broker._check_task_name(text, text, text),
    broker._tasks_as_jobs(jsonb),
    broker._task_queue_is(text, integer)
    TO broker_enqueue;
GRANT SELECT ON broker.broker_jobs, broker.broker_job_dependency, broker.broker_schedule, broker.broker_job_attempts,
                broker.broker_job_actions, broker.broker_queue_pause TO broker_enqueue;
-- operator actions (cancel a running job, retry) and pauses: rows the policies check, a trigger performs
GRANT INSERT (job_id, action, reason, run_after, with_dependents) ON broker.broker_job_actions TO broker_enqueue;
GRANT INSERT (job_queue), DELETE ON broker.broker_queue_pause TO broker_enqueue;
-- the task names its tenant uses, recorded by broker._task_queue as the enqueuing role (policy
-- broker_task_name_tenant_insert: its own tenant's)
GRANT INSERT (tenant_id, task_name) ON broker.broker_task_name_tenant TO broker_enqueue;
-- limits on its concurrency keys (broker_set_limit; the policies hold it to its own tenant's rows)
GRANT SELECT, DELETE ON broker.broker_key_limit TO broker_enqueue;
GRANT INSERT (tenant_id, concurrency_key, max_running, per_second, burst, tokens, tokens_at),
      UPDATE (max_running, per_second, burst, tokens, tokens_at, wake_at, set_by, set_at)
    ON broker.broker_key_limit TO broker_enqueue;
-- its own weight (the policy shows a tenant its own row)
GRANT SELECT ON broker.broker_tenant_weight TO broker_enqueue;
-- its finished counts (the last hour in pgsql-broker status as its login; the policy shows a tenant its own rows)
GRANT SELECT ON broker.broker_finished_count TO broker_enqueue;
GRANT EXECUTE ON FUNCTION broker._finished_counts_since(timestamptz), broker._finished_minute(timestamptz) TO broker_enqueue;
-- flow control seen (sql/flow/stats.sql): each tenant its own rows (row-level security) and the
-- totals its share and the limits across tenants are measured against; broker_runtime every tenant's
GRANT EXECUTE ON FUNCTION
    broker.broker_tenant_stats(interval),
    broker.broker_key_stats(),
    broker.broker_job_waiting(bigint),
    broker._sees_every_tenant(),
    broker._paused_tenants(integer),
    broker._paused_for(text[], text)
    TO broker_runtime, broker_enqueue;
GRANT EXECUTE ON FUNCTION
    broker._tenant_stats_rows(interval),
    broker._key_stats_rows(),
    broker._queue_totals(interval),
    broker._key_totals(text)
    TO broker_runtime, broker_enqueue;
-- (why a job waits, for the runner's console: the limits and weight of the job's tenant, as a tenant reads them)
GRANT SELECT ON broker.broker_key_limit, broker.broker_tenant_weight TO broker_runtime;
-- schedules: the management functions (or, equivalently, column-limited writes
-- that the policies check: owner = the writing role, a run_as it may use)
GRANT EXECUTE ON FUNCTION
    broker.broker_add_schedule(text, text, text, text, integer, integer, text, text, integer, text, text, integer,
                               text, boolean, interval, text, text, boolean, text),
    broker.broker_alter_schedule(text, text, text, text, integer, integer, text, text, integer, text, text, integer,
                                 text, interval, text, text, boolean, text, text),
    broker.broker_enable_schedule(text, boolean, text),
    broker.broker_remove_schedule(text, boolean, text),
    broker.broker_run_schedule_now(text, text),
    broker.broker_add_task_schedule(text, text, text, jsonb, text, integer, integer, text, text, integer, text, boolean,
                                    interval, text, text),
    broker._add_schedule(text, broker.broker_schedule, text),
    broker._schedule_job_name(broker.broker_schedule),
    broker._call_tenant(text, text),
    broker._end_call_tenant(text, text),
    broker._schedule_check(text, broker.broker_schedule),
    broker._schedule_row(text, text),
    broker._schedule_notify()
    TO broker_enqueue;
-- the enqueue-time checks of job SQL (also in the insert policies), autonomous jobs' arrangements
GRANT EXECUTE ON FUNCTION
    broker._check_autonomous(text, text, text, name, boolean),
    broker._never_in_transaction(text, text),
    broker._transaction_words(),
    broker._may_not_run_in_transaction(text),
    broker._transaction_keywords(),
    broker._sql_tokens(text),
    broker._autonomous_kind(text, text),
    broker._autonomous_refuse_kind(text, text, text),
    broker._autonomous_via(name)
    TO broker_enqueue;
GRANT SELECT ON broker.broker_autonomous_role TO broker_runtime, broker_enqueue;
-- autonomous jobs: the runner starts them, keeps their leases and records their outcome
GRANT EXECUTE ON FUNCTION
    broker.broker_autonomous_begin(bigint, uuid),
    broker.broker_autonomous_extend(bigint[], uuid[], integer),
    broker.broker_autonomous_end(bigint, uuid, text, text, interval, boolean)
    TO broker_runtime;
-- (broker_allow_autonomous: broker_admin's, as the owner; no one else is granted it)
GRANT INSERT (schedule_name, cron_expr, time_zone, execute_str, job_language, job_queue, job_priority, run_as,
              max_attempts, job_group, enabled, next_fire_at, job_timeout, job_search_path, catch_up, catch_up_max,
              overlap, autonomous, concurrency_key)
    ON broker.broker_schedule TO broker_enqueue;
GRANT UPDATE (schedule_name, cron_expr, time_zone, execute_str, job_language, job_queue, job_priority, run_as,
              max_attempts, job_group, enabled, next_fire_at, job_timeout, job_search_path, catch_up, catch_up_max,
              overlap, last_error, autonomous, concurrency_key, last_job_id)
    ON broker.broker_schedule TO broker_enqueue;
GRANT DELETE ON broker.broker_schedule TO broker_enqueue;
GRANT INSERT (job_name, job_group, execute_str, job_language, job_queue, job_priority, run_as, schedule_id,
              idempotency_key, max_attempts, run_after, job_timeout, job_search_path, autonomous, concurrency_key)
    ON broker.broker_jobs TO broker_enqueue;
GRANT UPDATE (cancel_reason) ON broker.broker_jobs TO broker_enqueue;
GRANT INSERT (job_id, depends_on_job_id, depends_on_group) ON broker.broker_job_dependency TO broker_enqueue;
