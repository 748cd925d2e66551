-- ---------------------------------------------------------------------------
-- pgsql_broker roles and grants: the one place privileges are given.
-- Not part of the extension script (roles are cluster-wide): run it as a
-- superuser after CREATE EXTENSION / every upgrade, in each broker database.
-- Idempotent. `pgsql-broker install --with-roles` runs it and sets passwords.
--
--   broker_admin    owns schema broker, every object in it and the per-role
--                   executor schemas broker_exec_<oid>; BYPASSRLS; runs
--                   migrations; may create schemas in this database (for the
--                   executor schemas). The runtime functions run with its
--                   rights (SECURITY DEFINER).
--   broker_runtime  what the runner connects as: EXECUTE on the runtime
--                   functions, SELECT (tenant-scoped by RLS); no BYPASSRLS,
--                   no direct writes.
--   broker_enqueue  enqueue, read and cancel jobs of its tenant; may create
--                   its own job executor (in its own schema). No BYPASSRLS.
-- LOGIN and passwords are left to the installer (ALTER ROLE ... LOGIN PASSWORD).
-- ---------------------------------------------------------------------------
DO $roles$
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
END
$roles$;
ALTER ROLE broker_admin NOSUPERUSER BYPASSRLS NOCREATEROLE;
ALTER ROLE broker_runtime NOSUPERUSER NOBYPASSRLS NOCREATEROLE;
ALTER ROLE broker_enqueue NOSUPERUSER NOBYPASSRLS NOCREATEROLE;
COMMENT ON ROLE broker_admin IS 'pgsql_broker: owns the broker schemas, BYPASSRLS, runs migrations.';
COMMENT ON ROLE broker_runtime IS 'pgsql_broker: the runner''s role; runtime functions only, no BYPASSRLS.';
COMMENT ON ROLE broker_enqueue IS 'pgsql_broker: enqueue, read and cancel jobs of its own tenant.';

-- Ownership: everything in broker, and the executor schemas, belong to
-- broker_admin (the executors themselves keep their run_as owner).
ALTER SCHEMA broker OWNER TO broker_admin;
DO $owner$
DECLARE
    r record;
BEGIN
    EXECUTE pg_catalog.format('GRANT CREATE ON DATABASE %I TO broker_admin', pg_catalog.current_database());
    FOR r IN SELECT n.nspname FROM pg_catalog.pg_namespace AS n WHERE n.nspname OPERATOR(pg_catalog.~) '^broker_exec_[0-9]+$'
    LOOP
        EXECUTE pg_catalog.format('ALTER SCHEMA %I OWNER TO broker_admin', r.nspname);
        -- broker_admin calls every executor (broker_run runs as broker_admin)
        EXECUTE pg_catalog.format('GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA %I TO broker_admin', r.nspname);
    END LOOP;
    FOR r IN SELECT c.oid::regclass AS rel FROM pg_catalog.pg_class AS c
              WHERE c.relnamespace OPERATOR(pg_catalog.=) 'broker'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm')
    LOOP
        EXECUTE pg_catalog.format('ALTER TABLE %s OWNER TO broker_admin', r.rel);
    END LOOP;
    FOR r IN SELECT p.oid::regprocedure AS fn FROM pg_catalog.pg_proc AS p
              WHERE p.pronamespace OPERATOR(pg_catalog.=) 'broker'::regnamespace
    LOOP
        EXECUTE pg_catalog.format('ALTER FUNCTION %s OWNER TO broker_admin', r.fn);
    END LOOP;
END
$owner$;

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
    broker.broker_set(text, text, boolean),
    broker._tenant_allowed(text, name),
    broker._strict_tenancy(),
    broker._setting_int(text, integer, integer),
    broker.broker_cron_next(text, timestamptz, text),
    broker._cron_parse(text),
    broker._cron_field(text, text, integer, integer, text[], text),
    broker._cron_next_wall(bigint, bigint, bigint, bigint, bigint, boolean, timestamp),
    broker._cron_utc_offset(timestamp, text)
    TO broker_runtime, broker_enqueue;

-- broker_runtime: the runtime functions; reads are tenant-scoped by RLS.
GRANT EXECUTE ON FUNCTION
    broker.broker_get(integer, bigint, integer, integer),
    broker.broker_run(bigint, uuid),
    broker.broker_run_batch(bigint[], uuid[]),
    broker.broker_recover_stale_jobs(integer),
    broker.broker_apply_deferred_releases(integer),
    broker.broker_purge_jobs(interval, integer),
    broker.broker_register_instance(text, text, integer, integer, text),
    broker.broker_ping_instance(bigint),
    broker.broker_shutdown_instance(bigint),
    broker.broker_queue_stats(),
    broker.broker_schedule_tick()
    TO broker_runtime;
GRANT SELECT ON broker.broker_jobs, broker.broker_job_dependency, broker.broker_queueinstance,
                broker.broker_schedule, broker.broker_schema_migrations, broker.broker_config,
                broker.broker_deferred_release
    TO broker_runtime;
-- each role sees its own tenant mappings (policy broker_tenant_roles_own)
GRANT SELECT ON broker.broker_tenant_roles TO broker_runtime, broker_enqueue;

-- broker_enqueue: enqueue (functions or, equivalently, column-limited INSERTs
-- that the policies and triggers check), read and cancel its tenant's jobs,
-- and create its own executor.
GRANT EXECUTE ON FUNCTION
    broker.broker_add_job(text, text, integer, integer, text, text, bigint, bigint[], text, integer, text, text[],
                          timestamptz, interval, text),
    broker.broker_add_job_simple(text, text, integer, text[], text),
    broker.broker_add_jobs(jsonb),
    broker._add_jobs(jsonb, text),
    broker._parse_jobs(jsonb, text),
    broker._add_plain_jobs(jsonb, text),
    broker._element_error(integer, text[]),
    broker.broker_cancel_job(bigint, text),
    broker.broker_create_executor(name),
    broker._executor(name),
    broker._executor_schema(name),
    broker._may_run_as(name, name),
    broker._check_run_as(text, text),
    broker._lock_dependency_keys(text, text[], text[], bigint[], bigint[]),
    broker._dependency_lock_key(text, text, bigint),
    broker._notify_queues(integer[])
    TO broker_enqueue;
GRANT SELECT ON broker.broker_jobs, broker.broker_job_dependency, broker.broker_schedule TO broker_enqueue;
-- schedules: the management functions (or, equivalently, column-limited writes
-- that the policies check: owner = the writing role, a run_as it may use)
GRANT EXECUTE ON FUNCTION
    broker.broker_add_schedule(text, text, text, text, integer, integer, text, text, integer, text, text, integer,
                               text, boolean, interval, text),
    broker.broker_alter_schedule(text, text, text, text, integer, integer, text, text, integer, text, text, integer,
                                 text, interval, text, text),
    broker.broker_enable_schedule(text, boolean),
    broker.broker_remove_schedule(text, boolean),
    broker._schedule_check(text, broker.broker_schedule),
    broker._schedule_row(text, text),
    broker._schedule_notify()
    TO broker_enqueue;
GRANT INSERT (schedule_name, cron_expr, time_zone, execute_str, job_language, job_queue, job_priority, run_as,
              max_attempts, job_group, enabled, next_fire_at, job_timeout, job_search_path, catch_up, catch_up_max,
              overlap)
    ON broker.broker_schedule TO broker_enqueue;
GRANT UPDATE (schedule_name, cron_expr, time_zone, execute_str, job_language, job_queue, job_priority, run_as,
              max_attempts, job_group, enabled, next_fire_at, job_timeout, job_search_path, catch_up, catch_up_max,
              overlap, last_error)
    ON broker.broker_schedule TO broker_enqueue;
GRANT DELETE ON broker.broker_schedule TO broker_enqueue;
GRANT INSERT (job_name, job_group, execute_str, job_language, job_queue, job_priority, run_as, schedule_id,
              idempotency_key, max_attempts, run_after, job_timeout, job_search_path)
    ON broker.broker_jobs TO broker_enqueue;
GRANT UPDATE (cancel_reason) ON broker.broker_jobs TO broker_enqueue;
GRANT INSERT (job_id, depends_on_job_id, depends_on_group) ON broker.broker_job_dependency TO broker_enqueue;
